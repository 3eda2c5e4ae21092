"""The P6 experiments' shared comparison: the paired bootstrap over held-out queries (against
the harness's bootstrap of the same resamples), masking helpers, and an end-to-end
comparison on a planted table where routing must win; `refit=True` reaches every learned
router's selection."""

from __future__ import annotations

import dataclasses

import jax
import numpy as np
import pytest

from experiments._harness import bootstrap
from experiments._harness._registry import validate_module
from experiments.routing import _compare, ablation, groups, masking, text, vqa
from jaxlab import routing

from .test_routing_routers import planted as planted_table


def planted(n, *, seed=0):
    """The router tests' planted table (model j right exactly when feature j is on) with
    two task groups."""
    t = planted_table(n, seed=seed)
    return dataclasses.replace(
        t, groups=(np.arange(n) % 2).astype(np.int64), group_names=("even", "odd")
    )


@pytest.fixture(scope="module")
def splits():
    cfg = dataclasses.replace(_compare.CompareConfig(), n_splits=2, steps=150, n_boot=100)
    return _compare.compare(planted(160), ("fixed", "mlp"), cfg, jax.random.key(0))


def test_experiment_contracts():
    for m in (text, vqa, ablation, masking, groups):
        validate_module(m)


def test_routing_beats_fixed_on_planted_table(splits):
    d = _compare.diff_estimate(splits, "mlp", "fixed", n_resamples=100)
    assert d.low > 0
    assert d.low <= d.value <= d.high
    assert d.n == sum(s.test.n_queries for s in splits)
    assert d.value == pytest.approx(_compare.stat(splits, "mlp") - _compare.stat(splits, "fixed"))
    # a router against itself: exactly no difference
    same = _compare.diff_estimate(splits, "mlp", "mlp", "rank", n_resamples=100)
    assert (same.value, same.low, same.high) == (0.0, 0.0, 0.0)
    zero, oracle = _compare.zero_and_oracle_aiq(splits)
    assert zero <= _compare.stat(splits, "mlp") <= oracle


def test_masking_helpers(splits):
    s = splits[0]
    av = _compare.best_candidates(s, 2)
    order = np.argsort(-s.train.quality.mean(0), kind="stable")
    assert not av[order[:2]].any()
    assert av[order[2:]].all()
    q = _compare.masked_quality(s, "mlp", av)
    assert q.shape == (s.test.n_queries,)
    assert q.mean() <= s.test.quality[:, av].max(1).mean() + 1e-12
    e = _compare.mean_estimate(
        splits, [np.full(x.test.n_queries, 0.25) for x in splits], n_resamples=50
    )
    assert (e.value, e.low, e.high) == pytest.approx((0.25, 0.25, 0.25))


def test_split_bootstrap_is_the_harness_bootstrap_of_the_pooled_queries(splits):
    """One split: the pooled items are its queries, so the interval of a per-query mean is
    the harness's bootstrap of that mean with the same generator (the same resamples); two
    splits: the value is the mean of the splits' means, `where` restricts each mean."""
    rng = np.random.default_rng(5)
    x = rng.normal(size=splits[0].test.n_queries)
    got = _compare.mean_estimate(splits[:1], [x], n_resamples=200)
    ref = bootstrap(x, np.mean, seed=np.random.default_rng([splits[0].seed]), n_resamples=200)
    assert (got.value, got.low, got.high) == pytest.approx((ref.value, ref.low, ref.high))
    xs = [rng.normal(size=s.test.n_queries) for s in splits]
    masks = [np.arange(s.test.n_queries) % 3 == 0 for s in splits]
    two = _compare.mean_estimate(splits, xs, where=masks, n_resamples=200)
    means = [x[m].mean() for x, m in zip(xs, masks, strict=True)]
    assert two.value == pytest.approx(np.mean(means))
    assert two.low < two.value < two.high
    # the same splits draw the same resamples (common random numbers across estimates)
    again = _compare.mean_estimate(splits, xs, where=masks, n_resamples=200)
    assert (again.low, again.high) == (two.low, two.high)


def test_oracle_curve_bounds_every_router(getkey):
    """No routing of a random table (random choices at several cost weights) has a higher
    AIQ than the per-query oracle over cost weights."""
    rng = np.random.default_rng(5)
    q = (rng.uniform(size=(50, 5)) < 0.4).astype(float)
    c = np.tile(rng.uniform(0.5, 4, 5), (50, 1))
    pc, pq = _compare.oracle_curve(q, c)
    crange = (float(c.mean(0).min()), float(c.mean(0).max()))
    top = routing.aiq(pc, pq, cost_range=crange)
    rows = np.arange(50)
    for _ in range(20):
        ch = rng.integers(0, 5, (6, 50))
        assert routing.aiq(c[rows, ch].mean(1), q[rows, ch].mean(1), cost_range=crange) <= top
    # and the fixed candidates' hull (the zero router) is below it too
    assert routing.aiq(c.mean(0), q.mean(0), cost_range=crange) <= top


def test_vqa_fine_groups_by_hand():
    from experiments.routing import _vqa_setup

    qs = [
        "what is the red shape?",
        "what color is the circle?",
        "is there a triangle?",
        "is there not a blue shape in the image?",
    ]
    g, names = _vqa_setup.fine_groups(qs, [0, 1, 2, 2], ("shape", "colour", "yes_no"))
    assert [names[i] for i in g] == ["shape", "colour", "yes_no/shape", "yes_no/colour"]


def test_every_learned_router_gets_the_same_selection_budget():
    learned = [n for n in (*_compare.BASELINES, *_compare.LATENT) if n != "fixed"]
    for m in (text, vqa, ablation, masking, groups):
        for cfg in (m.QUICK, m.FULL):
            assert {_compare.budget(n, cfg) for n in learned} == {6}
            assert _compare.budget("fixed", cfg) == 0
            # the grids' first entries are the settings of the unselected comparison
            assert _compare.grid("latent", cfg)[1][0]["learning_rate"] == 3e-3
            assert _compare.grid("mlp", cfg)[1][0]["learning_rate"] == 1e-2
        # the smoke tier's cut grid keeps the budgets equal (2 scored candidates each)
        assert {_compare.budget(n, m.TINY) for n in learned} == {2}


def test_selection_never_reads_test_rows():
    """Property: replacing the test rows' outcomes (quality and cost) leaves every
    router's selection (all validation scores, the chosen setting and step count) and its
    predictions unchanged (clustered splits, as for the VQA table)."""
    cfg = dataclasses.replace(
        _compare.CompareConfig(), n_splits=1, steps=30, n_boot=10, knn_ks=(1, 2, 4, 8, 16, 32)
    )
    t = planted(120, seed=4)
    rng = np.random.default_rng(0)
    # the no-cluster (stratified) split is the same code path after the split
    for clusters, names in ((np.arange(120) // 3, ("knn", "linear")),):
        key = jax.random.key(1)
        (s,) = _compare.compare(t, names, cfg, key, clusters=clusters)
        test = np.isin(np.asarray(t.query_ids), s.test.query_ids)
        q, c = t.quality.copy(), t.cost.copy()
        q[test] = rng.uniform(size=q[test].shape)
        c[test] = rng.uniform(0.1, 9, size=c[test].shape)
        (s2,) = _compare.compare(
            dataclasses.replace(t, quality=q, cost=c),
            ("knn", "linear"),
            cfg,
            key,
            clusters=clusters,
        )
        assert s2.test.query_ids == s.test.query_ids
        for n in names:
            a, b = s.selections[n], s2.selections[n]
            assert a.scores == b.scores
            assert (a.setting, a.steps) == (b.setting, b.steps)
            np.testing.assert_array_equal(
                np.asarray(s.routers[n].predict_quality(t.features)),
                np.asarray(s2.routers[n].predict_quality(t.features)),
            )
        assert len({x[2] for x in s.selections["knn"].scores}) > 1


def test_refit_reaches_the_selection_of_every_learned_router():
    """`CompareConfig(refit=True)`: each learned router is its selected setting fitted on
    the whole training part for the selected steps (bit for bit a direct fit with the
    selection's key); the fixed router has no selection; the protocol says so."""
    cfg = dataclasses.replace(
        _compare.CompareConfig(),
        n_splits=1,
        steps=30,
        n_boot=10,
        knn_ks=(1, 2, 4, 8, 16, 32),
        refit=True,
    )
    names = ("fixed", "knn", "linear")
    key = jax.random.key(3)
    (s,) = _compare.compare(planted(120, seed=4), names, cfg, key)
    assert s.selections["fixed"] is None
    k_fit = jax.random.split(jax.random.fold_in(key, 0), 3)[1]
    for i, n in enumerate(names[1:], start=1):
        sel = s.selections[n]
        assert sel.refit
        fit_fn = _compare.grid(n, cfg)[0]
        steps = {} if sel.steps is None else {"steps": sel.steps}
        key_n = jax.random.split(jax.random.fold_in(k_fit, i))[1]
        direct = fit_fn(s.train, key=key_n, **{**sel.setting, **steps})
        np.testing.assert_array_equal(
            np.asarray(s.routers[n].predict_quality(s.test.features)),
            np.asarray(direct.predict_quality(s.test.features)),
        )
    assert s.routers["knn"].train_features.shape[0] == s.train.n_queries
    assert "refitted on the whole training part" in _compare.protocol(cfg)
    assert "no refit" in _compare.protocol(dataclasses.replace(cfg, refit=False))
