"""Custom kernels behind `jaxlab.stereo`: the semi-global matching path aggregation.

- `sgm_aggregate_cpu(cost, p1=, p2=, paths=, threads=)`: C++ XLA FFI custom call (CPU;
  compiled on first use), the 4- or 8-path SGM sum with SIMD over disparities and the
  downward / upward passes on two threads.
- `sgm_disparity_cpu(cost, ...)`: the same passes ending in the argmin (and sub-pixel
  parabola) of each pixel, without writing the aggregated volume.
- `sgm_kernel_available()`: whether it could be built and registered.
"""

from ._cpu import build_sgm_kernel as build_sgm_kernel
from ._cpu import sgm_aggregate_cpu as sgm_aggregate_cpu
from ._cpu import sgm_disparity_cpu as sgm_disparity_cpu
from ._cpu import sgm_kernel_available as sgm_kernel_available
