"""`default_scan`: pick the fastest scan strategy for the default backend (or a named
platform); `scan_for_platform`: the same choice for a platform a device reports."""

from __future__ import annotations

import jax

from ._cpu import CpuScan, cpu_kernel_available
from ._pallas import PallasScan
from ._scan import AbstractScan, BlockedScan

__all__ = ["default_scan", "scan_for_platform"]

_PLATFORMS = frozenset({"cpu", "gpu", "cuda", "rocm", "tpu", "METAL"})


def default_scan(backend: str | None = None) -> AbstractScan:
    """`CpuScan` on CPU (if it compiles, else `BlockedScan`), `PallasScan` on GPU/TPU.

    `backend`: None (the default backend) or a platform name such as "cpu", "gpu",
    "cuda", "rocm", "tpu" (a `jax.Device.platform`); anything else is a ValueError
    naming it (an unknown name used to select `PallasScan` silently); the default
    backend is taken as JAX reports it."""
    if backend is not None and (not isinstance(backend, str) or not backend.strip()):
        raise ValueError(f"backend: expected None or a platform name, received {backend!r:.60}")
    if backend is not None and backend not in _PLATFORMS:
        raise ValueError(
            f"backend: expected one of {sorted(_PLATFORMS)} or None, received {backend!r:.60}"
        )
    return scan_for_platform(backend or jax.default_backend())


def scan_for_platform(platform: str) -> AbstractScan:
    """`CpuScan` (or `BlockedScan` without a compiler) for "cpu", `PallasScan` for any
    other platform a JAX device reports (not validated: plugins name their own)."""
    if platform == "cpu":
        return CpuScan() if cpu_kernel_available() else BlockedScan()
    return PallasScan()
