"""jaxlab: a JAX-first differentiable science toolkit.

Components live in subpackages (`jaxlab.lm`, `jaxlab.laplex`, ...); import the
one you need. `jaxlab.sweep` runs a function over a leading axis of seeds or configs
(vmapped, sharded over the devices when there are several, over every process's devices
in a multi-host job); `jaxlab.process_slice` gives one process its block of a work list.

The training driver every component's `fit` runs on is public here, for the types
those signatures name and for writing steps of your own: `AbstractStep` (`init(model,
key)`, `step(state, key)`), `run_steps`, `Driver` (chunk, checkpointer, progress, early
stop and loop of a run: the `driver=` of `run_steps` and of every `fit`), `History`,
`Checkpointer`, the loops
`ScanLoop`/`StepLoop`, early stopping on a validation loss (`ValidatedStep`,
`ValidatedState`) and the progress strategies `TqdmProgress`/`NoProgress` (and
`progress_bar` for loops that are not training steps). Beside it: pytree checkpoints
(`save_checkpoint`/`load_checkpoint`), atomic JSON (`write_json`) and host-side
randomness drawn from a JAX key (`numpy_rng`, `sklearn_seed`). `jaxlab.data.wheel_file`
locates the files of the installed data wheels. `jaxlab._core` holds the other helpers
the components share; it is private.
"""

from ._core import MAX_RUN_STEPS as MAX_RUN_STEPS
from ._core import AbstractLoop as AbstractLoop
from ._core import AbstractProgress as AbstractProgress
from ._core import AbstractStep as AbstractStep
from ._core import Checkpointer as Checkpointer
from ._core import Driver as Driver
from ._core import History as History
from ._core import NoProgress as NoProgress
from ._core import ScanLoop as ScanLoop
from ._core import StepLoop as StepLoop
from ._core import TqdmProgress as TqdmProgress
from ._core import ValidatedState as ValidatedState
from ._core import ValidatedStep as ValidatedStep
from ._core import load_checkpoint as load_checkpoint
from ._core import numpy_rng as numpy_rng
from ._core import process_slice as process_slice
from ._core import progress_bar as progress_bar
from ._core import run_steps as run_steps
from ._core import save_checkpoint as save_checkpoint
from ._core import sklearn_seed as sklearn_seed
from ._core import sweep as sweep
from ._core import write_json as write_json

__version__ = "0.1.0"
