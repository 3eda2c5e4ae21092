"""Backbones: exact rank-one updates, UCB/TS/epsilon-greedy rules, convergence, jit/vmap."""

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxlab.bandits as B


def _spd(key, d):
    m = jax.random.normal(key, (d, d), jnp.float64)
    return m @ m.T + d * jnp.eye(d, dtype=jnp.float64)


def test_sherman_morrison_equals_direct_inverse(getkey):
    a = _spd(getkey(), 5)
    x = jax.random.normal(getkey(), (5,), jnp.float64)
    got = B.sherman_morrison(jnp.linalg.inv(a), x)
    want = np.linalg.inv(np.asarray(a) + np.outer(x, x))
    np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize(
    "policy",
    [
        B.LinUCB(alpha=0.7, lam=2.0),
        B.LinearTS(v=0.3, lam=2.0),
        B.EpsilonGreedy(epsilon=0.2, lam=2.0),
    ],
)
def test_state_after_run_equals_direct_ridge(policy, getkey):
    t, k, d = 40, 6, 4
    contexts = jax.random.normal(getkey(), (t, k, d), jnp.float64)
    rewards = jax.random.normal(getkey(), (t, k), jnp.float64)
    tr = B.play(policy, contexts, rewards, key=getkey())
    x = np.asarray(contexts)[np.arange(t), np.asarray(tr.arms)]
    r = np.asarray(rewards)[np.arange(t), np.asarray(tr.arms)]
    gram = 2.0 * np.eye(d) + x.T @ x
    np.testing.assert_allclose(tr.state.a_inv, np.linalg.inv(gram), rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(
        tr.state.theta, np.linalg.solve(gram, x.T @ r), rtol=1e-9, atol=1e-12
    )
    assert int(tr.state.count) == t
    np.testing.assert_allclose(tr.rewards, r)


def test_linucb_scores_match_formula(getkey):
    pol = B.LinUCB(alpha=1.3, lam=1.0)
    st = pol.init(3, 4)
    for _ in range(5):
        x = jax.random.normal(getkey(), (4, 3), jnp.float64)
        st = pol.update(
            st, B.Selection(arm=jnp.asarray(1), scores=jnp.zeros(4)), x, jnp.asarray(0.5)
        )
    xs = np.asarray(jax.random.normal(getkey(), (4, 3), jnp.float64))
    a_inv = np.asarray(st.a_inv)
    theta = a_inv @ np.asarray(st.b)
    want = xs @ theta + 1.3 * np.sqrt(np.einsum("ki,ij,kj->k", xs, a_inv, xs))
    mask = jnp.asarray([True, False, True, True])
    sel = pol.select(st, jnp.asarray(xs), mask)
    np.testing.assert_allclose(sel.scores, want, rtol=1e-10)
    assert int(sel.arm) == int(np.argmax(np.where(np.asarray(mask), want, -np.inf)))


def test_linucb_converges_to_best_arm_two_arm_world():
    keys = iter(jax.random.split(jax.random.key(1), 4))
    getkey = keys.__next__
    # Two arms with fixed contexts; reward = x.theta* + noise; arm 1 is better by 0.3.
    t = 400
    contexts = jnp.asarray([[1.0, 0.0], [0.0, 1.0]], jnp.float64)
    means = jnp.asarray([0.2, 0.5], jnp.float64)
    rewards = means[None] + 0.3 * jax.random.normal(getkey(), (t, 2), jnp.float64)
    tr = B.play(B.LinUCB(alpha=1.0), contexts, rewards, key=getkey())
    late = np.asarray(tr.arms[-200:])
    assert np.mean(late == 1) > 0.95
    assert np.sum(np.asarray(tr.arms) == 0) < 60  # the bad arm is tried only O(log T) times


def test_linear_ts_samples_posterior(getkey):
    pol = B.LinearTS(v=0.5, lam=1.0)
    st = pol.init(2, 3)
    xs = jnp.asarray([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]], jnp.float64)
    for i in range(6):
        st = pol.update(
            st,
            B.Selection(arm=jnp.asarray(i % 3), scores=jnp.zeros(3)),
            xs,
            jnp.asarray(float(i % 2)),
        )
    keys = jax.random.split(getkey(), 4000)
    scores = jax.vmap(lambda k: pol.select(st, xs, jnp.ones(3, bool), key=k).scores)(keys)
    mean = np.asarray(xs) @ np.asarray(st.theta)
    cov = 0.25 * np.asarray(xs) @ np.asarray(st.a_inv) @ np.asarray(xs).T
    np.testing.assert_allclose(np.mean(scores, 0), mean, atol=4 * np.sqrt(cov.max() / 4000))
    np.testing.assert_allclose(np.cov(np.asarray(scores).T), cov, rtol=0.1, atol=0.01)


def test_epsilon_greedy_extremes(getkey):
    st = B.EpsilonGreedy(epsilon=0.0).init(2, 4)
    st = B.EpsilonGreedy().update(
        st,
        B.Selection(arm=jnp.asarray(2), scores=jnp.zeros(4)),
        jnp.eye(4, 2, dtype=jnp.float64) + 0.5,
        jnp.asarray(1.0),
    )
    xs = jnp.asarray([[0.0, 0.0], [1.0, 0.0], [2.0, 0.0], [0.0, 1.0]], jnp.float64)
    mask = jnp.asarray([True, True, False, True])
    keys = jax.random.split(getkey(), 2000)
    greedy = jax.vmap(lambda k: B.EpsilonGreedy(0.0).select(st, xs, mask, key=k).arm)(keys)
    scores = np.asarray(xs) @ np.asarray(st.theta)
    assert np.all(np.asarray(greedy) == np.argmax(np.where(np.asarray(mask), scores, -np.inf)))
    rand = np.asarray(
        jax.vmap(lambda k: B.EpsilonGreedy(1.0).select(st, xs, mask, key=k).arm)(keys)
    )
    assert not np.any(rand == 2)
    freq = np.bincount(rand, minlength=4)[[0, 1, 3]] / 2000
    np.testing.assert_allclose(freq, 1 / 3, atol=0.04)


def test_disjoint_linucb_matches_mabwiser(getkey):
    mabwiser = pytest.importorskip("mabwiser.mab")
    rng = np.random.default_rng(0)
    t, k, d = 60, 4, 3
    xs = rng.normal(size=(t, d))
    true = rng.normal(size=(k, d))
    rew = xs @ true.T + 0.1 * rng.normal(size=(t, k))
    pol = B.DisjointLinUCB(alpha=1.0, lam=1.0)
    st = pol.init(d, k)
    mab = mabwiser.MAB(
        arms=list(range(k)),
        learning_policy=mabwiser.LearningPolicy.LinUCB(alpha=1.0, l2_lambda=1.0),
        seed=0,
    )
    ours, theirs = [], []
    for i in range(t):
        ctx = jnp.broadcast_to(jnp.asarray(xs[i]), (k, d))
        sel = pol.select(st, ctx, jnp.ones(k, bool))
        # mabwiser must be fitted before predicting: seed it with our first decision.
        a_m = int(sel.arm) if i == 0 else int(mab.predict(xs[i : i + 1]))
        ours.append(int(sel.arm))
        theirs.append(a_m)
        st = pol.update(st, sel, ctx, jnp.asarray(rew[i, int(sel.arm)]))
        if i == 0:
            mab.fit([a_m], [rew[i, a_m]], xs[i : i + 1])
        else:
            mab.partial_fit([a_m], [rew[i, a_m]], xs[i : i + 1])
    assert ours == theirs


def test_play_jit_equals_eager_and_vmap_equals_loop(getkey, tree_allclose):
    t, k, d = 25, 5, 3
    contexts = jax.random.normal(getkey(), (k, d), jnp.float64)
    rewards = jax.random.normal(getkey(), (t, k), jnp.float64)
    pol = B.LinearTS(v=0.4)
    keys = jax.random.split(getkey(), 3)

    def run(key):
        tr = B.play(pol, contexts, rewards, key=key)
        return tr.arms, tr.rewards, tr.state

    eager = run(keys[0])
    assert tree_allclose(jax.jit(run)(keys[0]), eager)
    batched = jax.vmap(run)(keys)
    for i in range(3):
        assert tree_allclose(jax.tree_util.tree_map(lambda a, i=i: a[i], batched), run(keys[i]))


def test_hyperparameter_vmap_equals_loop(getkey, tree_allclose):
    # a traced exploration hyperparameter (tuning sweeps): every backbone, NeuralLinear's
    # retraining branch included, runs under vmap over it and matches one run per value
    t, k, d = 30, 4, 3
    contexts = jax.random.normal(getkey(), (k, d), jnp.float64)
    rewards = jax.random.normal(getkey(), (t, k), jnp.float64)
    key = getkey()
    for pol, field in (
        (B.LinUCB(alpha=1.0), "alpha"),
        (B.LinearTS(v=1.0), "v"),
        (B.EpsilonGreedy(epsilon=0.1), "epsilon"),
        (B.NeuralLinear(hidden=4, train_every=10, train_steps=5, buffer=32), "alpha"),
    ):
        values = jnp.asarray([0.05, 0.5, 2.0 if field != "epsilon" else 0.9])

        def run(h, pol=pol, field=field):
            p = eqx.tree_at(lambda q, field=field: getattr(q, field), pol, h)
            return B.play(p, contexts, rewards, key=key).arms

        batched = jax.vmap(run)(values)
        for i, h in enumerate(values):
            assert tree_allclose(batched[i], run(h)), (type(pol).__name__, float(h))


def test_neural_linear_head_is_exact_ridge_on_features(getkey):
    pol = B.NeuralLinear(hidden=6, train_every=10, train_steps=20, buffer=64)
    t, k, d = 25, 4, 3
    contexts = jax.random.normal(getkey(), (t, k, d), jnp.float64)
    rewards = jax.random.normal(getkey(), (t, k), jnp.float64)
    tr = B.play(pol, contexts, rewards, key=getkey())
    st = tr.state
    x = np.asarray(contexts)[np.arange(t), np.asarray(tr.arms)]
    r = np.asarray(tr.rewards)
    # Last retrain at round 20: head = ridge on phi of rounds 1..20, then 5 SM updates.
    phi = np.tanh(x @ np.asarray(st.w1).T + np.asarray(st.b1))
    gram = np.eye(6) + phi.T @ phi
    np.testing.assert_allclose(st.a_inv, np.linalg.inv(gram), rtol=1e-8, atol=1e-10)
    np.testing.assert_allclose(st.b, phi.T @ r, rtol=1e-8, atol=1e-10)
    np.testing.assert_allclose(st.buf_x[:t], x)


def test_neural_linear_training_reduces_loss():
    # Fixed keys: the assertion is a threshold on one training run, not a sigma bound.
    keys = iter(jax.random.split(jax.random.key(3), 4))
    getkey = keys.__next__
    pol = B.NeuralLinear(hidden=8, train_every=30, train_steps=200, learning_rate=0.1, buffer=32)
    st = pol.init(2, 1, key=getkey())
    xs = jax.random.normal(getkey(), (30, 1, 2), jnp.float64)
    ys = jnp.sin(2 * xs[:, 0, 0]) * xs[:, 0, 1]
    sel = B.Selection(arm=jnp.asarray(0), scores=jnp.zeros(1))

    def mse(s):
        return float(jnp.mean((pol.features(s, s.buf_x) @ s.head - s.buf_r) ** 2))

    update = jax.jit(pol.update)
    for i in range(29):
        st = update(st, sel, xs[i], ys[i])
    before = mse(st)
    st = update(st, sel, xs[29], ys[29])  # 30th update triggers retraining
    assert mse(st) < 0.5 * before


@pytest.mark.parametrize(
    ("make", "name"),
    [
        (lambda: B.LinUCB(alpha=-1.0), "alpha"),
        (lambda: B.LinUCB(lam=0.0), "lam"),
        (lambda: B.LinearTS(v=-0.1), "v"),
        (lambda: B.EpsilonGreedy(epsilon=1.5), "epsilon"),
        (lambda: B.NeuralLinear(hidden=0), "hidden"),
        (lambda: B.DisjointLinUCB(lam=-1.0), "lam"),
    ],
)
def test_bad_hyperparameters_raise(make, name):
    with pytest.raises(ValueError, match=name):
        make()


def test_play_bad_inputs_raise(getkey):
    pol = B.LinUCB()
    c = jnp.ones((3, 2))
    r = jnp.ones((5, 3))
    with pytest.raises(ValueError, match="rewards"):
        B.play(pol, c, jnp.ones((5,)), key=getkey())
    with pytest.raises(ValueError, match="contexts"):
        B.play(pol, jnp.ones((4, 2)), r, key=getkey())
    with pytest.raises(ValueError, match="mask"):
        B.play(pol, c, r, jnp.zeros((5, 3), bool), key=getkey())
    with pytest.raises(ValueError, match="contexts"):
        B.play(pol, c.at[0, 0].set(jnp.nan), r, key=getkey())
    with pytest.raises(ValueError, match="contexts"):
        B.play(pol, jnp.ones((3, 2), jnp.int32), r, key=getkey())
