"""Length-prediction metrics with bootstrap confidence intervals over prompts.

- MAE in tokens; normalised MAE = MAE / mean true length (the scale-free error that
  Piotrowski et al. 2025 report for remaining-token prediction; we state the normaliser
  so the number is reproducible);
- R^2 of `log1p` lengths (lengths span orders of magnitude; the probes regress log1p);
- Spearman rank correlation (scale-free, the P17 paper's headline).

Intervals: percentile bootstrap with whole prompts resampled (`jaxlab.interp.bootstrap_ci`
with `groups`), so the many token rows of one completion count as one unit.
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax.core import Tracer
from jaxtyping import Array, Float

from .. import interp
from .._core import (
    as_array,
    check_array,
    check_finite,
    check_memory,
    check_positive_int,
    check_range,
)

__all__ = ["mae", "normalised_mae", "log_r2", "length_metrics"]


def _lengths(y_true, y_pred, weights):
    """`y_true` (n,) lengths >= 0, `y_pred` (n,) and `weights` (n,) >= 0 as float32 arrays,
    finite where concrete (inside `bootstrap_ci` only shapes are checked)."""
    sizes: dict[str, int] = {}
    kw: dict[str, Any] = dict(shape=("n",), sizes=sizes, finite=True, nonempty=True)
    y = as_array("y_true", y_true, low=0.0, **kw).astype(jnp.float32)
    p = as_array("y_pred", y_pred, **kw).astype(jnp.float32)
    if weights is not None:
        weights = as_array("weights", weights, low=0.0, **kw).astype(jnp.float32)
        if not isinstance(weights, Tracer) and not float(jnp.sum(weights)) > 0:
            raise ValueError("weights: expected a positive total weight, received all zeros")
    return y, p, weights


def _w(weights, y):
    return jnp.ones_like(y) if weights is None else jnp.asarray(weights, y.dtype)


def mae(y_true, y_pred, *, weights=None) -> Float[Array, ""]:
    """Weighted mean absolute error. **Returns:** ()."""
    y, p, weights = _lengths(y_true, y_pred, weights)
    w = _w(weights, y)
    return jnp.sum(w * jnp.abs(y - p)) / jnp.sum(w)


def normalised_mae(y_true, y_pred, *, weights=None) -> Float[Array, ""]:
    """MAE divided by the (weighted) mean true length (which must be > 0: all-zero true
    lengths raise a `ValueError` naming `y_true`). **Returns:** ()."""
    y, p, weights = _lengths(y_true, y_pred, weights)
    w = _w(weights, y)
    if not isinstance(y, Tracer) and not float(jnp.sum(w * y)) > 0:
        raise ValueError("y_true: expected a positive mean length, received all zeros")
    return mae(y, p, weights=w) / (jnp.sum(w * y) / jnp.sum(w))


def log_r2(y_true, y_pred, *, weights=None) -> Float[Array, ""]:
    """R^2 of log1p(length). **Returns:** ().

    `y_true` needs at least 2 rows and 2 distinct values (R^2 is undefined otherwise: a
    `ValueError` names it).
    """
    y, p, weights = _lengths(y_true, y_pred, weights)
    if not isinstance(y, Tracer) and (y.shape[0] < 2 or float(jnp.ptp(y)) == 0):
        raise ValueError(
            f"y_true: expected at least 2 rows with distinct values, received {y.shape[0]} "
            "rows of one value"
        )
    y, p = jnp.log1p(y), jnp.log1p(jnp.maximum(p, 0.0))
    return interp.r2_score(y, p, weights=weights)


def _spearman(y_true, y_pred, *, weights=None):
    y, p = jnp.asarray(y_true, jnp.float32), jnp.asarray(y_pred, jnp.float32)
    return interp.spearman(y, p, weights=weights)


_METRICS = {"mae": mae, "nmae": normalised_mae, "r2": log_r2, "spearman": _spearman}


def length_metrics(
    y_true: Float[Array, " n"],
    y_pred: Float[Array, " n"],
    *,
    key: jax.Array,
    groups=None,
    mask=None,
    n_resamples: int = 500,
    level: float = 0.95,
) -> dict[str, float]:
    """MAE, normalised MAE, log R^2 and Spearman of length predictions, with bootstrap CIs.

    **Arguments:**

    - `y_true`: (n,) true lengths in tokens (>= 0).
    - `y_pred`: (n,) predicted lengths in tokens (negative predictions count as 0 in R^2).
    - `key`: PRNG key of the resampling.
    - `groups`: (n,) prompt ids resampled as units (default: rows).
    - `mask`: (n,) bool rows to evaluate (default all); masking instead of slicing keeps
      the shapes, so many subsets reuse one compiled bootstrap.
    - `n_resamples`, `level`: bootstrap replicates (a positive integer, refused before
      allocation when the resamples would not fit in memory) and coverage.

    **Returns:** {"mae", "mae_low", "mae_high", "nmae", ..., "r2", ..., "spearman", ...}
    as floats. A constant prediction has no rank information: its Spearman is reported
    as 0 (not NaN).
    """
    y = np.asarray(as_array("y_true", y_true, ndim=1), np.float32)
    p = np.asarray(as_array("y_pred", y_pred), np.float32)
    check_array("y_true", y, ndim=1)
    check_array("y_pred", p, shape=y.shape)
    if y.shape[0] < 2:
        raise ValueError(f"y_true: expected at least 2 rows, received {y.shape[0]}")
    check_finite("y_true", y)
    check_finite("y_pred", p)
    check_range("y_true", y, low=0)
    n_resamples = check_positive_int("n_resamples", n_resamples)
    check_memory("n_resamples", 8.0 * 4 * n_resamples * y.shape[0])  # resampled rows
    m = np.ones(y.shape, bool) if mask is None else np.asarray(mask)
    check_array("mask", m, shape=y.shape, dtype=np.bool_)
    if m.sum() < 2:
        raise ValueError(f"mask: expected at least 2 selected rows, received {int(m.sum())}")
    out = {}
    for i, (name, fn) in enumerate(_METRICS.items()):
        if name == "spearman" and np.ptp(p[m]) == 0:
            out.update(spearman=0.0, spearman_low=0.0, spearman_high=0.0)
            continue
        est, lo, hi = interp.bootstrap_ci(
            fn,
            jnp.asarray(y),
            jnp.asarray(p),
            key=jax.random.fold_in(key, i),
            n_resamples=n_resamples,
            level=level,
            groups=groups,
            weights=jnp.asarray(m, jnp.float32),
        )
        out[name], out[f"{name}_low"], out[f"{name}_high"] = float(est), float(lo), float(hi)
    return out
