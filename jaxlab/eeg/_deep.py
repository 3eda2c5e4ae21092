"""Deep baselines in flax (P10): EEGNet (Lawhern et al. 2018), ShallowConvNet and
DeepConvNet (Schirrmeister et al. 2017) with braindecode's default hyper-parameters,
trained with optax (Adam, mini-batches, early stopping on a held-out validation split,
tqdm, checkpoints every N steps with exact resume)."""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import optax
from tqdm.auto import tqdm

from jaxlab._core import load_checkpoint, optimizer_update, save_checkpoint

__all__ = ["EEGNet", "ShallowConvNet", "DeepConvNet", "TrainedClassifier", "train_classifier"]


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
            raise ValueError(f"x: DeepConvNet needs at least {self.min_length()} time samples "
                             f"with these pool/filter sizes, got {n_t}")
        dt = self.param_dtype

        def bn(h):
            return nn.BatchNorm(use_running_average=not train, momentum=0.9, epsilon=1e-5,
                                dtype=dt, param_dtype=dt)(h)

        h = jnp.asarray(x, dt)[..., None]
        h = nn.Conv(self.n_filters[0], (1, self.filter_length), padding="VALID", dtype=dt,
                    param_dtype=dt)(h)
        h = nn.Conv(self.n_filters[0], (c, 1), padding="VALID", use_bias=False, dtype=dt,
                    param_dtype=dt)(h)
        h = _max_pool(nn.elu(bn(h)), self.pool_length, self.pool_stride)
        for nf in self.n_filters[1:]:
            h = nn.Dropout(self.dropout, deterministic=not train)(h)
            h = nn.Conv(nf, (1, self.filter_length), padding="VALID", use_bias=False,
                        dtype=dt, param_dtype=dt)(h)
            h = _max_pool(nn.elu(bn(h)), self.pool_length, self.pool_stride)
        return nn.Dense(self.n_classes, dtype=dt, param_dtype=dt)(h.reshape(h.shape[0], -1))


class TrainedClassifier:
    """What `train_classifier` returns: call it on `(N, C, L)` epochs for labels `(N,)`.

    Attributes: `model`, `params`, `batch_stats` (the best weights), `val_losses`
    (per-epoch validation loss, NaN where not run), `steps` (optimizer steps taken),
    `stopped_early`.
    """

    def __init__(self, model, logits_fn, params, batch_stats, val_losses, steps,
                 stopped_early):
        self.model, self._logits = model, logits_fn
        self.params, self.batch_stats = params, batch_stats
        self.val_losses, self.steps, self.stopped_early = val_losses, steps, stopped_early

    def logits(self, x):
        """Logits `(N, n_classes)` of epochs `x` `(N, C, L)` (inference mode)."""
        return self._logits(self.params, self.batch_stats, jnp.asarray(x, jnp.float32))

    def __call__(self, x):
        return np.asarray(jnp.argmax(self.logits(x), -1))


@functools.lru_cache(maxsize=32)
def _compiled(model: nn.Module, learning_rate: float):
    """Jitted (train step, logits) for `model`, cached so that folds reuse compilations."""
    opt = optax.adam(learning_rate)

    def loss_fn(p, s, xb, yb, kd):
        logits, upd = model.apply({"params": p, "batch_stats": s}, xb, train=True,
                                  rngs={"dropout": kd}, mutable=["batch_stats"])
        return optax.softmax_cross_entropy_with_integer_labels(logits, yb).mean(), upd

    @jax.jit
    def step(p, s, o, xb, yb, kd):
        (loss, upd), g = jax.value_and_grad(loss_fn, has_aux=True)(p, s, xb, yb, kd)
        updates, o = optimizer_update(opt, g, o, p)
        return optax.apply_updates(p, updates), upd["batch_stats"], o, loss

    @jax.jit
    def logits_of(p, s, xb):
        return model.apply({"params": p, "batch_stats": s}, xb, train=False)

    return step, logits_of, opt


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
    learning_rate: float = 1e-3,
    patience: int = 5,
    progress: bool = True,
    checkpoint: str | Path | None = None,
    checkpoint_every: int = 100,
    resume: bool = False,
    max_steps: int | None = None,
) -> TrainedClassifier:
    """Train `model` with Adam on cross-entropy; early-stop on validation loss.

    **Arguments:**

    - `model`: a flax module (`EEGNet`, `ShallowConvNet`, `DeepConvNet`).
    - `x` `(N, C, L)`, `y` `(N,)` int labels; optional `x_val`, `y_val` for early stopping
      (stop after `patience` epochs without a lower validation loss; the best weights win).
    - `key`: PRNG key (keyword-only); initialisation, batch order and dropout derive from
      it per step, so a resumed run repeats the uninterrupted one exactly.
    - `checkpoint`: file to save the full training state to every `checkpoint_every`
      optimizer steps (atomically, `jaxlab._core.save_checkpoint`) and when training ends.
    - `resume`: continue from `checkpoint` when it exists (a finished run is not retrained).
    - `max_steps`: stop after this many optimizer steps in total (a compute budget; a later
      call with `resume=True` and no or a larger budget continues).

    **Returns:** `TrainedClassifier`: `clf(x) -> labels`, with the best weights.
    """
    x, y = jnp.asarray(x, jnp.float32), jnp.asarray(y).astype(jnp.int32)
    if x.ndim != 3 or y.shape != x.shape[:1]:
        raise ValueError(f"x/y: expected (N, C, L) and (N,), got {x.shape} and {y.shape}")
    for name, v in (("epochs", epochs), ("batch_size", batch_size),
                    ("checkpoint_every", checkpoint_every)):
        if not (isinstance(v, int | np.integer) and v > 0):
            raise ValueError(f"{name}: expected a positive int, got {v!r}")
    k_init, k_drop, k_perm = jax.random.split(key, 3)
    variables = model.init({"params": k_init}, x[:2])
    params, stats = variables["params"], variables["batch_stats"]
    step, logits_of, opt = _compiled(model, float(learning_rate))
    opt_state = opt.init(params)
    has_val = x_val is not None
    if has_val:
        xv = jnp.asarray(x_val, jnp.float32)
        yv = jnp.asarray(y_val).astype(jnp.int32)

    n = x.shape[0]
    n_batches = max(n // batch_size, 1)
    total = epochs * n_batches
    # counters: step, epochs without improvement, stopped early, N, batch size, epochs
    state = {"params": params, "stats": stats, "opt": opt_state, "best_params": params,
             "best_stats": stats,
             "counters": np.asarray([0, 0, 0, n, batch_size, epochs], np.int64),
             "best_val": np.asarray(np.inf), "val_losses": np.full(epochs, np.nan)}
    ckpt = None if checkpoint is None else Path(checkpoint)
    if resume and ckpt is not None and ckpt.exists():
        state = load_checkpoint(ckpt, state)
        if tuple(state["counters"][3:]) != (n, batch_size, epochs):
            raise ValueError(f"checkpoint: {ckpt} was written for (samples, batch size, "
                             f"epochs) = {tuple(int(v) for v in state['counters'][3:])}, not "
                             f"{(n, batch_size, epochs)}")
    t, bad, done = (int(v) for v in state["counters"][:3])
    budget = total if max_steps is None else min(total, int(max_steps))
    perm_epoch, perm = -1, None
    bar = tqdm(total=total, initial=min(t, total), desc=type(model).__name__,
               disable=not progress, leave=False)
    while t < budget and not done:
        ep, b = divmod(t, n_batches)
        if ep != perm_epoch:
            perm_epoch, perm = ep, jax.random.permutation(jax.random.fold_in(k_perm, ep), n)
        idx = perm[b * batch_size : (b + 1) * batch_size]
        kd = jax.random.fold_in(k_drop, t)
        state["params"], state["stats"], state["opt"], _ = step(
            state["params"], state["stats"], state["opt"], x[idx], y[idx], kd)
        t += 1
        bar.update(1)
        if t % n_batches == 0:  # end of an epoch: validation and early stopping
            if not has_val:
                state["best_params"], state["best_stats"] = state["params"], state["stats"]
            else:
                lg = logits_of(state["params"], state["stats"], xv)
                v = float(optax.softmax_cross_entropy_with_integer_labels(lg, yv).mean())
                state["val_losses"][ep] = v
                if v < float(state["best_val"]):
                    state["best_val"] = np.asarray(v)
                    state["best_params"], state["best_stats"] = state["params"], state["stats"]
                    bad = 0
                else:
                    bad += 1
                    done = int(bad >= patience)
        state["counters"] = np.asarray([t, bad, done, n, batch_size, epochs], np.int64)
        if ckpt is not None and (t % checkpoint_every == 0 or done or t == budget):
            save_checkpoint(ckpt, state)
    bar.close()
    if not np.isfinite(state["best_val"]) and has_val:  # budget ended before any validation
        state["best_params"], state["best_stats"] = state["params"], state["stats"]
    return TrainedClassifier(model, logits_of, state["best_params"], state["best_stats"],
                             np.asarray(state["val_losses"]), t, bool(done))

