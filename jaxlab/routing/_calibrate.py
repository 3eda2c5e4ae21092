"""RouteLLM's calibration: the `threshold_route` threshold that sends a chosen share of
queries to the strong (most expensive) candidate, read off a held-out calibration set.

RouteLLM (Ong et al. 2024) calibrates its routers' thresholds so that X% of calls go to
the strong model: the threshold is the (1 - X) quantile of the router's win-rate scores
on a calibration set, and unseen queries are then routed with that fixed threshold (their
share of strong calls is X up to sampling noise). `threshold_route` routes each query to
the cheapest candidate whose predicted quality reaches the threshold, else to the best
predicted one; so a strong candidate (one of the highest cost) gets query i exactly when
it is the best predicted candidate and every cheaper available candidate's predicted
quality is below the threshold. With `r_i` the largest predicted quality of the cheaper
candidates when a strong one is the best predicted (`+inf` otherwise: the query can never
go to one), query i goes to a strong candidate iff `r_i < threshold`, and the threshold
with share X is the X quantile of `r` over the calibration queries.
"""

from __future__ import annotations

import numbers

import numpy as np

from jaxlab._core import as_array

__all__ = ["calibrate_threshold"]


def strong_scores(predicted_quality, candidate_cost, *, available=None) -> np.ndarray:
    """Per query, the threshold below which `threshold_route` sends it to a candidate of the
    highest cost (`+inf`: never). Checks the arguments."""
    q = np.asarray(as_array("predicted_quality", predicted_quality), dtype=np.float64)
    if q.ndim != 2 or q.shape[0] == 0 or q.shape[1] < 2:
        raise ValueError(
            "predicted_quality: expected an (N, M) array with N >= 1 queries and M >= 2 "
            f"candidates, received shape {q.shape}"
        )
    if not np.all(np.isfinite(q)):
        raise ValueError("predicted_quality: expected finite values, received NaN or inf")
    c = np.asarray(as_array("candidate_cost", candidate_cost), dtype=np.float64)
    if c.shape != (q.shape[1],) or not np.all(np.isfinite(c)):
        raise ValueError(
            f"candidate_cost: expected ({q.shape[1]},) finite costs (one per candidate of "
            f"predicted_quality), received shape {c.shape}"
        )
    strong = c == c.max()  # the strong candidate(s): those of the highest cost
    if strong.all():
        raise ValueError(
            f"candidate_cost: expected a cheaper candidate besides the most expensive, "
            f"received {c.size} candidates all at cost {c[0]:g}"
        )
    av = (
        np.ones(q.shape, bool)
        if available is None
        else np.broadcast_to(np.asarray(available, bool), q.shape)
    )
    if not np.all(av.any(1)):
        raise ValueError("available: every query needs at least one available candidate")
    qa = np.where(av, q, -np.inf)
    # `threshold_route`'s fallback is jnp.argmax: the first of tied maxima
    goes_strong = strong[np.argmax(qa, axis=1)]
    others = np.where(strong, -np.inf, qa).max(1)  # -inf: only strong ones are available
    return np.where(goes_strong, others, np.inf)


def calibrate_threshold(
    predicted_quality, candidate_cost, strong_fraction: float, *, available=None
) -> float:
    """The `threshold_route` threshold that sends the share `strong_fraction` of the
    calibration queries to the strong model, the most expensive candidate (RouteLLM's "X%
    of calls to the strong model"; candidates tied at the highest cost count together).

    Calibrate on held-out queries (not the router's training queries), then route new
    queries with `threshold_route(predicted, candidate_cost, threshold)`: their share of
    strong calls is `strong_fraction` up to sampling noise. On the calibration queries the
    share is within 1/N of it (ties in the predictions aside).

    **Arguments:**

    - `predicted_quality`: (N, M) a router's predicted quality of the calibration queries
      (`router.predict_quality(features)`), the scores `threshold_route` compares.
    - `candidate_cost`: (M,) the candidates' costs (as passed to `threshold_route`); the
      strong candidate is the most expensive one (several tied at the highest cost count
      as one strong model, e.g. one model under several prompts).
    - `strong_fraction`: the share of queries for the strong candidate, in [0, 1].
    - `available`: (M,) or (N, M) bool, as passed to `threshold_route` (default all).

    **Returns:** the threshold (a float): the `strong_fraction` quantile (NumPy's linear
    interpolation) of the per-query score below which a query goes to the strong
    candidate; `strong_fraction=1` returns a value just above the largest score.

    Raises `ValueError` when `strong_fraction` is outside [0, 1] or above the share of
    queries whose best predicted candidate is a strong one (no threshold sends more).

    Example (RouteLLM's workflow, 20% of calls to the strong model):

    ```python
    cal, new = heldout.split(0.5, key=key)
    t = routing.calibrate_threshold(router.predict_quality(cal.features), cost, 0.2)
    choice = routing.threshold_route(router.predict_quality(new.features), cost, t)
    ```
    """
    if isinstance(strong_fraction, bool) or not isinstance(strong_fraction, numbers.Real):
        raise ValueError(
            f"strong_fraction: expected a number in [0, 1], received "
            f"{type(strong_fraction).__name__}"
        )
    x = float(strong_fraction)
    if not 0.0 <= x <= 1.0:
        raise ValueError(f"strong_fraction: expected a number in [0, 1], received {x!r}")
    r = strong_scores(predicted_quality, candidate_cost, available=available)
    reachable = float(np.mean(np.isfinite(r)))
    if x > reachable:
        raise ValueError(
            f"strong_fraction: expected at most {reachable:.4g}, the share of calibration "
            f"queries whose best predicted candidate is a strong one, received {x:g}"
        )
    finite = np.sort(r[np.isfinite(r)])
    if x == 0.0:
        return float(finite[0]) if finite.size else 0.0
    if finite.size and x >= reachable:
        return float(np.nextafter(finite[-1], np.inf))  # every reachable query
    # queries that never go to the strong candidate sort last (any value above the others)
    filled = np.where(np.isfinite(r), r, finite[-1] + 1.0)
    return float(np.quantile(filled, x))
