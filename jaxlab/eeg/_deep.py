"""Deep baselines in flax (P10): EEGNet (Lawhern et al. 2018) and ShallowConvNet
(Schirrmeister et al. 2017) with braindecode's default hyper-parameters, trained with
optax (Adam, mini-batches, early stopping on a held-out validation split, tqdm)."""

from __future__ import annotations

from typing import Any

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import optax
from tqdm.auto import tqdm

from jaxlab._core import optimizer_update

__all__ = ["EEGNet", "ShallowConvNet", "train_classifier"]


def _avg_pool(h, length: int, stride: int):
    """Average pooling over the time axis (-2) of `(B, H, T, F)`; written out because
    `flax.linen.avg_pool` divides by a Python int, which strict dtype promotion rejects
    (window sums from a cumulative sum, which reverse-mode differentiates)."""
    cs = jnp.cumsum(h, axis=2)
    cs = jnp.concatenate([jnp.zeros_like(cs[:, :, :1]), cs], axis=2)
    starts = jnp.arange((h.shape[2] - length) // stride + 1) * stride
    summed = cs[:, :, starts + length] - cs[:, :, starts]
    return summed / jnp.asarray(length, h.dtype)


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
):
    """Train `model` with Adam on cross-entropy; early-stop on validation loss.

    **Arguments:** `x` `(N, C, L)`, `y` `(N,)` int labels; optional validation set;
    `key` PRNG key (keyword-only).

    **Returns:** `predict(x) -> labels` using the best (lowest validation loss) weights.
    """
    x, y = jnp.asarray(x, jnp.float32), jnp.asarray(y).astype(jnp.int32)
    if x.ndim != 3 or y.shape != x.shape[:1]:
        raise ValueError(f"x/y: expected (N, C, L) and (N,), got {x.shape} and {y.shape}")
    k_init, k_drop, k_perm = jax.random.split(key, 3)
    variables = model.init({"params": k_init}, x[:2])
    params, stats = variables["params"], variables["batch_stats"]
    opt = optax.adam(learning_rate)
    opt_state = opt.init(params)

    def loss_fn(p, s, xb, yb, kd):
        logits, upd = model.apply(
            {"params": p, "batch_stats": s},
            xb,
            train=True,
            rngs={"dropout": kd},
            mutable=["batch_stats"],
        )
        return optax.softmax_cross_entropy_with_integer_labels(logits, yb).mean(), upd

    @jax.jit
    def step(p, s, o, xb, yb, kd):
        (loss, upd), g = jax.value_and_grad(loss_fn, has_aux=True)(p, s, xb, yb, kd)
        updates, o = optimizer_update(opt, g, o, p)
        return optax.apply_updates(p, updates), upd["batch_stats"], o, loss

    @jax.jit
    def logits_of(p, s, xb):
        return model.apply({"params": p, "batch_stats": s}, xb, train=False)

    def val_loss(p, s):
        lg = logits_of(p, s, jnp.asarray(x_val, jnp.float32))
        return float(
            optax.softmax_cross_entropy_with_integer_labels(
                lg, jnp.asarray(y_val).astype(jnp.int32)
            ).mean()
        )

    n = x.shape[0]
    n_batches = max(n // batch_size, 1)
    best = (np.inf, params, stats)
    bad = 0
    for ep in tqdm(range(epochs), desc=type(model).__name__, disable=not progress, leave=False):
        perm = jax.random.permutation(jax.random.fold_in(k_perm, ep), n)
        for b in range(n_batches):
            idx = perm[b * batch_size : (b + 1) * batch_size]
            kd = jax.random.fold_in(k_drop, ep * n_batches + b)
            params, stats, opt_state, _ = step(params, stats, opt_state, x[idx], y[idx], kd)
        if x_val is None:
            best = (np.inf, params, stats)
            continue
        v = val_loss(params, stats)
        if v < best[0]:
            best, bad = (v, params, stats), 0
        else:
            bad += 1
            if bad >= patience:
                break
    _, bp, bs = best

    def predict(xq):
        return np.asarray(jnp.argmax(logits_of(bp, bs, jnp.asarray(xq, jnp.float32)), -1))

    return predict
