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


# ---- issue #59: the fuzz tables' findings (maps, model, flower sampling, sizes)

_ACTION = np.array([0.1, -0.2, 0.0])


def _model_post():
    model = sensing.MultimodalVAE(latent_dim=2, width=4, depth=1, key=jax.random.key(2))
    post = sensing.GaussianExpert(mean=np.zeros(2), precision=np.ones(2))
    return model, post


def test_information_functions_refuse_nan_and_wrong_widths():
    """NaN actions gave a silent NaN gain/reward; a width of 2 or 4 a TypeError deep in
    the decoder; a NaN candidate grid a NaN map."""
    model, post = _model_post()
    nan_action = np.array([0.1, np.nan, 0.0])
    calls = {
        "linearized": lambda a: sensing.linearized_information_gain(model, post, a),
        "mc": lambda a: sensing.mc_information_gain(model, post, a, key=jax.random.key(0)),
        "reward": lambda a: sensing.expected_reward(model, post, a),
    }
    for name, f in calls.items():
        assert np.isfinite(f(_ACTION)), name
        for bad in (nan_action, _ACTION[:2], np.append(_ACTION, 0.0), _ACTION + 1j):
            with pytest.raises(ValueError, match="^action"):
                f(bad)
    with pytest.raises(ValueError, match="^actions"):
        sensing.information_map(model, post, np.array([[0.1, np.nan, 0.0]]))
    with pytest.raises(ValueError, match="^actions"):
        sensing.information_map(model, post, np.zeros((0, 3)))
    with pytest.raises(ValueError, match="n_samples"):  # an n_samples^2 table
        sensing.mc_information_gain(model, post, _ACTION, key=jax.random.key(0), n_samples=10**9)


def test_product_of_experts_and_elbo_refuse_nan_and_mismatched_shapes():
    experts = sensing.GaussianExpert(mean=np.zeros((3, 2)), precision=np.ones((3, 2)))
    assert np.all(np.isfinite(sensing.product_of_experts(experts, np.array([1.0, 0, 1])).mean))
    for mean, prec in (
        (np.full((3, 2), np.nan), np.ones((3, 2))),
        (np.zeros((3, 2)), -np.ones((3, 2))),
    ):
        with pytest.raises(ValueError, match="^experts"):
            sensing.product_of_experts(sensing.GaussianExpert(mean=mean, precision=prec))
    for mask in (np.array([1.0, np.nan, 1.0]), np.ones(2), np.array([1.0, 2.0, 1.0])):
        with pytest.raises(ValueError, match="^mask"):
            sensing.product_of_experts(experts, mask)
    model, _ = _model_post()
    vis, mech, acts = np.zeros((2, 9)), np.zeros((2, 6)), np.zeros((2, 3))
    key = jax.random.key(0)
    assert np.isfinite(sensing.elbo(model, vis, mech, acts, key=key, n_context=1))
    with pytest.raises(ValueError, match="^visual"):
        sensing.elbo(model, np.full((2, 9), np.nan), mech, acts, key=key)
    with pytest.raises(ValueError, match="^mechano"):
        sensing.elbo(model, vis, np.zeros((2, 5)), acts, key=key)
    for n_context in (0, 2.5, True, "1"):  # 0 or a string was accepted silently
        with pytest.raises(ValueError, match="^n_context"):
            sensing.elbo(model, vis, mech, acts, key=key, n_context=n_context)


def test_sample_flower_refuses_bad_kinds_and_ranges():
    key = jax.random.key(0)
    for kinds in ((3,), (-1,), (), None, "a", [[0, 1]]):  # 3 and -1 were wrapped/clamped
        with pytest.raises(ValueError, match="^kinds"):
            sensing.sample_flower(key=key, kinds=kinds)
    for rng in ((0.0, np.nan), (1.0,), None, (1.0, 0.5)):
        with pytest.raises(ValueError, match="^curvature_range"):
            sensing.sample_flower(key=key, curvature_range=rng)
    with pytest.raises(ValueError, match="^noise"):
        sensing.observe(sensing.sample_flower(key=key), _ACTION, key=key, noise=(np.nan, 0.1))
    with pytest.raises(ValueError, match="^q"):
        sensing.pattern_intensity(sensing.sample_flower(key=key), np.array([np.nan, 0.0]))


def test_huge_probe_and_step_counts_are_refused_before_allocation():
    key = jax.random.key(0)
    with pytest.raises(ValueError, match="n_probes"):
        sensing.simulate_probes(2, 10**9, key=key)
    with pytest.raises(ValueError, match="n_flowers"):
        sensing.simulate_probes(10**9, 2, key=key)
    model, _ = _model_post()
    flower = sensing.sample_flower(key=key)
    with pytest.raises(ValueError, match="n_steps"):
        sensing.run_episode(
            model, flower, sensing.ExploitPolicy(), np.zeros((2, 3)), 10**9, key=key
        )


def test_train_model_refuses_unbounded_steps_and_batch_before_any_work(getkey):
    """Issue #59: `train_model(steps=10**9)` ran without bound (the driver only checked
    steps >= 1); a batch of 10**9 flowers went to the compiler. Both are refused before
    the step is compiled (the shared driver cap `jaxlab.MAX_RUN_STEPS`)."""
    from jaxlab import MAX_RUN_STEPS

    model = sensing.MultimodalVAE(latent_dim=2, width=4, depth=1, key=getkey())
    data = sensing.simulate_probes(2, 2, key=getkey())
    with pytest.raises(ValueError, match=f"^steps: expected at most {MAX_RUN_STEPS}"):
        sensing.train_model(model, data, key=getkey(), steps=10**9)
    with pytest.raises(ValueError, match="^batch_size: needs about"):
        sensing.train_model(model, data, key=getkey(), steps=1, batch_size=10**12)
    flower = sensing.sample_flower(key=getkey())
    grid = sensing.action_grid(3)
    with pytest.raises(ValueError, match=f"^n_steps: expected at most {MAX_RUN_STEPS}"):
        sensing.run_episode(model, flower, sensing.ExploitPolicy(), grid, 10**9, key=getkey())
