"""Custom kernels behind `jaxlab.lm`: the quantised matmuls.

- `qmatmul_cpu(x, q, scale, offset, bits=)`: C++ XLA FFI custom call (CPU; compiled
  on first use), int8 or 4-bit weights with per-block-of-32 scales and offsets,
  dequantised in registers inside the matmul (AVX-512F, AVX2 + FMA or portable C++).
- `qmatmul_kernel_available()`: whether it could be built and registered;
  `qmatmul_isa()`: the vector path compiled.
- `q8matmul_cpu(x, q, scale, offset, bits=)`: the same weights with x quantised to int8
  per block of 32 inside the call (ggml's Q8_0) and integer dot products (AVX-512 VNNI,
  AVX2 or portable C++); `q8matmul_kernel_available()`, `q8matmul_isa()`.

Both also take a layer stack (L, N, K') with a scalar int32 `layer=` (may be traced) and
read that layer in place (`_stack.py`: no slice of the stack is copied under `lax.scan`).
"""

from ._cpu import build_qmatmul_kernel as build_qmatmul_kernel
from ._cpu import qmatmul_cpu as qmatmul_cpu
from ._cpu import qmatmul_isa as qmatmul_isa
from ._cpu import qmatmul_kernel_available as qmatmul_kernel_available
from ._q8 import build_q8matmul_kernel as build_q8matmul_kernel
from ._q8 import q8matmul_cpu as q8matmul_cpu
from ._q8 import q8matmul_isa as q8matmul_isa
from ._q8 import q8matmul_kernel_available as q8matmul_kernel_available
