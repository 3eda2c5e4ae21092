"""Issue 56: AIQ against RouterBench's released `calc_AIQ`, transcribed here as the oracle.

RouterBench: github.com/withmartian/routerbench, `evaluation/AIQ.py` at commit 30e0925
(the repository's only version of the file): `get_non_descreasing_convex_hull_of` (lines
11-72) and `calc_AIQ` (lines 75-128; lines 102-109: the area by `np.trapz` of the hull
points, the hull extended flat to the largest cost of the list, divided by that cost). The
transcription below keeps its loops and its order of operations; only the plotting is
left out.
"""

from __future__ import annotations

import numpy as np
import pytest

from jaxlab import routing


def _rb_hull(points: np.ndarray) -> np.ndarray:
    """RouterBench's `get_non_descreasing_convex_hull_of` (AIQ.py lines 11-72)."""
    pts = points[points[:, 0].argsort()]
    new: list = []
    for i in range(len(pts)):
        for j in range(i, len(pts)):
            x1, y1 = pts[i]
            x2, y2 = pts[j]
            for k in range(len(pts)):
                x, y = pts[k]
                if x1 < x < x2:
                    yi = np.interp(x, [x1, x2], [y1, y2])
                    if y < yi:
                        if x not in [mx for mx, _ in new]:
                            new.append([x, yi])
                        else:
                            for m in range(len(new)):
                                xn, yn = new[m]
                                if xn == x and yn < yi:
                                    new[m] = [x, yi]
                                    break
                                elif xn == x and yn > yi:
                                    new[m] = [x, yn]
                    if y >= yi:
                        if x not in [mx for mx, _ in new]:
                            new.append([x, y])
                        else:
                            for m in range(len(new)):
                                xn, yn = new[m]
                                if xn == x and yn < y:
                                    new[m] = [x, y]
                                    break
                                elif xn == x and yn > y:
                                    new[m] = [x, yn]
    if pts[-1][0] not in [mx for mx, _ in new] and pts[-1][1] >= new[-1][1]:
        new.append(pts[-1])
    if pts[0][0] not in [mx for mx, _ in new]:
        new = [pts[0], *new]
    hull = np.array(new, dtype=np.float64)
    hull = hull[hull[:, 0].argsort()]
    drop = [i for i in range(1, len(hull)) if hull[i][1] < hull[i - 1][1]]
    return np.delete(hull, drop, axis=0)


def _trapz(y, x):
    return float(np.sum(0.5 * (y[1:] + y[:-1]) * np.diff(x)))


def _rb_calc_aiq(routers: list[tuple[np.ndarray, np.ndarray]]) -> list[float]:
    """RouterBench's `calc_AIQ` (AIQ.py lines 95-109) over a list of routers' points."""
    hulls = [_rb_hull(np.c_[c, q]) for c, q in routers]
    max_x = max(float(np.max(h[:, 0])) for h in hulls)
    hulls = [np.vstack((h, np.array([max_x, h[-1, 1]]))) for h in hulls]
    return [_trapz(h[:, 1], h[:, 0]) / max_x for h in hulls]


def _router_points(rng, k=9):
    """A router's points at k cost weights: distinct costs, qualities in [0, 1] (at least
    three interior points so RouterBench's hull loop has work)."""
    c = np.sort(rng.choice(np.arange(1, 400), size=k, replace=False) / 37.0)
    q = np.clip(np.sort(rng.uniform(0.1, 0.9, k)) + rng.normal(0, 0.08, k), 0, 1)
    return c, q


def test_aiq_routerbench_equals_calc_aiq_on_distinct_costs():
    rng = np.random.default_rng(56)
    for _ in range(40):
        c, q = _router_points(rng, int(rng.integers(4, 12)))
        ref = _rb_calc_aiq([(c, q)])[0]
        assert routing.aiq(c, q, cost_range="routerbench") == pytest.approx(ref, abs=1e-12)
        # the hulls agree too: RouterBench's is ours evaluated at every point's cost
        rb = _rb_hull(np.c_[c, q])
        hc, hq = routing.cost_quality_hull(c, q)
        np.testing.assert_allclose(np.interp(rb[:, 0], hc, hq), rb[:, 1], atol=1e-12)
    # a list of routers shares one c_max (the largest of the list): the explicit range
    a, b = _router_points(rng), _router_points(rng)
    ref = _rb_calc_aiq([a, b])
    c_max = max(float(np.max(x[0][x[1] == np.max(x[1])])) for x in (a, b))
    got = [routing.aiq(*r, cost_range=(0.0, c_max)) for r in (a, b)]
    np.testing.assert_allclose(got, ref, atol=1e-12)


def test_aiq_hand_computed_both_normalisations():
    # (1, .2) (2, .6) (4, .8) (5, .7): hull (1,.2) (2,.6) (4,.8), flat to the range end
    c = np.array([1.0, 2.0, 4.0, 5.0])
    q = np.array([0.2, 0.6, 0.8, 0.7])
    # area over [1, 4]: .4 + 1.4 = 1.8
    assert routing.aiq(c, q, cost_range="routerbench") == pytest.approx(1.8 / 4)
    assert routing.aiq(c, q) == pytest.approx((1.8 + 0.8) / 4)  # [1, 5] / (5 - 1)
    assert _rb_calc_aiq([(c, q)])[0] == pytest.approx(1.8 / 4)
    with pytest.raises(ValueError, match="cost_range"):
        routing.aiq(c, q, cost_range="rb")
    with pytest.raises(ValueError, match="cost_range"):
        routing.aiq(c, q, cost_range=(0.0, 1.0, 2.0))  # type: ignore[arg-type]


def test_tied_cheapest_cost_keeps_the_better_point():
    # two points at the cheapest cost: RouterBench starts its hull from the first one its
    # sort meets (here the worse, 0.2) and never compares equal costs; ours keeps 0.5
    c = np.array([1.0, 1.0, 2.0, 3.0])
    q = np.array([0.2, 0.5, 0.6, 0.8])
    rb = _rb_hull(np.c_[c, q])
    assert rb[0].tolist() == [1.0, 0.2]
    hc, hq = routing.cost_quality_hull(c, q)
    assert (hc[0], hq[0]) == (1.0, 0.5)
    # without the tie (the worse point removed) the two agree exactly
    keep = np.array([False, True, True, True])
    ref = _rb_calc_aiq([(c[keep], q[keep])])[0]
    assert routing.aiq(c, q, cost_range="routerbench") == pytest.approx(ref, abs=1e-12)
    assert _rb_calc_aiq([(c, q)])[0] < ref  # RouterBench's value with the tie is lower
