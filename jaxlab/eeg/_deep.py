"""Deep baselines in flax (P10): EEGNet (Lawhern et al. 2018), ShallowConvNet and
DeepConvNet (Schirrmeister et al. 2017) with braindecode's default hyper-parameters,
trained with optax (`ClassifierStep`: Adam, shuffled mini-batches per epoch, early
stopping on a held-out validation split) by the one driver (progress, checkpoints,
exact resume)."""

from __future__ import annotations

import functools
from typing import Any

import equinox as eqx
import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import optax
from jaxtyping import Array, Float, Int

from jaxlab._core import (
    AbstractStep,
    Driver,
    StepLoop,
    as_array,
    check_ids,
    check_positive_int,
    check_size,
    driver_for,
    optimizer_update,
    run_steps,
)

__all__ = [
    "EEGNet",
    "ShallowConvNet",
    "DeepConvNet",
    "ClassifierStep",
    "TrainedClassifier",
    "train_classifier",
]

MAX_EPOCHS = 10_000
"""The most training epochs `train_classifier` accepts (a larger `epochs` is refused
before the epoch orders are drawn: 10**9 would allocate and run for ever)."""


def _avg_pool(h, length: int, stride: int):
    """Average pooling over the time axis (-2) of `(B, H, T, F)`; written out because
    `flax.linen.avg_pool` divides by a Python int, which strict dtype promotion rejects
    (window sums from a cumulative sum, which reverse-mode differentiates)."""
    cs = jnp.cumsum(h, axis=2)
    cs = jnp.concatenate([jnp.zeros_like(cs[:, :, :1]), cs], axis=2)
    starts = jnp.arange((h.shape[2] - length) // stride + 1) * stride
    summed = cs[:, :, starts + length] - cs[:, :, starts]
    return summed / jnp.asarray(length, h.dtype)


def _max_pool(h, length: int, stride: int):
    """Max pooling over the time axis (-2) of `(B, H, T, F)` (VALID windows)."""
    starts = jnp.arange((h.shape[2] - length) // stride + 1) * stride
    return jnp.max(jnp.stack([h[:, :, starts + j] for j in range(length)]), axis=0)


class EEGNet(nn.Module):
    """EEGNet-v4: temporal conv (F1, kernel_length) -> depthwise spatial conv (D) ->
    ELU, avg-pool 4, dropout -> separable conv (F2, 16) -> ELU, avg-pool 8, dropout ->
    dense. Input `(batch, C, L)`; output logits `(batch, n_classes)`."""

    n_classes: int
    f1: int = 8
    d: int = 2
    f2: int = 16
    kernel_length: int = 64
    dropout: float = 0.25
    param_dtype: Any = jnp.float32

    @nn.compact
    def __call__(self, x, *, train: bool = False):
        c = x.shape[-2]
        dt = self.param_dtype
        h = jnp.asarray(x, dt)[..., None]  # (B, C, L, 1): channels as height, time as width
        h = nn.Conv(
            self.f1,
            (1, self.kernel_length),
            padding="SAME",
            use_bias=False,
            dtype=dt,
            param_dtype=dt,
        )(h)
        h = nn.BatchNorm(
            use_running_average=not train, momentum=0.99, epsilon=1e-3, dtype=dt, param_dtype=dt
        )(h)
        h = nn.Conv(
            self.f1 * self.d,
            (c, 1),
            padding="VALID",
            feature_group_count=self.f1,
            use_bias=False,
            dtype=dt,
            param_dtype=dt,
        )(h)
        h = nn.BatchNorm(
            use_running_average=not train, momentum=0.99, epsilon=1e-3, dtype=dt, param_dtype=dt
        )(h)
        h = _avg_pool(nn.elu(h), 4, 4)
        h = nn.Dropout(self.dropout, deterministic=not train)(h)
        h = nn.Conv(
            self.f1 * self.d,
            (1, 16),
            padding="SAME",
            use_bias=False,
            feature_group_count=self.f1 * self.d,
            dtype=dt,
            param_dtype=dt,
        )(h)
        h = nn.Conv(self.f2, (1, 1), use_bias=False, dtype=dt, param_dtype=dt)(h)
        h = nn.BatchNorm(
            use_running_average=not train, momentum=0.99, epsilon=1e-3, dtype=dt, param_dtype=dt
        )(h)
        h = _avg_pool(nn.elu(h), 8, 8)
        h = nn.Dropout(self.dropout, deterministic=not train)(h)
        return nn.Dense(self.n_classes, dtype=dt, param_dtype=dt)(h.reshape(h.shape[0], -1))


class ShallowConvNet(nn.Module):
    """ShallowFBCSPNet: temporal conv (40, 25) -> spatial conv (40) -> BN -> square ->
    avg-pool (75, stride 15) -> log -> dropout 0.5 -> dense.
    Input `(batch, C, L)` with L >= 99; output logits `(batch, n_classes)`."""

    n_classes: int
    n_filters: int = 40
    filter_length: int = 25
    pool_length: int = 75
    pool_stride: int = 15
    dropout: float = 0.5
    param_dtype: Any = jnp.float32

    @nn.compact
    def __call__(self, x, *, train: bool = False):
        c = x.shape[-2]
        dt = self.param_dtype
        h = jnp.asarray(x, dt)[..., None]
        h = nn.Conv(
            self.n_filters, (1, self.filter_length), padding="VALID", dtype=dt, param_dtype=dt
        )(h)
        h = nn.Conv(
            self.n_filters, (c, 1), padding="VALID", use_bias=False, dtype=dt, param_dtype=dt
        )(h)
        h = nn.BatchNorm(
            use_running_average=not train, momentum=0.9, epsilon=1e-5, dtype=dt, param_dtype=dt
        )(h)
        h = _avg_pool(h**2, self.pool_length, self.pool_stride)
        h = jnp.log(jnp.clip(h, jnp.asarray(1e-6, dt)))
        h = nn.Dropout(self.dropout, deterministic=not train)(h)
        return nn.Dense(self.n_classes, dtype=dt, param_dtype=dt)(h.reshape(h.shape[0], -1))


class DeepConvNet(nn.Module):
    """Deep4Net (Schirrmeister et al. 2017, "Deep learning with convolutional neural
    networks for EEG decoding and visualization") with braindecode's defaults: temporal
    conv (25, kernel 10) -> spatial conv (25) -> BN -> ELU -> max-pool 3/3, then three
    blocks [dropout 0.5 -> conv (50 / 100 / 200, kernel 10) -> BN -> ELU -> max-pool 3/3]
    -> dense (braindecode's "auto" final conv spans the remaining time, i.e. a dense
    layer). Input `(batch, C, L)` with L >= `min_length()` (441 samples with the defaults,
    e.g. 3.5 s at 128 Hz); output logits `(batch, n_classes)`."""

    n_classes: int
    n_filters: tuple[int, ...] = (25, 50, 100, 200)
    filter_length: int = 10
    pool_length: int = 3
    pool_stride: int = 3
    dropout: float = 0.5
    param_dtype: Any = jnp.float32

    def min_length(self) -> int:
        """Shortest input (samples) for which every conv and pool window fits."""
        need = 1
        for _ in self.n_filters:
            need = (need - 1) * self.pool_stride + self.pool_length + self.filter_length - 1
        return need

    @nn.compact
    def __call__(self, x, *, train: bool = False):
        c, n_t = x.shape[-2], x.shape[-1]
        if n_t < self.min_length():
            raise ValueError(
                f"x: DeepConvNet needs at least {self.min_length()} time samples "
                f"with these pool/filter sizes, got {n_t}"
            )
        dt = self.param_dtype

        def bn(h):
            return nn.BatchNorm(
                use_running_average=not train, momentum=0.9, epsilon=1e-5, dtype=dt, param_dtype=dt
            )(h)

        h = jnp.asarray(x, dt)[..., None]
        h = nn.Conv(
            self.n_filters[0], (1, self.filter_length), padding="VALID", dtype=dt, param_dtype=dt
        )(h)
        h = nn.Conv(
            self.n_filters[0], (c, 1), padding="VALID", use_bias=False, dtype=dt, param_dtype=dt
        )(h)
        h = _max_pool(nn.elu(bn(h)), self.pool_length, self.pool_stride)
        for nf in self.n_filters[1:]:
            h = nn.Dropout(self.dropout, deterministic=not train)(h)
            h = nn.Conv(
                nf,
                (1, self.filter_length),
                padding="VALID",
                use_bias=False,
                dtype=dt,
                param_dtype=dt,
            )(h)
            h = _max_pool(nn.elu(bn(h)), self.pool_length, self.pool_stride)
        return nn.Dense(self.n_classes, dtype=dt, param_dtype=dt)(h.reshape(h.shape[0], -1))


@functools.partial(jax.jit, static_argnames="model")
def _logits(model: nn.Module, params, batch_stats, x):
    return model.apply({"params": params, "batch_stats": batch_stats}, x, train=False)


@functools.partial(jax.jit, static_argnames="model")
def _init_variables(model: nn.Module, key, x):
    # one compiled init per model and input shape (eager flax init compiles every
    # initialiser of every parameter shape op by op)
    return model.init({"params": key}, x)


def _cross_entropy(logits, labels):
    return optax.softmax_cross_entropy_with_integer_labels(logits, labels).mean()


class ClassifierStep(AbstractStep):
    """One Adam step of a flax EEG classifier on cross-entropy, with per-epoch shuffling,
    validation and early stopping.

    Step `t` trains on batch `t mod B` of epoch `t // B` (`B = max(N // batch_size, 1)`
    batches, epoch `e` in the order `state["order"][e]`, dropout from the step key). At
    the end of each epoch the validation loss is computed; the best weights are kept and
    after `patience` epochs without improvement `state["done"]` is set and every later
    step leaves the state unchanged (loss NaN), so the result does not depend on where
    the driver checks `stop=lambda s: s["done"]`. Without validation data the best
    weights are the last epoch's.

    State (a dict): `params`, `batch_stats`, `opt_state`, `best_params`, `best_stats`,
    `best_val`, `bad` (epochs without improvement), `done`, `t` (steps taken),
    `val_losses` `(epochs,)` (NaN where not run), `order` `(epochs, N)`. `init(None, key)`
    draws the weights from `split(key, 3)[0]` and the epoch orders from
    `fold_in(split(key, 3)[2], epoch)`; `init(variables, key)` starts from given flax
    variables. Aux: `loss` (training cross-entropy of the step).

    **Arguments:**

    - `model`: a flax module (`EEGNet`, `ShallowConvNet`, `DeepConvNet`).
    - `x` `(N, C, L)` float32 epochs, `y` `(N,)` int32 labels; `x_val`, `y_val` optional
      validation set (both or neither).
    - `optimizer`: an optax transformation (`train_classifier`: Adam, lr 1e-3).
    - `epochs`, `batch_size`, `patience`.
    """

    x: Float[Array, "N C L"]
    y: Int[Array, " N"]
    x_val: Float[Array, "M C L"] | None
    y_val: Int[Array, " M"] | None
    model: nn.Module = eqx.field(static=True)
    optimizer: optax.GradientTransformation = eqx.field(static=True)
    epochs: int = eqx.field(static=True, default=30)
    batch_size: int = eqx.field(static=True, default=64)
    patience: int = eqx.field(static=True, default=5)

    @property
    def n_batches(self) -> int:
        """Optimizer steps per epoch."""
        return max(self.x.shape[0] // self.batch_size, 1)

    @property
    def total_steps(self) -> int:
        """`epochs * n_batches`: the `steps` to run."""
        return self.epochs * self.n_batches

    def init(self, model, key):
        k_init, _, k_perm = jax.random.split(key, 3)
        variables = _init_variables(self.model, k_init, self.x[:2]) if model is None else model
        params, stats = variables["params"], variables["batch_stats"]
        n = self.x.shape[0]
        order = jnp.stack(
            [jax.random.permutation(jax.random.fold_in(k_perm, e), n) for e in range(self.epochs)]
        ).astype(jnp.int32)
        return {
            "params": params,
            "batch_stats": stats,
            "opt_state": self.optimizer.init(params),
            "best_params": params,
            "best_stats": stats,
            "best_val": jnp.asarray(jnp.inf, jnp.float32),
            "bad": jnp.asarray(0, jnp.int32),
            "done": jnp.asarray(False),
            "t": jnp.asarray(0, jnp.int32),
            "val_losses": jnp.full((self.epochs,), jnp.nan, jnp.float32),
            "order": order,
        }

    def _train(self, state, key):
        t = state["t"]
        nb = self.n_batches
        bs = min(self.batch_size, self.x.shape[0])
        ep, b = t // nb, t % nb
        idx = jax.lax.dynamic_slice(state["order"][ep], (b * bs,), (bs,))

        def loss_fn(p):
            logits, upd = self.model.apply(
                {"params": p, "batch_stats": state["batch_stats"]},
                self.x[idx],
                train=True,
                rngs={"dropout": key},
                mutable=["batch_stats"],
            )
            return _cross_entropy(logits, self.y[idx]), upd["batch_stats"]

        (loss, stats), g = jax.value_and_grad(loss_fn, has_aux=True)(state["params"])
        updates, opt_state = optimizer_update(
            self.optimizer, g, state["opt_state"], state["params"]
        )
        new = {
            **state,
            "params": optax.apply_updates(state["params"], updates),
            "batch_stats": stats,
            "opt_state": opt_state,
            "t": t + 1,
        }
        new = jax.lax.cond((t + 1) % nb == 0, lambda s: self._end_epoch(s, ep), lambda s: s, new)
        return new, loss

    def _end_epoch(self, s, ep):
        if self.x_val is None or self.y_val is None:
            return {**s, "best_params": s["params"], "best_stats": s["batch_stats"]}
        v = _cross_entropy(
            _logits(self.model, s["params"], s["batch_stats"], self.x_val), self.y_val
        ).astype(jnp.float32)
        better = v < s["best_val"]
        keep = lambda new, old: jax.tree_util.tree_map(  # noqa: E731
            lambda a, b: jnp.where(better, a, b), new, old
        )
        bad = jnp.where(better, 0, s["bad"] + 1)
        return {
            **s,
            "val_losses": s["val_losses"].at[ep].set(v),
            "best_val": jnp.where(better, v, s["best_val"]),
            "best_params": keep(s["params"], s["best_params"]),
            "best_stats": keep(s["batch_stats"], s["best_stats"]),
            "bad": bad,
            "done": bad >= self.patience,
        }

    def step(self, state, key):
        def frozen(s):
            return s, jnp.asarray(jnp.nan, jnp.float32)

        new, loss = jax.lax.cond(state["done"], frozen, lambda s: self._train(s, key), state)
        return new, {"loss": loss.astype(jnp.float32)}


class TrainedClassifier:
    """What `train_classifier` returns: call it on `(N, C, L)` epochs for labels `(N,)`.

    **Attributes:** `model`, `params`, `batch_stats` (the best weights), `val_losses`
    (per-epoch validation loss, NaN where not run), `steps` (optimizer steps taken),
    `stopped_early`, `losses` (per-step training loss, NaN after an early stop).
    """

    def __init__(self, model, params, batch_stats, val_losses, steps, stopped_early, losses):
        self.model = model
        self.params, self.batch_stats = params, batch_stats
        self.val_losses, self.steps, self.stopped_early = val_losses, steps, stopped_early
        self.losses = losses

    def logits(self, x):
        """Logits `(N, n_classes)` of epochs `x` `(N, C, L)` (inference mode)."""
        return _logits(self.model, self.params, self.batch_stats, jnp.asarray(x, jnp.float32))

    def __call__(self, x):
        return np.asarray(jnp.argmax(self.logits(x), -1))


def train_classifier(
    model: nn.Module,
    x,
    y,
    *,
    key,
    x_val=None,
    y_val=None,
    epochs: int = 30,
    batch_size: int = 64,
    patience: int = 5,
    optimizer: optax.GradientTransformation | None = None,
    driver: Driver | None = None,
) -> TrainedClassifier:
    """Train `model` with Adam on cross-entropy; early-stop on validation loss
    (`ClassifierStep` run by `jaxlab.run_steps`, one jitted step per call).

    **Arguments:**

    - `model`: a flax module (`EEGNet`, `ShallowConvNet`, `DeepConvNet`).
    - `x` `(N, C, L)` finite, `y` `(N,)` int labels in [0, `model.n_classes`) (never
      wrapped: an out-of-range label is refused); optional `x_val`, `y_val` for early stopping
      (stop after `patience` epochs without a lower validation loss; the best weights win).
    - `epochs` (at most `MAX_EPOCHS` = 10 000), `batch_size`, `patience`: positive ints.
    - `key`: PRNG key (keyword-only): weights from `split(key, 3)[0]`, step `t`'s dropout
      from `fold_in(split(key, 3)[1], t)`, epoch orders from `split(key, 3)[2]`.
    - `optimizer`: default `optax.adam(1e-3)`; pass one object to several calls (folds)
      to reuse the compiled step.
    - `driver`: a `jaxlab.Driver`: chunk (one epoch when left at the default), its
      checkpointer (saves every `checkpointer.every` steps, default every chunk, and at
      the end; with `resume=True` continues exactly: a finished or early-stopped run is
      not retrained), progress (default silent), stop (combined with the early stop);
      `StepLoop()` unless it names a loop.

    **Returns:** `TrainedClassifier`: `clf(x) -> labels`, with the best weights (an
    exception to the `(model, History)` convention: the classifier object is what the
    callers use; its `losses` hold the history's per-step loss).
    """
    n_classes = getattr(model, "n_classes", None)
    x = as_array("x", x, finite=True, nonempty=True, real=True).astype(jnp.float32)
    y = jnp.asarray(check_ids("y", y, n_classes, what="class labels"), jnp.int32)
    if x.ndim != 3 or y.shape != x.shape[:1]:
        raise ValueError(f"x/y: expected (N, C, L) and (N,), got {x.shape} and {y.shape}")
    epochs = check_size("epochs", epochs, cap=MAX_EPOCHS, why="MAX_EPOCHS")
    batch_size = check_positive_int("batch_size", batch_size)
    patience = check_positive_int("patience", patience)
    try:  # abstract: no compile, no weights; a too short epoch divides by zero inside
        jax.eval_shape(lambda: _init_variables(model, jax.random.key(0), x[:2]))
    except (ZeroDivisionError, ValueError, TypeError) as e:
        raise ValueError(
            f"x: epochs of shape {tuple(x.shape[1:])} do not fit {type(model).__name__} ({e})"
        ) from None
    if (x_val is None) != (y_val is None):
        raise ValueError("x_val/y_val: expected both or neither")
    if x_val is not None:
        x_val = as_array("x_val", x_val, finite=True, nonempty=True, real=True)
        y_val = check_ids("y_val", y_val, n_classes, what="class labels")
    has_val = x_val is not None
    optimizer = optax.adam(1e-3) if optimizer is None else optimizer
    step = ClassifierStep(
        x,
        y,
        jnp.asarray(x_val, jnp.float32) if has_val else None,
        jnp.asarray(y_val).astype(jnp.int32) if has_val else None,
        model,
        optimizer,
        int(epochs),
        int(batch_size),
        int(patience),
    )
    state, hist = run_steps(
        step,
        step.init(None, key),
        key=jax.random.split(key, 3)[1],
        steps=step.total_steps,
        driver=driver_for(
            driver, chunk=step.n_batches, loop=StepLoop(), stop=lambda s: bool(s["done"])
        ),
    )
    return TrainedClassifier(
        model,
        state["best_params"],
        state["best_stats"],
        np.asarray(state["val_losses"]),
        int(state["t"]),
        bool(state["done"]),
        hist.losses,
    )
