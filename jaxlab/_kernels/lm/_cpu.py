"""`qmatmul_cpu`: x @ dequantise(q, scale, offset).T as an XLA FFI custom call in C++.

The source `lm_qmatmul.cc` lives in the repository's `kernels/lm/` and ships inside
the wheel beside this module; it is compiled on first use (see `jaxlab._kernels._build`)
with `-march=native` (the library is cached per CPU model: the CPU's flags are part of
its name), then registered as an FFI target for the CPU
platform. Without a compiler `qmatmul_kernel_available()` is False and `jaxlab.lm`
uses its pure-JAX path.
"""

from __future__ import annotations

import functools
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np

from .._build import build_shared_library, cpu_tag, load_cpu_targets, source_dir

__all__ = ["qmatmul_cpu", "qmatmul_kernel_available", "build_qmatmul_kernel"]

_SOURCE_NAME = "lm_qmatmul.cc"
_HEADER_NAMES = ["lm_matmul.h"]
_TARGET = "jaxlab_lm_qmatmul_f32"


def build_qmatmul_kernel(*, force: bool = False) -> Path:
    """Compile `lm_qmatmul.cc` (cached); returns the shared library's path."""
    d = source_dir("lm", [_SOURCE_NAME, *_HEADER_NAMES])
    return build_shared_library(
        "lm_qmatmul",
        [d / _SOURCE_NAME],
        [d / h for h in _HEADER_NAMES],
        flags=["-march=native"],
        tag_extra=cpu_tag(),
        force=force,
    )


@functools.cache
def _register() -> bool:
    return load_cpu_targets(build_qmatmul_kernel, {_TARGET: "LmQMatmulF32"}) is not None


def qmatmul_kernel_available() -> bool:
    """Whether the C++ quantised matmul could be built and registered in this process."""
    return _register()


def qmatmul_cpu(x, q, scale, offset, *, bits: int):
    """(M, K) float32 x times the dequantised (N, K) weights, transposed: (M, N) float32.

    `q` is (N, K) int8 (`bits=8`) or (N, K/2) uint8 holding two 4-bit values per
    byte (`bits=4`, low nibble weight j, high nibble weight j + 16 of each block of
    32); `scale` and `offset` are (N, K/32) float32. CPU only; no batching rule
    (callers fold batches into M).
    """
    if not _register():
        raise RuntimeError("qmatmul_cpu: the C++ kernel is unavailable (no compiler?)")
    q = jax.lax.bitcast_convert_type(q, jnp.uint8) if q.dtype == jnp.int8 else q
    call = jax.ffi.ffi_call(_TARGET, jax.ShapeDtypeStruct((x.shape[0], q.shape[0]), jnp.float32))
    return call(x, q, scale, offset, bits=np.int32(bits))
