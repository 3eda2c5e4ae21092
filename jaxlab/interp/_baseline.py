"""`TopKPCA`: the PCA baseline of an SAE with the same number of active components.

Each token keeps its k largest-magnitude coefficients in the principal basis of a
sample (signed), so the code has L0 = k like a TopK SAE, and the reconstruction
is those k components plus the mean. It is an `AbstractSAE`, so every metric and
splice of an SAE applies to it.
"""

from __future__ import annotations

import equinox as eqx
import jax
import jax.numpy as jnp
from jaxtyping import Array, Float

from .._core import check_array, check_finite, check_positive_int
from ._sae import AbstractSAE

__all__ = ["TopKPCA"]


class TopKPCA(AbstractSAE):
    """Per-token top-k (by magnitude) reconstruction in a PCA basis.

    **Attributes:** `W_enc` (d, d) principal axes as columns (variance descending),
    `W_dec` = its transpose, `b_dec` the sample mean, `b_enc` zeros; static `k`.
    """

    W_enc: Float[Array, "d_in d_sae"]
    b_enc: Float[Array, " d_sae"]
    W_dec: Float[Array, "d_sae d_in"]
    b_dec: Float[Array, " d_in"]
    k: int = eqx.field(static=True)

    def __init__(self, sample: Float[Array, "n d"], k: int):
        """**Arguments:** `sample` (n, d) activations (n >= 2); `k` in [1, d] active components."""
        x = jnp.asarray(sample)
        check_array("sample", x, ndim=2, dtype=jnp.floating)
        if x.shape[0] < 2:
            raise ValueError(f"sample: expected at least 2 rows, received {x.shape[0]}")
        check_finite("sample", x)
        k = check_positive_int("k", k)
        if k > x.shape[1]:
            raise ValueError(f"k: expected 1 <= k <= d={x.shape[1]}, received {k}")
        mean = jnp.mean(x, axis=0)
        xc = x - mean[None]
        _, vecs = jnp.linalg.eigh(xc.T @ xc)
        vecs = vecs[:, ::-1]
        self.W_enc, self.b_enc, self.W_dec, self.b_dec = (
            vecs,
            jnp.zeros((x.shape[1],), x.dtype),
            vecs.T,
            mean,
        )
        self.k = k

    def activation(self, pre):
        _, idx = jax.lax.top_k(jnp.abs(pre), self.k)
        return jnp.zeros_like(pre).at[idx].set(pre[idx])
