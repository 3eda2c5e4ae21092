"""`train_history`: sequential overlap flows equal N-space gradient flow through the same
phases (exact for linear units), and keep a trace of the earlier task."""

from __future__ import annotations

import diffrax
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxlab import lowrank as lr


def _two_tasks():
    a = lr.fixed_point_task(n_trials=3, n_steps=12, gain=0.8).astype(jnp.float64)
    b = lr.fixed_point_task(n_trials=3, n_steps=12, gain=-0.6).astype(jnp.float64)
    # task A drives input 1, task B input 2
    zeros = jnp.zeros_like(a.inputs)
    ta = lr.Task(jnp.concatenate([a.inputs, zeros], -1), a.targets, a.mask, a.dt, "A")
    tb = lr.Task(jnp.concatenate([zeros, b.inputs], -1), b.targets, b.mask, b.dt, "B")
    return ta, tb


@pytest.mark.slow  # four adaptive ODE solves at tight tolerance: ~40 s idle
def test_history_equals_network_flow_through_the_same_phases(getkey):
    layout = lr.OverlapLayout(1, 2)
    ta, tb = _two_tasks()
    p = layout.size
    m = jax.random.normal(getkey(), (p, p), jnp.float64) / np.sqrt(p)
    v = lr.gaussian_vectors(m @ m.T + 0.5 * jnp.eye(p, dtype=jnp.float64), 30, key=getkey())
    trained = layout.trained_mask(m=False, n=True)
    phases = [(ta, 1.0), (tb, 1.0)]
    g0 = lr.gram(v)
    g = lr.train_history(g0, phases, trained, rtol=1e-9)
    # oracle: gradient flow of the N-space network loss, phase after phase
    ctrl = diffrax.PIDController(rtol=1e-10, atol=1e-12)
    for task, duration in phases:
        ts = jnp.asarray([0.0, duration], jnp.float64)
        v = lr.solve_network_flow(
            lr.NetworkLoss(task, layout, lr.Linear()), v, trained, ts, stepsize_controller=ctrl
        )[-1]
    assert float(jnp.max(jnp.abs(g - g0))) > 1e-2  # learning happened
    np.testing.assert_allclose(g, lr.gram(v), rtol=0, atol=1e-6)
    # no phases: unchanged; vmap over initial overlaps with traced durations equals one call
    np.testing.assert_array_equal(lr.train_history(g0, [], trained), g0)
    hist = jax.jit(
        jax.vmap(lambda x, d: lr.train_history(x, [(ta, d), (tb, d)], trained, rtol=1e-9))
    )(jnp.stack([g0, g]), jnp.asarray([1.0, 0.5]))
    np.testing.assert_allclose(hist[0], g, rtol=0, atol=1e-10)
    assert float(jnp.max(jnp.abs(hist[1] - g))) > 1e-3


def test_history_rejects_bad_input():
    ta, _ = _two_tasks()
    trained = lr.OverlapLayout(1, 2).trained_mask()
    g = jnp.eye(5, dtype=jnp.float64)
    with pytest.raises(ValueError, match="g0"):
        lr.train_history(jnp.eye(5, 4), [(ta, 1.0)], trained)
    with pytest.raises(ValueError, match=r"phases\[0\]: expected a \(Task, duration\) pair"):
        lr.train_history(g, [ta], trained)
    with pytest.raises(ValueError, match=r"phases\[0\]: a rank-2 layout with 2 inputs has 7"):
        lr.train_history(g, [(ta, 1.0)], trained, rank=2)
    with pytest.raises(ValueError, match="rtol: expected a positive float"):
        lr.train_history(g, [(ta, 1.0)], trained, rtol=0.0)
