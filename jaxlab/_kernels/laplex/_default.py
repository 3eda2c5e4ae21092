"""`default_scan`: pick the fastest scan strategy for the default backend."""

from __future__ import annotations

import jax

from ._cpu import CpuScan, cpu_kernel_available
from ._pallas import PallasScan
from ._scan import AbstractScan, BlockedScan

__all__ = ["default_scan"]


def default_scan(backend: str | None = None) -> AbstractScan:
    """`CpuScan` on CPU (if it compiles, else `BlockedScan`), `PallasScan` on GPU/TPU."""
    backend = backend or jax.default_backend()
    if backend == "cpu":
        return CpuScan() if cpu_kernel_available() else BlockedScan()
    return PallasScan()
