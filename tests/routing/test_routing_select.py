"""`select_router` / `router_aiq`: the selected setting and stopping point equal a
brute-force loop over the grid (separate fits of every setting at every step count),
`router_aiq` equals AIQ of the routed choices computed by hand, the validation split
keeps clusters together, patience ends a fit early; `refit=True` returns the selected
setting fitted on the whole table (equal to a direct fit at the selected step count; kNN
against a NumPy nearest-neighbour average). (That the P6 comparison's selection
never reads test rows is a property test in test_routing_compare.py.)"""

from __future__ import annotations

import dataclasses
import functools

import equinox as eqx
import jax
import numpy as np
import pytest

from jaxlab import routing

from .test_routing_routers import planted

LAMS = (0.0, 0.1, 0.4, 1.6)


def _parts(table, sel):
    val = np.isin(np.asarray(table.query_ids), sel.validation_ids)
    return table.rows(~val), table.rows(val)


def _noisy(n, seed):
    """The planted table with 30% of its labels flipped (so settings and step counts
    differ in validation AIQ)."""
    t = planted(n, seed=seed)
    rng = np.random.default_rng(seed + 10)
    flip = rng.uniform(size=t.quality.shape) < 0.3
    return dataclasses.replace(t, quality=np.abs(t.quality - flip))


def test_router_aiq_by_hand(getkey):
    t = planted(30, seed=4)
    r = routing.MLPRouter(6, 4, t.cost.mean(0), hidden=(), key=getkey())
    rows = np.arange(t.n_queries)
    pts = []
    for lam in LAMS:
        ch = np.asarray(routing.route(r, t.features, cost_weight=lam))
        pts.append((t.cost[rows, ch].mean(), t.quality[rows, ch].mean()))
    c, q = np.array(pts).T
    want = routing.aiq(c, q, cost_range=(1.0, 4.0))
    assert routing.router_aiq(r, t, cost_weights=LAMS) == pytest.approx(want)
    with pytest.raises(ValueError, match="cost_weights"):
        routing.router_aiq(r, t, cost_weights=[-1.0])


def test_selection_equals_brute_force_over_grid_and_steps(getkey):
    """Checkpointed selection (one fit per setting, scored every 20 of 40 steps) picks the
    (setting, steps) a brute-force loop of separate fits picks, with the same scores."""
    t = _noisy(120, seed=1)
    grid = [{"learning_rate": 3e-3}, {"learning_rate": 3e-2, "hidden": (8,)}]
    fit = functools.partial(routing.MLPRouter.fit, steps=40)
    key = getkey()
    sel = routing.select_router(fit, t, grid, key=key, cost_weights=LAMS, monitor_every=20)
    inner, val = _parts(t, sel)
    k_fit = jax.random.split(key)[1]
    brute = []
    for i, s in enumerate(grid):
        for steps in (20, 40):
            r = routing.MLPRouter.fit(inner, key=k_fit, steps=steps, **s)
            brute.append((i, steps, routing.router_aiq(r, val, cost_weights=LAMS)))
    assert [(i, s) for i, s, _ in sel.scores] == [(i, s) for i, s, _ in brute]
    np.testing.assert_allclose([x[2] for x in sel.scores], [x[2] for x in brute], atol=1e-6)
    i, steps, score = max(brute, key=lambda x: x[2])  # first maximum, as the selection
    assert (sel.setting, sel.steps) == (grid[i], steps)
    assert sel.score == pytest.approx(score, abs=1e-6)
    assert routing.router_aiq(sel.router, val, cost_weights=LAMS) == pytest.approx(sel.score)
    assert len({x[2] for x in brute}) > 1  # the grid matters on this table


def test_knn_selection_equals_brute_force(getkey):
    t = _noisy(150, seed=2)
    grid = [{"k": k} for k in (1, 4, 16, 64)]
    key = getkey()
    sel = routing.select_router(routing.KNNRouter.fit, t, grid, key=key, cost_weights=LAMS)
    inner, val = _parts(t, sel)
    brute = [
        routing.router_aiq(routing.KNNRouter.fit(inner, **s), val, cost_weights=LAMS) for s in grid
    ]
    np.testing.assert_allclose([x[2] for x in sel.scores], brute)
    assert sel.setting == grid[int(np.argmax(brute))]
    assert sel.steps is None
    assert sel.router.k == sel.setting["k"]


def test_patience_stops_a_fit_early(getkey):
    t = _noisy(80, seed=3)
    fit = functools.partial(routing.MLPRouter.fit, steps=200)
    kw = {"key": getkey(), "cost_weights": LAMS, "monitor_every": 10}
    full = routing.select_router(fit, t, [{"learning_rate": 0.3}], **kw)
    early = routing.select_router(fit, t, [{"learning_rate": 0.3}], patience=1, **kw)
    assert len(full.scores) == 20
    # the same checks up to the first one without improvement, then the fit ends
    n = len(early.scores)
    assert n < 20
    assert early.scores == full.scores[:n]
    assert early.scores[-1][2] <= max(s[2] for s in early.scores[:-1])


def test_validation_split_keeps_clusters(getkey):
    t = _noisy(120, seed=5)
    clusters = np.arange(120) // 4
    grid = [{"k": 3}, {"k": 9}]
    key = getkey()
    sel = routing.select_router(
        routing.KNNRouter.fit, t, grid, key=key, clusters=clusters, cost_weights=LAMS
    )
    val = np.isin(np.asarray(t.query_ids), sel.validation_ids)
    assert 0 < val.sum() < 120
    assert not set(clusters[val]) & set(clusters[~val])
    with pytest.raises(ValueError, match="grid"):
        routing.select_router(routing.KNNRouter.fit, t, [], key=key)


def _same_arrays(a, b) -> None:
    la, lb = (
        jax.tree.leaves(eqx.filter(a, eqx.is_array)),
        jax.tree.leaves(eqx.filter(b, eqx.is_array)),
    )
    assert len(la) == len(lb) > 0
    for x, y in zip(la, lb, strict=True):
        np.testing.assert_array_equal(np.asarray(x), np.asarray(y))


@pytest.mark.parametrize("kind", ["mlp", pytest.param("latent", marks=pytest.mark.slow)])
def test_refit_equals_a_fit_on_the_whole_table_at_the_selected_steps(kind):
    """`refit=True`: the same selection as `refit=False`; the returned router is, bit for
    bit, the selected setting fitted on the whole table (the selection's fit key) for the
    selected step count, which overrides the setting's own `steps` (here the selection
    stops early, so a refit for the setting's 40 steps would differ); and it matches the
    checkpoint at that step count of one monitored fit on the whole table."""
    t = _noisy(120, seed=1)
    if kind == "mlp":
        fit = functools.partial(routing.MLPRouter.fit, hidden=(32,))
        grid = [{"learning_rate": 3e-1, "steps": 40}, {"learning_rate": 3e-2, "steps": 40}]
        key = jax.random.key(2)  # selects the second setting after 20 steps
    else:
        fit = functools.partial(routing.LatentRouter.fit, dim=8, depth=1)
        grid = [{"learning_rate": 1e-1, "steps": 40}, {"learning_rate": 1e-2, "steps": 40}]
        key = jax.random.key(1)  # selects the first setting after 20 steps
    kw = {"key": key, "cost_weights": LAMS, "monitor_every": 20}
    plain = routing.select_router(fit, t, grid, **kw)
    sel = routing.select_router(fit, t, grid, refit=True, **kw)
    assert (plain.refit, sel.refit) == (False, True)
    for f in ("setting", "steps", "score", "scores", "validation_ids"):
        assert getattr(sel, f) == getattr(plain, f)
    assert sel.steps < 40  # the selected stopping point is not the setting's own
    k_fit = jax.random.split(key)[1]
    direct = fit(t, key=k_fit, **{**sel.setting, "steps": sel.steps})
    _same_arrays(sel.router, direct)
    np.testing.assert_array_equal(
        np.asarray(sel.router.predict_quality(t.features)),
        np.asarray(direct.predict_quality(t.features)),
    )
    # the checkpoints of one monitored 40-step fit on the whole table: the one at the
    # selected step count is the refit, the last one (the setting's own steps) is not
    seen = {}

    def monitor(router, steps):
        seen[steps] = np.asarray(router.predict_quality(t.features))
        return False

    fit(t, key=k_fit, monitor=monitor, monitor_every=20, **sel.setting)
    got = np.asarray(sel.router.predict_quality(t.features))
    np.testing.assert_allclose(got, seen[sel.steps], atol=1e-5)
    assert np.abs(got - seen[40]).max() > 1e-3
    # nor the inner-part fit
    assert np.abs(got - np.asarray(plain.router.predict_quality(t.features))).max() > 1e-3


def test_knn_refit_uses_the_whole_table(getkey):
    """kNN refit: the selected k over every row of the table, checked against a NumPy
    nearest-neighbour average (cosine similarity; continuous features, so no ties)."""
    t = _noisy(150, seed=2)
    rng = np.random.default_rng(3)
    t = dataclasses.replace(t, features=t.features + 0.3 * rng.normal(size=t.features.shape))
    grid = [{"k": k} for k in (1, 4, 16, 64)]
    key = getkey()
    kw = {"key": key, "cost_weights": LAMS}
    plain = routing.select_router(routing.KNNRouter.fit, t, grid, **kw)
    sel = routing.select_router(routing.KNNRouter.fit, t, grid, refit=True, **kw)
    assert (sel.setting, sel.steps, sel.scores) == (plain.setting, None, plain.scores)
    assert sel.refit
    assert sel.router.train_features.shape[0] == t.n_queries
    assert plain.router.train_features.shape[0] < t.n_queries
    x = t.features / np.linalg.norm(t.features, axis=1, keepdims=True)
    q = rng.normal(size=(20, t.features.shape[1]))
    qn = q / np.linalg.norm(q, axis=1, keepdims=True)
    near = np.argsort(-(qn @ x.T), axis=1)[:, : sel.setting["k"]]
    want = t.quality[near].mean(axis=1)
    np.testing.assert_allclose(np.asarray(sel.router.predict_quality(q)), want, atol=1e-6)
