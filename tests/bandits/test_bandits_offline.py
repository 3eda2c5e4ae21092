"""Offline evaluation: Li et al. replay, IPS / SNIPS / DR, bootstrap CIs — against known values."""

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxlab.bandits as B


class _FixedLinear(B.AbstractBackbone):
    """A non-learning policy: argmax of contexts @ w (its value is computable exactly)."""

    w: jax.Array

    def init(self, dim, n_arms=1, *, key=None):
        return jnp.zeros((), jnp.int32)

    def select(self, state, contexts, mask, *, key=None):
        scores = contexts @ self.w
        return B.Selection(
            arm=jnp.argmax(jnp.where(mask, scores, -jnp.inf)).astype(jnp.int32), scores=scores
        )

    def update(self, state, choice, contexts, reward):
        return state + 1


def _uniform_log(key, t, k, d):
    kc, ka, kr = jax.random.split(key, 3)
    contexts = jax.random.normal(kc, (t, k, d), jnp.float64)
    means = jax.nn.sigmoid(contexts @ jnp.asarray([1.0, -0.5, 0.3], jnp.float64)[:d])
    arms = jax.random.randint(ka, (t,), 0, k).astype(jnp.int32)
    all_r = jax.random.bernoulli(kr, means).astype(jnp.float64)
    return contexts, means, arms, all_r[jnp.arange(t), arms]


def test_replay_unbiased_for_known_policy_value(getkey):
    t, k, d = 600, 4, 3
    pol = _FixedLinear(w=jnp.asarray([1.0, 0.0, 0.0], jnp.float64))
    # True value of the fixed policy: E[mean reward of its arm] (contexts are i.i.d.).
    ctx, means, _, _ = _uniform_log(getkey(), 20000, k, d)
    true_value = float(jnp.mean(means[jnp.arange(20000), jnp.argmax(ctx[..., 0], axis=1)]))

    def estimate(key):
        c, _, a, r = _uniform_log(key, t, k, d)
        res = B.replay(pol, c, a, r, key=key)
        return res.value, res.n_matched

    values, n = jax.jit(jax.vmap(estimate))(jax.random.split(getkey(), 200))
    values = np.asarray(values)
    assert np.all(np.asarray(n) > 100)  # about t / k events are kept
    se = values.std() / np.sqrt(values.size)
    assert abs(values.mean() - true_value) < 4 * se + 2e-3
    # ...and it is a different value from the uniform policy's, so the test can fail.
    assert abs(float(jnp.mean(means)) - true_value) > 10 * se


def test_replay_updates_only_on_matches(getkey):
    t, k, d = 50, 3, 2
    c = jax.random.normal(getkey(), (t, k, d), jnp.float64)
    a = jax.random.randint(getkey(), (t,), 0, k).astype(jnp.int32)
    r = jax.random.normal(getkey(), (t,), jnp.float64)
    res = B.replay(B.LinUCB(alpha=0.5), c, a, r, key=getkey())
    hit = np.asarray(res.matched)
    np.testing.assert_array_equal(hit, np.asarray(res.arms) == np.asarray(a))
    x = np.asarray(c)[np.arange(t), np.asarray(a)][hit]
    np.testing.assert_allclose(res.state.a_inv, np.linalg.inv(np.eye(d) + x.T @ x), rtol=1e-9)
    assert int(res.n_matched) == hit.sum() == int(res.state.count)
    np.testing.assert_allclose(res.value, np.asarray(r)[hit].mean())


def _ope_log(key, n, k):
    kx, ka, kr = jax.random.split(key, 3)
    q = jax.random.uniform(kx, (n, k), jnp.float64, 0.1, 0.9)
    logging = jax.nn.softmax(jnp.linspace(0.0, 1.0, k, dtype=jnp.float64))
    a = jax.random.choice(ka, k, (n,), p=logging).astype(jnp.int32)
    r = jax.random.bernoulli(kr, q[jnp.arange(n), a]).astype(jnp.float64)
    return q, a, r, logging[a]


def test_ips_dr_unbiased_on_simulated_log(getkey):
    n, k = 400, 5
    target = jax.nn.one_hot(jnp.arange(n) % k, k, dtype=jnp.float64)  # a known policy

    def est(key):
        q, a, r, p = _ope_log(key, n, k)
        truth = jnp.mean(jnp.sum(target * q, axis=1))
        return (
            B.ips(a, r, p, target) - truth,
            B.doubly_robust(a, r, p, target, q) - truth,
            B.doubly_robust(a, r, p, target, jnp.zeros_like(q)) - B.ips(a, r, p, target),
            B.snips(a, r, p, target) - truth,
        )

    keys = jax.random.split(getkey(), 300)
    err_ips, err_dr, dr0_minus_ips, err_snips = (np.asarray(v) for v in jax.vmap(est)(keys))
    assert abs(err_ips.mean()) < 4 * err_ips.std() / np.sqrt(300)
    assert abs(err_dr.mean()) < 4 * err_dr.std() / np.sqrt(300) + 1e-12
    # DR with the true reward model has lower variance than IPS; with q = 0 it is IPS.
    assert err_dr.std() < 0.7 * err_ips.std()
    np.testing.assert_allclose(dr0_minus_ips, 0.0, atol=1e-12)
    assert abs(err_snips.mean()) < 0.02


def test_bootstrap_ci_covers_truth():
    # Fixed keys: a 95% interval misses the truth 5% of the time by design.
    keys = iter(jax.random.split(jax.random.key(5), 4))
    getkey = keys.__next__
    n, k = 3000, 4
    q, a, r, p = _ope_log(getkey(), n, k)
    target = jnp.full((n, k), 1.0 / k, jnp.float64)
    truth = float(jnp.mean(q))
    est = B.estimate_with_ci(B.ips, a, r, p, target, key=getkey(), n_boot=300)
    assert float(est.low) < float(est.value) < float(est.high)
    assert float(est.low) < truth < float(est.high)
    width = float(est.high - est.low)
    assert 0.005 < width < 0.1


def test_bootstrap_is_compiled_once_per_estimator_and_shape(getkey):
    # eagerly, every estimate_with_ci call compiled its lax.map anew (30 calls: ~8 s of
    # bandits_obd's smoke run); the interval is now one jitted function, cached
    from jaxlab.bandits import _offpolicy

    q, a, r, p = _ope_log(getkey(), 50, 3)
    target = jnp.full((50, 3), 1 / 3, jnp.float64)
    before = _offpolicy._bootstrap_interval._cache_size()
    ests = [
        B.estimate_with_ci(B.doubly_robust, a, r, p, target, q, key=getkey(), n_boot=20)
        for _ in "ab"
    ]
    assert _offpolicy._bootstrap_interval._cache_size() == before + 1
    for est in ests:
        assert float(est.low) <= float(est.value) <= float(est.high)


def test_offline_bad_inputs_raise(getkey):
    q, a, r, p = _ope_log(getkey(), 20, 3)
    target = jnp.full((20, 3), 1 / 3, jnp.float64)
    with pytest.raises(ValueError, match="pscores"):
        B.ips(a, r, p.at[0].set(0.0), target)
    with pytest.raises(ValueError, match="actions"):
        B.ips(a.at[0].set(7), r, p, target)
    with pytest.raises(ValueError, match="q_hat"):
        B.doubly_robust(a, r, p, target, q[:, :2])
    with pytest.raises(ValueError, match="level"):
        B.estimate_with_ci(B.ips, a, r, p, target, key=getkey(), level=1.5)
    c = jnp.ones((20, 3, 2), jnp.float64)
    with pytest.raises(ValueError, match="logged_arms"):
        B.replay(B.LinUCB(), c, a.at[0].set(3), r, key=getkey())
    with pytest.raises(ValueError, match="logged_rewards"):
        B.replay(B.LinUCB(), c, a, r[:5], key=getkey())
    assert isinstance(
        B.estimate_with_ci(B.snips, a, r, p, target, key=getkey(), n_boot=5), eqx.Module
    )


def test_doubly_robust_terms_match_the_per_event_formula(getkey):
    """Oracle: the DR term of each event written out by hand in NumPy, one event at a time;
    their mean is `doubly_robust`, and the difference of two policies' terms is linear."""
    n, k = 50, 4
    q, a, r, p = _ope_log(getkey(), n, k)
    pi = jax.nn.softmax(jax.random.normal(getkey(), (n, k)), axis=1)
    terms = np.asarray(B.doubly_robust_terms(a, r, p, pi, q))
    qn, an, rn, pn, pin = (np.asarray(x) for x in (q, a, r, p, pi))
    oracle = [
        sum(pin[i, j] * qn[i, j] for j in range(k)) + pin[i, an[i]] / pn[i] * (rn[i] - qn[i, an[i]])
        for i in range(n)
    ]
    np.testing.assert_allclose(terms, oracle, rtol=1e-10)
    np.testing.assert_allclose(terms.mean(), B.doubly_robust(a, r, p, pi, q), rtol=1e-12)
    with pytest.raises(ValueError, match="q_hat"):
        B.doubly_robust_terms(a, r, p, pi, q[:, :2])
