"""Sensor noise in `simulate` (zero-order-held samples) and the integration tolerance the
P2 experiments use (rtol = atol = 1e-10)."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxlab.observers as O


def _scalar_plant():
    z = jnp.zeros((1, 1))
    return O.LinearPlant(
        A=-jnp.ones((1, 1)), B=z, C=jnp.ones((1, 1)), E=jnp.ones((1, 1)), delta_A=z,
        feedback=z, reference_amp=jnp.zeros(1), reference_freq=jnp.zeros(1),
        dist_amp=jnp.zeros(1), dist_freq=jnp.zeros(1),
    )  # fmt: skip


def test_sensor_noise_holds_each_sample_over_its_period():
    with jax.enable_x64(True):
        noise = O.SensorNoise.white(
            jnp.array([1.0, 2.0]), key=jax.random.key(0), period=0.1, horizon=1.0
        )
        s = np.asarray(noise.samples)
        assert s.shape == (11, 2)
        for k in range(11):
            for frac in (0.0, 0.25, 0.99):
                np.testing.assert_array_equal(noise(0.1 * k + 0.1 * frac + 1e-12), s[k])
        np.testing.assert_array_equal(noise(5.0), s[-1])  # held after the last sample time
        assert np.std(s[:, 1]) > np.std(s[:, 0])


def test_simulate_with_noise_matches_the_closed_form_error_of_a_scalar_luenberger_observer():
    # x' = -x, y = x + n(t), x_hat' = -x_hat - L (y - x_hat): e = x - x_hat obeys
    # e' = (a + L) e + L n, piecewise constant n: exact exponential updates per period
    with jax.enable_x64(True):
        plant = _scalar_plant()
        obs = O.LuenbergerObserver.from_plant(plant, [-3.0])
        L = float(obs.gain[0, 0])
        lam = -1.0 + L
        np.testing.assert_allclose(lam, -3.0, rtol=1e-12)
        period, horizon = 0.05, 2.0
        noise = O.SensorNoise.white(0.1, key=jax.random.key(1), period=period, horizon=horizon)
        ts = jnp.linspace(0.0, horizon, 41)  # the hold times, every period
        x0 = jnp.array([1.0])
        traj = O.simulate(plant, obs, x0, x0, ts, rtol=1e-10, atol=1e-10, noise=noise)
        assert bool(traj.ok)
        e, ref = 0.0, [0.0]
        g = np.exp(lam * period)
        for c in np.asarray(noise.samples)[:40, 0]:
            e = e * g + L * c * (g - 1) / lam
            ref.append(e)
        err = np.asarray(traj.x - traj.x_hat)[:, 0]
        np.testing.assert_allclose(err, ref, atol=1e-9)
        assert np.max(np.abs(ref)) > 1e-3  # the noise moved the estimate
        # the plant is untouched by the noise
        np.testing.assert_allclose(np.asarray(traj.x)[:, 0], np.exp(-np.asarray(ts)), atol=1e-9)


@pytest.mark.parametrize("system", ["vanderpol", "x29"])
def test_simulation_tolerance_error_is_far_below_the_noise_driven_error(system):
    """The P2 experiments with sensor noise simulate at rtol = atol = 1e-7 (Config.sim_tol):
    there the estimate differs from a 1e-10 reference by < 1e-4 of the noise-driven
    estimation error, and by at least 10x less than at 1e-4 (the check resolves the
    tolerance)."""
    with jax.enable_x64(True):
        if system == "vanderpol":
            plant, eps, poles = O.VanDerPol(), 0.05, [-1.0, -1.5, -2.0]
            x0, std = jnp.array([1.0, -0.5]), 0.01
        else:
            plant = O.x29_longitudinal(0.1)
            eps = 0.01
            poles = [-0.5, -1 + 0.2j, -1 - 0.2j, -1.5 + 0.5j, -1.5 - 0.5j, -2 + 0.2j, -2 - 0.2j]
            poles = [*poles, -2.5]  # the paper's poles (extended dimension 8)
            x0, std = jnp.array([5.0, 0.05, -0.05, 0.05]), 1e-3
        eso = O.high_gain_eso(plant, epsilon=eps, poles=poles, key=jax.random.key(0))
        p = plant.output(x0).shape[0]
        noise = O.SensorNoise.white(
            std * jnp.ones(p), key=jax.random.key(2), period=0.01, horizon=2.0
        )
        ts = jnp.linspace(0.0, 2.0, 81)

        def run(tol):
            return O.simulate(
                plant, eso, x0, jnp.zeros_like(x0), ts, rtol=tol, atol=tol, noise=noise
            )

        ref, new, loose = run(1e-10), run(1e-7), run(1e-4)
        assert bool(ref.ok & new.ok & loose.ok)
        settle = 20
        signal = np.sqrt(np.mean(np.asarray(ref.x - ref.x_hat)[settle:] ** 2))
        d_new = np.sqrt(np.mean(np.asarray(new.x_hat - ref.x_hat)[settle:] ** 2))
        d_loose = np.sqrt(np.mean(np.asarray(loose.x_hat - ref.x_hat)[settle:] ** 2))
        assert d_new < 1e-4 * signal
        assert d_loose > 10 * d_new  # the tolerance matters at this resolution
