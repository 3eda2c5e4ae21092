"""JEPA-SCORE: the log-volume of the encoder Jacobian, per cell, and its gene attribution.

For an encoder f: R^G -> R^D (D <= G), JEPA-SCORE(x) = sum_i log max(s_i, 1e-6)
over the singular values s_i of the Jacobian J_f(x) (D x G). If f maps the data
to an isotropic Gaussian, change of variables makes it (up to the Gaussian term)
a log-density: high for typical cells, low for atypical ones.

- `jepa_score`: exact, with a reverse-mode Jacobian (D backward passes).
- `jepa_score_sketched`: randomized, k forward-mode products J @ Omega with
  Gaussian Omega (G x k) / sqrt(k), so E[J Omega Omega^T J^T] = J J^T; its
  log-volume 0.5 logdet(J Omega Omega^T J^T) is an estimate (biased for small k),
  for encoders with very many genes.
- `gene_attribution`: gradient x input of the score, per gene.

Paper: P5, after JEPA-SCORE (Balestriero et al., 2025).
"""

from __future__ import annotations

from collections.abc import Callable

import equinox as eqx
import jax
import jax.numpy as jnp
from jaxtyping import Array, Float

from jaxlab._core import as_array, check_memory, check_positive_int

from ._logvol import CLIP, jacobian_log_volume, log_volume
from ._model import LeCellModel

__all__ = ["jepa_score", "jepa_score_sketched", "gene_attribution", "CLIP", "Encoder"]

Encoder = Callable[[Float[Array, " G"]], Float[Array, " D"]]
"""An encoder of one cell, (G,) -> (D,): a `LeCellModel` (its `embed`) or any function."""


def _as_encoder(encoder: LeCellModel | Encoder) -> Encoder:
    if isinstance(encoder, LeCellModel):
        return encoder.embed
    if isinstance(encoder, eqx.nn.MLP):
        raise ValueError(
            "encoder: expected a LeCellModel (or model.embed), received a bare eqx.nn.MLP; "
            "model.encoder skips the gene standardisation that fit applies, so its scores "
            "differ from obs['jepa_score']: pass the model itself"
        )
    if not callable(encoder):
        raise ValueError(
            f"encoder: expected a LeCellModel or a function (G,) -> (D,), received "
            f"{type(encoder).__name__}"
        )
    return encoder


def _check_cell(encoder: LeCellModel | Encoder, x) -> jax.Array:
    """One cell's expression `x`: 1-D finite floats, as wide as a `LeCellModel`'s genes."""
    genes = encoder.gene_mean.shape[0] if isinstance(encoder, LeCellModel) else None
    return as_array("x", x, shape=(genes,), dtype=jnp.floating, finite=True, nonempty=True)


def jepa_score(encoder: LeCellModel | Encoder, x: Float[Array, " G"]) -> Float[Array, ""]:
    """Sum of log singular values (clipped at 1e-6) of the encoder Jacobian at one cell.

    **Arguments:**

    - `encoder`: a `LeCellModel` (scored through `embed`, as `fit` does) or a function
      (G,) -> (D,). A bare `model.encoder` MLP raises `ValueError` (it skips the
      standardisation).
    - `x`: (G,) one cell's log-normalised expression (`log_normalize(counts)[i]`).

    A `x` of another width than the model's genes, or with NaN/inf, raises a
    `ValueError` naming it.

    **Returns:** a scalar; `fit`'s `obs["jepa_score"]` for the cell.
    """
    x = _check_cell(encoder, x)
    return jacobian_log_volume(_as_encoder(encoder), x)


def jepa_score_sketched(
    encoder: LeCellModel | Encoder, x: Float[Array, " G"], *, key: jax.Array, rank: int = 64
) -> Float[Array, ""]:
    """Randomized JEPA-SCORE from `rank` Jacobian-vector products.

    **Arguments:** `encoder`, `x` as `jepa_score`; `key` (keyword-only) draws the
    Gaussian sketch Omega (G, rank) / sqrt(rank), so E[J Omega Omega^T J^T] = J J^T;
    `rank` products (more: less bias).

    **Returns:** a scalar estimate of `jepa_score(encoder, x)` (biased for small `rank`).
    """
    x = _check_cell(encoder, x)
    encoder = _as_encoder(encoder)
    rank = check_positive_int("rank", rank)
    check_memory("rank", 4.0 * rank * x.shape[0] * x.dtype.itemsize)  # Omega and J Omega
    omega = jax.random.normal(key, (x.shape[0], rank), x.dtype) / jnp.sqrt(
        jnp.asarray(rank, x.dtype)
    )
    jo = jax.vmap(lambda v: jax.jvp(encoder, (x,), (v,))[1], in_axes=1, out_axes=1)(omega)
    return log_volume(jo)


def gene_attribution(encoder: LeCellModel | Encoder, x: Float[Array, " G"]) -> Float[Array, " G"]:
    """Gradient x input of JEPA-SCORE for one cell: each gene's contribution.

    **Arguments:** `encoder`, `x` (G,) as `jepa_score` (same checks). **Returns:** (G,).
    """
    x = _check_cell(encoder, x)
    encoder = _as_encoder(encoder)
    return x * jax.grad(lambda y: jepa_score(encoder, y))(x)
