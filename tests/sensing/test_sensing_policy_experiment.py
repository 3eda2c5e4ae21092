"""sensing_policy's scoring of visits, its tuning grids and the trained-model cache of the
P4 experiments."""

import dataclasses

import equinox as eqx
import jax
import numpy as np
import pytest

from experiments._harness import RunContext
from experiments.sensing import _setup, policy


def test_visit_scores_equal_a_hand_count():
    # 2 flowers, 3 visits of 2 probes
    rewards = np.array(
        [
            [0, 0, 1, 0, 1, 1],  # rates 0, .5, 1; first nectar at probe 3
            [0, 0, 0, 0, 0, 0],  # never
        ]
    )
    got = policy.visit_scores(rewards, 3, threshold=0.5)
    np.testing.assert_array_equal(got["rate"], [[0, 0.5, 1], [0, 0, 0]])
    np.testing.assert_allclose(got["reward"], [0.5, 0.0])
    np.testing.assert_array_equal(got["visits_to_threshold"], [2, 4])  # 4 = never
    np.testing.assert_array_equal(got["first_nectar"], [3, 7])
    # a higher threshold moves the first flower's learned visit to the third
    np.testing.assert_array_equal(
        policy.visit_scores(rewards, 3, threshold=0.75)["visits_to_threshold"], [3, 4]
    )
    with pytest.raises(ValueError, match="do not split into 4 visits"):
        policy.visit_scores(rewards, 4, threshold=0.5)


def test_tuning_grids_have_one_size_and_the_config_values():
    c = policy.QUICK
    grid = policy.tuning_grid(c)
    sizes = {k: len(v) for k, v in grid.items() if k != "exploit"}
    assert len(set(sizes.values())) == 1  # the same tuning budget for every tuned policy
    assert [policy.parameter(p) for p in grid["lexicographic"]] == pytest.approx(c.gates)
    assert [policy.parameter(p) for p in grid["egreedy"]] == pytest.approx(c.epsilons)
    assert [policy.parameter(p) for p in grid["weighted"]] == pytest.approx(c.betas)
    assert np.isnan(policy.parameter(grid["exploit"][0]))


def test_traced_parameter_gives_the_episodes_of_the_constant_one():
    # the compiled episodes take the policy's parameter as an array: the same rewards as
    # the policy built from a Python float (compiled in)
    c = policy.TINY
    model = _setup.sensing.MultimodalVAE(
        latent_dim=c.latent_dim, width=c.width, key=jax.random.key(0)
    )
    flowers = policy._flowers(jax.random.key(1), 3)
    keys = jax.random.split(jax.random.key(2), 3)
    grid = _setup.sensing.action_grid(5)
    for traced in policy.tuning_grid(c)["weighted"]:
        const = _setup.sensing.WeightedPolicy(beta=policy.parameter(traced))
        got = policy._episodes(model, flowers, keys, traced, grid, 4)
        want = jax.vmap(
            lambda f, k, p=const: _setup.sensing.run_episode(model, f, p, grid, 4, key=k).rewards
        )(flowers, keys)
        np.testing.assert_array_equal(np.asarray(got), np.asarray(want))


def _leaves(m):
    return jax.tree.leaves(eqx.filter(m, eqx.is_array))


def test_model_cache_returns_the_trained_model_and_keys_on_config_key_and_code(
    tmp_path, monkeypatch
):
    monkeypatch.setenv("JAXLAB_CACHE_DIR", str(tmp_path / "cache"))
    c = dataclasses.replace(policy.TINY, steps=20, val_every=10, cache=True)
    key = jax.random.key(3)
    ctx = RunContext("sensing_policy", tmp_path / "run")
    fresh = _setup._train(c, key, ctx, "ref")
    first = _setup.trained_model_validated(c, key, ctx)
    files = sorted(p.name for p in (tmp_path / "cache" / "sensing").iterdir())
    assert len(files) == 2  # the model (.eqx) and its training record (.npz)
    calls = []
    monkeypatch.setattr(_setup, "_train", lambda *a: calls.append(a))
    second = _setup.trained_model_validated(c, key, ctx)
    assert calls == []  # read from the cache, not trained again
    for got in (first, second):
        for a, b in zip(_leaves(got[0]), _leaves(fresh[0]), strict=True):
            np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
        np.testing.assert_array_equal(got[1], fresh[1])
        np.testing.assert_array_equal(got[2][1], fresh[2][1])
        assert got[3] == fresh[3]
    # the key names the training settings, the key and the code; not the evaluation
    k0 = _setup.model_cache_key(c, key)
    assert _setup.model_cache_key(dataclasses.replace(c, n_eval=99, cache=False), key) == k0
    assert _setup.model_cache_key(dataclasses.replace(c, steps=21), key) != k0
    assert _setup.model_cache_key(c, jax.random.key(4)) != k0
    monkeypatch.setattr(_setup, "_CODE", (*_setup._CODE[1:], _setup._CODE[0].parent / "maps.py"))
    assert _setup.model_cache_key(c, key) != k0
