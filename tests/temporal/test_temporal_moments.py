"""Method of moments: recovery within the asymptotic CI, plug-in vs Monte-Carlo variance."""

import operator

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxlab.temporal import (
    PARAM_NAMES,
    TransitionStats,
    confidence_intervals,
    estimate_moments,
    estimating_functions,
    moment_means,
    plugin_covariance,
    sandwich_covariance,
)

from .conftest import BURN_IN, N_STEPS, REPS
from .conftest import PARAMS as TRUE


@pytest.fixture
def replicates(replicate_chains, chain_capacity):
    return jax.tree.map(jnp.asarray, replicate_chains), chain_capacity


def test_recovers_parameters_within_ci(replicates):
    stats, _ = replicates
    pooled = jax.tree.map(lambda x: x.reshape(-1), stats)  # a long record: 32 x 200 transitions
    est = estimate_moments(pooled)
    assert bool(est.converged)
    assert bool(est.identifiable)
    cov = sandwich_covariance(est.theta, pooled)
    ci = np.asarray(confidence_intervals(est.theta, cov, level=0.999))
    truth = np.asarray(TRUE.as_vector())
    for i, name in enumerate(PARAM_NAMES):
        assert ci[i, 0] < truth[i] < ci[i, 1], (name, ci[i], truth[i])
    # and the intervals are informative: relative half-width below 15%
    assert np.all((ci[:, 1] - ci[:, 0]) / 2 < 0.15 * truth)


@pytest.mark.slow
def test_plugin_variance_matches_monte_carlo(replicates):
    stats, cap = replicates
    thetas = np.stack(
        [
            np.asarray(estimate_moments(jax.tree.map(operator.itemgetter(r), stats)).theta)
            for r in range(REPS)
        ]
    )
    mc_sd = thetas.std(axis=0, ddof=1)
    plug = plugin_covariance(
        TRUE.as_vector(),
        N_STEPS,
        key=jax.random.key(7),
        n_chains=4,
        n_steps=N_STEPS,
        burn_in=BURN_IN,
        capacity=cap,
    )
    plug_sd = np.sqrt(np.diag(np.asarray(plug)))
    # 32 replicates: the Monte-Carlo sd itself has ~13% relative error
    np.testing.assert_allclose(plug_sd, mc_sd, rtol=0.35)
    # coverage of the plug-in 95% intervals around the replicate estimates
    z = np.abs(thetas - np.asarray(TRUE.as_vector())) / plug_sd
    assert 0.85 <= np.mean(z < 1.96) <= 1.0


def test_estimating_functions_are_unbiased(replicates):
    stats, _ = replicates
    psi = np.asarray(
        estimating_functions(TRUE.as_vector(), jax.tree.map(lambda x: x.reshape(-1), stats))
    )
    se = psi.std(axis=0) / np.sqrt(psi.shape[0])
    assert np.all(np.abs(psi.mean(axis=0)) < 4 * se)


def _toy_stats(n=30.0):
    f = jnp.asarray
    return TransitionStats(
        size=f([n, n]),
        next_size=f([n, n + 2]),
        survivors=f([n - 2, n - 1]),
        arrivals=f([2.0, 3.0]),
        surv_edges=f([40.0, 35.0]),
        surv_wedges=f([120.0, 100.0]),
        surv_triangles=f([10.0, 8.0]),
        persisted=f([25.0, 20.0]),
        next_edges=f([45.0, 44.0]),
        next_wedges=f([130.0, 120.0]),
        next_triangles=f([12.0, 11.0]),
        next_four_cycles=f([3.0, 2.0]),
        weight=f([1.0, 1.0]),
    )


def test_moment_means_grad_matches_finite_differences():
    stats = _toy_stats()
    theta = jnp.array([0.6, 1.5, 1.0])

    def total(th):
        return sum(jnp.sum(m) for m in moment_means(th, stats))

    g = jax.grad(total)(theta)
    eps = 1e-6
    fd = jnp.stack(
        [(total(theta + eps * e) - total(theta - eps * e)) / (2 * eps) for e in jnp.eye(3)]
    )
    np.testing.assert_allclose(np.asarray(g), np.asarray(fd), rtol=1e-6)
    # jit equals eager
    np.testing.assert_allclose(
        np.asarray(jax.jit(total)(theta)), np.asarray(total(theta)), rtol=1e-12
    )


def test_moment_means_small_probability_limit():
    """For tiny alpha, gamma: E[edges] ~ persisted mean + (C(n,2) - e) (alpha + gamma) / n."""
    stats = _toy_stats()
    theta = jnp.array([0.6, 1e-4, 1e-4])
    mp, mm, mt = moment_means(theta, stats)
    n = np.asarray(stats.next_size)
    e = np.asarray(stats.surv_edges)
    np.testing.assert_allclose(np.asarray(mp), e * 0.6, rtol=1e-3)
    np.testing.assert_allclose(
        np.asarray(mm) - np.asarray(mp),
        (n * (n - 1) / 2 - e) * (1e-4 + 1e-4 * (n - 2) / n) / n,
        rtol=1e-3,
    )
    # triangles ~ persisted triangles p^3 when nothing new forms
    np.testing.assert_allclose(np.asarray(mt), np.asarray(stats.surv_triangles) * 0.6**3, rtol=1e-2)


def test_not_identifiable_without_edges():
    z = jnp.zeros(5)
    n = jnp.full(5, 10.0)
    stats = TransitionStats(
        size=n,
        next_size=n,
        survivors=n - 1,
        arrivals=jnp.ones(5),
        surv_edges=z,
        surv_wedges=z,
        surv_triangles=z,
        persisted=z,
        next_edges=z,
        next_wedges=z,
        next_triangles=z,
        next_four_cycles=z,
        weight=jnp.ones(5),
    )
    est = estimate_moments(stats)
    assert not bool(est.identifiable)


def test_bad_inputs():
    stats = _toy_stats()
    with pytest.raises(ValueError, match="weight 0"):
        estimate_moments(TransitionStats(**{**vars(stats), "weight": jnp.zeros(2)}))
    with pytest.raises(ValueError, match="stats.next_edges"):
        estimate_moments(TransitionStats(**{**vars(stats), "next_edges": jnp.array([-1.0, 2.0])}))
    with pytest.raises(ValueError, match="stats"):
        estimate_moments({"size": 1})
    with pytest.raises(ValueError, match="level"):
        confidence_intervals(jnp.zeros(5), jnp.eye(5), level=1.5)
    with pytest.raises(ValueError, match="theta"):
        plugin_covariance(jnp.zeros(3), 10, key=jax.random.key(0))
    with pytest.raises(ValueError, match="n_transitions"):
        plugin_covariance(jnp.ones(5), 0, key=jax.random.key(0))
