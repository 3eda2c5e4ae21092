"""`q8matmul_cpu`: x @ dequantise(q, scale, offset).T with x quantised to int8 per block
of 32 (ggml's Q8_0) and integer dot products, as an XLA FFI custom call in C++.

The source `lm_q8matmul.cc` (with `lm_matmul.h`) lives in the repository's `kernels/lm/`
and ships inside the wheel beside this module; it is compiled on first use with
`-march=native -ffp-contract=off` (cached per CPU model), which picks the integer dot
product: AVX-512 VNNI `vpdpbusd` where the CPU has it, else AVX2 `vpmaddubsw` +
`vpmaddwd`, else a portable C++ loop. `portable=True` builds a second library with
`-DJAXLAB_LM_PORTABLE` (the C++ loop whatever the CPU) so the tests can check it too.
The math is in the C++ file's header and `jaxlab.lm.QuantWeight`'s docstring.
"""

from __future__ import annotations

from pathlib import Path

from ._ffi import QuantMatmulLibrary

__all__ = ["q8matmul_cpu", "q8matmul_kernel_available", "q8matmul_isa", "build_q8matmul_kernel"]

_LIB = QuantMatmulLibrary(
    "q8matmul", "lm_q8matmul.cc", "LmQ8MatmulF32", "LmQ8MatmulIsa", flags=("-ffp-contract=off",)
)


def build_q8matmul_kernel(*, portable: bool = False, force: bool = False) -> Path:
    """Compile `lm_q8matmul.cc` (cached); returns the shared library's path.

    `portable=True`: the portable C++ dot product whatever the CPU (`-DJAXLAB_LM_PORTABLE`).
    """
    return _LIB.build(portable=portable, force=force)


def q8matmul_kernel_available(*, portable: bool = False) -> bool:
    """Whether the int8-activation kernel could be built and registered in this process."""
    return _LIB.available(portable=portable)


def q8matmul_isa(*, portable: bool = False) -> str:
    """The integer dot product the built library uses: "avx512vnni", "avx2" or "portable"."""
    return _LIB.isa("q8matmul_isa", portable=portable)


def q8matmul_cpu(x, q, scale, offset, *, bits: int, layer=None, portable: bool = False):
    """(M, K) float32 x, quantised to int8 per block of 32, times the (N, K) weights
    `q * scale + offset`, transposed: (M, N) float32.

    `q` is (N, K) int8 (`bits=8`) or (N, K/2) uint8 holding two 4-bit levels per byte
    (`bits=4`, low nibble weight j, high nibble weight j + 16 of each block of 32);
    `scale` and `offset` are (N, K/32) float32; or a layer stack (L, N, K'), (L, N, K/32)
    with a scalar int32 `layer` (may be traced; no slice of the stack is copied, and an
    index outside [0, L) is an error of the call). Per row m and block b:
    `d = max|x| / 127`, `a = round(x * (1 / d))` (half away from zero), and
    `out[m, n] = sum_b d * (scale[n, b] * sum_j a q + offset[n, b] * sum_j a)`.
    CPU only; no batching rule and no derivative (callers fold batches into M).
    """
    return _LIB.call("q8matmul_cpu", x, q, scale, offset, bits=bits, layer=layer, portable=portable)
