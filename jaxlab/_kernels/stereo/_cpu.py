"""`sgm_aggregate_cpu`: the SGM path aggregation as an XLA FFI custom call in C++.

The source `stereo_sgm.cc` lives in the repository's `kernels/stereo/` and ships inside
the wheel beside this module; it is compiled on first use (see `jaxlab._kernels._build`)
with `-march=native` (the library is cached per CPU model: the CPU's flags are part of
its name), then registered as an FFI target for the CPU platform. Without a compiler
`sgm_kernel_available()` is False and `jaxlab.stereo` uses its pure-JAX path.
"""

from __future__ import annotations

import functools
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np

from .._build import build_shared_library, cpu_tag, load_cpu_targets, source_dir

__all__ = [
    "build_sgm_kernel",
    "sgm_aggregate_cpu",
    "sgm_disparity_cpu",
    "sgm_kernel_available",
]

_SOURCE_NAME = "stereo_sgm.cc"
_TARGETS = {
    jnp.dtype(jnp.float32): ("jaxlab_stereo_sgm_f32", "StereoSgmF32"),
    jnp.dtype(jnp.float64): ("jaxlab_stereo_sgm_f64", "StereoSgmF64"),
}


def build_sgm_kernel(*, force: bool = False) -> Path:
    """Compile `stereo_sgm.cc` (cached); returns the shared library's path."""
    src = source_dir("stereo", [_SOURCE_NAME]) / _SOURCE_NAME
    return build_shared_library(
        "stereo_sgm",
        [src],
        flags=["-march=native", "-fopenmp-simd", "-fno-trapping-math"],
        tag_extra=cpu_tag(),
        force=force,
    )


@functools.cache
def _register() -> bool:
    return load_cpu_targets(build_sgm_kernel, dict(_TARGETS.values())) is not None


def sgm_kernel_available() -> bool:
    """Whether the C++ SGM aggregation could be built and registered in this process."""
    return _register()


def _check(cost, paths: int, threads: int) -> jnp.dtype:
    if not _register():
        raise RuntimeError("stereo SGM: the C++ kernel is unavailable (no compiler?)")
    dt = jnp.dtype(cost.dtype)
    if dt not in _TARGETS:
        raise ValueError(f"cost: expected float32 or float64, received {cost.dtype}")
    if cost.ndim < 3:
        raise ValueError(f"cost: expected shape (..., H, W, D), received {cost.shape}")
    if paths not in (4, 8):
        raise ValueError(f"paths: expected 4 or 8, received {paths}")
    if threads not in (0, 1, 2):
        raise ValueError(f"threads: expected 0, 1 or 2, received {threads}")
    return dt


def _call(cost, shape, *, p1: float, p2: float, paths: int, threads: int, mode: int):
    dt = _check(cost, paths, threads)
    call = jax.ffi.ffi_call(
        _TARGETS[dt][0], jax.ShapeDtypeStruct(shape, dt), vmap_method="broadcast_all"
    )
    return call(
        cost,
        p1=np.float64(p1),
        p2=np.float64(p2),
        paths=np.int32(paths),
        threads=np.int32(threads),
        mode=np.int32(mode),
    )


def sgm_aggregate_cpu(cost, *, p1: float, p2: float, paths: int = 8, threads: int = 0):
    """Sum of the SGM path costs of a float32 / float64 volume `(..., H, W, D)` (leading
    dimensions are a batch): the arithmetic of `jaxlab.stereo.sgm_aggregate`'s JAX path.

    `threads` 1 runs the two passes one after the other (bit-identical to the JAX path
    for any input); 2 runs them at once (float sums may then differ in the last bits;
    integer-valued costs stay exact); 0 picks 2 for large volumes on a machine with two
    CPUs or more. Float32 costs that are integers in [0, 4095 - p2] with integer p1, p2
    (census / Hamming costs) run in int16 arithmetic, exactly. CPU only; no
    differentiation rule (see `jaxlab.stereo`)."""
    return _call(cost, cost.shape, p1=p1, p2=p2, paths=paths, threads=threads, mode=0)


def sgm_disparity_cpu(
    cost, *, p1: float, p2: float, paths: int = 8, subpixel: bool = True, threads: int = 0
):
    """`(..., H, W)` disparities from the SGM-aggregated `cost` `(..., H, W, D)` without
    writing the aggregated volume: the first minimum over D of each pixel's sum and,
    with `subpixel`, the parabola vertex of `jaxlab.stereo.subpixel_argmin` in the same
    dtype (`threads`: see `sgm_aggregate_cpu`)."""
    return _call(
        cost,
        cost.shape[:-1],
        p1=p1,
        p2=p2,
        paths=paths,
        threads=threads,
        mode=1 if subpixel else 2,
    )
