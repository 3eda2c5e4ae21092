"""The P6 experiments' shared comparison: paired-bootstrap CIs, masking helpers, the exact
permutation test of routing_groups (against scipy's permutation_test), and an end-to-end
comparison on a planted table where routing must win."""

from __future__ import annotations

import dataclasses

import jax
import numpy as np
import pytest
from scipy import stats

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
    gain, lo, hi = _compare.diff_ci(splits, "mlp", "fixed")
    assert lo > 0
    assert lo <= gain <= hi
    assert _compare.stat(splits, "mlp") > _compare.stat(splits, "fixed")
    # a router against itself: exactly no difference
    assert _compare.diff_ci(splits, "mlp", "mlp", "rank") == (0.0, 0.0, 0.0)
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
    m, lo, hi = _compare.boot_ci(splits, [np.full(x.test.n_queries, 0.25) for x in splits])
    assert (m, lo, hi) == pytest.approx((0.25, 0.25, 0.25))


def test_exact_spearman_p_matches_scipy():
    rng = np.random.default_rng(3)
    for n in (4, 6):
        x, y = rng.normal(size=n), rng.normal(size=n)
        rho, p = groups.exact_spearman_p(x, y)
        ref = stats.permutation_test(
            (y,),
            lambda yy, x=x: stats.spearmanr(x, yy)[0],
            permutation_type="pairings",
            alternative="greater",
            n_resamples=np.inf,
        )
        assert rho == pytest.approx(ref.statistic)
        assert p == pytest.approx(ref.pvalue)
    with pytest.raises(ValueError, match="8 groups"):
        groups.exact_spearman_p(np.arange(9.0), np.arange(9.0))


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
