"""Training shared by HOPSE and HOMP: pure `(init, epoch)` over padded batches.

`Trainer.init(model)` returns a `TrainState` (trainable leaves + optimiser state);
`Trainer.epoch(state, data, targets, weights, key)` runs one shuffled epoch as a
`lax.scan` over mini-batches and is `jit`/`vmap` friendly (e.g. vmap over the
folds of a cross-validation with per-fold `weights`). `HopseStep` makes one epoch a
step of the training driver `jaxlab.run_steps` and `fit` runs it (checkpoints, resume, progress).

Paper: P18, HOPSE (higher-order positional and structural encodings).
"""

from __future__ import annotations

import equinox as eqx
import jax
import jax.numpy as jnp
import optax
from jaxtyping import Array, Float, Int, PRNGKeyArray, PyTree

from jaxlab._core import (
    AbstractStep,
    Driver,
    History,
    StepLoop,
    as_array,
    check_positive_int,
    check_steps,
    driver_for,
    optimizer_update,
    run_steps,
)

from ._arrays import ComplexArrays

__all__ = ["Trainer", "TrainState", "HopseStep", "fit", "predict", "LOSSES"]

LOSSES = ("cross_entropy", "l1", "mse")
"""The losses `Trainer` accepts."""


class TrainState(eqx.Module):
    """Trainable parameters, optimiser state and step count."""

    params: PyTree
    opt_state: PyTree
    step: Int[Array, ""]


def _loss_per_graph(loss: str, out: Float[Array, "b o"], y: Array) -> Float[Array, " b"]:
    if loss == "cross_entropy":
        return optax.softmax_cross_entropy_with_integer_labels(out, y.astype(jnp.int32))
    pred = out[:, 0]
    if loss == "l1":
        return jnp.abs(pred - y)
    return (pred - y) ** 2


class Trainer(eqx.Module):
    """Mini-batch trainer (AdamW, gradient clipping) for graph-level targets (P18).

    **Arguments:**

    - `model`: the HOPSE/HOMP model to train; its non-trainable part (everything but
      inexact arrays) is kept in the `static` field, the trainable part goes to `init`.
    - `loss`: `"cross_entropy"` (integer class targets), `"l1"` or `"mse"` (regression).
    - `batch_size`: graphs per step (the last incomplete batch of an epoch is dropped).
    - `learning_rate`, `weight_decay`: AdamW settings (after clipping the global norm to 1).
    - `optimizer`: an optax transformation used instead of the AdamW default.
    """

    static: PyTree = eqx.field(static=True)
    loss: str = eqx.field(static=True)
    batch_size: int = eqx.field(static=True)
    optimizer: optax.GradientTransformation = eqx.field(static=True)

    def __init__(
        self,
        model: eqx.Module,
        *,
        loss: str,
        batch_size: int = 32,
        learning_rate: float = 1e-3,
        weight_decay: float = 0.0,
        optimizer: optax.GradientTransformation | None = None,
    ):
        if loss not in LOSSES:
            raise ValueError(f"loss: expected one of {LOSSES}, received {loss!r}")
        if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
            raise ValueError(f"batch_size: expected a positive integer, received {batch_size!r}")
        if not learning_rate > 0:
            raise ValueError(f"learning_rate: expected > 0, received {learning_rate!r}")
        self.static = eqx.partition(model, eqx.is_inexact_array)[1]
        self.loss = loss
        self.batch_size = batch_size
        if optimizer is None:
            optimizer = optax.chain(
                optax.clip_by_global_norm(1.0),
                optax.adamw(learning_rate, weight_decay=weight_decay),
            )
        self.optimizer = optimizer

    def init(self, model: eqx.Module) -> TrainState:
        params = eqx.filter(model, eqx.is_inexact_array)
        return TrainState(params, self.optimizer.init(params), jnp.zeros((), jnp.int32))

    def model(self, state: TrainState) -> eqx.Module:
        return eqx.combine(state.params, self.static)

    def batch_loss(self, params: PyTree, batch: ComplexArrays, y: Array, w: Array) -> Array:
        model = eqx.combine(params, self.static)
        out = jax.vmap(model)(batch)
        per = _loss_per_graph(self.loss, out, y)
        return jnp.sum(per * w) / jnp.maximum(jnp.sum(w), 1.0)

    def epoch(
        self,
        state: TrainState,
        data: ComplexArrays,
        targets: Array,
        weights: Float[Array, " g"],
        key: PRNGKeyArray,
    ) -> tuple[TrainState, Float[Array, ""]]:
        """One epoch over a stacked data set of `g` complexes.

        **Arguments:**
            state: from `init`.
            data: stacked `ComplexArrays` (leading axis `g`).
            targets: `[g]` class ids or regression values.
            weights: `[g]` per-graph loss weights (0 excludes a graph, e.g. a CV fold).
            key: shuffling key.

        **Returns:**
            `(new_state, mean training loss over the epoch's batches)`.
        """
        g = targets.shape[0]
        nb = max(1, g // self.batch_size)
        bs = min(self.batch_size, g)
        perm = jax.random.permutation(key, g)[: nb * bs].reshape(nb, bs)

        def step(st: TrainState, idx):
            batch = jax.tree_util.tree_map(lambda a: a[idx], data)
            value, grads = jax.value_and_grad(self.batch_loss)(
                st.params, batch, targets[idx], weights[idx]
            )
            updates, opt_state = optimizer_update(self.optimizer, grads, st.opt_state, st.params)
            params = eqx.apply_updates(st.params, updates)
            return TrainState(params, opt_state, st.step + 1), value

        state, losses = jax.lax.scan(step, state, perm)
        return state, jnp.mean(losses)


class HopseStep(AbstractStep):
    """One training epoch of a HOPSE (or HOMP) model as a step of `jaxlab.run_steps`.

    The state is the `Trainer`'s `TrainState`; with `vmapped=True` it, `weights` and
    the epoch's keys carry a leading axis (independent seeds or cross-validation folds
    trained at once; the epoch key is split over that axis). With `eval_data`, the
    step also returns the predictions on each evaluation set after every
    `eval_every`-th epoch (zeros after the others) as `aux["pred_<name>"]`, so model
    selection reads them from the driver's history (resumable like the rest). `aux["loss"]`
    is the epoch's mean training loss (over seeds/folds when `vmapped`, their own in
    `aux["losses"]`).

    **Arguments:**

    - `trainer`: the `Trainer` (loss, batch size, optimiser, model's static part).
    - `data`: stacked `ComplexArrays` of `g` training complexes; `targets`: `(g,)`, or
      `(S, g)` when `vmapped` (each run its own targets, e.g. standardised with its own
      split's training statistics); `weights`: `(g,)` loss weights, `(S, g)` when
      `vmapped`. Targets must be finite real numbers and weights finite and >= 0 (None:
      all 1); anything else raises a `ValueError` naming the argument.
    - `eval_data`: name -> stacked `ComplexArrays` to predict on; `eval_every`: epochs.
    - `vmapped`: whether the state has a leading seed/fold axis.
    """

    trainer: Trainer
    data: ComplexArrays
    targets: Array
    weights: Array
    eval_data: dict[str, ComplexArrays]
    eval_every: int = eqx.field(static=True)
    vmapped: bool = eqx.field(static=True)

    def __init__(
        self,
        trainer: Trainer,
        data: ComplexArrays,
        targets: Array,
        weights: Array | None = None,
        *,
        vmapped: bool = False,
        eval_data: dict[str, ComplexArrays] | None = None,
        eval_every: int = 1,
    ):
        if not isinstance(trainer, Trainer):
            raise ValueError(f"trainer: expected a Trainer, received {type(trainer).__name__}")
        if not isinstance(data, ComplexArrays):
            raise ValueError(f"data: expected ComplexArrays, received {type(data).__name__}")
        # real, finite (NaN targets or weights trained to a NaN loss silently); weights >= 0
        targets = as_array("targets", targets, dtype=jnp.number, real=True, finite=True)
        g = targets.shape[-1] if targets.ndim else 0
        ndims = (1, 2) if vmapped else (1,)
        if targets.ndim not in ndims or g != data.x[0].shape[0]:
            raise ValueError(
                f"targets: expected shape ({data.x[0].shape[0]},)"
                + (f" or (S, {data.x[0].shape[0]})" if vmapped else "")
                + f", received {targets.shape}"
            )
        # the default weights take the targets' float dtype (float32 ones against float64
        # targets fail under strict dtype promotion)
        wdtype = targets.dtype if jnp.issubdtype(targets.dtype, jnp.floating) else jnp.float32
        weights = (
            jnp.ones((g,), wdtype)
            if weights is None
            else as_array("weights", weights, dtype=jnp.number, real=True, finite=True, low=0.0)
        )
        if weights.shape[-1:] != (g,) or weights.ndim != (2 if vmapped else 1):
            raise ValueError(
                f"weights: expected shape {'(S, ' if vmapped else '('}{g},), "
                f"received {weights.shape}"
            )
        self.trainer, self.data, self.targets, self.weights = trainer, data, targets, weights
        self.eval_data = {} if eval_data is None else dict(eval_data)
        self.eval_every = check_positive_int("eval_every", eval_every)
        self.vmapped = bool(vmapped)

    def init(self, model: eqx.Module, key: PRNGKeyArray) -> TrainState:
        """The `TrainState` of `model` (a stacked model when `vmapped`; `key` unused)."""
        del key
        init = eqx.filter_vmap(self.trainer.init) if self.vmapped else self.trainer.init
        return init(model)

    def _predict(self, state: TrainState, data: ComplexArrays) -> Array:
        def one(st):
            return predict(self.trainer.model(st), data)

        return eqx.filter_vmap(one)(state) if self.vmapped else one(state)

    def step(self, state: TrainState, key: PRNGKeyArray):
        if self.vmapped:
            t_axis = 0 if self.targets.ndim == 2 else None  # per-run targets (S, g)
            epoch = eqx.filter_vmap(self.trainer.epoch, in_axes=(0, None, t_axis, 0, 0))
            keys = jax.random.split(key, self.weights.shape[0])
            state, losses = epoch(state, self.data, self.targets, self.weights, keys)
            aux = {"loss": jnp.mean(losses), "losses": losses}
        else:
            state, loss = self.trainer.epoch(state, self.data, self.targets, self.weights, key)
            aux = {"loss": loss}
        if self.eval_data:
            per_epoch = max(1, self.targets.shape[-1] // self.trainer.batch_size)
            count = state.step[0] if self.vmapped else state.step
            done = count // per_epoch  # epochs completed, outside any vmap: a real cond

            def evaluate(st):
                return {f"pred_{k}": self._predict(st, d) for k, d in self.eval_data.items()}

            shapes = jax.eval_shape(evaluate, state)
            aux |= jax.lax.cond(
                done % self.eval_every == 0,
                evaluate,
                lambda st: jax.tree_util.tree_map(lambda s: jnp.zeros(s.shape, s.dtype), shapes),
                state,
            )
        return state, aux


def fit(
    trainer: Trainer,
    model: eqx.Module,
    data: ComplexArrays,
    targets: Array,
    weights: Array | None = None,
    *,
    key: PRNGKeyArray,
    steps: int,
    vmapped: bool = False,
    eval_data: dict[str, ComplexArrays] | None = None,
    eval_every: int = 1,
    driver: Driver | None = None,
) -> tuple[TrainState, History]:
    """Train `model` for `steps` epochs (`HopseStep` through `jaxlab.run_steps`).

    **Arguments:**

    - `trainer`, `data`, `targets`, `weights`, `vmapped`, `eval_data`, `eval_every`: as
      in `HopseStep`; `model` the (stacked, when `vmapped`) model to start from.
    - `key`: PRNG key (keyword-only); epoch `e` shuffles with `fold_in(key, e)` (split
      over the seeds/folds when `vmapped`).
    - `steps`: epochs, an integer in [1, `jaxlab.MAX_RUN_STEPS`] (10**7; other values
      raise a `ValueError` naming `steps` before the step is built).
    - `driver`: a `jaxlab.Driver`: chunk (epochs between progress/stop/checkpoint
      checks; 1 here when left at the default), checkpointer, progress, stop (on the
      `TrainState`), loop (`StepLoop()` unless it names one: one jitted call per epoch,
      an epoch is already a `lax.scan` over mini-batches). The optimiser is the
      `Trainer`'s.

    **Returns:** `(state, history)` (the `TrainState` rather than the model: the
    optimiser and the model's non-array part live in the `Trainer`;
    `trainer.model(state)` is the model) and the driver's `History`: `losses` `(steps,)`
    (the mean over seeds/folds when `vmapped`, with `aux["losses"]` `(steps, S)` per
    seed/fold) and the `pred_<name>` predictions when `eval_data` is given.
    """
    check_steps("steps", steps)
    step = HopseStep(
        trainer, data, targets, weights, vmapped=vmapped, eval_data=eval_data, eval_every=eval_every
    )
    return run_steps(
        step,
        step.init(model, key),
        key=key,
        steps=steps,
        driver=driver_for(driver, chunk=1, loop=StepLoop()),
    )


def predict(model: eqx.Module, data: ComplexArrays, *, batch_size: int = 256) -> Array:
    """Graph-level outputs `[g, out_dim]` of `model` on a stacked data set.

    `data` a stacked `ComplexArrays`; `batch_size` graphs per vectorised call, a positive
    integer (one larger than the data set is one call); anything else raises a
    `ValueError` naming the argument (0 and None were taken as "no batching", a negative
    or fractional size failed inside `lax.map`).
    """
    if not isinstance(data, ComplexArrays):
        raise ValueError(f"data: expected ComplexArrays, received {type(data).__name__}")
    batch_size = check_positive_int("batch_size", batch_size)
    return jax.lax.map(model, data, batch_size=batch_size)
