"""Issue 30 findings 3 and 10 (bandits): NumPy inputs to `play`/`replay`, and Open Bandit
logs with impossible propensities."""

from __future__ import annotations

import importlib.metadata

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxlab import bandits as B
from jaxlab.bandits._data import _read_open_bandit


def test_play_accepts_numpy_and_lists_like_jax_arrays(getkey, tree_allclose):
    rng = np.random.default_rng(0)
    contexts = rng.standard_normal((4, 3))
    rewards = rng.standard_normal((12, 4))
    key = getkey()
    ref = B.play(B.LinUCB(alpha=0.5), jnp.asarray(contexts), jnp.asarray(rewards), key=key)
    for ctx, rew in ((contexts, rewards), (contexts.tolist(), rewards.tolist())):
        got = B.play(B.LinUCB(alpha=0.5), ctx, rew, key=key)
        assert tree_allclose((got.arms, got.rewards), (ref.arms, ref.rewards))
    mask = np.ones((12, 4), bool)
    got = B.play(B.LinUCB(alpha=0.5), contexts, rewards, mask, key=key)
    np.testing.assert_array_equal(got.arms, ref.arms)


def test_replay_accepts_numpy(getkey):
    rng = np.random.default_rng(1)
    contexts = rng.standard_normal((10, 3, 2))
    arms = rng.integers(0, 3, 10)
    rewards = rng.uniform(size=10)
    key = getkey()
    ref = B.replay(
        B.LinUCB(), jnp.asarray(contexts), jnp.asarray(arms), jnp.asarray(rewards), key=key
    )
    got = B.replay(B.LinUCB(), contexts, arms, rewards, key=key)
    np.testing.assert_array_equal(got.matched, ref.matched)
    np.testing.assert_allclose(got.value, ref.value)


@pytest.mark.parametrize(
    ("arg", "value", "match"),
    [
        ("rewards", None, "^rewards: expected an array, received NoneType"),
        ("rewards", "nan", "^rewards: expected finite values"),
        ("contexts", "nan", "^contexts: expected finite values"),
        ("contexts", "rank", r"^contexts: expected shape \('K=4', None\)"),
    ],
)
def test_play_bad_input_names_the_argument(getkey, arg, value, match):
    rng = np.random.default_rng(0)
    kw = {"contexts": rng.standard_normal((4, 3)), "rewards": rng.standard_normal((12, 4))}
    if value == "nan":
        kw[arg][0, 0] = np.nan
    elif value == "rank":
        kw[arg] = rng.standard_normal((5, 3))
    else:
        kw[arg] = value
    with pytest.raises(ValueError, match=match):
        B.play(B.LinUCB(), kw["contexts"], kw["rewards"], key=getkey())


def _obd_files():
    dist = importlib.metadata.distribution("obp")
    (log,) = [f for f in dist.files if str(f).endswith("obd/random/all/all.csv")]
    (ctx,) = [f for f in dist.files if str(f).endswith("obd/random/all/item_context.csv")]
    return dist.locate_file(log), dist.locate_file(ctx)


@pytest.mark.parametrize("pscore", ["0", "0.0", "nan", "7.5", "-0.1", "inf"])
def test_load_open_bandit_rejects_impossible_propensities(tmp_path, pscore):
    log_src, ctx_src = _obd_files()
    lines = log_src.read_text(encoding="utf-8").splitlines()[:50]
    head = lines[0].split(",")
    col = head.index("propensity_score")
    row = lines[7].split(",")
    row[col] = pscore
    lines[7] = ",".join(row)
    log = tmp_path / "all.csv"
    log.write_text("\n".join(lines) + "\n", encoding="utf-8")
    # the untouched slice loads (the check is not over-eager)
    ok = tmp_path / "ok.csv"
    ok.write_text("\n".join(log_src.read_text(encoding="utf-8").splitlines()[:50]) + "\n")
    assert _read_open_bandit(ok, ctx_src, "random", "all").pscore.shape == (49,)
    with pytest.raises(ValueError, match=r"all.csv: propensity_score: expected values in \(0, 1\]"):
        _read_open_bandit(log, ctx_src, "random", "all")


def test_jitted_play_with_numpy_closure(getkey):
    """A NumPy table closed over by a jitted function (the TracerArrayConversionError case)."""
    rng = np.random.default_rng(2)
    contexts, rewards = rng.standard_normal((12, 4, 3)), rng.standard_normal((12, 4))
    f = jax.jit(lambda k: B.play(B.LinUCB(), contexts, rewards, key=k).arms)
    assert f(getkey()).shape == (12,)


# ---- issue #59: the fuzz tables' findings (estimate_with_ci, the world, MovieLens tiers)


def _log():
    rng = np.random.default_rng(3)
    return (
        rng.integers(0, 3, 12),
        rng.uniform(size=12),
        np.full(12, 1 / 3),
        np.full((12, 3), 1 / 3),
    )


def test_estimate_with_ci_accepts_lists_and_names_a_bad_level():
    key = jax.random.key(0)
    log = _log()
    ref = B.estimate_with_ci(B.ips, *log, key=key, n_boot=8)
    got = B.estimate_with_ci(B.ips, *(np.asarray(a).tolist() for a in log), key=key, n_boot=8)
    np.testing.assert_allclose([got.value, got.low, got.high], [ref.value, ref.low, ref.high])
    for level in (None, "0.9", np.array([[0.9]]), np.nan):
        with pytest.raises(ValueError, match="level"):
            B.estimate_with_ci(B.ips, *log, key=key, n_boot=8, level=level)
    with pytest.raises(ValueError, match="n_boot"):  # 10**9 resamples: refused, not allocated
        B.estimate_with_ci(B.ips, *log, key=key, n_boot=10**9)


def test_one_hot_items_refuses_values_out_of_range():
    values = np.array([[0, 2], [1, 0]])
    np.testing.assert_array_equal(B.one_hot_items(values, (3, 3)).sum(1), [2, 2])
    for bad in (3, -1):  # one_hot gave an all-zero block (3) or wrapped (-1)
        with pytest.raises(ValueError, match="values"):
            B.one_hot_items(np.array([[0, bad]]), (3, 3))
    for bad in (None, "ab", np.zeros((1, 1, 2), int), np.zeros((2, 1), int)):
        with pytest.raises(ValueError, match="values"):
            B.one_hot_items(bad, (3, 3))


def test_make_dimension_world_names_bad_dimensions_and_sizes():
    key = jax.random.key(0)
    world = B.make_dimension_world(4, np.array([2, 3]), np.array([1]), key=key)
    assert world.features.shape == (4, 5)
    for n_values in (None, "ab", [2.0, np.nan], [[2, 3]], [2, 1]):
        with pytest.raises(ValueError, match="n_values"):
            B.make_dimension_world(4, n_values, (1,), key=key)
    for relevant in (None, "a", [[1]], [2], [-1]):
        with pytest.raises(ValueError, match="relevant"):
            B.make_dimension_world(4, (2, 3), relevant, key=key)
    with pytest.raises(ValueError, match="n_items"):  # refused before allocating
        B.make_dimension_world(10**9, (2, 3), (1,), key=key)


def test_movielens_item_dimensions_caps_the_tiers():
    from tests.test_fuzz_public_api import _tiny_movielens

    ml = _tiny_movielens()
    feats = B.movielens_item_dimensions(ml, n_tiers=3)[0]
    assert feats.shape[0] == 3
    with pytest.raises(ValueError, match="n_tiers"):  # np.eye(10**9) aborted the process
        B.movielens_item_dimensions(ml, n_tiers=10**9)
    with pytest.raises(ValueError, match="train_mask"):
        B.movielens_item_dimensions(ml, "abc")


def _tiny_tdge_state():
    """A TDGE over two dimensions of two values each, after six LinUCB rounds."""
    w = B.make_dimension_world(4, np.array([2, 2]), np.array([0]), key=jax.random.key(0))
    pol = B.TDGE(B.LinUCB(), w.feature_dim, probe_rounds=1)
    tr = B.play(pol, w.features, w.sample_rewards(6, key=jax.random.key(1)), key=jax.random.key(2))
    return pol, tr.state


def test_dimension_relevance_refuses_a_nan_state_and_names_the_field():
    """Issue #59 (fuzz): a NaN in the trained state's ridge statistics came back as a NaN
    relevance, and a missing or misshapen field as an AttributeError/TypeError from
    `a_inv @ b`; now each is a ValueError naming the field. Valid states are unchanged."""
    pol, state = _tiny_tdge_state()
    ref = np.asarray(B.dimension_relevance(pol, state))
    assert np.all(np.isfinite(ref))
    item = state.item_state
    for field, value in (
        ("b", np.asarray(item.b).copy()),
        ("a_inv", np.asarray(item.a_inv).copy()),
    ):
        value.reshape(-1)[1] = np.nan
        bad = eqx.tree_at(lambda s, f=field: getattr(s.item_state, f), state, value)
        with pytest.raises(ValueError, match=rf"^state.item_state.{field}: expected finite"):
            B.dimension_relevance(pol, bad)
    short = eqx.tree_at(lambda s: s.item_state.b, state, np.asarray(item.b)[:-1])
    with pytest.raises(ValueError, match=r"^state.item_state.b: expected shape"):
        B.dimension_relevance(pol, short)
    nan_feat = eqx.tree_at(lambda s: s.feat_state.b, state, np.full(4, np.nan))
    with pytest.raises(ValueError, match=r"^state.feat_state.b: expected finite"):
        B.dimension_relevance(pol, nan_feat, level="feature")
    with pytest.raises(ValueError, match="^state: expected a TDGEState"):
        B.dimension_relevance(pol, item)
    with pytest.raises(ValueError, match="^policy: expected a TDGE"):
        B.dimension_relevance(B.LinUCB(), state)
    # under jit the shapes are still checked and the values pass through unchanged
    jitted = jax.jit(lambda s: B.dimension_relevance(pol, s))(state)
    np.testing.assert_allclose(np.asarray(jitted), ref, rtol=1e-6)


def test_load_open_bandit_names_a_non_string_policy_or_campaign():
    """Issue #59 (fuzz): an array policy such as np.array([["random"]]) passed the
    membership test (NumPy compares elementwise) and failed as a FileNotFoundError of
    the path "obd/[['random']]/..."; now a ValueError naming the argument."""
    for kw in ({"policy": np.array([["random"]])}, {"campaign": None}, {"policy": 1}):
        name = next(iter(kw))
        with pytest.raises(ValueError, match=f"^{name}: expected a str"):
            B.load_open_bandit(**kw)
