"""Small shared helpers: validation, atomic serialisation, the training driver,
progress strategies, data-wheel lookup, device sweeps."""

from ._checkpoint import Checkpointer as Checkpointer
from ._checkpoint import atomic_write as atomic_write
from ._checkpoint import load_checkpoint as load_checkpoint
from ._checkpoint import save_checkpoint as save_checkpoint
from ._checkpoint import write_json as write_json
from ._loop import AbstractLoop as AbstractLoop
from ._loop import AbstractStep as AbstractStep
from ._loop import History as History
from ._loop import ScanLoop as ScanLoop
from ._loop import StepLoop as StepLoop
from ._loop import run_steps as run_steps
from ._optim import optimizer_update as optimizer_update
from ._progress import AbstractProgress as AbstractProgress
from ._progress import NoProgress as NoProgress
from ._progress import TqdmProgress as TqdmProgress
from ._progress import progress_bar as progress_bar
from ._rng import numpy_rng as numpy_rng
from ._rng import sklearn_seed as sklearn_seed
from ._sweep import sweep as sweep
from ._validate import check_array as check_array
from ._validate import check_finite as check_finite
from ._validate import check_positive_int as check_positive_int
from ._validate import check_range as check_range
from ._wheels import wheel_file as wheel_file
