"""`qmatmul_cpu`: x @ dequantise(q, scale, offset).T as an XLA FFI custom call in C++.

The source `lm_qmatmul.cc` lives in the repository's `kernels/lm/` and ships inside
the wheel beside this module; it is compiled on first use (see `jaxlab._kernels._build`)
with `-march=native` (the library is cached per CPU model: the CPU's flags are part of
its name), then registered as an FFI target for the CPU platform. `-march=native` picks
the vector path: AVX-512F where the CPU has it, else AVX2 + FMA, else a portable C++
loop; `portable=True` builds a second library with `-DJAXLAB_LM_PORTABLE` (the C++ loop
whatever the CPU) so the tests can check it too, and `qmatmul_isa()` names the path a
library compiled. Without a compiler `qmatmul_kernel_available()` is False and
`jaxlab.lm` uses its pure-JAX path.
"""

from __future__ import annotations

import ctypes
import functools
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np

from .._build import build_shared_library, cpu_tag, load_cpu_targets, source_dir
from ._stack import stack_layer

__all__ = ["qmatmul_cpu", "qmatmul_kernel_available", "qmatmul_isa", "build_qmatmul_kernel"]

_SOURCE_NAME = "lm_qmatmul.cc"
_HEADER_NAMES = ["lm_matmul.h"]


def _target(portable: bool) -> str:
    return "jaxlab_lm_qmatmul_portable_f32" if portable else "jaxlab_lm_qmatmul_f32"


def build_qmatmul_kernel(*, portable: bool = False, force: bool = False) -> Path:
    """Compile `lm_qmatmul.cc` (cached); returns the shared library's path.

    `portable=True`: the portable C++ loop whatever the CPU (`-DJAXLAB_LM_PORTABLE`).
    """
    d = source_dir("lm", [_SOURCE_NAME, *_HEADER_NAMES])
    flags = ["-march=native"]
    return build_shared_library(
        "lm_qmatmul_portable" if portable else "lm_qmatmul",
        [d / _SOURCE_NAME],
        [d / h for h in _HEADER_NAMES],
        flags=[*flags, "-DJAXLAB_LM_PORTABLE"] if portable else flags,
        tag_extra=cpu_tag(),
        force=force,
    )


@functools.cache
def _register(portable: bool = False) -> ctypes.CDLL | None:
    return load_cpu_targets(
        functools.partial(build_qmatmul_kernel, portable=portable),
        {_target(portable): "LmQMatmulF32"},
    )


def qmatmul_kernel_available(*, portable: bool = False) -> bool:
    """Whether the C++ quantised matmul could be built and registered in this process."""
    return _register(portable) is not None


def qmatmul_isa(*, portable: bool = False) -> str:
    """The vector path the built library uses: "avx512", "avx2" or "portable"."""
    lib = _register(portable)
    if lib is None:
        raise RuntimeError("qmatmul_isa: the C++ kernel is unavailable (no compiler?)")
    fn = lib.LmQMatmulIsa
    fn.restype = ctypes.c_char_p
    return fn().decode()


def qmatmul_cpu(x, q, scale, offset, *, bits: int, layer=None, portable: bool = False):
    """(M, K) float32 x times the dequantised (N, K) weights, transposed: (M, N) float32.

    `q` is (N, K) int8 (`bits=8`) or (N, K/2) uint8 holding two 4-bit values per
    byte (`bits=4`, low nibble weight j, high nibble weight j + 16 of each block of
    32); `scale` and `offset` are (N, K/32) float32. A layer stack q (L, N, K') with
    scale/offset (L, N, K/32) and a scalar int32 `layer` (may be traced) multiplies layer
    `layer` without slicing the stack (no copy under `lax.scan`; an index outside [0, L)
    is an error of the call). `portable=True` runs the portable
    C++ build (for tests). CPU only; no batching rule (callers fold batches into M).
    """
    if _register(portable) is None:
        raise RuntimeError("qmatmul_cpu: the C++ kernel is unavailable (no compiler?)")
    if jnp.dtype(q.dtype) not in (jnp.int8, jnp.uint8):
        raise ValueError(f"q: expected int8 or uint8 levels, received {jnp.dtype(q.dtype)}")
    layer = stack_layer("qmatmul_cpu", q, scale, offset, layer)
    out = jax.ShapeDtypeStruct((x.shape[0], q.shape[-2]), jnp.float32)
    call = jax.ffi.ffi_call(_target(portable), out)
    return call(x, q, scale, offset, layer, bits=np.int32(bits))
