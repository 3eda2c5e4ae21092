"""Tanh units: Gauss–Hermite mean gain and the large-N Gaussian limit."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import scipy.integrate

from jaxlab import lowrank as lr


@pytest.mark.parametrize("delta", [0.0, 0.05, 1.0, 4.0])
def test_tanh_mean_gain_matches_quadrature(delta):
    def integrand(z):
        return (1 - np.tanh(np.sqrt(delta) * z) ** 2) * np.exp(-z * z / 2) / np.sqrt(2 * np.pi)

    expected, _ = scipy.integrate.quad(integrand, -np.inf, np.inf)
    got = lr.Tanh().mean_gain(jnp.asarray(delta, jnp.float64))
    np.testing.assert_allclose(got, expected, rtol=1e-7)
    assert lr.Linear().mean_gain(jnp.asarray(delta)) == 1.0


def test_tanh_mean_gain_grad_finite_at_zero():
    grad = jax.grad(lambda d: lr.Tanh().mean_gain(d))(jnp.asarray(0.0, jnp.float64))
    assert np.isfinite(float(grad))


def test_tanh_overlap_loss_is_large_n_limit(getkey):
    layout = lr.OverlapLayout(1, 1)
    task = lr.fixed_point_task(n_trials=3, n_steps=15).astype(jnp.float64)
    cov = 0.8 * jnp.eye(4, dtype=jnp.float64)
    cov = cov.at[1, 0].set(0.5).at[0, 1].set(0.5).at[3, 0].set(0.4).at[0, 3].set(0.4)
    cov = cov.at[1, 2].set(0.3).at[2, 1].set(0.3)
    act = lr.Tanh()
    # Outputs of i.i.d. Gaussian vectors converge to the Gaussian prediction (evaluated
    # at their empirical overlaps) with error ~ N^-1/2 (mean over 16 seeds).
    ns = (200, 800, 3200, 12800)
    errs = []
    for n in ns:

        def err(k, n=n):
            v = lr.gaussian_vectors(cov, n, key=k)
            z_net = lr.network_outputs(v, task, layout, act)
            z_mf = lr.overlap_outputs(lr.gram(v), task, layout, act)
            return jnp.max(jnp.abs(z_net - z_mf))

        errs.append(float(jnp.mean(jax.jit(jax.vmap(err))(jax.random.split(getkey(), 16)))))
    slope = np.polyfit(np.log(ns), np.log(errs), 1)[0]
    assert -0.75 < slope < -0.3, (errs, slope)
    assert errs[-1] < 3e-3
