"""The Hamilton & Gifford design: exact 18/8 vs 9/4 counts, phi = 0, randomised order."""

from __future__ import annotations

import jax
import numpy as np
import pytest

import jaxlab.illusions as il


@pytest.mark.parametrize("variant", sorted(il.VARIANTS))
def test_design_counts_exact_and_phi_zero(variant, getkey):
    s = il.make_stimuli(key=getkey(), variant=variant)
    table = il.contingency_table(s.minority, s.desirable)
    np.testing.assert_array_equal(table, [[18, 8], [9, 4]])
    # phi = (18*4 - 8*9) / sqrt(...) = 0 exactly: the same 9:4 ratio in both groups
    assert 18 * 4 - 8 * 9 == 0
    assert float(il.phi_coefficient(table)) == 0.0
    assert len(s.texts) == 39
    assert len(set(s.behaviours)) == 39
    v = il.VARIANTS[variant]
    for text, m, b in zip(s.texts, s.minority, s.behaviours, strict=True):
        assert text == f"A member of {v.minority if m else v.majority} {b}."
    for b, d in zip(s.behaviours, s.desirable, strict=True):
        assert (b in il.DESIRABLE) == bool(d)
        assert (b in il.UNDESIRABLE) == (not d)
    assert s.texts[0] in s.context
    assert v.preamble in s.context


def test_order_is_randomised_by_key():
    a = il.make_stimuli(key=jax.random.key(0))
    b = il.make_stimuli(key=jax.random.key(0))
    c = il.make_stimuli(key=jax.random.key(1))
    assert a.texts == b.texts
    assert a.texts != c.texts
    # not blocked: both groups and both classes appear in the first half of some order
    orders = [il.make_stimuli(key=jax.random.key(k)) for k in range(20)]
    first_minority = [int(np.flatnonzero(o.minority)[0]) for o in orders]
    assert len(set(first_minority)) > 3
    # averaged over orders, every position holds a minority statement ~1/3 of the time
    frac = np.mean([o.minority for o in orders], axis=0)
    assert 0.1 < frac.mean() < 0.5
    assert frac.max() < 1


def test_label_swap_renames_only():
    a = il.make_stimuli(key=jax.random.key(4), variant="neutral")
    b = il.make_stimuli(key=jax.random.key(4), variant="label_swap")
    assert a.behaviours == b.behaviours
    np.testing.assert_array_equal(a.minority, b.minority)
    assert b.label(minority=False) == "Group B"
    assert a.label(minority=False) == "Group A"


def test_custom_counts_and_bad_input(getkey):
    s = il.make_stimuli(key=getkey(), counts=((16, 8), (8, 4)))
    np.testing.assert_array_equal(il.contingency_table(s.minority, s.desirable), [[16, 8], [8, 4]])
    with pytest.raises(ValueError, match="variant"):
        il.make_stimuli(key=getkey(), variant="nope")
    with pytest.raises(ValueError, match="counts"):
        il.make_stimuli(key=getkey(), counts=((18, 8), (9, -1)))
    with pytest.raises(ValueError, match="counts"):
        il.make_stimuli(key=getkey(), counts=((100, 8), (9, 4)))
    with pytest.raises(ValueError, match="desirable"):
        il.contingency_table(np.zeros(3, bool), np.zeros(4, bool))
    with pytest.raises(ValueError, match="minority"):
        il.contingency_table(np.array([0, 2, 1]), np.zeros(3, bool))
