"""Covariance geometry (P10 baselines): matrix functions, log-Euclidean mean, tangent
space, Euclidean alignment (He & Wu 2019) and Riemannian re-centering."""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np

from jaxlab._core import as_array, check_real

__all__ = [
    "spd_power",
    "spd_log",
    "spd_exp",
    "log_euclidean_mean",
    "tangent_space",
    "euclidean_alignment",
    "recenter",
]


def _check_spd(name, c, *, ndim=None):
    c = as_array(name, c, ndim=ndim, dtype=jnp.floating, finite=True, nonempty=True)
    if c.ndim < 2 or c.shape[-1] != c.shape[-2]:
        raise ValueError(f"{name}: expected (..., C, C) square matrices, got {c.shape}")
    return c


def _check_square(name, m, c: int):
    m = _check_spd(name, m, ndim=2)
    if m.shape != (c, c):
        raise ValueError(f"{name}: expected shape ({c}, {c}), received {tuple(m.shape)}")
    return m


def _eig_apply(c, fn):
    w, v = jnp.linalg.eigh(c)
    return (v * fn(w)[..., None, :]) @ jnp.swapaxes(v, -1, -2)


def spd_power(c, p: float):
    """Matrix power of symmetric positive-definite `c` `(..., C, C)`."""
    c = _check_spd("c", c)
    return _eig_apply(c, lambda w: w**p)


def spd_log(c):
    """Matrix logarithm of SPD `c` `(..., C, C)`."""
    c = _check_spd("c", c)
    return _eig_apply(c, jnp.log)


def spd_exp(s):
    """Matrix exponential of symmetric `s` `(..., C, C)`."""
    s = _check_spd("s", s)
    return _eig_apply(s, jnp.exp)


def log_euclidean_mean(covs):
    """exp(mean(log C_i)) over the leading axis: `(N, C, C)` -> `(C, C)`."""
    covs = _check_spd("covs", covs, ndim=3)
    return spd_exp(spd_log(covs).mean(0))


def tangent_space(covs, reference):
    """Affine-invariant tangent vectors at `reference`:
    upper triangle of `log(R^-1/2 C R^-1/2)` with off-diagonals times sqrt(2)
    (the isometric vectorisation of pyriemann's `TangentSpace`).

    **Arguments:** `covs` `(..., C, C)`, `reference` `(C, C)`. **Returns:** `(..., C(C+1)/2)`.
    """
    covs = _check_spd("covs", covs)
    reference = _check_spd("reference", reference)
    c = covs.shape[-1]
    if reference.shape != (c, c):
        raise ValueError(f"reference: expected shape ({c}, {c}), got {reference.shape}")
    isq = spd_power(reference, -0.5)
    s = spd_log(isq @ covs @ isq)
    iu = np.triu_indices(c)
    coef = np.where(iu[0] == iu[1], 1.0, np.sqrt(2.0)).astype(np.dtype(covs.dtype))
    upper = s[..., iu[0], iu[1]]
    return upper * jnp.broadcast_to(jnp.asarray(coef), upper.shape)


def euclidean_alignment(epochs, *, reference=None, shrinkage: float = 0.0):
    """Euclidean alignment (He & Wu 2019): `x -> R^{-1/2} x` with `R` the arithmetic
    mean of the epochs' covariances (or `reference`), so the aligned covariances average
    to the identity. `epochs` `(N, C, L)` -> `(N, C, L)`.

    `shrinkage` in [0, 1) blends `R` towards `trace(R)/C * I` first; use it for
    rank-deficient data (e.g. after average re-referencing, whose covariance is singular).

    **Raises:** `ValueError` naming `epochs` (not `(N, C, L)` floats with L >= 2, empty,
    NaN/inf), `reference` (not a finite `(C, C)` matrix) or `shrinkage`.
    """
    epochs = as_array(
        "epochs", epochs, shape=("N", "C", "L"), dtype=jnp.floating, finite=True, nonempty=True
    )
    if epochs.shape[-1] < 2:
        raise ValueError(f"epochs: expected L >= 2 samples per epoch, received {epochs.shape}")
    shrinkage = check_real("shrinkage", shrinkage, low=0.0, high=1.0, high_inclusive=False)
    if reference is not None:
        reference = _check_square("reference", reference, epochs.shape[-2])
    else:
        xc = epochs - epochs.mean(-1, keepdims=True)
        reference = (xc @ jnp.swapaxes(xc, -1, -2) / (epochs.shape[-1] - 1)).mean(0)
    c = reference.shape[-1]
    reference = (1 - shrinkage) * reference + shrinkage * jnp.trace(reference) / c * jnp.eye(
        c, dtype=reference.dtype
    )
    return spd_power(reference, -0.5) @ epochs


def recenter(covs, *, reference=None):
    """Riemannian re-centering: `C -> M^{-1/2} C M^{-1/2}` with `M` the log-Euclidean mean
    (or `reference`): `(N, C, C)` -> `(N, C, C)`.

    **Raises:** `ValueError` naming `covs` (not finite `(N, C, C)`) or `reference` (not a
    finite `(C, C)` matrix)."""
    covs = _check_spd("covs", covs, ndim=3)
    if reference is not None:
        reference = _check_square("reference", reference, covs.shape[-1])
    m = log_euclidean_mean(covs) if reference is None else reference
    isq = spd_power(m, -0.5)
    return isq @ covs @ isq
