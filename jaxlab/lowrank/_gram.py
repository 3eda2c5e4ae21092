"""Overlap (Gram) matrices and vectors realising them."""

from __future__ import annotations

import equinox as eqx
import jax
import jax.core
import jax.numpy as jnp
from jaxtyping import Array, Float, PRNGKeyArray

from jaxlab._core import as_array, check_array, check_finite, check_memory, check_positive_int

__all__ = ["gram", "vectors_from_gram", "gaussian_vectors"]


def gram(vectors: Float[Array, "P N"]) -> Float[Array, "P P"]:
    """Overlaps `G_ab = v_a . v_b / N` of stacked vectors `(P, N)`; returns `(P, P)`."""
    vectors = as_array("vectors", vectors, ndim=2, dtype=jnp.floating, finite=True)
    if 0 in vectors.shape:
        raise ValueError(
            f"vectors: expected at least one vector and one neuron, received shape {vectors.shape}"
        )
    return vectors @ vectors.T / vectors.shape[1]


def _psd_factor(g, name):
    """`L` with `L L^T = G` for symmetric PSD `G`, via eigh (works when G is singular)."""
    sym = 0.5 * (g + g.T)
    evals, evecs = jnp.linalg.eigh(sym)
    scale = jnp.maximum(jnp.max(jnp.abs(evals)), jnp.finfo(g.dtype).tiny)
    tol = 1e3 * jnp.finfo(g.dtype).eps * scale
    asym = jnp.max(jnp.abs(g - g.T)) > tol
    negative = evals[0] < -tol
    if isinstance(asym, jax.core.Tracer) or isinstance(negative, jax.core.Tracer):
        evecs = eqx.error_if(evecs, asym, f"{name}: expected a symmetric matrix")
        evecs = eqx.error_if(evecs, negative, f"{name}: expected a positive semi-definite matrix")
    elif bool(asym):
        raise ValueError(f"{name}: expected a symmetric matrix")
    elif bool(negative):
        raise ValueError(
            f"{name}: expected a positive semi-definite matrix, smallest eigenvalue {evals[0]}"
        )
    return evecs * jnp.sqrt(jnp.maximum(evals, 0.0))[None, :]


def vectors_from_gram(
    g: Float[Array, "P P"], n_neurons: int, *, key: PRNGKeyArray
) -> Float[Array, "P N"]:
    """Vectors `V` `(P, N)` with `V V^T / N = G` exactly (reconstruction from overlaps).

    `V = sqrt(N) L Q^T` with `L L^T = G` and `Q` `(N, P)` a random matrix with
    orthonormal columns (Haar), so per-neuron entries look Gaussian with
    covariance `G` at large N. Requires `N >= P`.

    **Arguments:** `g`: symmetric PSD `(P, P)`; `n_neurons`: `N`; `key`: PRNG key.

    **Returns:** `(P, N)` in the dtype of `g`.
    """
    sizes = check_array("g", g, shape=("P", "P"), dtype=jnp.floating)
    n = check_positive_int("n_neurons", n_neurons)
    if n < sizes["P"]:
        raise ValueError(f"n_neurons: expected N >= P = {sizes['P']}, received {n}")
    # z, q and the result: about 4 (N, P) arrays
    check_memory("n_neurons", 4.0 * n * sizes["P"] * jnp.dtype(g.dtype).itemsize)
    if not isinstance(g, jax.core.Tracer):
        check_finite("g", g)
    factor = _psd_factor(g, "g")
    z = jax.random.normal(key, (n, sizes["P"]), g.dtype)
    q, r = jnp.linalg.qr(z)
    q = q * jnp.sign(jnp.diagonal(r))[None, :]  # Haar-distributed columns
    return jnp.sqrt(jnp.asarray(n, g.dtype)) * factor @ q.T


def gaussian_vectors(
    cov: Float[Array, "P P"], n_neurons: int, *, key: PRNGKeyArray
) -> Float[Array, "P N"]:
    """I.i.d. per-neuron Gaussian vectors: column `i` of the result is `~ N(0, cov)`.

    Their empirical overlaps `gram(V)` fluctuate around `cov` by `O(N^-1/2)`.
    """
    sizes = check_array("cov", cov, shape=("P", "P"), dtype=jnp.floating)
    n = check_positive_int("n_neurons", n_neurons)
    check_memory("n_neurons", 2.0 * n * sizes["P"] * jnp.dtype(cov.dtype).itemsize)
    if not isinstance(cov, jax.core.Tracer):
        check_finite("cov", cov)
    factor = _psd_factor(cov, "cov")
    return factor @ jax.random.normal(key, (sizes["P"], n), cov.dtype)
