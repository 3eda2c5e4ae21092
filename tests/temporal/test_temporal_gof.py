"""Monte-Carlo goodness of fit: leave-one-out scores, exact calibration, misfit power."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy import stats

from jaxlab.temporal import (
    Snapshot,
    TemporalNetworkParams,
    default_capacity,
    monte_carlo_gof,
    one_step_counts,
    simulate,
)

from .conftest import PARAMS

ALPHA = 0.05


def _binomial_band(n, p, tail=5e-4):
    """Two-sided binomial acceptance band for a rejection count (0.1% total miss)."""
    return int(stats.binom.ppf(tail, n, p)), int(stats.binom.isf(tail, n, p))


def _naive_pvalues(obs, sims, var_floor=0.25):
    """The old in-sample version: each replicate scored against moments that include it."""
    mean = sims.mean(axis=0)
    var = np.maximum(sims.var(axis=0, ddof=1), var_floor)
    x_obs = ((obs - mean) ** 2 / var).sum(axis=0)
    x_sim = ((sims - mean) ** 2 / var).sum(axis=1)
    return (1 + (x_sim >= x_obs).sum(axis=0)) / (sims.shape[0] + 1)


def test_scores_match_explicit_leave_one_out():
    rng = np.random.default_rng(0)
    pooled = rng.poisson(rng.uniform(0.5, 20, (7, 4)), (12, 7, 4)).astype(float)
    res = monte_carlo_gof(pooled[0], pooled[1:], var_floor=0.25)
    scores = []
    for i in range(pooled.shape[0]):
        rest = np.delete(pooled, i, axis=0)
        var = np.maximum(rest.var(axis=0, ddof=1), 0.25)
        scores.append(((pooled[i] - rest.mean(axis=0)) ** 2 / var).sum(axis=0))
    scores = np.array(scores)
    np.testing.assert_allclose(np.asarray(res.observed), scores[0], rtol=1e-5)
    np.testing.assert_allclose(np.asarray(res.replicates), scores[1:], rtol=1e-5)
    expect = (1 + (scores[1:] >= scores[0]).sum(axis=0)) / pooled.shape[0]
    np.testing.assert_allclose(np.asarray(res.pvalues), expect)
    tot = scores.sum(axis=1)
    assert float(res.pvalue) == pytest.approx((1 + (tot[1:] >= tot[0]).sum()) / pooled.shape[0])


def test_calibrated_when_data_come_from_the_model_and_naive_is_not():
    # 1000 data sets whose observed series is one more draw of the same count process
    # (overdispersed, heterogeneous over time and statistics, as real counts are).
    n_sets, r, t, s = 1000, 39, 100, 3
    rng = np.random.default_rng(20261201)
    mu = rng.uniform(1.0, 60.0, (n_sets, 1, t, s))
    lam = rng.gamma(4.0, mu / 4.0, (n_sets, r + 1, t, s))
    pooled = rng.poisson(lam).astype(np.float32)
    obs, sims = pooled[:, 0], pooled[:, 1:]
    p = np.asarray(jax.vmap(lambda o, x: monte_carlo_gof(o, x).pvalues)(obs, sims))
    lo, hi = _binomial_band(n_sets, ALPHA)
    for j in range(s):
        rejected = int(np.sum(p[:, j] <= ALPHA))
        assert lo <= rejected <= hi, (j, rejected, (lo, hi))
    # uniform p-values: also at 0.5 (the test is exact at every k / (R + 1))
    assert _binomial_band(n_sets, 0.5)[0] <= int(np.sum(p[:, 0] <= 0.5))
    # the scoring it replaces rejects a true model far too often (~20% at R = 39)
    naive = np.stack([_naive_pvalues(o, x) for o, x in zip(obs, sims, strict=True)])
    assert int(np.sum(naive[:, 0] <= ALPHA)) > 2 * hi


@pytest.mark.slow  # ~85 s: 11700 one-step model draws
def test_calibrated_on_the_temporal_model_and_detects_misfit():
    # one-step-ahead replicates of the real P3 model from a simulated sequence: the
    # "observed" next graphs are themselves model draws, so the test must reject at
    # <= 5% (binomial band); a wrong persistence must be rejected in most sets.
    cap = default_capacity(PARAMS)
    seq = simulate(PARAMS, 12, key=jax.random.key(3), capacity=cap, burn_in=60)
    times = jnp.arange(12)
    n_sets, r = 200, 19
    draws = np.asarray(
        one_step_counts(
            PARAMS, seq, times, key=jax.random.key(4), capacity=cap, n_replicates=n_sets * (r + 1)
        )
    ).reshape(n_sets, r + 1, 12, 3)
    p = np.asarray(jax.vmap(lambda d: monte_carlo_gof(d[0], d[1:]).pvalue)(draws))
    lo, hi = _binomial_band(n_sets, ALPHA)
    assert lo <= int(np.sum(p <= ALPHA)) <= hi
    wrong = TemporalNetworkParams(1.0, 0.08, 0.2, 1.5, 1.0)  # persistence 0.6 -> 0.2
    sims = one_step_counts(
        wrong, seq, times, key=jax.random.key(5), capacity=cap, n_replicates=n_sets * r
    ).reshape(n_sets, r, 12, 3)
    p_bad = np.asarray(jax.vmap(lambda o, x: monte_carlo_gof(o, x).pvalue)(draws[:, 0], sims))
    assert np.mean(p_bad <= ALPHA) > 0.7  # 0.81 at 300 sets; R = 19 caps p at >= 0.05


def test_rejects_bad_input():
    obs = np.zeros((5, 3))
    with pytest.raises(ValueError, match="replicates"):
        monte_carlo_gof(obs, np.zeros((4, 5, 2)))
    with pytest.raises(ValueError, match="at least 2"):
        monte_carlo_gof(obs, np.zeros((1, 5, 3)))
    with pytest.raises(ValueError, match="observed"):
        monte_carlo_gof(np.full((5, 3), np.nan), np.zeros((4, 5, 3)))
    with pytest.raises(ValueError, match="var_floor"):
        monte_carlo_gof(obs, np.zeros((4, 5, 3)), var_floor=0.0)
    cap = default_capacity(PARAMS)
    n = cap.num_slots
    seq = Snapshot(
        present=jnp.zeros((4, n), bool),
        arrived=jnp.zeros((4, n), bool),
        edges=jnp.zeros((4, 2, 2), jnp.int32),
        edge_mask=jnp.zeros((4, 2), bool),
    )
    with pytest.raises(ValueError, match="times"):
        one_step_counts(
            PARAMS, seq, jnp.arange(4), key=jax.random.key(1), capacity=cap, n_replicates=2
        )
    with pytest.raises(ValueError, match="n_replicates"):
        one_step_counts(
            PARAMS, seq, jnp.arange(2), key=jax.random.key(1), capacity=cap, n_replicates=0
        )
