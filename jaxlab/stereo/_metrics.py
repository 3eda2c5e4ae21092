"""Stereo metrics: disparity errors (EPE, bad-k), depth errors (RMSE, delta_1) and the
face-specific absolute inlier ratio (IR) and landmark 3-D distance error (L3DE) of P15.

Disparity d (pixels), focal length f (pixels) and baseline B give depth Z = f B / d.
"""

from __future__ import annotations

import jax.numpy as jnp
from jaxtyping import Array, Bool, Float

from jaxlab._core import as_array

__all__ = [
    "disparity_to_depth",
    "depth_to_disparity",
    "epe",
    "bad_pixel_rate",
    "inlier_ratio",
    "delta1",
    "rmse",
    "landmark_3d_error",
]


def disparity_to_depth(disp: Float[Array, ...], focal_px: float, baseline: float):
    """Z = f B / d (inf where d <= 0)."""
    disp = as_array("disp", disp, dtype=jnp.floating, finite=True)
    return jnp.where(disp > 0, focal_px * baseline / jnp.where(disp > 0, disp, 1.0), jnp.inf)


def depth_to_disparity(depth: Float[Array, ...], focal_px: float, baseline: float):
    """d = f B / Z."""
    depth = as_array("depth", depth, dtype=jnp.floating, finite=True)
    return focal_px * baseline / depth


def _masked(pred, gt, mask, names=("pred", "gt")):
    """The valid pixels: finite ground truth (non-finite marks "no ground truth") and `mask`;
    the prediction must be finite there (a NaN there would make the metric NaN)."""
    pred = as_array(names[0], pred, dtype=jnp.floating)
    gt = as_array(names[1], gt, shape=pred.shape, dtype=jnp.floating)
    if mask is not None:
        mask = as_array("mask", mask, shape=pred.shape, dtype=jnp.bool_)
    valid = jnp.isfinite(gt) if mask is None else (mask & jnp.isfinite(gt))
    if not bool(jnp.any(valid)):
        raise ValueError("mask: expected at least one valid pixel, received none")
    bad = int(jnp.sum(valid & ~jnp.isfinite(pred)))
    if bad:
        raise ValueError(
            f"{names[0]}: expected finite values at the valid pixels, received {bad} NaN/inf"
        )
    return pred, gt, valid


def _fraction(hits, valid):
    return jnp.sum(hits) / jnp.sum(valid)  # integer / integer: true division, float


def epe(pred, gt, mask: Bool[Array, ...] | None = None) -> Float[Array, ""]:
    """Mean absolute disparity error over valid pixels (finite ground truth and `mask`)."""
    pred, gt, valid = _masked(pred, gt, mask)
    err = jnp.where(valid, jnp.abs(pred - jnp.where(valid, gt, 0.0)), 0.0)
    return jnp.sum(err) / jnp.sum(valid).astype(err.dtype)


def bad_pixel_rate(pred, gt, threshold: float, mask=None) -> Float[Array, ""]:
    """Fraction of valid pixels whose disparity error exceeds `threshold` pixels."""
    pred, gt, valid = _masked(pred, gt, mask)
    err = jnp.abs(pred - jnp.where(valid, gt, 0.0))
    return _fraction(valid & (err > threshold), valid)


def inlier_ratio(pred_depth, gt_depth, tau, mask=None) -> Float[Array, ""]:
    """IR: fraction of valid (face) pixels with |depth error| < tau (same units)."""
    pred_depth, gt_depth, valid = _masked(pred_depth, gt_depth, mask, ("pred_depth", "gt_depth"))
    err = jnp.abs(pred_depth - jnp.where(valid, gt_depth, 0.0))
    return _fraction(valid & (err < tau), valid)


def delta1(pred_depth, gt_depth, mask=None) -> Float[Array, ""]:
    """Fraction of valid pixels with max(pred/gt, gt/pred) < 1.25."""
    pred_depth, gt_depth, valid = _masked(pred_depth, gt_depth, mask, ("pred_depth", "gt_depth"))
    g = jnp.where(valid, gt_depth, 1.0)
    p = jnp.where(valid, pred_depth, 1.0)
    ratio = jnp.maximum(p / g, g / p)
    return _fraction(valid & (ratio < 1.25), valid)


def rmse(pred_depth, gt_depth, mask=None) -> Float[Array, ""]:
    """Root-mean-square depth error over valid pixels."""
    pred_depth, gt_depth, valid = _masked(pred_depth, gt_depth, mask, ("pred_depth", "gt_depth"))
    err = jnp.where(valid, pred_depth - jnp.where(valid, gt_depth, 0.0), 0.0)
    return jnp.sqrt(jnp.sum(err**2) / jnp.sum(valid).astype(err.dtype))


def landmark_3d_error(pred_points: Float[Array, "K 3"], gt_points: Float[Array, "K 3"]):
    """L3DE: mean Euclidean distance between predicted and true 3-D landmarks.

    **Raises:** `ValueError` naming `pred_points` or `gt_points` (not `(K, 3)` with the
    same K >= 1, or NaN/inf: a NaN landmark made the mean NaN)."""
    sizes: dict[str, int] = {}
    pred_points = as_array(
        "pred_points",
        pred_points,
        shape=("K", 3),
        sizes=sizes,
        dtype=jnp.floating,
        finite=True,
        nonempty=True,
    )
    gt_points = as_array(
        "gt_points", gt_points, shape=("K", 3), sizes=sizes, dtype=jnp.floating, finite=True
    )
    return jnp.mean(jnp.linalg.norm(pred_points - gt_points, axis=-1))
