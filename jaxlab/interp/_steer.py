"""Steering and ablation: difference-of-means directions, interventions for
`lm.forward(intervene=...)`, SAE-feature clamping/ablation and dose-response curves.

Papers: Turner et al. 2023 ("Activation Addition"); Marks & Tegmark 2023 ("The
Geometry of Truth", difference-of-means probes); Arditi et al. 2024 (directional
ablation); Templeton et al. 2024 (SAE feature clamping).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Bool, Float, Int, PRNGKeyArray

from .._core import as_array, check_array, check_finite, check_real
from ..lm import ProjectOut, Steer
from ._sae import AbstractSAE
from ._stats import accuracy, auroc

__all__ = [
    "MeanDifference",
    "mean_difference",
    "SteerAt",
    "steer",
    "project_out",
    "ClampFeatures",
    "ablate_features",
    "dose_response",
]


class MeanDifference(eqx.Module):
    """A difference-of-means direction and its held-out separation check.

    **Attributes:** `direction` (d,) = mean(positive) - mean(negative) on the training rows;
    `threshold` () midpoint of the two class means' projections; `test_auroc` and
    `test_accuracy` () of `x @ direction > threshold` on the held-out rows.
    """

    direction: Float[Array, " d"]
    threshold: Float[Array, ""]
    test_auroc: Float[Array, ""]
    test_accuracy: Float[Array, ""]


def mean_difference(
    x: Float[Array, "n d"], labels: Bool[Array, " n"], *, train: Bool[Array, " n"]
) -> MeanDifference:
    """Difference-of-means direction fitted on `train` rows and checked on the others.

    **Arguments:** `x` (n, d) activations; `labels` (n,) bool (True = positive class);
    `train` (n,) bool mask (e.g. `group_split` by prompt); both classes must occur on
    both sides.

    **Returns:** `MeanDifference` (held-out AUROC near 1: the direction separates).
    """
    x = as_array("x", x)
    sizes = check_array("x", x, shape=("n", "d"), dtype=jnp.floating)
    labels, train = as_array("labels", labels), as_array("train", train)
    check_array("labels", labels, shape=("n",), sizes=sizes, dtype=jnp.bool_)
    check_array("train", train, shape=("n",), sizes=sizes, dtype=jnp.bool_)
    check_finite("x", x)
    for side, m in (("training", train), ("held-out", ~train)):
        for cls in (True, False):
            if not bool(jnp.any(m & (labels == cls))):
                raise ValueError(
                    f"labels: expected both classes among the {side} rows "
                    f"(train mask), class {cls} has none"
                )
    return _mean_difference(x, labels, train)


@jax.jit
def _mean_difference(x, labels, train):
    f = x.dtype
    pos = (train & labels).astype(f)
    neg = (train & ~labels).astype(f)
    mp, mn = pos @ x / jnp.sum(pos), neg @ x / jnp.sum(neg)
    direction = mp - mn
    threshold = (mp + mn) @ direction / 2
    proj = x @ direction
    test = (~train).astype(f)
    return MeanDifference(
        direction,
        threshold,
        auroc(labels, proj, weights=test),
        accuracy(labels, proj > threshold, weights=test),
    )


class SteerAt(eqx.Module):
    """Add `alpha * direction` at chosen positions of a (T, d) activation.

    **Attributes:** `direction` (d,); `alpha` (); `positions` (P,) int indices into the
    sequence (negative counts from the end, e.g. -1 = last token).
    """

    direction: Float[Array, " d"]
    alpha: Float[Array, ""]
    positions: Int[Array, " P"]

    def __call__(self, x: Float[Array, "T d"]) -> Float[Array, "T d"]:
        T = x.shape[0]
        hit = jnp.zeros((T,), x.dtype).at[self.positions % T].set(1)
        return x + (self.alpha * hit)[:, None] * self.direction.astype(x.dtype)[None, :]


def _direction(direction, name="direction"):
    d = as_array(name, direction, ndim=1, dtype=jnp.floating, finite=True, nonempty=True)
    return d.astype(jnp.float32)


def steer(
    direction: Float[Array, " d"],
    alpha: float | Float[Array, ""],
    *,
    layers: Sequence[int],
    site: str = "resid_post",
    positions: Sequence[int] | Int[Array, " P"] | None = None,
) -> dict[tuple[str, int], Callable]:
    """`intervene=` mapping that adds `alpha * direction` at `site` of each of `layers`.

    **Arguments:** `direction` (d,); `alpha` () (traced: a new value does not recompile);
    `layers` layer indices; `site` (`jaxlab.lm.SITES`); `positions` indices to steer
    (default every position; negative from the end).

    **Returns:** {(site, layer): `jaxlab.lm.Steer` or `SteerAt`}; pass it to `lm.forward`.
    """
    d = _direction(direction)
    a = jnp.asarray(check_real("alpha", alpha), jnp.float32)
    layers = tuple(int(i) for i in layers)
    if not layers:
        raise ValueError("layers: expected at least one layer, received none")
    if positions is None:
        fn = Steer(d, a)
    else:
        pos = jnp.asarray(positions, jnp.int32).reshape(-1)
        if pos.shape[0] == 0:
            raise ValueError("positions: expected at least one position, received none")
        fn = SteerAt(d, a, pos)
    return {(site, i): fn for i in layers}


def project_out(
    direction: Float[Array, " d"], *, layers: Sequence[int], site: str = "resid_post"
) -> dict[tuple[str, int], Callable]:
    """`intervene=` mapping removing the component along `direction` at each layer.

    **Returns:** {(site, layer): `jaxlab.lm.ProjectOut`}.
    """
    d = _direction(direction)
    if not float(jnp.linalg.norm(d)) > 0:
        raise ValueError("direction: expected a non-zero vector, received all zeros")
    fn = ProjectOut(d)
    return {(site, int(i)): fn for i in layers}


class ClampFeatures(eqx.Module):
    """Set chosen SAE latents to fixed values, keeping the SAE's reconstruction error.

    `x -> x + sum_i (value_i - z_i(x)) W_dec[i] / scale` with `z = sae.encode(x * scale)`;
    value 0 is feature ablation (subtract the latent's decoded contribution).

    **Attributes:** `sae`; `latents` (m,) int; `values` (m,); `scale` ().
    """

    sae: AbstractSAE
    latents: Int[Array, " m"]
    values: Float[Array, " m"]
    scale: Float[Array, ""]

    def __init__(self, sae: AbstractSAE, latents, values=None, *, input_scale: float = 1.0):
        if not isinstance(sae, AbstractSAE):
            raise ValueError(f"sae: expected an AbstractSAE, received {type(sae).__name__}")
        lat = np.asarray(as_array("latents", latents, dtype=jnp.integer, nonempty=True))
        if lat.ndim > 1:
            raise ValueError(f"latents: expected a 1-D list of ints, received shape {lat.shape}")
        lat = lat.reshape(-1)
        if lat.min() < 0 or lat.max() >= sae.d_sae:
            raise ValueError(
                f"latents: expected indices in [0, {sae.d_sae}), received {lat.tolist()}"
            )
        vals = (
            np.zeros(lat.shape, np.float32)
            if values is None
            else np.broadcast_to(np.asarray(values, np.float32), lat.shape)
        )
        self.sae = sae
        self.latents = jnp.asarray(lat, jnp.int32)
        self.values = jnp.asarray(vals, sae.W_dec.dtype)
        self.scale = jnp.asarray(input_scale, sae.W_dec.dtype)

    def __call__(self, x: Float[Array, "T d"]) -> Float[Array, "T d"]:
        z = jax.vmap(self.sae.encode)(x.astype(self.scale.dtype) * self.scale)[:, self.latents]
        delta = (self.values[None, :] - z) @ self.sae.W_dec[self.latents] / self.scale
        return x + delta.astype(x.dtype)


def ablate_features(sae: AbstractSAE, latents, *, input_scale: float = 1.0) -> ClampFeatures:
    """Intervention subtracting the decoded contribution of `latents` (clamp to 0)."""
    return ClampFeatures(sae, latents, None, input_scale=input_scale)


def dose_response(
    metric: Callable[[Float[Array, " d"]], Array],
    direction: Float[Array, " d"],
    alphas: Sequence[float] | Float[Array, " A"],
    *,
    key: PRNGKeyArray,
) -> dict[str, np.ndarray]:
    """A behavioural metric over a grid of steering strengths, with a random control.

    **Arguments:** `metric(vector)` -> () (e.g. a logit difference of `lm.forward` run with
    `steer(vector, 1.0, layers=...)`); `direction` (d,) finite, non-zero; `alphas` (A,)
    finite grid (a scalar is one value); `key` draws the control direction, uniformly
    random with the norm of `direction`. A metric value that is NaN/inf raises a
    `ValueError` naming `metric`.

    **Returns:** {"alphas": (A,), "direction": (A,) metric(alpha * direction),
    "control": (A,) metric(alpha * random), "random_direction": (d,)} (NumPy).
    """
    d = _direction(direction)
    a = as_array("alphas", alphas, finite=True, real=True)
    if a.ndim > 1:
        raise ValueError(f"alphas: expected a scalar or an (A,) grid, received shape {a.shape}")
    a = np.asarray(a, np.float32).reshape(-1)
    if a.shape[0] == 0:
        raise ValueError("alphas: expected at least one value, received none")
    if not callable(metric):
        raise ValueError(f"metric: expected a callable, received {type(metric).__name__}")
    r = jax.random.normal(key, d.shape, d.dtype)
    r = r * (jnp.linalg.norm(d) / jnp.linalg.norm(r))
    run = [np.asarray([float(metric(jnp.asarray(al, d.dtype) * v)) for al in a]) for v in (d, r)]
    for name, vals in zip(("direction", "control"), run, strict=True):
        if not np.all(np.isfinite(vals)):
            raise ValueError(f"metric: returned a non-finite value on the {name} steering run")
    return {"alphas": a, "direction": run[0], "control": run[1], "random_direction": np.asarray(r)}
