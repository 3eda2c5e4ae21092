"""The dominance metric against a numpy reference, and the self-report statistics."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxlab import beliefs as bl


def _reference(scores, mask, target):
    s = np.asarray(scores, np.float64)
    if s.ndim == 1:
        margin = s
    else:
        others = np.delete(s, target, axis=1)
        margin = s[:, target] - others.max(axis=1)
    valid = np.flatnonzero(mask)
    m = margin[valid]
    return np.where(mask, margin, 0.0), m.mean(), margin[valid[-1]], np.mean(m > 0)


def test_dominance_hand_made_sequences():
    # belief A rises from behind to dominate; the last position is padding
    scores = np.array([[0.0, 1.0], [0.5, 1.0], [2.0, 1.0], [3.0, 0.5], [9.0, -9.0]])
    mask = np.array([True, True, True, True, False])
    d = bl.dominance(scores, mask=mask)
    np.testing.assert_allclose(d.margin, [-1.0, -0.5, 1.0, 2.5, 0.0])
    assert float(d.mean) == pytest.approx(0.5)
    assert float(d.final) == pytest.approx(2.5)
    assert float(d.fraction) == pytest.approx(0.5)
    # the competitor's view is the mirror image; a tie (margin 0) is not domination
    d_b = bl.dominance(scores, mask=mask, target=1)
    np.testing.assert_allclose(d_b.margin, -np.asarray(d.margin))
    assert float(bl.dominance(np.zeros((3, 2))).fraction) == 0.0


@pytest.mark.parametrize("K", [1, 3])
def test_dominance_matches_numpy_reference_jit_and_vmap(K, getkey):
    T, B = 7, 5
    shape = (B, T) if K == 1 else (B, T, K)
    scores = np.asarray(jax.random.normal(getkey(), shape))
    lengths = np.array([7, 1, 3, 5, 6])
    mask = np.arange(T)[None, :] < lengths[:, None]
    target = 0 if K == 1 else K - 1
    batched = jax.vmap(lambda s, m: bl.dominance(s, mask=m, target=target))(scores, mask)
    jitted = jax.jit(lambda s, m: bl.dominance(s, mask=m, target=target))
    for i in range(B):
        ref = _reference(scores[i], mask[i], target)
        eager = bl.dominance(scores[i], mask=mask[i], target=target)
        for got in (eager, jitted(scores[i], mask[i])):
            np.testing.assert_allclose(got.margin, ref[0], rtol=1e-6, atol=1e-12)
            np.testing.assert_allclose([got.mean, got.final, got.fraction], ref[1:], rtol=1e-6)
        np.testing.assert_allclose(batched.mean[i], ref[1], rtol=1e-6)
        np.testing.assert_allclose(batched.final[i], ref[2], rtol=1e-6)


def test_dominance_rejects_bad_input():
    with pytest.raises(ValueError, match="scores"):
        bl.dominance(np.zeros((2, 3, 4)))
    with pytest.raises(ValueError, match="K >= 2"):
        bl.dominance(np.zeros((3, 1)))
    with pytest.raises(ValueError, match="target"):
        bl.dominance(np.zeros((3, 2)), target=2)
    with pytest.raises(ValueError, match="target"):
        bl.dominance(np.zeros(3), target=1)
    with pytest.raises(ValueError, match="mask"):
        bl.dominance(np.zeros((3, 2)), mask=np.zeros(3, bool))
    with pytest.raises(ValueError, match="mask"):
        bl.dominance(np.zeros((3, 2)), mask=np.ones(4, bool))


def test_partial_correlation_matches_formula_and_weights(getkey):
    k1, k2, k3 = jax.random.split(getkey(), 3)
    z = np.asarray(jax.random.normal(k1, (60,)))
    x = z + 0.7 * np.asarray(jax.random.normal(k2, (60,)))
    y = z + 0.5 * x + np.asarray(jax.random.normal(k3, (60,)))
    r = np.corrcoef(np.stack([x, y, z]))
    expect = (r[0, 1] - r[0, 2] * r[1, 2]) / np.sqrt((1 - r[0, 2] ** 2) * (1 - r[1, 2] ** 2))
    np.testing.assert_allclose(bl.partial_correlation(x, y, z), expect, rtol=1e-8)
    # integer weights equal replicated rows (what bootstrap_ci relies on)
    w = np.arange(60) % 3
    rep = np.repeat(np.arange(60), w)
    np.testing.assert_allclose(
        bl.partial_correlation(x, y, z[:, None], weights=w),
        bl.partial_correlation(x[rep], y[rep], z[rep]),
        rtol=1e-8,
    )
    # a covariate that explains all of x's link to y leaves (almost) nothing
    assert abs(float(bl.partial_correlation(z + 1e-3 * x, z, z))) < 0.2
    with pytest.raises(ValueError, match="covariates"):
        bl.partial_correlation(x, y, z[:10])


def test_expected_rating():
    ll = np.log(np.array([[0.2, 0.3, 0.5], [1.0, 1e-12, 1e-12]]))
    np.testing.assert_allclose(
        bl.expected_rating(ll, np.array([0.0, 0.5, 1.0])), [0.65, 0.0], atol=1e-9
    )
    with pytest.raises(ValueError, match="logliks"):
        bl.expected_rating(ll, jnp.ones(2))
