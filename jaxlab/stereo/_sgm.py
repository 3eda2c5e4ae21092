"""Semi-global matching (Hirschmüller, 2008) in JAX: 8-path aggregation with P1/P2.

For each path direction r, L_r(p, d) = C(p, d) + min(L_r(p - r, d),
L_r(p - r, d +- 1) + P1, min_k L_r(p - r, k) + P2) - min_k L_r(p - r, k); the
aggregated cost is sum_r L_r, the disparity its argmin with a parabolic
sub-pixel fit. Each path is a `lax.scan` over image rows (columns for the
horizontal paths by transposition) with the previous row shifted for diagonals.

On CPU (`impl="auto"`, when the C++ kernel builds) the eight paths run in the C++ XLA
FFI kernel `kernels/stereo/stereo_sgm.cc` (`jaxlab._kernels.stereo.sgm_aggregate_cpu`):
the same arithmetic, SIMD over disparities, the downward and upward passes on two
threads. The JAX path (`impl="jax"`) is the portable fallback (every backend) and
gives the derivatives of both: the kernel's output is wrapped in a `jax.custom_jvp`
whose tangent is the JAX path's.

Paper: P15 (semi-global matching is one of its benchmarked methods).
"""

from __future__ import annotations

import functools
from typing import Literal

import jax
import jax.numpy as jnp
from jaxtyping import Array, Float

from jaxlab._core import as_array
from jaxlab._kernels.stereo import sgm_aggregate_cpu, sgm_disparity_cpu, sgm_kernel_available

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


def _aggregate_jax(cost, p1: float, p2: float, paths: int):
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


# mode 0: the aggregated volume; 1: sub-pixel disparities; 2: integer argmin disparities
def _reference(cost, p1: float, p2: float, paths: int, mode: int):
    agg = _aggregate_jax(cost, p1, p2, paths)
    if mode == 0:
        return agg
    if mode == 1:
        return subpixel_argmin(agg)
    return jnp.argmin(agg, axis=-1).astype(cost.dtype)


@functools.partial(jax.custom_jvp, nondiff_argnums=(1, 2, 3, 4))
def _kernel(cost, p1: float, p2: float, paths: int, mode: int):
    if mode == 0:
        return sgm_aggregate_cpu(cost, p1=p1, p2=p2, paths=paths)
    return sgm_disparity_cpu(cost, p1=p1, p2=p2, paths=paths, subpixel=mode == 1)


@_kernel.defjvp
def _kernel_jvp(p1, p2, paths, mode, primals, tangents):
    (cost,), (dcost,) = primals, tangents
    _, dout = jax.jvp(lambda c: _reference(c, p1, p2, paths, mode), (cost,), (dcost,))
    return _kernel(cost, p1, p2, paths, mode), dout


def _use_kernel(impl: str, cost: Array) -> bool:
    if impl not in ("auto", "cpu", "jax"):
        raise ValueError(f"impl: expected 'auto', 'cpu' or 'jax', received {impl!r}")
    if impl == "jax":
        return False
    ok = cost.dtype in (jnp.float32, jnp.float64) and sgm_kernel_available()
    if impl == "cpu":
        if not ok:
            raise ValueError(
                "impl: 'cpu' needs the C++ kernel (a C++ compiler) and a float32/float64 "
                f"cost, received {cost.dtype} (kernel available: {sgm_kernel_available()})"
            )
        return True
    return ok and jax.default_backend() == "cpu"


def sgm_aggregate(
    cost: Float[Array, "H W D"],
    p1: float = 8.0,
    p2: float = 32.0,
    paths: int = 8,
    *,
    impl: Literal["auto", "cpu", "jax"] = "auto",
) -> Float[Array, "H W D"]:
    """Sum of the path costs over 4 (horizontal, vertical) or 8 (plus diagonal) directions.

    `impl`: "jax" the `lax.scan` path (any backend); "cpu" the C++ kernel (CPU only);
    "auto" the kernel when the default backend is the CPU and it builds, else the JAX
    path. Both give the same values (the kernel's float sums may differ in the last
    bits, integer-valued costs are exact) and the same derivatives (the JAX path's).
    """
    cost, p1, p2 = _check_args(cost, p1, p2, paths)
    if _use_kernel(impl, cost):
        return _kernel(cost, p1, p2, paths, 0)
    return _aggregate_jax(cost, p1, p2, paths)


def _check_args(cost, p1, p2, paths: int) -> tuple[Array, float, float]:
    cost = check_cost("cost", cost)
    if paths not in (4, 8):
        raise ValueError(f"paths: expected 4 or 8, received {paths}")
    if not 0 <= p1 <= p2:
        raise ValueError(f"p1, p2: expected 0 <= p1 <= p2, received p1={p1}, p2={p2}")
    return cost, float(p1), float(p2)


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
    *,
    impl: Literal["auto", "cpu", "jax"] = "auto",
) -> Float[Array, "H W"]:
    """SGM disparity map (left image reference) from a matching-cost volume.

    `impl` as in `sgm_aggregate`; the C++ kernel then also takes the argmin (and the
    sub-pixel parabola of `subpixel_argmin`, in the same dtype) without writing the
    aggregated volume.
    """
    cost, p1, p2 = _check_args(cost, p1, p2, paths)
    mode = 1 if subpixel else 2
    if _use_kernel(impl, cost):
        return _kernel(cost, p1, p2, paths, mode)
    return _reference(cost, p1, p2, paths, mode)
