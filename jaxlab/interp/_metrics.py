"""Reconstruction and sparsity metrics of a sparse autoencoder (current SAELens' definitions).

Over N activation vectors x_t with reconstructions x_hat_t and codes z_t:

- `l0`: mean over tokens of the number of non-zero latents, `mean_t #{i: z_ti != 0}`;
- `mse`: mean over tokens of `||x_t - x_hat_t||^2` (summed over dimensions: SAELens'
  evals and training convention; divide by d_in for the per-element mean);
- `explained_variance`: `1 - sum_t ||x_t - x_hat_t||^2 / sum_t ||x_t - mean_t x_t||^2`
  (SAELens' `ExplainedVarianceCalculator`, pooled over the evaluation tokens; SAELens
  6.18 and earlier reported a different, inflated value for activations with a mean);
- `cosine_similarity`: mean over tokens of cos(x_t, x_hat_t);
- `l2_ratio`: mean over tokens of `||x_hat_t|| / ||x_t||`;
- `dead_fraction`: fraction of latents that fire on none of the N tokens (the window);
- `feature_density`: per latent, the fraction of the N tokens on which it fires;
  `density_histogram` bins `log10(density + 1e-10)` as SAELens' plots do.

Tokens are processed in chunks (`jax.lax.map`), so N can exceed what fits as (N, d_sae).
"""

from __future__ import annotations

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float

from .._core import as_array, check_array, check_finite, check_memory, check_positive_int
from ._sae import AbstractSAE

__all__ = ["sae_metrics", "density_histogram"]


@eqx.filter_jit
def _sums(sae, x, valid, mean):
    def one(args):
        xb, vb = args
        z = jax.vmap(sae.encode)(xb)
        xh = jax.vmap(sae.decode)(z)
        v = vb.astype(xb.dtype)
        nx = jnp.linalg.norm(xb, axis=1)
        nh = jnp.linalg.norm(xh, axis=1)
        safe = jnp.where(nx > 0, nx, 1)
        cos = jnp.sum(xb * xh, axis=1) / jnp.maximum(safe * nh, jnp.finfo(xb.dtype).tiny)
        return (
            jnp.sum(v * jnp.sum((xb - xh) ** 2, axis=1)),
            jnp.sum(v * jnp.sum((xb - mean[None]) ** 2, axis=1)),
            jnp.sum(v * jnp.sum(z != 0, axis=1).astype(xb.dtype)),
            jnp.sum(v * cos),
            jnp.sum(v * nh / safe),
            jnp.sum(v[:, None] * (z != 0).astype(xb.dtype), axis=0),
        )

    return jax.tree.map(lambda a: jnp.sum(a, axis=0), jax.lax.map(one, (x, valid)))


def sae_metrics(
    sae: AbstractSAE, x: Float[Array, "N d_in"], *, chunk: int = 4096
) -> dict[str, Array]:
    """L0, MSE, explained variance, cosine similarity, L2 ratio, dead fraction and density.

    **Arguments:** `sae` (any `AbstractSAE`, including `TopKPCA`); `x` (N, d_in) activations
    (the evaluation window); `chunk` tokens per block.

    **Returns:** {"l0", "mse", "explained_variance", "cosine_similarity", "l2_ratio",
    "dead_fraction": (), "feature_density": (d_sae,)}, SAELens' definitions over tokens
    x_t with reconstructions x_hat_t and codes z_t: `l0` the mean number of non-zero
    latents; `mse` the mean over tokens of `||x_t - x_hat_t||^2` (summed over the d_in
    dimensions, as SAELens; divide by d_in for the per-element mean); `explained_variance`
    `1 - sum_t ||x_t - x_hat_t||^2 / sum_t ||x_t - mean_t x_t||^2`; `cosine_similarity` the
    mean cos(x_t, x_hat_t); `l2_ratio` the mean `||x_hat_t|| / ||x_t||`; `dead_fraction`
    the fraction of latents firing on none of the tokens; `feature_density` per latent,
    the fraction of tokens on which it fires.
    """
    if not isinstance(sae, AbstractSAE):
        raise ValueError(f"sae: expected an AbstractSAE, received {type(sae).__name__}")
    x = as_array("x", x)
    check_array("x", x, shape=(None, sae.d_in), dtype=jnp.floating)
    n = x.shape[0]
    if n == 0:
        raise ValueError("x: expected at least one activation vector, received 0")
    check_finite("x", x)
    chunk = min(check_positive_int("chunk", chunk), n)
    x = x.astype(sae.W_dec.dtype)
    mean = jnp.mean(x, axis=0)
    pad = (-n) % chunk
    xp = jnp.concatenate([x, jnp.zeros((pad, x.shape[1]), x.dtype)]).reshape(-1, chunk, x.shape[1])
    valid = (jnp.arange(n + pad) < n).reshape(-1, chunk)
    rss, tss, l0, cos, ratio, fired = _sums(sae, xp, valid, mean)
    density = fired / n
    return {
        "l0": l0 / n,
        "mse": rss / n,
        "explained_variance": 1 - rss / tss,
        "cosine_similarity": cos / n,
        "l2_ratio": ratio / n,
        "dead_fraction": jnp.mean((fired == 0).astype(x.dtype)),
        "feature_density": density,
    }


def density_histogram(
    density: Float[Array, " d_sae"], *, bins: int = 50, low: float = -10.0
) -> tuple[np.ndarray, np.ndarray]:
    """Histogram of `log10(density + 1e-10)` over [low, 0] (dead latents land in the first bin).

    **Returns:** (counts (bins,), bin edges (bins + 1,)) as NumPy arrays.
    """
    bins = check_positive_int("bins", bins)
    check_memory("bins", 16.0 * (bins + 1))  # counts and edges
    d = np.asarray(
        as_array("density", density, dtype=jnp.floating, nonempty=True, low=0, high=1, finite=True),
        np.float64,
    )
    if d.ndim != 1:
        raise ValueError(f"density: expected shape (d_sae,), received {d.shape}")
    return np.histogram(np.log10(d + 1e-10), bins=bins, range=(low, 0.0))
