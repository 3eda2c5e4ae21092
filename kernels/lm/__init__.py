"""Custom kernels behind `jaxlab.lm`: the weight-only quantised matmul.

- `qmatmul_cpu(x, q, scale, offset, bits=)`: C++ XLA FFI custom call (CPU; compiled
  on first use), int8 or 4-bit weights with per-block-of-32 scales and offsets,
  dequantised in registers inside the matmul.
- `qmatmul_kernel_available()`: whether it could be built and registered.
"""

from ._cpu import build_qmatmul_kernel as build_qmatmul_kernel
from ._cpu import qmatmul_cpu as qmatmul_cpu
from ._cpu import qmatmul_kernel_available as qmatmul_kernel_available
