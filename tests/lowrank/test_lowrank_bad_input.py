"""Issue 30 finding 10 (lowrank): a NaN/inf start or bad save times raise a `ValueError`
naming the argument, not diffrax's "maximum number of solver steps"."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxlab import lowrank as lr


def _problem():
    layout = lr.OverlapLayout(1, 1)
    task = lr.fixed_point_task(n_trials=2, n_steps=6).astype(jnp.float64)
    loss = lr.OverlapLoss(task, layout, lr.Linear())
    p = layout.size
    g0 = jnp.eye(p, dtype=jnp.float64) + 0.1
    return loss, g0, layout.trained_mask()


@pytest.mark.parametrize("bad", [np.nan, np.inf])
def test_solve_overlap_flow_nan_start_is_a_value_error(bad):
    loss, g0, trained = _problem()
    ts = jnp.array([0.0, 0.5])
    with pytest.raises(ValueError, match="^g0: expected finite values"):
        lr.solve_overlap_flow(loss, g0.at[0, 1].set(bad), trained, ts)
    with pytest.raises(ValueError, match="^ts: expected finite values"):
        lr.solve_overlap_flow(loss, g0, trained, ts.at[1].set(bad))


def test_solve_overlap_flow_bad_times_and_options():
    loss, g0, trained = _problem()
    with pytest.raises(ValueError, match="^ts: expected nondecreasing"):
        lr.solve_overlap_flow(loss, g0, trained, jnp.array([0.0, 1.0, 0.5]))
    with pytest.raises(ValueError, match="^ts: expected at least one save time"):
        lr.solve_overlap_flow(loss, g0, trained, jnp.zeros((0,)))
    with pytest.raises(ValueError, match="^max_steps: expected a positive integer"):
        lr.solve_overlap_flow(loss, g0, trained, jnp.array([0.0, 1.0]), max_steps=0)
    with pytest.raises(ValueError, match="^g0: expected an array, received NoneType"):
        lr.solve_overlap_flow(loss, None, trained, jnp.array([0.0, 1.0]))
    v = np.ones((trained.shape[0], 8))
    v[0, 0] = np.nan
    with pytest.raises(ValueError, match="^v0: expected finite values"):
        lr.solve_network_flow(lr.NetworkLoss, v, trained, jnp.array([0.0, 1.0]))


def test_solve_overlap_flow_accepts_lists_like_arrays():
    loss, g0, trained = _problem()
    ts = jnp.array([0.0, 0.2])
    ref = lr.solve_overlap_flow(loss, g0, trained, ts)
    got = lr.solve_overlap_flow(
        loss, np.asarray(g0).tolist(), np.asarray(trained).tolist(), [0.0, 0.2]
    )
    np.testing.assert_allclose(got, ref, rtol=1e-12)


def test_a_start_of_the_wrong_size_names_g0_not_g():
    """Issue #59: the size error of a start that does not fit the loss's layout named the
    loss's internal `g`, not the caller's argument `g0`."""
    loss, g0, trained = _problem()
    p = g0.shape[0]
    big, big_trained = jnp.eye(p + 1), jnp.ones(p + 1, bool)
    with pytest.raises(ValueError, match=rf"^g0: expected shape \({p}, {p}\)"):
        lr.solve_overlap_flow(loss, big, big_trained, jnp.array([0.0, 0.5]))
    with pytest.raises(ValueError, match=rf"^g0: expected shape \({p}, {p}\)"):
        lr.overlap_gd(loss, big, big_trained, eta=0.1, n_steps=2)
    with pytest.raises(ValueError, match=rf"^g: expected shape \({p}, {p}\)"):
        lr.overlap_flow(loss, big, big_trained)


def test_overlap_gd_refuses_a_trajectory_larger_than_memory():
    """Issue #59 (contract fuzz): n_steps=10**9 asked XLA for a (n_steps + 1, P, P)
    trajectory of 64 GB; the estimate is checked first, naming n_steps."""
    loss, g0, trained = _problem()
    gs = lr.overlap_gd(loss, g0, trained, eta=0.1, n_steps=2)
    assert gs.shape == (3, *g0.shape)
    with pytest.raises(ValueError, match="^n_steps: needs about"):
        lr.overlap_gd(loss, g0, trained, eta=0.1, n_steps=10**9)


# ---- issue #59 round 3 (contract fuzz over every public lowrank function)


def test_overlap_and_network_functions_refuse_nan_inputs():
    """Before: a NaN in the overlaps/vectors gave NaN outputs, losses, flows and gradient
    steps silently (only overlap_gd and the solvers checked their start)."""
    loss, g0, trained = _problem()
    layout, task = loss.layout, loss.task
    bad = g0.at[0, 1].set(jnp.nan)
    for call in (
        lambda: lr.overlap_flow(loss, bad, trained),
        lambda: lr.overlap_gd_step(loss, bad, trained, 0.1),
        lambda: lr.overlap_loss(bad, task, layout, lr.Linear()),
        lambda: lr.overlap_outputs(bad, task, layout, lr.Linear()),
    ):
        with pytest.raises(ValueError, match="^g: expected finite values"):
            call()
    with pytest.raises(ValueError, match="^gs: expected finite values"):
        lr.overlap_sensitivity(loss, bad[None])
    with pytest.raises(ValueError, match="^gs: expected at least one"):
        lr.classify_overlaps(loss, jnp.zeros((0, layout.size, layout.size)))
    v = np.random.default_rng(0).standard_normal((layout.size, 6))
    v[1, 2] = np.inf
    nloss = lr.NetworkLoss(task, layout, lr.Linear())
    with pytest.raises(ValueError, match="^vectors: expected finite values"):
        lr.network_loss(jnp.asarray(v), task, layout, lr.Linear())
    with pytest.raises(ValueError, match="^vectors: expected finite values"):
        lr.network_gd_init(jnp.asarray(v), eta=0.1)
    with pytest.raises(ValueError, match="^vectors: expected finite values"):
        lr.network_flow(nloss, jnp.asarray(v), trained)


def test_network_gd_names_v0_and_step_checks_trained():
    """Before: network_gd's errors named `vectors` (the argument is `v0`); network_gd_step
    with a wrong-size `trained` failed with a broadcasting error."""
    loss, g0, trained = _problem()
    nloss = lr.NetworkLoss(loss.task, loss.layout, lr.Linear())
    v = jnp.asarray(np.random.default_rng(0).standard_normal((loss.layout.size, 6)))
    with pytest.raises(ValueError, match="^v0: expected finite values"):
        lr.network_gd(nloss, v.at[0, 0].set(jnp.nan), trained, eta=0.1, n_steps=2)
    state = lr.network_gd_init(v, eta=0.1)
    with pytest.raises(ValueError, match="^trained: expected shape"):
        lr.network_gd_step(nloss, state, trained[:-1], eta=0.1)


def test_visibility_table_checks_its_mask():
    """Before: a mask of the wrong shape raised IndexError, None a 0-d IndexError."""
    layout = lr.OverlapLayout(1, 1)
    p = layout.size
    assert all(lr.visibility_table(layout, np.ones((p, p), bool)).values())
    for bad in (None, np.ones((p, p - 1), bool), np.ones((p, p))):
        with pytest.raises(ValueError, match="^visible: expected"):
            lr.visibility_table(layout, bad)


def test_task_sizes_are_checked_and_bounded():
    """Before: flip_flop_task(pulse_width=True) was accepted and a huge pulse_width looped
    without bound; ramp_task(n_steps=np.int64(6)) failed with a dtype-promotion error;
    n_trials=10**9 tried to allocate the task."""
    with pytest.raises(ValueError, match="^pulse_width: expected a positive integer"):
        lr.flip_flop_task(key=jax.random.key(0), n_trials=2, n_steps=6, pulse_width=True)
    long = lr.flip_flop_task(key=jax.random.key(0), n_trials=2, n_steps=6, pulse_width=10**9)
    full = lr.flip_flop_task(key=jax.random.key(0), n_trials=2, n_steps=6, pulse_width=6)
    np.testing.assert_array_equal(long.inputs, full.inputs)  # capped at the trial length
    assert lr.ramp_task(n_trials=2, n_steps=np.int64(6)).targets.shape == (2, 6)
    with pytest.raises(ValueError, match="^pulse_steps: expected a positive integer"):
        lr.ramp_task(n_trials=2, n_steps=6, pulse_steps="3")
    with pytest.raises(ValueError, match="^n_trials: needs about"):
        lr.fixed_point_task(n_trials=10**9, n_steps=10**3)
