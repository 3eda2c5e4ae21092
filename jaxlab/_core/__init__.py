"""Tiny shared helpers: validation, atomic serialisation, device sweeps."""

from ._checkpoint import atomic_write as atomic_write
from ._checkpoint import load_checkpoint as load_checkpoint
from ._checkpoint import save_checkpoint as save_checkpoint
from ._checkpoint import write_json as write_json
from ._optim import optimizer_update as optimizer_update
from ._sweep import sweep as sweep
from ._validate import check_array as check_array
from ._validate import check_finite as check_finite
from ._validate import check_positive_int as check_positive_int
from ._validate import check_range as check_range
