"""Issue 30 finding 3 (sensing): NumPy inputs to `run_episode` and `train_model` work like
JAX arrays (they crashed with TracerArrayConversionError), bad ones name the argument."""

from __future__ import annotations

import jax
import numpy as np
import optax
import pytest

from jaxlab import Driver, sensing


def _numpy_tree(tree):
    return jax.tree.map(lambda x: np.asarray(x) if isinstance(x, jax.Array) else x, tree)


def test_run_episode_traces_with_numpy_inputs(getkey):
    """Tracing alone hit the TracerArrayConversionError (no compile: cheap)."""
    model = sensing.MultimodalVAE(latent_dim=2, width=8, key=getkey())
    flower = _numpy_tree(sensing.sample_flower(key=getkey()))
    grid = np.asarray(sensing.action_grid(3))
    pol = sensing.LexicographicPolicy(gate=0.5)
    out = jax.eval_shape(
        lambda k: sensing.run_episode(model, flower, pol, grid, 2, key=k), getkey()
    )
    assert out.actions.shape == (2, 3)
    bad = grid.copy()
    bad[0, 0] = np.nan
    with pytest.raises(ValueError, match="^candidates: expected finite values"):
        sensing.run_episode(model, flower, pol, bad, 3, key=getkey())
    with pytest.raises(ValueError, match="^candidates: expected at least one candidate"):
        sensing.run_episode(model, flower, pol, np.zeros((0, 3)), 3, key=getkey())


def test_vae_step_traces_with_numpy_probe_data(getkey):
    rng = np.random.default_rng(0)
    data = sensing.ProbeData(
        flowers=_numpy_tree(sensing.sample_flower(key=getkey())),  # not read by the step
        actions=rng.standard_normal((8, 4, 3)),
        visual=rng.standard_normal((8, 4, 9)),
        mechano=rng.standard_normal((8, 4, 6)),
    )
    model = sensing.MultimodalVAE(latent_dim=2, width=8, key=getkey())
    step = sensing.VAEStep(model, data, optimizer=optax.adam(1e-3), batch_size=4)
    assert isinstance(step.data.visual, jax.Array)
    state = step.init(model, getkey())
    _, aux = jax.eval_shape(step.step, state, getkey())
    assert aux["loss"].shape == ()
    bad = sensing.ProbeData(data.flowers, data.actions, data.visual.copy(), data.mechano)
    bad.visual[0, 0, 0] = np.nan
    with pytest.raises(ValueError, match="^data.visual: expected finite values"):
        sensing.train_model(model, bad, key=getkey(), steps=1)
    short = sensing.ProbeData(data.flowers, data.actions, data.visual[:, :2], data.mechano)
    with pytest.raises(ValueError, match=r"^data.visual: expected shape \('F=8', 'K=4', 9\)"):
        sensing.train_model(model, short, key=getkey(), steps=1)


@pytest.mark.slow
def test_run_episode_accepts_numpy_candidates_and_flower(getkey):
    model = sensing.MultimodalVAE(latent_dim=2, width=8, key=getkey())
    flower = sensing.sample_flower(key=getkey())
    grid = sensing.action_grid(3)
    pol = sensing.LexicographicPolicy(gate=0.5)
    key = getkey()
    ref = sensing.run_episode(model, flower, pol, grid, 3, key=key)
    got = sensing.run_episode(model, _numpy_tree(flower), pol, np.asarray(grid), 3, key=key)
    np.testing.assert_allclose(got.actions, ref.actions)
    np.testing.assert_allclose(got.rewards, ref.rewards)


@pytest.mark.slow
def test_train_model_accepts_numpy_probe_data(getkey):
    data = sensing.simulate_probes(8, 4, key=getkey())
    model = sensing.MultimodalVAE(latent_dim=2, width=8, key=getkey())
    key = getkey()
    kw = {
        "key": key,
        "steps": 3,
        "batch_size": 4,
        "optimizer": optax.adam(1e-3),
        "driver": Driver(chunk=3),
    }
    _, ref = sensing.train_model(model, data, **kw)
    _, got = sensing.train_model(model, _numpy_tree(data), **kw)
    np.testing.assert_allclose(got.losses, ref.losses)


def test_action_grid_refuses_a_grid_larger_than_memory():
    """Issue #59 (contract fuzz): n=10**9 allocated an n-point linspace and an n x n mesh."""
    assert sensing.action_grid(3, 0.9).shape == (5, 3)  # the 4 corners lie outside the disc
    with pytest.raises(ValueError, match="^n: needs about"):
        sensing.action_grid(10**9)


# issue #59: the flower's pure functions, newly declared in the fuzz table, refuse bad
# inputs by name (before: TypeError/IndexError from inside, or a silent NaN result)


def test_flower_functions_refuse_none_nan_and_wrong_shapes():
    flower = sensing.sample_flower(key=jax.random.key(1))
    assert np.isfinite(float(sensing.surface_height(flower, np.array([0.1, -0.2]))))
    with pytest.raises(ValueError, match="p: expected an array"):
        sensing.surface_height(flower, None)
    with pytest.raises(ValueError, match="p: expected finite"):
        sensing.surface_height(flower, np.array([np.nan, 0.0]))
    with pytest.raises(ValueError, match="action"):
        sensing.nectar_reward(flower, np.zeros((1, 1, 3)))
    with pytest.raises(ValueError, match="action"):
        sensing.observe_mean(flower, np.zeros(0))


def test_grid_mask_and_random_actions_refuse_bad_sizes():
    flower = sensing.sample_flower(key=jax.random.key(1))
    assert sensing.grid_mask(3).shape == (3, 3)
    with pytest.raises(ValueError, match="n: expected a positive integer"):
        sensing.grid_mask(2.5)
    assert sensing.random_actions(flower, 4, key=jax.random.key(0)).shape == (4, 3)
    with pytest.raises(ValueError, match="n: expected a positive integer"):
        sensing.random_actions(flower, 0, key=jax.random.key(0))
    with pytest.raises(ValueError, match="near_nectary"):
        sensing.random_actions(flower, 4, key=jax.random.key(0), near_nectary=1.5)
    with pytest.raises(ValueError, match="near_nectary"):
        sensing.random_actions(flower, 4, key=jax.random.key(0), near_nectary=float("nan"))
