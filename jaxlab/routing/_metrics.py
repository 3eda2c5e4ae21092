"""Routing metrics: cost-quality hulls, AIQ, PGR/APGR, call-performance threshold, rank score.

- RouterBench (Hu et al. 2024): a router evaluated at several cost weights traces points
  (cost, quality); its non-decreasing convex hull is the quality reachable by mixing those
  routers at random, and AIQ is the area under that hull over the cost range, divided by
  the range. The zero router is the hull of the fixed models' points.
- RouteLLM (Ong et al. 2024): between a weak and a strong model, PGR = (q - q_weak) /
  (q_strong - q_weak); APGR averages PGR over the fraction of calls sent to the strong
  model; the call-performance threshold CPT(x) is the smallest such fraction reaching
  PGR >= x.
- VL-RouterBench (Huang et al. 2025, after RouterArena): rank score =
  (1 + beta) A C / (beta A + C), A the accuracy, C = (log cmax - log cost) / (log cmax -
  log cmin) the log-normalised cheapness.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from jaxlab._core import check_finite, check_ids, check_range, check_real

__all__ = [
    "cost_quality_hull",
    "aiq",
    "zero_router_curve",
    "pgr",
    "apgr",
    "call_performance_threshold",
    "rank_score",
    "accuracy_at_cost",
    "routed_outcome",
    "RoutedOutcome",
    "oracle_choice",
]


def _float_array(name: str, x) -> np.ndarray:
    """`x` as a float64 NumPy array; None/str/non-numeric/complex: a ValueError naming
    `name` (a complex array would lose its imaginary part)."""
    if x is None or isinstance(x, str | bytes):
        raise ValueError(f"{name}: expected an array, received {type(x).__name__}")
    if np.iscomplexobj(x):
        raise ValueError(f"{name}: expected real values, received a complex array")
    try:
        return np.asarray(x, np.float64)
    except (TypeError, ValueError) as e:
        raise ValueError(f"{name}: expected a numeric array, received {e}") from None


def _points(cost, quality):
    c = _float_array("cost", cost).reshape(-1)
    q = _float_array("quality", quality).reshape(-1)
    if c.shape != q.shape or c.size == 0:
        raise ValueError(
            f"cost, quality: expected two non-empty arrays of one length, received "
            f"{np.shape(cost)} and {np.shape(quality)}"
        )
    if not (np.all(np.isfinite(c)) and np.all(np.isfinite(q))):
        raise ValueError("cost, quality: expected finite values, received NaN or inf")
    if np.any(c < 0):
        raise ValueError(f"cost: expected non-negative costs, received min {c.min():g}")
    if np.any((q < 0) | (q > 1)):
        raise ValueError(
            f"quality: expected values in [0, 1] (a RoutingTable's quality), received "
            f"[{q.min():g}, {q.max():g}]; the argument order is (cost, quality): are they "
            "swapped?"
        )
    return c, q


class RoutedOutcome(NamedTuple):
    """Mean cost and mean quality of a routing (`routed_outcome`), in the (cost, quality)
    order of `aiq` and `cost_quality_hull`; read the fields by name."""

    cost: float
    quality: float


def cost_quality_hull(cost, quality) -> tuple[np.ndarray, np.ndarray]:
    """Vertices of the non-decreasing convex hull of the points (cost_k, quality_k).

    The upper concave envelope of the points, from the cheapest point (the best quality
    at the lowest cost) to the first point of maximal quality; every cost between two
    vertices is reachable by a random mixture of the two (RouterBench's zero router).

    **Arguments:** `cost`, `quality`: (K,) arrays.

    **Returns:** `(hull_cost, hull_quality)`, (H,) arrays, cost increasing, quality
    non-decreasing.
    """
    c, q = _points(cost, quality)
    order = np.lexsort((-q, c))  # by cost, best quality first among equal costs
    c, q = c[order], q[order]
    keep = np.r_[True, c[1:] != c[:-1]]
    c, q = c[keep], q[keep]
    # non-decreasing: from the cheapest point on, only points that improve quality matter
    best = np.maximum.accumulate(q)
    improve = np.r_[True, q[1:] > best[:-1]]
    c, q = c[improve], q[improve]
    hull: list[int] = []
    for i in range(c.size):  # monotone chain, upper hull
        while len(hull) >= 2:
            a, b = hull[-2], hull[-1]
            cross = (c[b] - c[a]) * (q[i] - q[a]) - (q[b] - q[a]) * (c[i] - c[a])
            if cross >= 0:  # b lies on or below the chord a-i
                hull.pop()
            else:
                break
        hull.append(i)
    return c[hull], q[hull]


def aiq(cost, quality, *, cost_range: tuple[float, float] | str | None = None) -> float:
    """Average improvement in quality (RouterBench): area under the non-decreasing convex
    hull of the cost-quality points over a cost range, divided by its width.

    Beyond its last vertex the hull stays at its maximum; below its first vertex (when
    the range starts lower) quality is 0 (nothing is reachable there).

    **Arguments:**

    - `cost`, `quality`: (K,) points of one router at K cost weights (or of K models).
    - `cost_range`: the cost interval to integrate over and divide by:
        - `None` (default, jaxlab's convention): the points' own range, from the
          cheapest point to the dearest, normalised by `c_max - c_min`;
        - `(cmin, cmax)`: that range (the fixed models' range puts routers on one
          scale; jaxlab's experiments report this, with the table's fixed candidates'
          cheapest and dearest mean cost);
        - `"routerbench"`: RouterBench's released `calc_AIQ` for this one router: the
          area from cost 0 (quality 0 below the cheapest point) to `c_max`, divided by
          `c_max`, where `c_max` is the dearest cost at which the router reaches its best
          quality (RouterBench's hull ends there). `calc_AIQ` over a list of routers uses
          the largest such `c_max` of the list: pass `cost_range=(0.0, that c_max)` to
          reproduce it.

    Tied costs: the hull keeps the best quality at each cost. RouterBench's released
    hull (`get_non_descreasing_convex_hull_of`) starts from whichever point of the
    cheapest cost sorts first and never compares points of equal cost, so a worse point
    at the cheapest cost can start its hull and the better of two points at the dearest
    cost can be lost; here neither happens, and the two agree exactly where costs are
    distinct (see docs/components/routing.md, "Compatibility").

    **Returns:** a float; within [min quality, max quality] for the default range.
    """
    hc, hq = cost_quality_hull(cost, quality)
    if isinstance(cost_range, str):
        if cost_range != "routerbench":
            raise ValueError(
                f"cost_range: expected None, (cmin, cmax) or 'routerbench', received {cost_range!r}"
            )
        c, q = _points(cost, quality)
        hi = float(np.max(c[q == np.max(q)]))
        if not hi > 0:
            return float(hq[-1])  # every best point is free: RouterBench divides 0 by 0
        cost_range = (0.0, hi)
    c_max = float(np.max(_float_array("cost", cost)))
    if cost_range is None:
        lo, hi = float(hc[0]), max(float(hc[-1]), c_max)
    else:
        try:
            lo, hi = (float(v) for v in cost_range)
        except (TypeError, ValueError):
            raise ValueError(
                f"cost_range: expected None, (cmin, cmax) or 'routerbench', received {cost_range!r}"
            ) from None
    if not hi > lo:
        if cost_range is not None:
            raise ValueError(f"cost_range: expected cmin < cmax, received {cost_range}")
        return float(hq[-1])
    start = max(lo, float(hc[0]))  # below the cheapest vertex nothing is reachable: 0
    if hi <= start:
        return 0.0
    grid = np.unique(np.clip(np.r_[start, hi, hc], start, hi))
    vals = np.interp(grid, hc, hq)  # flat at the maximum beyond the last vertex
    area = np.sum(0.5 * (vals[1:] + vals[:-1]) * np.diff(grid))
    return float(area / (hi - lo))


def zero_router_curve(cost, quality) -> tuple[np.ndarray, np.ndarray]:
    """The zero router of RouterBench: the hull of the fixed models' (mean cost, mean
    quality) points, reached by random mixtures of two adjacent models.

    **Arguments:** `cost`, `quality`: (N, M) per-query tables (or (M,) means), finite and
    of one shape (else a `ValueError` naming the argument).

    **Returns:** `(hull_cost, hull_quality)` as `cost_quality_hull`.
    """
    c, q = _float_array("cost", cost), _float_array("quality", quality)
    for name, v in (("cost", c), ("quality", q)):
        check_finite(name, v)
        if v.ndim not in (1, 2) or v.size == 0:
            raise ValueError(
                f"{name}: expected a non-empty (N, M) or (M,) array, received {v.shape}"
            )
    if c.shape != q.shape:
        raise ValueError(f"cost, quality: expected one shape, received {c.shape} and {q.shape}")
    if c.ndim == 2:
        c, q = c.mean(0), q.mean(0)
    return cost_quality_hull(c, q)


def pgr(quality, weak: float, strong: float) -> float | np.ndarray:
    """Performance gap recovered (RouteLLM): `(quality - weak) / (strong - weak)`.

    `quality` finite (any shape); `weak`, `strong` finite and different (else a
    `ValueError` naming the argument)."""
    weak = check_real("weak", weak)
    strong = check_real("strong", strong)
    q = _float_array("quality", quality)
    check_finite("quality", q)
    if not strong != weak:
        raise ValueError(
            f"strong, weak: expected different qualities, received {strong} and {weak}"
        )
    return (q - weak) / (strong - weak)


def _pgr_curve(strong_fraction, quality, weak, strong):
    f = _float_array("strong_fraction", strong_fraction).reshape(-1)
    check_range("strong_fraction", f, low=0.0, high=1.0)
    q = _float_array("quality", quality)
    check_finite("quality", q)
    g = np.asarray(pgr(q, weak, strong), np.float64).reshape(-1)
    if f.shape != g.shape:
        raise ValueError(
            f"strong_fraction, quality: expected one length, received {f.size} and {g.size}"
        )
    order = np.argsort(f, kind="stable")
    f, g = f[order], g[order]
    # the endpoints are known: all weak (PGR 0) and all strong (PGR 1)
    return np.r_[0.0, f, 1.0], np.r_[0.0, g, 1.0]


def apgr(strong_fraction, quality, *, weak: float, strong: float) -> float:
    """Average PGR (RouteLLM): the area under PGR against the fraction of calls routed to
    the strong model, over [0, 1] (trapezoids; the endpoints (0, 0) and (1, 1) added).

    **Arguments:** `strong_fraction`: (K,) fractions of strong calls of K router settings;
    `quality`: (K,) their qualities; `weak`, `strong`: the two models' qualities.
    """
    f, g = _pgr_curve(strong_fraction, quality, weak, strong)
    return float(np.sum(0.5 * (g[1:] + g[:-1]) * np.diff(f)))


def call_performance_threshold(
    strong_fraction, quality, target: float, *, weak: float, strong: float
) -> float:
    """CPT(target) (RouteLLM): the smallest fraction of strong-model calls at which the
    router's PGR reaches `target` (e.g. 0.5 for CPT(50%)), linearly interpolated between
    the router's settings; 1.0 if only calling the strong model always reaches it."""
    target = check_real("target", target, low=0.0, high=1.0)
    f, g = _pgr_curve(strong_fraction, quality, weak, strong)
    for i in range(f.size):
        if g[i] >= target:
            if i == 0 or g[i - 1] >= target:
                return float(f[i])
            t = (target - g[i - 1]) / (g[i] - g[i - 1])
            return float(f[i - 1] + t * (f[i] - f[i - 1]))
    return 1.0


def rank_score(accuracy, cost, *, cmin: float, cmax: float, beta: float = 0.1):
    """VL-RouterBench rank score: weighted harmonic mean of accuracy A and the
    log-normalised cheapness C = (log cmax - log clip(cost)) / (log cmax - log cmin).

    `(1 + beta) A C / (beta A + C)`; beta < 1 weighs accuracy more (0.1 in the benchmark).
    `cmin`, `cmax` > 0: the cheapest and dearest model's mean cost. 0 when A = C = 0.
    `accuracy` must lie in [0, 1] and `cost` be finite and >= 0 (`ValueError` naming the
    argument otherwise; an accuracy of 5.0 is not clipped into a score).
    """
    if not 0 < cmin < cmax < np.inf:
        raise ValueError(f"cmin, cmax: expected 0 < cmin < cmax < inf, received {cmin}, {cmax}")
    if not 0 <= beta < np.inf:
        raise ValueError(f"beta: expected a finite number >= 0, received {beta!r}")
    a, c = _float_array("accuracy", accuracy), _float_array("cost", cost)
    check_range("accuracy", a, low=0.0, high=1.0)
    check_finite("cost", c)
    check_range("cost", c, low=0.0)
    try:
        np.broadcast_shapes(a.shape, c.shape)
    except ValueError:
        raise ValueError(
            f"accuracy, cost: expected shapes that broadcast, received {a.shape} and {c.shape}"
        ) from None
    c = np.clip(c, cmin, cmax)
    cheap = (np.log(cmax) - np.log(c)) / (np.log(cmax) - np.log(cmin))
    den = beta * a + cheap
    return np.where(den > 0, (1 + beta) * a * cheap / np.where(den > 0, den, 1.0), 0.0)


def accuracy_at_cost(cost, quality, budget: float) -> float:
    """The best quality a router reaches at mean cost <= `budget`, on its hull (random
    mixtures of its settings); `nan` if even its cheapest setting costs more. `budget` a
    finite number (else a `ValueError` naming it)."""
    budget = check_real("budget", budget)
    hc, hq = cost_quality_hull(cost, quality)
    if budget < hc[0]:
        return float("nan")
    return float(np.interp(budget, hc, hq))


def routed_outcome(choice, quality, cost) -> RoutedOutcome:
    """Mean cost and mean quality of routing query i to candidate `choice[i]`.

    **Arguments:** `choice` (N,) int candidate indices in [0, M) (never wrapped);
    `quality`, `cost` (N, M) finite (a `RoutingTable`'s). Anything else raises a
    `ValueError` naming the argument.

    **Returns:** a `RoutedOutcome(cost, quality)`: the (cost, quality) order of `aiq` and
    `cost_quality_hull` (before issue 60 this returned (quality, cost); read the fields by
    name, `out.cost` / `out.quality`).
    """
    q, c = _float_array("quality", quality), _float_array("cost", cost)
    if q.ndim != 2 or q.size == 0:
        raise ValueError(f"quality: expected a non-empty (N, M) array, received {q.shape}")
    if c.shape != q.shape:
        raise ValueError(f"cost: expected the shape of quality {q.shape}, received {c.shape}")
    check_finite("quality", q)
    check_finite("cost", c)
    ch = check_ids("choice", choice, q.shape[1], what="candidate indices")
    if ch.shape != (q.shape[0],):
        raise ValueError(f"choice: expected ({q.shape[0]},) ints, received shape {ch.shape}")
    rows = np.arange(ch.size)
    return RoutedOutcome(cost=float(c[rows, ch].mean()), quality=float(q[rows, ch].mean()))


def oracle_choice(quality, cost, *, available=None) -> np.ndarray:
    """The oracle router: per query, the cheapest available candidate of highest quality.

    **Arguments:** `quality`, `cost` (N, M); `available` (M,) or (N, M) bool (default all).

    **Returns:** (N,) int choices. NaN/inf quality or cost raises `ValueError` naming it.
    """
    q, c = _float_array("quality", quality), _float_array("cost", cost)
    if q.ndim != 2 or c.shape != q.shape or q.size == 0:
        raise ValueError(
            f"quality, cost: expected two non-empty (N, M) arrays of one shape, received "
            f"{q.shape}, {c.shape}"
        )
    check_finite("quality", q)  # a NaN quality compared False everywhere: candidate 0
    check_finite("cost", c)
    if available is None:
        av = np.ones(q.shape, bool)
    else:
        try:
            av = np.broadcast_to(available, q.shape)
        except ValueError:
            raise ValueError(
                f"available: expected (M,) or (N, M) = {q.shape} booleans, received shape "
                f"{np.shape(available)}"
            ) from None
    if not np.all(av.any(1)):
        raise ValueError("available: every query needs at least one available candidate")
    qm = np.where(av, q, -np.inf)
    best = qm.max(1, keepdims=True)
    return np.argmin(np.where(qm == best, c, np.inf), axis=1)
