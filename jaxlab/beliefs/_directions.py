"""Belief directions per layer and the belief state of a token (its projection).

P13: a belief is a representation in latent space that emerges in response to an input.
Per layer, the direction separating items whose evidence favours hypothesis A from those
favouring B is fitted on training items only, by difference of means (Marks & Tegmark
2023, via `jaxlab.interp.mean_difference`) or by an L2 logistic probe
(`jaxlab.interp.fit_logistic`); the belief state of a token is its signed distance to
the separating hyperplane along that direction.
"""

from __future__ import annotations

import equinox as eqx
import jax
import jax.core
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Bool, Float

from .. import interp
from .._core import as_array, check_array, check_finite, check_real

__all__ = ["BeliefDirections", "fit_directions", "belief_state"]

_METHODS = ("mean_difference", "logistic")


def belief_state(
    acts: Float[Array, "*shape d"], direction: Float[Array, " d"], threshold: Float[Array, ""]
) -> Float[Array, "*shape"]:
    """Belief state of token activations: `b = (h . w - c) / |w|` (P13).

    `b > 0` favours hypothesis A; |b| is the distance (in residual-stream units) from the
    hyperplane `h . w = c` that separates A-items from B-items.

    **Arguments:** `acts` (..., d) activations; `direction` (d,) the layer's `w`;
    `threshold` () its `c`.

    **Returns:** (...) belief states.
    """
    acts = as_array("acts", acts, dtype=jnp.floating, finite=True)
    d = as_array("direction", direction, ndim=1, dtype=jnp.floating, finite=True, nonempty=True)
    threshold = as_array("threshold", threshold, shape=(), finite=True)
    if not isinstance(d, jax.core.Tracer) and not bool(np.any(np.asarray(d) != 0)):
        raise ValueError("direction: expected a non-zero vector, received all zeros")
    if acts.ndim < 1 or acts.shape[-1] != d.shape[0]:
        raise ValueError(
            f"acts: expected shape (..., {d.shape[0]}) (the direction's width), "
            f"received {acts.shape}"
        )
    norm = jnp.linalg.norm(d)
    return (acts @ d - jnp.asarray(threshold, d.dtype)) / norm


class BeliefDirections(eqx.Module):
    """One fitted belief direction per layer with its held-out separation.

    **Attributes:** `directions` (L, d) the `w` of each layer (A minus B); `thresholds` (L,)
    their `c`; `test_auroc` and `test_accuracy` (L,) of `h . w > c` on the held-out items;
    `method` "mean_difference" or "logistic". Other shapes, NaN/inf directions or
    thresholds, or another method raise a `ValueError` naming the field.
    """

    directions: Float[Array, "L d"]
    thresholds: Float[Array, " L"]
    test_auroc: Float[Array, " L"]
    test_accuracy: Float[Array, " L"]
    method: str = eqx.field(static=True)

    def __check_init__(self):
        check_array("directions", self.directions, ndim=2)
        check_finite("directions", self.directions)
        n_layers = self.directions.shape[0]
        for name in ("thresholds", "test_auroc", "test_accuracy"):
            check_array(name, getattr(self, name), shape=(n_layers,))
        check_finite("thresholds", self.thresholds)
        if self.method not in _METHODS:
            raise ValueError(f"method: expected one of {_METHODS}, received {self.method!r}")

    def state(self, acts: Float[Array, "L ..."]) -> Float[Array, "L ..."]:
        """Belief states of activations stacked by layer: (L, ..., d) -> (L, ...)."""
        acts = jnp.asarray(acts)
        if acts.ndim < 2 or acts.shape[0] != self.directions.shape[0]:
            raise ValueError(
                f"acts: expected shape ({self.directions.shape[0]}, ..., d) (one slice per "
                f"layer), received {acts.shape}"
            )
        return jnp.stack(
            [
                belief_state(acts[i], self.directions[i], self.thresholds[i])
                for i in range(acts.shape[0])
            ]
        )

    @property
    def unit(self) -> Float[Array, "L d"]:
        """The directions normalised to unit length."""
        return self.directions / jnp.linalg.norm(self.directions, axis=-1, keepdims=True)


def fit_directions(
    acts: Float[Array, "L n d"],
    labels: Bool[Array, " n"],
    *,
    train: Bool[Array, " n"],
    method: str = "mean_difference",
    penalty: float = 1.0,
) -> BeliefDirections:
    """Fit a belief direction at every layer on the training items only (P13).

    **Arguments:**

    - `acts`: (L, n, d) one activation per item and layer (e.g. the last prompt token),
      finite, L >= 1.
    - `labels`: (n,) bool, True where the evidence favours hypothesis A.
    - `train`: (n,) bool training mask; the others are only used for `test_auroc`.
      Both classes must occur on both sides.
    - `method`: "mean_difference" (`w = mean_A - mean_B`, `c` the midpoint of the two
      means' projections) or "logistic" (`w`, `-c` the coefficients and intercept of an
      L2 logistic regression with `penalty`).
    - `penalty`: the logistic regression's L2 penalty (> 0).

    **Returns:** `BeliefDirections`.
    """
    if method not in _METHODS:
        raise ValueError(f"method: expected one of {_METHODS}, received {method!r}")
    acts = as_array("acts", acts, nonempty=True)
    penalty = check_real("penalty", penalty, low=0.0, low_inclusive=False)
    sizes = check_array("acts", acts, shape=("L", "n", "d"), dtype=jnp.floating)
    labels, train = as_array("labels", labels), as_array("train", train)
    check_array("labels", labels, shape=("n",), sizes=sizes, dtype=jnp.bool_)
    check_array("train", train, shape=("n",), sizes=sizes, dtype=jnp.bool_)
    check_finite("acts", acts)
    if method == "mean_difference":
        fits = [interp.mean_difference(acts[i], labels, train=train) for i in range(sizes["L"])]
        return BeliefDirections(
            jnp.stack([f.direction for f in fits]),
            jnp.stack([f.threshold for f in fits]),
            jnp.stack([f.test_auroc for f in fits]),
            jnp.stack([f.test_accuracy for f in fits]),
            method,
        )
    # the checks of mean_difference (both classes on both sides) apply to the probe too
    interp.mean_difference(acts[0], labels, train=train)
    test = (~train).astype(acts.dtype)
    ws, cs, au, ac = [], [], [], []
    for i in range(sizes["L"]):
        p = interp.fit_logistic(
            acts[i],
            labels.astype(jnp.int32),
            n_classes=2,
            penalty=penalty,
            weights=train.astype(acts.dtype),
        )
        w, c = p.coef[:, 0], -p.intercept[0]
        z = acts[i] @ w
        ws.append(w)
        cs.append(c)
        au.append(interp.auroc(labels, z, weights=test))
        ac.append(interp.accuracy(labels, z > c, weights=test))
    return BeliefDirections(jnp.stack(ws), jnp.stack(cs), jnp.stack(au), jnp.stack(ac), method)
