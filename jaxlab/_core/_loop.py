"""The one training driver: `(init, step)` strategy objects run by `run_steps`.

Every iterative fit in jaxlab is a step object (optax/diffrax style): a pure, jittable
`step(state, key) -> (state, aux)` plus `init(model, key) -> state`. `run_steps` runs
it in jitted chunks and fixes the semantics once, for every component:

- the key of step `i` is `jax.random.fold_in(key, i)`, so results do not depend on the
  chunk size (`lax.scan` chunks or stepwise calls, see `ScanLoop`/`StepLoop`);
- the step counter and the history so far live in the checkpoint, so a resumed run
  equals an uninterrupted one bit for bit, and `History` always has `steps` rows;
- the compiled chunk is cached by the driver (`equinox.filter_jit` on the step object:
  its array fields are traced, everything else is static);
- `stop(state)` is checked after every chunk (certification, early stopping);
- progress is a strategy (`NoProgress()` by default; `TqdmProgress()` in experiments).

How a run is driven (chunk size, checkpointer, progress, early stop, loop) is one
`Driver` value, passed as `driver=` to `run_steps` and to every `fit`/`train_*` wrapper,
so the wrappers do not re-declare those options one by one.
"""

from __future__ import annotations

import abc
import dataclasses
from collections.abc import Callable
from typing import Any, Generic, TypeVar

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from ._checkpoint import Checkpointer
from ._progress import AbstractProgress, NoProgress
from ._repr import short_repr
from ._validate import check_memory, check_positive_int, check_size

__all__ = [
    "MAX_RUN_STEPS",
    "check_steps",
    "AbstractStep",
    "AbstractLoop",
    "ScanLoop",
    "StepLoop",
    "Driver",
    "History",
    "run_steps",
]

State = TypeVar("State")

# The most steps one `run_steps` call (and so every `fit`/`train_*` wrapper) accepts:
# 10**7 steps is far beyond any run in jaxlab (the longest are ~10**5) and, at a
# millisecond a step, already hours; a larger `steps` (10**9 by mistake) would run
# without bound, so it is refused before the step is built or anything compiles.
MAX_RUN_STEPS = 10_000_000


def check_steps(name: str, steps: Any) -> int:
    """A run's step (or epoch) count: an integer in [1, `MAX_RUN_STEPS`], as `int`.

    Booleans, floats, strings and None raise, as does a count above the cap: a
    `ValueError` naming the argument `name` (`"steps"`, `"n_steps"`, `"epochs"`). Wrappers
    call it before building their step, `run_steps` calls it again."""
    return check_size(name, steps, cap=MAX_RUN_STEPS, why="MAX_RUN_STEPS, the driver's cap")


class AbstractStep(eqx.Module, Generic[State]):
    """A training step: `init(model, key) -> state` and `step(state, key) -> (state, aux)`.

    Subclasses are `equinox.Module`s: static configuration (the optimiser, shapes,
    flax modules) as static fields, data arrays as ordinary fields (traced, so new data
    of the same shape does not recompile). `step` must be pure and jittable; `aux` is
    a dict of scalars or small arrays, conventionally with a `"loss"` entry.
    """

    @abc.abstractmethod
    def init(self, model: Any, key: jax.Array) -> State:
        """The training state (parameters, optimiser state, ...) to start from."""

    @abc.abstractmethod
    def step(self, state: State, key: jax.Array) -> tuple[State, Any]:
        """One update: the new state and this step's auxiliary outputs."""


@dataclasses.dataclass(frozen=True)
class History:
    """What `run_steps` records per step.

    - `aux`: name -> `(steps, ...)` NumPy array of the step's auxiliary outputs; rows of
      steps that did not run (early stop) are NaN for floating entries, 0 otherwise.
    - `steps_done`: how many steps ran (`< steps` only after `stop` fired).
    """

    __repr__ = short_repr  # arrays as dtype[shape], long sequences cut

    aux: dict[str, np.ndarray]
    steps_done: int

    @property
    def losses(self) -> np.ndarray:
        """`aux["loss"]`: the per-step loss, `(steps,)`."""
        if "loss" not in self.aux:
            raise KeyError("this step's aux has no 'loss' entry; see History.aux")
        return self.aux["loss"]


class AbstractLoop(eqx.Module):
    """How a chunk of `n` steps is executed (the results are the same either way)."""

    @abc.abstractmethod
    def run(
        self, step: AbstractStep, state: Any, key: jax.Array, start: int, n: int
    ) -> tuple[Any, Any]:
        """Steps `start .. start + n - 1`; returns the state and stacked aux."""


@eqx.filter_jit
def _scan_chunk(step, state, key, start, n):
    def body(s, i):
        return step.step(s, jax.random.fold_in(key, i))

    return jax.lax.scan(body, state, start + jnp.arange(n, dtype=jnp.int32))


@eqx.filter_jit
def _one_step(step, state, key, i):
    return step.step(state, jax.random.fold_in(key, i))


class ScanLoop(AbstractLoop):
    """A chunk is one jitted `lax.scan` (the default: one dispatch per chunk)."""

    def run(self, step, state, key, start, n):
        return _scan_chunk(step, state, key, jnp.asarray(start, jnp.int32), n)


class StepLoop(AbstractLoop):
    """Each step is one jitted call driven from Python.

    For models whose ops XLA:CPU runs much slower inside a `lax.scan` body
    (convolutions), at the cost of one dispatch per step.
    """

    def run(self, step, state, key, start, n):
        auxes = []
        for i in range(start, start + n):
            state, aux = _one_step(step, state, key, jnp.asarray(i, jnp.int32))
            auxes.append(aux)
        return state, jax.tree_util.tree_map(lambda *xs: jnp.stack(xs), *auxes)


class _DefaultChunk(int):
    """The `Driver`'s default chunk (100): an int that remembers it was not chosen, so a
    wrapper's natural chunk replaces it and an explicit `chunk=100` is kept."""

    def __repr__(self) -> str:
        return f"{int(self)}"


_DEFAULT_CHUNK = _DefaultChunk(100)


@dataclasses.dataclass(frozen=True)
class Driver:
    """How `run_steps` drives a run: chunking, checkpoints, progress, early stop, loop.

    One value for everything that is not the training problem itself, passed as
    `driver=` to `run_steps` and to every `fit`/`train_*` wrapper (the optimiser is the
    wrapper's own `optimizer=` argument). `Driver()` is the plain default: chunks of
    100 steps, no checkpoint, no progress, no early stop, `ScanLoop()`.

    **Arguments:**

    - `chunk`: steps per jitted chunk (a positive int). It does not change the results,
      only dispatch and how often `stop`, `progress` and the checkpointer are consulted
      (one caveat: XLA compiles a one-step scan without its loop, which can change the
      last bit). Wrappers whose step has a natural chunk (an epoch) use their own when
      this is left out (an explicit `chunk=100` is kept).
    - `checkpointer`: a `Checkpointer` or None; saves `(header, state, history)` every
      `checkpointer.every` steps (every chunk when None) and at the end; with
      `resume=True` the run continues from its file.
    - `progress`: a progress strategy (`AbstractProgress`) or None (`NoProgress()`).
    - `stop`: `stop(state) -> bool` or None, checked after each chunk; True ends the run
      for good (recorded in the checkpoint). Wrappers whose step stops by itself
      (certification, validation) combine theirs with this one.
    - `loop`: an `AbstractLoop` (`ScanLoop()`, `StepLoop()`) or None (the wrapper's
      choice; `ScanLoop()` in `run_steps`).

    `driver.replace(chunk=10)` returns a copy with some fields changed
    (`dataclasses.replace`).
    """

    chunk: int = _DEFAULT_CHUNK
    checkpointer: Checkpointer | None = None
    progress: AbstractProgress | None = None
    stop: Callable[[Any], bool] | None = None
    loop: AbstractLoop | None = None

    def __post_init__(self):
        if not isinstance(self.chunk, _DefaultChunk):
            object.__setattr__(self, "chunk", check_positive_int("chunk", self.chunk))
        for name, kind in (
            ("checkpointer", Checkpointer),
            ("progress", AbstractProgress),
            ("loop", AbstractLoop),
        ):
            value = getattr(self, name)
            if value is not None and not isinstance(value, kind):
                raise ValueError(
                    f"{name}: expected a {kind.__name__} or None, received {type(value).__name__}"
                )
        if self.stop is not None and not callable(self.stop):
            raise ValueError(
                f"stop: expected a callable stop(state) -> bool or None, "
                f"received {type(self.stop).__name__}"
            )

    def replace(self, **changes: Any) -> Driver:
        """A copy with the named fields changed (validated again)."""
        return dataclasses.replace(self, **changes)


def driver_for(
    driver: Driver | None,
    *,
    chunk: int | None = None,
    loop: AbstractLoop | None = None,
    stop: Callable[[Any], bool] | None = None,
) -> Driver:
    """The `Driver` a `fit` wrapper runs: the caller's `driver` (`Driver()` when None)
    with the wrapper's own defaults filled in.

    `chunk` (the wrapper's natural chunk: an epoch, the whole run) replaces the driver's
    chunk when the caller left it out (an explicit `Driver(chunk=100)` is kept); `loop`
    is used when the driver names none; `stop` (the wrapper's own: certification, its
    epochs' end) is combined with the driver's (the run stops when either says so; both
    are called).
    """
    driver = Driver() if driver is None else driver
    if not isinstance(driver, Driver):
        raise ValueError(f"driver: expected a Driver or None, received {type(driver).__name__}")
    changes: dict[str, Any] = {}
    if chunk is not None and isinstance(driver.chunk, _DefaultChunk):
        changes["chunk"] = chunk
    if loop is not None and driver.loop is None:
        changes["loop"] = loop
    if stop is not None:
        if driver.stop is None:
            changes["stop"] = stop
        else:
            user_stop = driver.stop

            def both(state, ours=stop, theirs=user_stop):
                a = bool(ours(state))
                b = bool(theirs(state))
                return a or b

            changes["stop"] = both
    return driver.replace(**changes) if changes else driver


def _key_data(key: jax.Array) -> jax.Array:
    if jnp.issubdtype(key.dtype, jax.dtypes.prng_key):
        return jax.random.key_data(key)
    return jnp.asarray(key)


def _check_aux(aux: Any) -> dict[str, Any]:
    if not isinstance(aux, dict):
        raise ValueError(f"step: aux must be a dict of arrays, received {type(aux).__name__}")
    return aux


def _empty_history(aux_shapes: Any, steps: int) -> dict[str, np.ndarray]:
    per_step = sum(
        float(np.prod(sd.shape)) * np.dtype(sd.dtype).itemsize
        for sd in _check_aux(aux_shapes).values()
    )
    # one row per step of every aux entry: a huge `steps` is refused before allocation
    check_memory("steps", steps * per_step)
    out = {}
    for name, sd in _check_aux(aux_shapes).items():
        dtype = np.dtype(sd.dtype)
        fill = np.nan if np.issubdtype(dtype, np.inexact) else 0
        out[name] = np.full((steps, *sd.shape), fill, dtype)
    return out


def run_steps(
    step: AbstractStep[State],
    state: State,
    *,
    key: jax.Array,
    steps: int,
    driver: Driver | None = None,
) -> tuple[State, History]:
    """Run `steps` steps of `step` from `state`; checkpoint, resume, stop early.

    **Arguments:**

    - `step`: the step object (`AbstractStep`).
    - `state`: the initial state, usually `step.init(model, key)`; on resume it is the
      template the checkpoint is loaded into.
    - `key`: PRNG key; step `i` uses `jax.random.fold_in(key, i)` (keyword-only).
    - `steps`: total number of steps, an integer in [1, `MAX_RUN_STEPS`] (10**7; a
      larger count raises a `ValueError` naming `steps` before anything runs).
    - `driver`: a `Driver` (`Driver()` when None): the chunk size, the checkpointer
      (saves `(header, state, history)`, the header holding steps, key and step count;
      a checkpoint written with another key or another `steps` raises `ValueError`),
      the progress strategy, the early `stop(state)` and the loop (`ScanLoop()` when
      None).

    **Returns:** `(state, history)`, `history.aux[name]` of shape `(steps, ...)`.
    """
    steps = check_steps("steps", steps)
    if not isinstance(step, AbstractStep):
        raise ValueError(f"step: expected an AbstractStep, received {type(step).__name__}")
    driver = Driver() if driver is None else driver
    if not isinstance(driver, Driver):
        raise ValueError(f"driver: expected a Driver or None, received {type(driver).__name__}")
    chunk, checkpointer, progress = driver.chunk, driver.checkpointer, driver.progress
    stop, loop = driver.stop, driver.loop
    progress = NoProgress() if progress is None else progress
    loop = ScanLoop() if loop is None else loop
    every = chunk if checkpointer is None or checkpointer.every is None else checkpointer.every

    history: dict[str, np.ndarray] | None = None  # allocated from the first chunk's aux
    kdata = np.asarray(_key_data(key))
    done = 0
    stopped = False

    def save():
        if checkpointer is not None and history is not None:
            header = (
                jnp.asarray(steps, jnp.int32),
                jnp.asarray(kdata),
                jnp.asarray(done, jnp.int32),
                jnp.asarray(stopped),
            )
            checkpointer.save((header, state, {k: jnp.asarray(v) for k, v in history.items()}))

    if checkpointer is not None and checkpointer.resume and checkpointer.exists():
        # Tracing once more for the shapes is only needed to read a checkpoint back.
        _, aux_shapes = eqx.filter_eval_shape(step.step, state, key)
        history = _empty_history(aux_shapes, steps)
        header_like = (
            jnp.asarray(0, jnp.int32),
            jnp.asarray(kdata),
            jnp.asarray(0, jnp.int32),
            jnp.asarray(False),
        )
        # The header comes first in the file: read it alone to say what does not match.
        steps_a, kd, _, _ = checkpointer.load(header_like)
        if int(steps_a) != steps:
            raise ValueError(
                f"checkpoint {checkpointer.path} was written for steps="
                f"{int(steps_a)}, this run has steps={steps}"
            )
        if not np.array_equal(np.asarray(kd), kdata):
            raise ValueError(f"checkpoint {checkpointer.path} was written with another key")
        like = (header_like, state, {k: jnp.asarray(v) for k, v in history.items()})
        (_, _, done_a, stopped_a), state, hist = checkpointer.load(like)
        history = {k: np.array(v) for k, v in hist.items()}
        done, stopped = int(done_a), bool(stopped_a)

    progress.start(steps, done)
    try:
        while done < steps and not stopped:
            next_save = (done // every + 1) * every
            n = min(chunk, steps - done, next_save - done)
            state, aux = loop.run(step, state, key, done, n)
            aux = jax.device_get(aux)
            if history is None:
                history = _empty_history(
                    {
                        k: jax.ShapeDtypeStruct(np.shape(v)[1:], np.asarray(v).dtype)
                        for k, v in _check_aux(aux).items()
                    },
                    steps,
                )
            for name, v in aux.items():
                history[name][done : done + n] = v
            done += n
            if stop is not None and bool(stop(state)):
                stopped = True
            if done % every == 0 or done == steps or stopped:
                save()
            last = aux.get("loss")  # per-step loss; its mean when a step has several (folds)
            progress.update(n, None if last is None else float(np.mean(np.asarray(last)[-1])))
    finally:
        progress.close()
    assert history is not None  # steps >= 1 ran, or the checkpoint held them
    return state, History(aux=history, steps_done=done)
