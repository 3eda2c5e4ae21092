"""jaxlab: a JAX-first differentiable science toolkit.

Components live in subpackages (`jaxlab.lm`, `jaxlab.laplex`, ...); import the
one you need. `jaxlab.sweep` runs a function over a leading axis of seeds or configs
(vmapped, sharded over the devices when there are several).

The training driver every component's `fit` runs on is public here, for the types
those signatures name and for writing steps of your own: `AbstractStep` (`init(model,
key)`, `step(state, key)`), `run_steps`, `History`, `Checkpointer`, the loops
`ScanLoop`/`StepLoop` and the progress strategies `TqdmProgress`/`NoProgress`.
`jaxlab._core` holds the other helpers the components share; it is private.
"""

from ._core import AbstractLoop as AbstractLoop
from ._core import AbstractProgress as AbstractProgress
from ._core import AbstractStep as AbstractStep
from ._core import Checkpointer as Checkpointer
from ._core import History as History
from ._core import NoProgress as NoProgress
from ._core import ScanLoop as ScanLoop
from ._core import StepLoop as StepLoop
from ._core import TqdmProgress as TqdmProgress
from ._core import run_steps as run_steps
from ._core import sweep as sweep

__version__ = "0.1.0"
