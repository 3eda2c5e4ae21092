"""Nonlinear-plant rollouts (RK4 `lax.scan`) and the validated, never-worse-than-init fit."""

import functools

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxlab.observers as O
from jaxlab import Driver


def _eso(plant, eps=0.05):
    return O.high_gain_eso(plant, epsilon=eps, poles=(-1.0, -1.5, -2.0), key=jax.random.key(0))


def test_rollout_matches_diffrax_and_converges_at_fourth_order():
    plant = O.VanDerPol()
    eso = _eso(plant)
    x0, xh0 = jnp.array([1.0, -0.5]), jnp.zeros(2)
    ts = jnp.linspace(0.0, 2.0, 201)
    ref = O.simulate(plant, eso, x0, xh0, ts, rtol=1e-11, atol=1e-13)
    errs = []
    for dt in (0.01, 0.005, 0.0025):
        k = round(0.01 / dt)
        tr = eqx.filter_jit(O.rollout)(plant, eso, x0, xh0, dt=dt, steps=200 * k)
        np.testing.assert_allclose(tr.ts[::k], ts, atol=1e-12)
        assert bool(tr.ok)
        errs.append(
            max(
                float(jnp.max(jnp.abs(tr.x[::k] - ref.x))),
                float(jnp.max(jnp.abs(tr.x_hat[::k] - ref.x_hat))),
                float(jnp.max(jnp.abs(tr.d_hat[::k] - ref.d_hat))),
            )
        )
    # RK4: halving dt divides the error by ~16 (>= 8 allowed)
    assert errs[0] / errs[1] > 8
    assert errs[1] / errs[2] > 8
    assert errs[2] < 1e-3


def test_rollout_mse_is_the_hand_mean_and_skips_t0():
    plant = O.Duffing()
    eso = _eso(plant)
    x0s = jnp.array([[1.0, 0.0], [-0.5, 0.3], [0.2, -1.0]])
    xh0s = jnp.zeros_like(x0s)
    t0s = jnp.array([0.0, 0.7, 2.0])
    w = jnp.array([1.0, 0.25])
    got = O.rollout_mse(plant, eso, x0s, xh0s, dt=0.01, steps=50, start=10, t0s=t0s, weights=w)
    hand = []
    roll = eqx.filter_jit(O.rollout)  # one compile for the loop (dt, steps static)
    for x0, t0 in zip(x0s, t0s, strict=True):
        tr = roll(plant, eso, x0, jnp.zeros(2), dt=0.01, steps=50, t0=t0)
        e = np.asarray(tr.x - tr.x_hat)[10:] ** 2 * np.array([1.0, 0.25])
        hand.append(e.mean())
    np.testing.assert_allclose(got, np.mean(hand), rtol=1e-12)
    # start = 1 leaves out only t = t0, where the error is x0 - x_hat0 for any observer
    tr = roll(plant, eso, x0s[0], xh0s[0], dt=0.01, steps=50, t0=0.0)
    np.testing.assert_allclose(tr.x[0] - tr.x_hat[0], x0s[0])
    whole = np.mean(np.asarray(tr.x - tr.x_hat) ** 2)
    after = O.rollout_mse(plant, eso, x0s[:1], xh0s[:1], dt=0.01, steps=50, start=1)
    np.testing.assert_allclose(after * 50 * 2, whole * 51 * 2 - float(jnp.sum(x0s[0] ** 2)))
    with pytest.raises(ValueError, match="start"):
        O.rollout_mse(plant, eso, x0s, xh0s, dt=0.01, steps=50, start=0)


def test_rollout_mse_gradient_matches_finite_differences():
    plant = O.DisturbedPendulum()
    obs = O.NeuralObserver.from_plant(
        plant, (3,), epsilon=0.05, key=jax.random.key(1), gain=_eso(plant).gain
    )
    x0s = jnp.array([[0.5, 0.0], [-0.3, 0.4]])

    @jax.jit
    def f(scale, readout):
        o = eqx.tree_at(lambda m: (m.gain, m.readout), obs, (scale * obs.gain, readout))
        return O.rollout_mse(plant, o, x0s, jnp.zeros_like(x0s), dt=0.01, steps=100, start=5)

    g_s, g_r = jax.jit(jax.grad(f, argnums=(0, 1)))(1.0, obs.readout)
    h = 1e-6
    fd_s = (f(1.0 + h, obs.readout) - f(1.0 - h, obs.readout)) / (2 * h)
    np.testing.assert_allclose(g_s, fd_s, rtol=1e-5)
    dr = jnp.zeros_like(obs.readout).at[2, 1].set(h)
    fd_r = (f(1.0, obs.readout + dr) - f(1.0, obs.readout - dr)) / (2 * h)
    np.testing.assert_allclose(g_r[2, 1], fd_r, rtol=1e-5)


def test_rollout_estimation_is_log_mse_of_its_batch_and_enters_the_stage_losses():
    plant = O.VanDerPol()
    eso = _eso(plant)
    est = O.rollout_estimation(
        plant, initial_spread=0.8, batch=4, dt=0.01, steps=60, start=20, period=3.0
    )
    key = jax.random.key(5)
    kx, kt = jax.random.split(key)
    x0s = 0.8 * jax.random.normal(kx, (4, 2))
    t0s = 3.0 * jax.random.uniform(kt, (4,))
    hand = O.rollout_mse(plant, eso, x0s, jnp.zeros_like(x0s), dt=0.01, steps=60, start=20, t0s=t0s)
    np.testing.assert_allclose(est(eso, key), np.log(hand), rtol=1e-12)
    # point_loss: the estimation term is replaced, the rest (hinge, regulariser) kept
    params = O.CertifiedObserver.from_observer(
        O.NeuralObserver.from_plant(plant, (3,), epsilon=0.05, key=key, gain=eso.gain)
    )
    cfg = O.ObserverTrainConfig(batch=4, rollout_steps=2)
    k = jax.random.key(9)
    ks, ke = jax.random.split(k)
    etas = O.sample_errors(4, 3, key=ks, radius=cfg.sample_radius, min_radius=cfg.min_radius)
    lin = O.estimation_loss(params.observer, etas, cfg, key=ke)
    nonlin = est(params.observer, ke)
    diff = O.point_loss(params, cfg, key=k, estimation=est) - O.point_loss(params, cfg, key=k)
    np.testing.assert_allclose(diff, cfg.est_weight * (nonlin - lin), rtol=1e-10)


def _val_loss(params, data, plant):
    x0s, t0s = data
    return O.rollout_mse(
        plant, params.observer, x0s, jnp.zeros_like(x0s), dt=0.01, steps=80, start=20, t0s=t0s
    )


def test_validated_fit_never_ends_worse_than_its_initialisation():
    plant = O.VanDerPol()
    eso = _eso(plant)
    obs = O.NeuralObserver.from_plant(
        plant, (4,), epsilon=0.05, key=jax.random.key(2), gain=eso.gain
    )
    params = O.CertifiedObserver.from_observer(obs)
    cfg = O.ObserverTrainConfig(batch=8, learning_rate=0.05)
    est = O.rollout_estimation(plant, initial_spread=1.0, batch=2, dt=0.01, steps=40, start=10)
    data = (jax.random.normal(jax.random.key(3), (4, 2)), jnp.zeros(4))
    val = functools.partial(_val_loss, plant=plant)
    init_score = float(val(params, data))

    # a loss that makes the estimate worse: the validated fit keeps the initial state
    def worse(p, c, *, key):
        return -est(p.observer, key)

    fit = functools.partial(
        O.fit, key=jax.random.key(4), config=cfg, steps=20, driver=Driver(chunk=10)
    )
    validated = functools.partial(fit, val_loss=val, val_data=data, val_every=5)
    got, info = validated(worse, params)
    assert info["best_step"] == 0
    np.testing.assert_allclose(info["init_val_loss"], init_score, rtol=1e-12)
    np.testing.assert_allclose(float(val(got, data)), init_score, rtol=1e-12)
    # without validation the same run ends worse (what the check guards against)
    last, _ = fit(worse, params)
    assert float(val(last, data)) > init_score

    # the real loss: the returned state is the best scored one and not worse than the start
    loss = functools.partial(O.point_loss, estimation=est)
    got, info = validated(loss, params)
    score = float(val(got, data))
    np.testing.assert_allclose(score, info["best_val_loss"], rtol=1e-10)
    assert score <= init_score
    evaluated = info["val_losses"][np.isfinite(info["val_losses"])]
    assert evaluated.size == 4
    np.testing.assert_allclose(info["best_val_loss"], min(init_score, evaluated.min()), rtol=1e-12)
