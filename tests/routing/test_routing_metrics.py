"""Routing metrics against hand-computed values, scipy's ConvexHull and brute force."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from scipy.spatial import ConvexHull

from jaxlab import routing


def _brute_upper_hull(c, q):
    """Best quality of a random mixture of two points with mean cost <= x (brute force
    over all pairs; a mixture's quality is linear in its weight, so the best weight is an
    end of the feasible interval)."""

    def at(x):
        best = -np.inf
        for i, j in itertools.product(range(c.size), repeat=2):
            lo, hi = (i, j) if c[i] <= c[j] else (j, i)
            if c[lo] > x:
                continue
            t = 1.0 if c[hi] <= x else (x - c[lo]) / (c[hi] - c[lo])
            best = max(best, q[lo], (1 - t) * q[lo] + t * q[hi])
        return best

    return at


def test_hull_and_aiq_hand_computed():
    # points: (1, .2), (2, .6), (3, .5) dominated, (4, .8), (5, .7) dominated
    c = np.array([1.0, 2, 3, 4, 5])
    q = np.array([0.2, 0.6, 0.5, 0.8, 0.7])
    hc, hq = routing.cost_quality_hull(c, q)
    np.testing.assert_allclose(hc, [1, 2, 4])
    np.testing.assert_allclose(hq, [0.2, 0.6, 0.8])
    # area over [1, 5]: (.2+.6)/2*1 + (.6+.8)/2*2 + .8*1 = .4 + 1.4 + .8 = 2.6; / 4
    assert routing.aiq(c, q) == pytest.approx(2.6 / 4)
    # a range starting below the cheapest point: nothing reachable there (0)
    assert routing.aiq(c, q, cost_range=(0.0, 5.0)) == pytest.approx(2.6 / 5)


def test_hull_is_concave_envelope(getkey):
    rng = np.random.default_rng(0)
    for _ in range(8):
        c = rng.uniform(0, 10, 12)
        q = rng.uniform(0, 1, 12)
        hc, hq = routing.cost_quality_hull(c, q)
        assert np.all(np.diff(hc) > 0)
        assert np.all(np.diff(hq) >= 0)
        brute = _brute_upper_hull(c, q)
        grid = np.linspace(c.min(), c.max(), 57)
        mono = [brute(x) for x in grid]
        np.testing.assert_allclose(np.interp(grid, hc, hq), mono, atol=1e-9)
        # every hull vertex is a vertex of scipy's convex hull of the points
        verts = {tuple(p) for p in np.c_[c, q][ConvexHull(np.c_[c, q]).vertices]}
        assert all((x, y) in verts for x, y in zip(hc, hq, strict=True))
        # AIQ equals the integral of the brute-force envelope (piecewise linear between
        # the points' costs, so trapezoids on those costs are exact)
        fine = np.unique(c)
        env = np.array([brute(x) for x in fine])
        ref = np.sum(0.5 * (env[1:] + env[:-1]) * np.diff(fine)) / (fine[-1] - fine[0])
        assert routing.aiq(c, q) == pytest.approx(ref, abs=1e-12)


def test_pgr_apgr_cpt_toy():
    # weak 0.5, strong 0.9; a router at 25% / 50% strong calls reaches 0.7 / 0.8
    f = np.array([0.25, 0.5])
    q = np.array([0.7, 0.8])
    np.testing.assert_allclose(routing.pgr(q, 0.5, 0.9), [0.5, 0.75])
    # trapezoids over (0,0) (.25,.5) (.5,.75) (1,1)
    ref = 0.25 * 0.25 + 0.25 * 0.625 + 0.5 * 0.875
    assert routing.apgr(f, q, weak=0.5, strong=0.9) == pytest.approx(ref)
    assert routing.call_performance_threshold(f, q, 0.5, weak=0.5, strong=0.9) == pytest.approx(
        0.25
    )
    # PGR 0.6 lies between .5 at 25% and .75 at 50%: 25% + 0.4 * 25%
    assert routing.call_performance_threshold(f, q, 0.6, weak=0.5, strong=0.9) == pytest.approx(
        0.35
    )
    # a random router (PGR = fraction) has APGR 0.5
    g = np.linspace(0, 1, 11)
    assert routing.apgr(g, 0.5 + 0.4 * g, weak=0.5, strong=0.9) == pytest.approx(0.5)
    with pytest.raises(ValueError, match="strong"):
        routing.pgr(q, 0.5, 0.5)


def test_rank_score_formula():
    s = routing.rank_score(0.8, 2.0, cmin=1.0, cmax=8.0, beta=0.1)
    cheap = (np.log(8) - np.log(2)) / (np.log(8) - np.log(1))  # 2/3
    assert s == pytest.approx(1.1 * 0.8 * cheap / (0.1 * 0.8 + cheap))
    assert routing.rank_score(0.8, 8.0, cmin=1.0, cmax=8.0) == 0.0  # dearest: C = 0
    assert routing.rank_score(1.0, 1.0, cmin=1.0, cmax=8.0) == pytest.approx(1.0)
    with pytest.raises(ValueError, match="cmin"):
        routing.rank_score(0.5, 1.0, cmin=2.0, cmax=1.0)


def test_oracle_zero_router_and_accuracy_at_cost():
    quality = np.array([[1, 1, 0], [0, 1, 1], [0, 0, 1], [0, 0, 0]], float)
    cost = np.tile([1.0, 2.0, 4.0], (4, 1))
    ch = routing.oracle_choice(quality, cost)
    np.testing.assert_array_equal(ch, [0, 1, 2, 0])  # cheapest right one; none right: cheapest
    out = routing.routed_outcome(ch, quality, cost)
    assert out.quality == pytest.approx(quality.max(1).mean())
    assert out.cost == pytest.approx(2.0)  # costs 1 + 2 + 4 + 1 of the choices
    assert tuple(out) == (out.cost, out.quality)  # (cost, quality), as aiq takes them
    # masking the middle model: query 1 goes to model 2
    ch2 = routing.oracle_choice(quality, cost, available=np.array([True, False, True]))
    np.testing.assert_array_equal(ch2, [0, 2, 2, 0])
    # zero router: hull of (1, .25), (2, .5), (4, .5) -> the 4-cost model is dominated
    hc, hq = routing.zero_router_curve(cost, quality)
    np.testing.assert_allclose(hc, [1, 2])
    np.testing.assert_allclose(hq, [0.25, 0.5])
    assert routing.accuracy_at_cost(hc, hq, 1.5) == pytest.approx(0.375)
    assert np.isnan(routing.accuracy_at_cost(hc, hq, 0.5))
    with pytest.raises(ValueError, match="choice"):
        routing.routed_outcome(np.array([0, 1, 2, 3]), quality, cost)
