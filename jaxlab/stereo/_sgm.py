"""Semi-global matching (Hirschmüller, 2008) in JAX: 8-path aggregation with P1/P2.

For each path direction r, L_r(p, d) = C(p, d) + min(L_r(p - r, d),
L_r(p - r, d +- 1) + P1, min_k L_r(p - r, k) + P2) - min_k L_r(p - r, k); the
aggregated cost is sum_r L_r, the disparity its argmin with a parabolic
sub-pixel fit. Each path is a `lax.scan` over image rows (columns for the
horizontal paths by transposition) with the previous row shifted for diagonals.

Paper: P15 (semi-global matching is one of its benchmarked methods).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from jaxtyping import Array, Float

from jaxlab._core import as_array

__all__ = ["sgm_aggregate", "sgm_disparity", "subpixel_argmin"]


def _path_down(cost: Float[Array, "H W D"], dx: int, p1, p2) -> Float[Array, "H W D"]:
    """Aggregate top -> bottom, each pixel's predecessor at column x - dx of the row above."""
    w = cost.shape[1]
    valid = (jnp.arange(w) - dx >= 0) & (jnp.arange(w) - dx < w)

    def step(prev, c_row):
        pr = prev if dx == 0 else jnp.roll(prev, dx, axis=0)  # pr[x] = prev[x - dx]
        m = jnp.min(pr, axis=-1, keepdims=True)
        up = jnp.pad(pr[:, 1:], ((0, 0), (0, 1)), constant_values=jnp.inf)
        down = jnp.pad(pr[:, :-1], ((0, 0), (1, 0)), constant_values=jnp.inf)
        best = jnp.minimum(jnp.minimum(pr, m + p2), jnp.minimum(up, down) + p1)
        new = c_row + best - m
        new = jnp.where(valid[:, None], new, c_row)
        return new, new

    first = cost[0]
    _, rest = jax.lax.scan(step, first, cost[1:])
    return jnp.concatenate([first[None], rest], axis=0)


def sgm_aggregate(
    cost: Float[Array, "H W D"], p1: float = 8.0, p2: float = 32.0, paths: int = 8
) -> Float[Array, "H W D"]:
    """Sum of the path costs over 4 (horizontal, vertical) or 8 (plus diagonal) directions."""
    cost = check_cost("cost", cost)
    if paths not in (4, 8):
        raise ValueError(f"paths: expected 4 or 8, received {paths}")
    if not 0 <= p1 <= p2:
        raise ValueError(f"p1, p2: expected 0 <= p1 <= p2, received p1={p1}, p2={p2}")
    pen1 = jnp.asarray(p1, cost.dtype)
    pen2 = jnp.asarray(p2, cost.dtype)
    total = jnp.zeros_like(cost)
    dxs = (0, 1, -1) if paths == 8 else (0,)
    for flip in (False, True):
        c = cost[::-1] if flip else cost
        for dx in dxs:
            agg = _path_down(c, dx, pen1, pen2)
            total = total + (agg[::-1] if flip else agg)
        ct = jnp.swapaxes(c if not flip else cost[:, ::-1], 0, 1)  # rows <-> columns
        agg = jnp.swapaxes(_path_down(ct, 0, pen1, pen2), 0, 1)
        total = total + (agg[:, ::-1] if flip else agg)
    return total


def check_cost(name: str, cost) -> Array:
    """A matching-cost volume `(H, W, D)`: a non-empty floating array, finite where concrete."""
    return as_array(name, cost, ndim=3, dtype=jnp.floating, finite=True, nonempty=True)


def subpixel_argmin(agg: Float[Array, "H W D"]) -> Float[Array, "H W"]:
    """Integer argmin refined by the vertex of the parabola through its two neighbours."""
    agg = check_cost("agg", agg)
    d = jnp.argmin(agg, axis=-1)
    n = agg.shape[-1]
    dm, dp = jnp.clip(d - 1, 0, n - 1), jnp.clip(d + 1, 0, n - 1)
    c0 = jnp.take_along_axis(agg, d[..., None], -1)[..., 0]
    cm = jnp.take_along_axis(agg, dm[..., None], -1)[..., 0]
    cp = jnp.take_along_axis(agg, dp[..., None], -1)[..., 0]
    denom = cm - 2 * c0 + cp
    inner = (d > 0) & (d < n - 1) & (denom > 0)
    offset = jnp.where(inner, (cm - cp) / (2 * jnp.where(inner, denom, 1.0)), 0.0)
    return d.astype(agg.dtype) + offset


def sgm_disparity(
    cost: Float[Array, "H W D"],
    p1: float = 8.0,
    p2: float = 32.0,
    paths: int = 8,
    subpixel: bool = True,
) -> Float[Array, "H W"]:
    """SGM disparity map (left image reference) from a matching-cost volume."""
    agg = sgm_aggregate(cost, p1, p2, paths)
    if subpixel:
        return subpixel_argmin(agg)
    return jnp.argmin(agg, axis=-1).astype(cost.dtype)
