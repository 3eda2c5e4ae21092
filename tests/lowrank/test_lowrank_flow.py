"""Overlap ODE vs neuron-space gradient descent: the closure is exact for linear units."""

from __future__ import annotations

import diffrax
import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxlab import lowrank as lr


def _setup(getkey, rank=1, n_inputs=1, n_neurons=64, activation=None, scale=1.0):
    layout = lr.OverlapLayout(rank, n_inputs)
    if n_inputs == 1:
        task = lr.fixed_point_task(n_trials=3, n_steps=12).astype(jnp.float64)
    else:
        task = lr.context_task(key=getkey(), n_trials=4, n_steps=12).astype(jnp.float64)
    activation = lr.Linear() if activation is None else activation
    p = layout.size
    a = jax.random.normal(getkey(), (p, p), jnp.float64) / np.sqrt(p)
    cov = scale * (a @ a.T + 0.5 * jnp.eye(p, dtype=jnp.float64))
    v = lr.gaussian_vectors(cov, n_neurons, key=getkey())
    return layout, task, activation, v


@pytest.mark.parametrize(
    ("rank", "n_inputs", "trained_kw"), [(1, 1, {}), (2, 3, {"inputs": True, "readout": True})]
)
def test_flow_equals_gram_projected_full_gradient(getkey, rank, n_inputs, trained_kw):
    layout, task, act, v = _setup(getkey, rank, n_inputs)
    trained = layout.trained_mask(**trained_kw)
    dv = lr.network_flow(lr.NetworkLoss(task, layout, act), v, trained)
    n = v.shape[1]
    dg_projected = (dv @ v.T + v @ dv.T) / n
    dg = lr.overlap_flow(lr.OverlapLoss(task, layout, act), lr.gram(v), trained)
    scale = float(jnp.max(jnp.abs(dg_projected)))
    assert scale > 1e-4  # the flow is not trivially zero
    np.testing.assert_allclose(dg, dg_projected, rtol=0, atol=1e-12 * max(scale, 1.0))
    np.testing.assert_allclose(dg, dg.T, atol=1e-14)


def test_overlap_loss_and_outputs_equal_network_linear(getkey):
    layout, task, act, v = _setup(getkey, 2, 3, n_neurons=40)
    z_net = lr.network_outputs(v, task, layout, act)
    z_ov = lr.overlap_outputs(lr.gram(v), task, layout, act)
    np.testing.assert_allclose(z_ov, z_net, rtol=1e-12, atol=1e-13)
    assert float(jnp.std(z_net)) > 1e-3
    np.testing.assert_allclose(
        lr.overlap_loss(lr.gram(v), task, layout, act),
        lr.network_loss(v, task, layout, act),
        rtol=1e-12,
    )


def test_network_simulation_equals_dense_matrix_oracle(getkey):
    layout, task, _, v = _setup(getkey, 2, 1, n_neurons=30)
    act = lr.Tanh()
    net = lr.LowRankRNN.from_vectors(v, layout, act)
    n = v.shape[1]
    j = net.m.T @ net.n / n  # dense J = (1/N) sum_r m_r n_r^T
    u = task.inputs[1]
    x = np.zeros(n)
    zs = []
    for t in range(u.shape[0]):
        x = x + task.dt * (-x + np.asarray(j) @ np.tanh(x) + np.asarray(net.inputs.T @ u[t]))
        zs.append(np.asarray(net.readout) @ np.tanh(x) / n)
    _, z = net.simulate(u, dt=task.dt)
    np.testing.assert_allclose(z, np.array(zs), rtol=1e-12, atol=1e-14)


def test_discrete_gd_exact_in_overlap_space(getkey):
    layout, task, act, v = _setup(getkey, 1, 1, n_neurons=50)
    trained = layout.trained_mask(readout=True)
    eta, steps = 0.3, 15
    _, gs_net, losses = lr.network_gd(
        lr.NetworkLoss(task, layout, act), v, trained, eta=eta, n_steps=steps
    )
    gs_ov = lr.overlap_gd(
        lr.OverlapLoss(task, layout, act), lr.gram(v), trained, eta=eta, n_steps=steps
    )
    assert gs_net.shape == gs_ov.shape == (steps + 1, 4, 4)
    assert float(losses[-1]) < float(losses[0])
    np.testing.assert_allclose(gs_ov, gs_net, rtol=0, atol=1e-11)


def test_network_gd_step_passes_the_shared_step_checks(getkey, tmp_path):
    import optax

    from tests.step_checks import check_step

    layout, task, act, v = _setup(getkey, 1, 1, n_neurons=16)
    step = lr.NetworkGDStep(
        lr.NetworkLoss(task, layout, act), layout.trained_mask(readout=True), optax.sgd(0.3 * 16)
    )
    check_step(step, step.init(v, getkey()), key=getkey(), steps=6, tmp_path=tmp_path)
    # one step of the driver's step object == the public single-step function
    s1, aux = step.step(step.init(v, getkey()), getkey())
    s2, loss = lr.network_gd_step(
        step.loss_fn, lr.network_gd_init(v, eta=0.3), step.trained, eta=0.3
    )
    np.testing.assert_array_equal(s1.vectors, s2.vectors)
    np.testing.assert_array_equal(aux["loss"], loss)
    np.testing.assert_array_equal(aux["gram"], lr.gram(s2.vectors))


def test_ode_matches_network_flow_linear(getkey):
    layout, task, act, v = _setup(getkey, 1, 1, n_neurons=30)
    trained = layout.trained_mask()
    ts = jnp.linspace(0.0, 2.0, 5, dtype=jnp.float64)
    ctrl = diffrax.PIDController(rtol=1e-10, atol=1e-12)
    vs = lr.solve_network_flow(
        lr.NetworkLoss(task, layout, act), v, trained, ts, stepsize_controller=ctrl
    )
    gs_sim = jax.vmap(lr.gram)(vs)
    gs_ode = lr.solve_overlap_flow(
        lr.OverlapLoss(task, layout, act), lr.gram(v), trained, ts, stepsize_controller=ctrl
    )
    assert float(jnp.max(jnp.abs(gs_ode[-1] - gs_ode[0]))) > 1e-2  # learning happened
    np.testing.assert_allclose(gs_ode, gs_sim, rtol=0, atol=1e-8)


def test_weight_decay_consistent(getkey):
    layout, task, act, v = _setup(getkey, 1, 1, n_neurons=30)
    trained = layout.trained_mask()
    dv = lr.network_flow(lr.NetworkLoss(task, layout, act, weight_decay=0.1), v, trained)
    proj = (dv @ v.T + v @ dv.T) / v.shape[1]
    dg = lr.overlap_flow(lr.OverlapLoss(task, layout, act, weight_decay=0.1), lr.gram(v), trained)
    np.testing.assert_allclose(dg, proj, atol=1e-12)


def test_convergence_order(getkey):
    layout, task, act, v = _setup(getkey, 1, 1, n_neurons=20)
    trained = layout.trained_mask()
    loss = lr.OverlapLoss(task, layout, act)
    g0 = lr.gram(v)
    ts = jnp.array([0.0, 1.0], dtype=jnp.float64)
    ref = lr.solve_overlap_flow(
        loss, g0, trained, ts, stepsize_controller=diffrax.PIDController(rtol=1e-12, atol=1e-13)
    )
    errs = []
    for dt in (0.2, 0.1, 0.05):
        g = lr.solve_overlap_flow(
            loss,
            g0,
            trained,
            ts,
            solver=diffrax.Heun(),
            stepsize_controller=diffrax.ConstantStepSize(),
            dt0=dt,
        )
        errs.append(float(jnp.max(jnp.abs(g[-1] - ref[-1]))))
    orders = np.log2(np.array(errs[:-1]) / np.array(errs[1:]))
    assert np.all((orders > 1.8) & (orders < 2.3)), (errs, orders)


def test_jit_equals_eager_and_grad_matches_finite_differences(getkey):
    layout, task, _, v = _setup(getkey, 1, 1, n_neurons=20)
    loss = lr.OverlapLoss(task, layout, lr.Tanh())
    g = lr.gram(v)
    trained = layout.trained_mask()
    eager = lr.overlap_flow(loss, g, trained)
    jitted = eqx.filter_jit(lr.overlap_flow)(loss, g, trained)
    np.testing.assert_allclose(jitted, eager, rtol=1e-12, atol=1e-14)
    direction = jax.random.normal(getkey(), g.shape, jnp.float64)
    direction = direction + direction.T
    eps = 1e-5
    fd = (loss(g + eps * direction) - loss(g - eps * direction)) / (2 * eps)
    ad = jnp.sum(jax.grad(loss)(g) * direction)
    np.testing.assert_allclose(ad, fd, rtol=1e-7)


def test_vmap_over_seeds_equals_loop(getkey):
    layout, task, act, _ = _setup(getkey, 1, 1)
    trained = layout.trained_mask()
    loss = lr.OverlapLoss(task, layout, act)
    keys = jax.random.split(getkey(), 3)
    g0s = jnp.stack(
        [lr.gram(lr.gaussian_vectors(jnp.eye(4, dtype=jnp.float64), 20, key=k)) for k in keys]
    )
    ts = jnp.linspace(0.0, 1.0, 3, dtype=jnp.float64)
    batched = jax.vmap(lambda g: lr.solve_overlap_flow(loss, g, trained, ts))(g0s)
    looped = jnp.stack([lr.solve_overlap_flow(loss, g, trained, ts) for g in g0s])
    np.testing.assert_allclose(batched, looped, rtol=1e-10, atol=1e-12)
    gd_b = jax.vmap(lambda g: lr.overlap_gd(loss, g, trained, eta=0.2, n_steps=4))(g0s)
    gd_l = jnp.stack([lr.overlap_gd(loss, g, trained, eta=0.2, n_steps=4) for g in g0s])
    np.testing.assert_allclose(gd_b, gd_l, rtol=1e-10, atol=1e-12)
