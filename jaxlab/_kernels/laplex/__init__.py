"""Custom kernels behind `jaxlab.laplex`: linear-recurrence scan strategies.

- `AssociativeScan`: `jax.lax.associative_scan` reference.
- `BlockedScan`: pure-JAX chunked scan (any backend).
- `CpuScan`: C++ XLA FFI custom call (CPU; compiled on first use).
- `fused_apply` / `fused_sym` / `fused_sym_fresh` / `fused_parts` (`fused_parts_separate`):
  whole LAPLEX operator passes fused in C++ (CPU); `fused_sym_grad`: the symmetric
  operator's cotangents in one pass.
- `cpu_plan`: the LAPLEX sort plan in C++ (radix argsort + merge ranks, CPU).
- `source_dir()`: where the C++ sources are (the wheel's copy, or `kernels/laplex/` of a checkout).
- `PallasScan`: chunked Pallas kernel (GPU/TPU; `interpret=True` on CPU).
- `PallasBlockScan` / `pallas_sym_matvec`: the symmetric real operator as reduce-then-scan
  Pallas kernels in the natural order (GPU via Triton, TPU via Mosaic); `pallas_sym_grad`:
  its cotangents by the same kind of kernels; `pallas_sym_matvec_phased`: the phased
  (complex) symmetric operator, and `pallas_sym_grad_phased` its cotangents (incl. the
  phase's). `jaxlab.laplex.matvec` runs the M != N operator (`t` not `s`), real or
  phased, and its gradient by the same kernels on the merged sequence of targets and
  sources.
- `default_scan()`: the fastest strategy available on the default backend;
  `scan_for_platform(device.platform)`: the same for a device's platform.
"""

from ._cpu import CpuScan as CpuScan
from ._cpu import build_cpu_kernel as build_cpu_kernel
from ._cpu import cpu_kernel_available as cpu_kernel_available
from ._cpu import source_dir as source_dir
from ._default import default_scan as default_scan
from ._default import scan_for_platform as scan_for_platform
from ._fused import cpu_plan as cpu_plan
from ._fused import fused_apply as fused_apply
from ._fused import fused_parts as fused_parts
from ._fused import fused_parts_separate as fused_parts_separate
from ._fused import fused_sym as fused_sym
from ._fused import fused_sym_fresh as fused_sym_fresh
from ._fused import fused_sym_grad as fused_sym_grad
from ._pallas import PallasScan as PallasScan
from ._pallas_block import PallasBlockScan as PallasBlockScan
from ._pallas_block import pallas_sym_matvec as pallas_sym_matvec
from ._pallas_block_grad import pallas_sym_grad as pallas_sym_grad
from ._pallas_block_phased import pallas_sym_matvec_phased as pallas_sym_matvec_phased
from ._pallas_block_phased_grad import pallas_sym_grad_phased as pallas_sym_grad_phased
from ._scan import AbstractScan as AbstractScan
from ._scan import AssociativeScan as AssociativeScan
from ._scan import BlockedScan as BlockedScan
