"""The `AbstractRouter` interface and the utility policy every router shares.

A router predicts, per query and candidate, the expected quality; the policy turns it
into a utility `E[quality] - cost_weight * cost / max(cost)` (the performance-cost
routing of LatentRouter and RouterBench's cost weight), sets unavailable candidates to
-inf (availability masking) and routes each query to the argmax.
"""

from __future__ import annotations

import abc

import equinox as eqx
import jax.numpy as jnp
import numpy as np
from jax.core import Tracer
from jaxtyping import Array, Bool, Float, Int

from jaxlab._core import as_array, check_real

__all__ = ["AbstractRouter", "route", "threshold_route"]


def _check_cost_weight(cost_weight) -> None:
    """A concrete cost weight must be a finite number >= 0 (traced ones pass through)."""
    if isinstance(cost_weight, Tracer):
        return
    w = np.asarray(cost_weight)
    if w.ndim != 0 or w.dtype.kind not in "iuf":
        raise ValueError(f"cost_weight: expected a number >= 0, received {cost_weight!r}")
    if not (np.isfinite(w) and w >= 0):
        raise ValueError(
            f"cost_weight: expected a finite number >= 0 (0: performance routing; larger "
            f"weights prefer cheaper candidates), received {float(w)}"
        )


class AbstractRouter(eqx.Module):
    """A router: `predict_quality(features) -> (N, M)` plus the candidates' cost scale.

    Subclasses hold `candidate_cost` (M,) (the mean cost of each candidate on the
    training table) and implement `predict_quality`; `predict_utilities` and `route`
    are shared. Fitting is a classmethod `fit(table, ..., key=...)` of each subclass.
    """

    candidate_cost: eqx.AbstractVar[Float[Array, " M"]]

    @abc.abstractmethod
    def predict_quality(self, features: Float[Array, "N F"]) -> Float[Array, "N M"]:
        """Expected quality of every candidate on every query, in [0, 1]."""

    def predict_utilities(
        self,
        features: Float[Array, "N F"],
        *,
        cost_weight: float | Float[Array, ""] = 0.0,
        available: Bool[Array, " M"] | Bool[Array, "N M"] | None = None,
    ) -> Float[Array, "N M"]:
        """`E[quality] - cost_weight * cost / max(cost)`, -inf where not `available`.

        **Arguments:**

        - `features`: (N, F) query features.
        - `cost_weight`: lambda >= 0 (0: performance routing).
        - `available`: (M,) or (N, M) bool mask of the candidates that may be chosen.

        **Returns:** (N, M) utilities.
        """
        _check_cost_weight(cost_weight)
        q = self.predict_quality(features)
        c = self.candidate_cost / jnp.max(self.candidate_cost)
        u = q - cost_weight * c[None, :]
        if available is not None:
            u = jnp.where(jnp.broadcast_to(available, u.shape), u, -jnp.inf)
        return u


def route(
    router: AbstractRouter,
    features,
    *,
    cost_weight: float = 0.0,
    available=None,
) -> Int[Array, " N"]:
    """The candidate each query is sent to: argmax of `router.predict_utilities`.

    **Arguments:** as `AbstractRouter.predict_utilities`; `available` must leave at
    least one candidate per query.

    `features` (N, F) finite and non-empty, `available` booleans; anything else raises a
    `ValueError` naming the argument.

    **Returns:** (N,) int choices (never an unavailable candidate).
    """
    features = as_array("features", features, ndim=2, finite=True, nonempty=True, real=True)
    _check_cost_weight(cost_weight)
    if available is not None:
        available = as_array("available", available, dtype=np.bool_)
        m = int(router.candidate_cost.shape[0])
        n = int(features.shape[0])
        if available.shape not in ((m,), (n, m)):
            raise ValueError(
                f"available: expected (M,) or (N, M) = ({n}, {m}) booleans, received shape "
                f"{tuple(available.shape)}"
            )
        if not isinstance(available, Tracer) and not bool(  # NumPy: never traced
            np.all(np.any(np.atleast_2d(np.asarray(available)), axis=-1))
        ):
            raise ValueError("available: expected at least one available candidate per query")
    try:
        u = router.predict_utilities(features, cost_weight=cost_weight, available=available)
    except TypeError as e:  # a width mismatch inside the router's matmul / distances
        raise ValueError(
            f"features: expected the feature width the router was fitted on, received "
            f"shape {tuple(features.shape)} ({type(router).__name__}: {e})"
        ) from None
    return jnp.argmax(u, axis=1)


def threshold_route(
    predicted_quality, candidate_cost, threshold: float, *, available=None
) -> Int[Array, " N"]:
    """Cost-aware thresholding (RouteLLM-style, generalised to M candidates): the cheapest
    candidate whose predicted quality is >= `threshold`, else the best predicted one.

    **Arguments:** `predicted_quality` (N, M) finite; `candidate_cost` (M,) finite;
    `threshold` a finite number, usually in [0, 1] (sweeping it traces a cost-quality
    curve); `available` (M,) or (N, M) bool leaving a candidate per query. Anything else
    raises a `ValueError` naming the argument.

    **Returns:** (N,) int choices.
    """
    sizes: dict[str, int] = {}
    q = as_array(
        "predicted_quality",
        predicted_quality,
        shape=("N", "M"),
        sizes=sizes,
        finite=True,
        nonempty=True,
    )
    c = as_array("candidate_cost", candidate_cost, shape=("M",), sizes=sizes, finite=True)
    threshold = check_real("threshold", threshold)
    if available is None:
        av = jnp.ones(q.shape, bool)
    else:
        av = as_array("available", available, dtype=np.bool_)
        try:
            av = jnp.broadcast_to(av, q.shape)
        except ValueError:
            raise ValueError(
                f"available: expected (M,) or (N, M) = {q.shape} booleans, received shape "
                f"{av.shape}"
            ) from None
        if not isinstance(av, Tracer) and not bool(jnp.all(jnp.any(av, axis=1))):
            raise ValueError("available: expected at least one available candidate per query")
    ok = (q >= threshold) & av
    cheapest_ok = jnp.argmin(jnp.where(ok, c[None, :], jnp.inf), axis=1)
    best = jnp.argmax(jnp.where(av, q, -jnp.inf), axis=1)
    return jnp.where(ok.any(1), cheapest_ok, best)
