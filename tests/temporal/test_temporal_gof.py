"""Monte-Carlo goodness of fit: leave-one-out scores, exact calibration, misfit power."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy import stats

from jaxlab.temporal import (
    Snapshot,
    TemporalNetworkParams,
    bootstrap_gof,
    default_capacity,
    monte_carlo_gof,
    one_step_counts,
    simulate,
    transition,
    two_sided_pvalues,
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


# ------------------------------------------------------------ parametric bootstrap


def test_two_sided_pvalues_match_explicit_counts():
    rng = np.random.default_rng(1)
    rep = rng.integers(0, 6, (39, 4)).astype(float)  # ties on purpose
    obs = np.array([0.0, 2.0, 5.0, 9.0])
    two, up, lo = (np.asarray(x) for x in two_sided_pvalues(jnp.asarray(obs), jnp.asarray(rep)))
    for j in range(4):
        u = (1 + sum(r >= obs[j] for r in rep[:, j])) / 40
        low = (1 + sum(r <= obs[j] for r in rep[:, j])) / 40
        assert up[j] == pytest.approx(u)
        assert lo[j] == pytest.approx(low)
        assert two[j] == pytest.approx(min(1.0, 2 * min(u, low)))
    assert two[3] == pytest.approx(2 / 40)  # beyond every replicate: the smallest p


def _sequence(key, n_steps, persistence=None):
    """A simulated sequence; with `persistence` `(p_even, p_odd)` its edges are rebuilt one
    step at a time with a persistence that alternates over time (not the model: the edge
    counts vary more than any single persistence allows)."""
    cap = default_capacity(PARAMS, slack=1.5)
    seq = simulate(PARAMS, n_steps, key=key, capacity=cap, burn_in=60)
    if persistence is None:
        return seq, cap
    snaps = [jax.tree.map(lambda x: x[0], seq)]
    for t in range(n_steps - 1):
        p = persistence[t % 2]
        params = TemporalNetworkParams(1.0, 0.08, p, 1.5, 1.0)
        nxt, _ = transition(
            params, snaps[-1], seq.present[t + 1], key=jax.random.fold_in(key, t), capacity=cap
        )
        snaps.append(nxt)
    return jax.tree.map(lambda *xs: jnp.stack(xs), *snaps), cap


def test_bootstrap_gof_calibrated_under_the_model():
    # data from the model: the re-estimating bootstrap must neither over-reject nor pile
    # its p-values near 1 (the plug-in test's failure mode on fitted moments)
    n_sets, b = 20, 19
    ps = []
    for i in range(n_sets):
        seq, cap = _sequence(jax.random.key(100 + i), 16)
        res = bootstrap_gof(
            seq, jnp.arange(15), key=jax.random.key(i), capacity=cap, n_bootstrap=b, n_inner=3
        )
        assert bool(np.all(np.asarray(res.converged)))
        ps.append(np.asarray(res.pvalues))
    ps = np.array(ps)  # (n_sets, 3)
    _, hi = _binomial_band(n_sets * 3, 0.1)
    assert int(np.sum(ps <= 0.1)) <= hi
    # two-sided p of B = 19 under the null: mean 0.55; a test blind to one tail or piling
    # p near 1 lies far above
    assert 0.4 < float(ps.mean()) < 0.7, ps.mean(axis=0)


def test_bootstrap_gof_rejects_time_varying_persistence():
    seq, cap = _sequence(jax.random.key(7), 31, persistence=(0.98, 0.05))
    res = bootstrap_gof(
        seq, jnp.arange(30), key=jax.random.key(8), capacity=cap, n_bootstrap=39, n_inner=5
    )
    assert float(res.pvalues[0]) <= 0.05  # edges vary more than the model allows
    assert float(res.upper[0]) <= 0.025
    theta = np.asarray(res.theta)
    assert 0.05 < theta[2] < 0.98  # one compromise persistence


def test_bootstrap_gof_rejects_bad_input():
    seq, cap = _sequence(jax.random.key(0), 6)
    with pytest.raises(ValueError, match="n_inner"):
        bootstrap_gof(seq, jnp.arange(3), key=jax.random.key(0), capacity=cap,
                      n_bootstrap=3, n_inner=1)  # fmt: skip
    with pytest.raises(ValueError, match="times"):
        bootstrap_gof(seq, jnp.arange(10), key=jax.random.key(0), capacity=cap,
                      n_bootstrap=3, n_inner=2)  # fmt: skip
