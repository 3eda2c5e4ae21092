"""Routers: availability masking, permutation equivariance, finite gradients, a planted
routing rule learned, kNN against a NumPy brute force, thresholding by hand."""

from __future__ import annotations

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxlab import routing


def planted(n, *, m=4, f=6, seed=0):
    """Model j is right exactly when feature j is on; costs 1..m."""
    rng = np.random.default_rng(seed)
    x = (rng.uniform(size=(n, f)) < 0.35).astype(float)
    return routing.RoutingTable(
        quality=x[:, :m].copy(),
        cost=np.tile(np.arange(1, m + 1.0), (n, 1)),
        candidates=[f"m{j}" for j in range(m)],
        features=x,
    )


@pytest.fixture(scope="module")
def routers():
    t = planted(40)
    key = jax.random.key(0)
    return t, {
        "fixed": routing.FixedRouter.fit(t),
        "knn": routing.KNNRouter.fit(t, k=5),
        "mlp": routing.MLPRouter(6, 4, t.cost.mean(0), hidden=(8,), key=key),
        "mf": routing.MatrixFactorisationRouter(6, 4, t.cost.mean(0), dim=4, key=key),
        "embedllm": routing.EmbedLLMRouter(6, 4, t.cost.mean(0), dim=4, hidden=8, key=key),
        "latent": routing.LatentRouter(6, 4, t.cost.mean(0), dim=8, depth=1, key=key),
    }


def test_masking_never_picks_unavailable(routers, getkey):
    t, rs = routers
    for _ in range(5):
        k1, k2 = jax.random.split(getkey())
        av = np.array(jax.random.uniform(k1, (t.n_queries, 4)) < 0.4)
        av[np.arange(t.n_queries), np.asarray(jax.random.randint(k2, (t.n_queries,), 0, 4))] = True
        lam = float(jax.random.uniform(k2)) * 2
        for name, r in rs.items():
            ch = np.asarray(routing.route(r, t.features, cost_weight=lam, available=av))
            assert av[np.arange(t.n_queries), ch].all(), name
    # a mask leaving a query without candidates is an error, not a silent choice
    with pytest.raises(ValueError, match="available"):
        routing.route(rs["fixed"], t.features, available=np.zeros(4, bool))


def test_latent_router_is_permutation_equivariant(routers):
    t, rs = routers
    r = rs["latent"]
    perm = np.array([2, 0, 3, 1])
    rp = eqx.tree_at(
        lambda m: (m.capability, m.candidate_cost),
        r,
        (r.capability[perm], r.candidate_cost[perm]),
    )
    av = np.array([True, True, False, True])
    u = np.asarray(r.predict_utilities(t.features, cost_weight=0.3, available=av))
    up = np.asarray(rp.predict_utilities(t.features, cost_weight=0.3, available=av[perm]))
    np.testing.assert_allclose(up, u[:, perm], rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize(
    "options",
    [{}, pytest.param({"communication": False, "head": "point"}, marks=pytest.mark.slow)],
)
def test_latent_gradients_finite(routers, getkey, options):
    t, _ = routers
    r = routing.LatentRouter(6, 4, t.cost.mean(0), dim=8, depth=1, key=getkey(), **options)
    x, y = jnp.asarray(t.features, jnp.float32), jnp.asarray(t.quality, jnp.float32)
    loss, g = eqx.filter_value_and_grad(lambda m: m.loss(x, y, key=jax.random.key(1)))(r)
    leaves = jax.tree_util.tree_leaves(g)
    assert np.isfinite(float(loss))
    assert all(np.all(np.isfinite(np.asarray(v))) for v in leaves)
    assert any(float(jnp.abs(v).max()) > 0 for v in leaves)


def test_knn_matches_brute_force(routers):
    t, rs = routers
    q = planted(7, seed=3).features
    xt = t.features / np.maximum(np.linalg.norm(t.features, axis=1, keepdims=True), 1e-12)
    xq = q / np.maximum(np.linalg.norm(q, axis=1, keepdims=True), 1e-12)
    sims = xq @ xt.T
    # ties in similarity: compare against the set of rows at least as similar as the 5th
    got = np.asarray(rs["knn"].predict_quality(q))
    for i in range(q.shape[0]):
        kth = np.sort(sims[i])[-5]
        if np.sum(sims[i] >= kth) == 5:
            np.testing.assert_allclose(got[i], t.quality[sims[i] >= kth].mean(0), atol=1e-6)


def test_threshold_route_by_hand():
    q = np.array([[0.9, 0.95, 0.99], [0.2, 0.7, 0.9], [0.1, 0.2, 0.3]])
    c = np.array([1.0, 2.0, 4.0])
    np.testing.assert_array_equal(routing.threshold_route(q, c, 0.8), [0, 2, 2])
    np.testing.assert_array_equal(routing.threshold_route(q, c, 0.6), [0, 1, 2])
    av = np.array([False, True, True])
    np.testing.assert_array_equal(routing.threshold_route(q, c, 0.6, available=av), [1, 1, 2])


def test_mlp_learns_planted_rule_through_driver(getkey):
    tr, te = planted(200, seed=1), planted(200, seed=2)
    r = routing.MLPRouter(6, 4, tr.cost.mean(0), hidden=(16,), key=getkey())
    r, hist = routing.fit_router(r, tr.features, tr.quality, key=getkey(), steps=200)
    losses = hist.losses
    assert losses.shape == (200,)
    assert losses[-1] < 0.5 * losses[0]
    acc = routing.routed_outcome(
        np.asarray(routing.route(r, te.features)), te.quality, te.cost
    ).quality
    assert acc >= 0.95 * te.quality.max(1).mean()
    # the best fixed model is far from the oracle on this table
    acc_fixed = routing.routed_outcome(
        np.asarray(routing.route(routing.FixedRouter.fit(tr), te.features)), te.quality, te.cost
    ).quality
    assert acc_fixed < 0.6 * te.quality.max(1).mean()


@pytest.mark.slow
def test_latent_router_learns_planted_rule(getkey):
    tr, te = planted(300, seed=1), planted(300, seed=2)
    r = routing.LatentRouter.fit(tr, key=getkey(), steps=300)
    ch = np.asarray(routing.route(r, te.features))
    acc = routing.routed_outcome(ch, te.quality, te.cost).quality
    assert acc >= 0.95 * te.quality.max(1).mean()
    # under a masked pool it still routes by the rule among the remaining models
    av = np.array([True, False, True, True])
    ch = np.asarray(routing.route(r, te.features, available=av))
    oracle = te.quality[:, av].max(1).mean()
    assert te.quality[np.arange(te.n_queries), ch].mean() >= 0.9 * oracle


def test_embedllm_learns_planted_rule(getkey):
    """The EmbedLLM router (inner product of a learned model embedding and an MLP of the
    query) recovers the planted rule on held-out queries."""
    tr, te = planted(200, seed=1), planted(200, seed=2)
    r = routing.EmbedLLMRouter.fit(tr, key=getkey(), dim=8, hidden=16, steps=300)
    acc = routing.routed_outcome(
        np.asarray(routing.route(r, te.features)), te.quality, te.cost
    ).quality
    assert acc >= 0.95 * te.quality.max(1).mean()
    # its logits are the inner products it claims to compute
    x = jnp.asarray(te.features[:5], jnp.float32)
    z = jax.vmap(r.phi)(x)
    want = np.asarray(z) @ np.asarray(r.model_embedding).T + np.asarray(r.bias)
    np.testing.assert_allclose(np.asarray(r.logits(x)), want, rtol=1e-5, atol=1e-5)
