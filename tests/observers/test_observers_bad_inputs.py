"""observers.coverage_bound refuses a complex confidence with a ValueError naming it (the
contract fuzz of issue #59 met a TypeError from float() before)."""

from __future__ import annotations

import pytest

import jaxlab.observers as ob


def test_coverage_bound_refuses_a_complex_confidence():
    # no failures: (1 - confidence)^(1/N), the documented closed form
    assert ob.coverage_bound(100, 0, 0.99) == pytest.approx(0.01 ** (1 / 100))
    with pytest.raises(ValueError, match="confidence: expected (real values|dtype floating)"):
        ob.coverage_bound(100, 0, 0.99 + 1j)
