"""`CpuScan`: the LAPLEX recurrence as an XLA FFI custom call in C++.

The C++ sources `laplex_scan.cc` (the scan), `laplex_fused.cc` (whole fused
operator passes, see `_fused.py`) and `laplex_plan.cc` (radix argsort + merge
ranks, `cpu_plan`) live in the repository's `kernels/laplex/` and ship inside the
wheel beside this module (`jaxlab/_kernels/laplex/`). On first use they are
compiled with the system C++ compiler against the FFI headers that jaxlib ships
(`jax.ffi.include_dir()`), into a per-user cache directory keyed by the source
hash and the jaxlib version, and registered as an FFI target for the CPU
platform. Compilation is atomic (temp file + rename), so concurrent processes
are safe. Without a compiler, `cpu_kernel_available()` is False and
`default_scan()` falls back to the pure-JAX `BlockedScan`.
"""

from __future__ import annotations

import functools
from pathlib import Path

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from .._build import build_shared_library, load_cpu_targets
from .._build import source_dir as _source_dir
from ._scan import AbstractScan

__all__ = ["CpuScan", "cpu_kernel_available", "build_cpu_kernel"]

_SOURCE_NAMES = ("laplex_scan.cc", "laplex_fused.cc", "laplex_plan.cc")
# headers: hashed into the cache key too, not compiled alone
_HEADER_NAMES = ("laplex_check.h", "laplex_mem.h", "laplex_par.h", "laplex_sort.h")
_TARGETS = {
    jnp.dtype(jnp.float32): ("laplex_scan_f32", "LaplexScanF32"),
    jnp.dtype(jnp.float64): ("laplex_scan_f64", "LaplexScanF64"),
    jnp.dtype(jnp.complex64): ("laplex_scan_c64", "LaplexScanC64"),
    jnp.dtype(jnp.complex128): ("laplex_scan_c128", "LaplexScanC128"),
}
_FUSED_SUFFIX = {
    jnp.dtype(jnp.float32): "F32",
    jnp.dtype(jnp.float64): "F64",
    jnp.dtype(jnp.complex64): "C64",
    jnp.dtype(jnp.complex128): "C128",
}


def fused_target(kind: str, dtype) -> str:
    """FFI target name of a fused pass for a storage dtype (`kind`: "apply", "sym",
    "symfresh", "symgrad" or "parts")."""
    return f"laplex_fused_{kind}_{_FUSED_SUFFIX[jnp.dtype(dtype)].lower()}"


def source_dir() -> Path:
    """The folder holding the LAPLEX C++ sources (wheel copy or `kernels/laplex/`)."""
    return _source_dir("laplex", _SOURCE_NAMES + _HEADER_NAMES)


def build_cpu_kernel(*, force: bool = False) -> Path:
    """Compile the C++ sources into one shared library (cached); returns its path.

    Raises `RuntimeError` with the compiler output when no compiler is found or
    compilation fails, and naming the folders looked in when the sources are missing.
    """
    d = source_dir()
    return build_shared_library(
        "laplex_scan",
        [d / f for f in _SOURCE_NAMES],
        [d / f for f in _HEADER_NAMES],
        flags=["-fno-trapping-math"],
        force=force,
    )


@functools.cache
def _register() -> bool:
    lib = load_cpu_targets(build_cpu_kernel, dict(_TARGETS.values()))
    if lib is None:
        return False
    for suffix in _FUSED_SUFFIX.values():
        for kind in ("Apply", "Parts", "Sym"):
            jax.ffi.register_ffi_target(
                f"laplex_fused_{kind.lower()}_{suffix.lower()}",
                jax.ffi.pycapsule(getattr(lib, f"LaplexFused{kind}{suffix}")),
                platform="cpu",
            )
    for suffix in ("F32", "F64"):
        for target, symbol in (
            ("laplex_plan", "LaplexPlan"),
            ("laplex_fused_symfresh", "LaplexFusedSymFresh"),
            ("laplex_fused_symgrad", "LaplexFusedSymGrad"),
        ):
            jax.ffi.register_ffi_target(
                f"{target}_{suffix.lower()}",
                jax.ffi.pycapsule(getattr(lib, f"{symbol}{suffix}")),
                platform="cpu",
            )
    return True


def cpu_kernel_available() -> bool:
    """Whether the C++ scan could be built and registered in this process."""
    return _register()


class CpuScan(AbstractScan):
    """One streaming C++ pass per direction (XLA FFI custom call on CPU).

    `scan_beta` (given `beta = alpha - 1`) accumulates in double precision for
    every storage dtype, so float32 operators with tiny decays stay accurate.

    Works under `jit` and `vmap` (batched dimensions are looped over inside the
    kernel). CPU only.

    `fused=True` (default) lets `jaxlab.laplex.matvec` replace its whole
    gather -> scans -> combine -> scatter pipeline by the fused C++ passes of
    `laplex_fused.cc` (its `fused_apply` / `fused_parts` calls);
    `fused=False` keeps the scan-by-scan path (the scans still run in C++).
    """

    fused: bool = eqx.field(static=True, default=True)

    def forward(self, alpha, x):
        return self(alpha, x)

    def __call__(self, alpha, x, *, reverse: bool = False):
        return self._call(alpha, x, reverse, 0)

    def scan_beta(self, beta, x, *, reverse: bool = False):
        return self._call(beta, x, reverse, 1)

    def _call(self, alpha, x, reverse, beta_form):
        if not _register():
            raise RuntimeError("CpuScan: the C++ kernel is unavailable (no compiler?)")
        dt = jnp.dtype(x.dtype)
        if dt not in _TARGETS or jnp.dtype(alpha.dtype) != dt:
            raise ValueError(
                f"CpuScan: alpha and x must share one of "
                f"{[str(d) for d in _TARGETS]}, got {alpha.dtype}, {x.dtype}"
            )
        name = _TARGETS[dt][0]
        call = jax.ffi.ffi_call(
            name, jax.ShapeDtypeStruct(x.shape, x.dtype), vmap_method="broadcast_all"
        )
        return call(alpha, x, reverse=np.int32(1 if reverse else 0), beta_form=np.int32(beta_form))
