"""LAPLEX: exact trainable (phased) Laplace-kernel operators (P9).

Example: `examples/laplex.py` (a jupytext notebook; rendered in the docs site).
"""

from jaxlab._kernels.laplex import AbstractScan as AbstractScan
from jaxlab._kernels.laplex import AssociativeScan as AssociativeScan
from jaxlab._kernels.laplex import BlockedScan as BlockedScan
from jaxlab._kernels.laplex import CpuScan as CpuScan
from jaxlab._kernels.laplex import PallasBlockScan as PallasBlockScan
from jaxlab._kernels.laplex import PallasScan as PallasScan
from jaxlab._kernels.laplex import cpu_kernel_available as cpu_kernel_available
from jaxlab._kernels.laplex import default_scan as default_scan

from ._dense import dense_matrix as dense_matrix
from ._gram import LaplexGram as LaplexGram
from ._linalg import conjugate_gradient as conjugate_gradient
from ._linalg import lanczos as lanczos
from ._linalg import lanczos_sqrt_apply as lanczos_sqrt_apply
from ._linalg import slq_logdet as slq_logdet
from ._linear import LaplexLinear as LaplexLinear
from ._matvec import matmat as matmat
from ._matvec import matvec as matvec
from ._plan import LaplexPlan as LaplexPlan
from ._plan import make_plan as make_plan
from ._plan import plan_is_valid as plan_is_valid
from ._plan import update_plan as update_plan
from ._sharded import sharded_matvec as sharded_matvec
from ._train import GramStep as GramStep
from ._train import HeadStep as HeadStep
from ._train import fit_gram as fit_gram
from ._train import fit_head as fit_head
