"""Matching costs for rectified stereo: census transform and Hamming cost volumes.

Convention: disparity d >= 0 matches left pixel (y, x) with right pixel (y, x - d).
Cost volumes are (H, W, D) with D candidate disparities 0..D-1; a candidate whose
right pixel falls outside the image gets the maximum cost.

Paper: P15 (the block-matching and semi-global baselines of its benchmark).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from jaxtyping import Array, Float, UInt32

from jaxlab._core import as_array, check_array, check_finite, check_positive_int

from ._sgm import check_cost

__all__ = ["census_transform", "census_cost_volume", "block_matching"]


def census_transform(image: Float[Array, "H W"], window: int = 5) -> UInt32[Array, "H W"]:
    """Census signature: bit k is set when neighbour k is darker than the centre.

    `window` is odd and at most 5 (24 bits fit a uint32); borders are edge-padded.

    **Raises:** `ValueError` naming `image` (not a 2-D float array, empty, NaN/inf: a NaN
    compares as "not darker" and would give a plausible signature) or `window`.
    """
    image = as_array("image", image, ndim=2, dtype=jnp.floating, finite=True, nonempty=True)
    if window % 2 == 0 or not 3 <= window <= 5:
        raise ValueError(f"window: expected 3 or 5, received {window}")
    r = window // 2
    pad = jnp.pad(image, r, mode="edge")
    h, w = image.shape
    sig = jnp.zeros((h, w), jnp.uint32)
    bit = 0
    for dy in range(-r, r + 1):
        for dx in range(-r, r + 1):
            if dy == 0 and dx == 0:
                continue
            nb = pad[r + dy : r + dy + h, r + dx : r + dx + w]
            sig = sig | ((nb < image).astype(jnp.uint32) << jnp.uint32(bit))
            bit += 1
    return sig


def census_cost_volume(
    left: Float[Array, "H W"], right: Float[Array, "H W"], n_disp: int, window: int = 5
) -> Float[Array, "H W D"]:
    """Hamming distance between left and right census signatures for each disparity."""
    sizes = check_array("left", left, ndim=2, dtype=jnp.floating)
    check_array("right", right, shape=left.shape, dtype=jnp.floating, sizes=sizes)
    check_positive_int("n_disp", n_disp)
    check_finite("left", left)
    check_finite("right", right)
    if n_disp > left.shape[1]:
        raise ValueError(
            f"n_disp: expected at most the image width {left.shape[1]}, received {n_disp}"
        )
    cl, cr = census_transform(left, window), census_transform(right, window)
    n_bits = window * window - 1
    x = jnp.arange(left.shape[1])

    def cost(d):
        shifted = jnp.roll(cr, d, axis=1)  # shifted[:, x] = cr[:, x - d]
        c = jax.lax.population_count(cl ^ shifted).astype(left.dtype)
        return jnp.where(x[None, :] >= d, c, jnp.asarray(n_bits, left.dtype))

    return jnp.moveaxis(jax.vmap(cost)(jnp.arange(n_disp)), 0, -1)


def block_matching(cost: Float[Array, "H W D"], radius: int = 2) -> Float[Array, "H W"]:
    """Winner-take-all disparity after summing costs over a (2r+1)^2 box (local method)."""
    cost = check_cost("cost", cost)
    k = 2 * radius + 1
    summed = jax.lax.reduce_window(cost, 0.0, jax.lax.add, (k, k, 1), (1, 1, 1), "SAME")
    return jnp.argmin(summed, axis=-1).astype(cost.dtype)
