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

from pathlib import Path

from ._ffi import QuantMatmulLibrary

__all__ = ["qmatmul_cpu", "qmatmul_kernel_available", "qmatmul_isa", "build_qmatmul_kernel"]

_LIB = QuantMatmulLibrary("qmatmul", "lm_qmatmul.cc", "LmQMatmulF32", "LmQMatmulIsa", flags=())


def build_qmatmul_kernel(*, portable: bool = False, force: bool = False) -> Path:
    """Compile `lm_qmatmul.cc` (cached); returns the shared library's path.

    `portable=True`: the portable C++ loop whatever the CPU (`-DJAXLAB_LM_PORTABLE`).
    """
    return _LIB.build(portable=portable, force=force)


def qmatmul_kernel_available(*, portable: bool = False) -> bool:
    """Whether the C++ quantised matmul could be built and registered in this process."""
    return _LIB.available(portable=portable)


def qmatmul_isa(*, portable: bool = False) -> str:
    """The vector path the built library uses: "avx512", "avx2" or "portable"."""
    return _LIB.isa("qmatmul_isa", portable=portable)


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
    return _LIB.call("qmatmul_cpu", x, q, scale, offset, bits=bits, layer=layer, portable=portable)
