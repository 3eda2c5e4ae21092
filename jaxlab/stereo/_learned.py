"""Training and inference of the learned matcher (RAFT-Stereo-lite, `RAFTStereo`).

Loss (RAFT-Stereo): sum over iterations i = 1..N of gamma^(N - i) times the mean
absolute error between the i-th full-resolution disparity and the ground truth over
the pixels where the ground truth is finite (and, optionally, inside a given mask).
AdamW with a warm-up + cosine-decay learning rate and gradient clipping
(`raft_optimizer`); light photometric augmentation (per-image brightness, contrast,
gamma, colour gain, noise; left and right jittered independently). `RaftStep` is one
update; `train_raft` runs it with `jaxlab.run_steps`, one jitted update at a time
(`StepLoop`: convolutions inside a `lax.scan` body are much slower on XLA:CPU), with
checkpoints and exact resume from a `Checkpointer`.

Paper: P15 (learned stereo matchers on synthetic faces).
"""

from __future__ import annotations

import functools
import math
from typing import Any, cast

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import optax
from jaxtyping import Array, Bool, Float, PRNGKeyArray

from jaxlab._core import (
    AbstractStep,
    Driver,
    History,
    StepLoop,
    check_array,
    check_finite,
    check_instance,
    check_memory,
    check_positive_int,
    check_real,
    check_size,
    driver_for,
    optimizer_update,
    run_steps,
)

from ._raft import RAFTStereo

__all__ = [
    "init_raft",
    "raft_loss",
    "raft_optimizer",
    "RaftStep",
    "train_raft",
    "raft_predictor",
    "raft_disparity",
]


MAX_ITERS = 1_000
"""Most refinement iterations (`n_iters`): the loop is unrolled when traced, so the
compile time and memory grow with it (RAFT-Stereo uses up to 32)."""

MAX_STEPS = 10**6
"""Most training steps of `train_raft` (each is a full forward and backward pass)."""


def _check_n_iters(n_iters) -> int:
    return check_size("n_iters", n_iters, cap=MAX_ITERS, why="MAX_ITERS")


def _activation_bytes(model, n, h, w, n_iters) -> float:
    """A rough upper estimate of the activations of `n` pairs of (h, w) pixels through
    `n_iters` iterations (forward and backward): ~ 256 + 64 n_iters values a pixel."""
    return float(n) * h * w * (256 + 64 * n_iters) * jnp.dtype(model.dtype).itemsize


def _check_pair(left, right, n_iters, downsample):
    check_array("left", left, dtype=jnp.floating)
    if left.ndim not in (3, 4) or left.shape[-1] != 3:
        raise ValueError(f"left: expected (H, W, 3) or (B, H, W, 3), received {left.shape}")
    check_array("right", right, shape=tuple(left.shape), dtype=jnp.floating)
    check_finite("left", left)
    check_finite("right", right)
    _check_n_iters(n_iters)
    h, w = left.shape[-3], left.shape[-2]
    if h % downsample or w % downsample:
        raise ValueError(
            f"left: expected height and width divisible by {downsample}, received {left.shape}"
        )


@functools.partial(jax.jit, static_argnums=(1, 2))
def _normal(key, n, dtype):
    return jax.random.normal(key, (n,), dtype)


INIT_SIDE_CAP = 64
"""Most `downsample` cells per side at which `init_raft` traces the network: the
parameters do not depend on the image size, so a larger side gives the same ones."""


def init_raft(model: RAFTStereo, height: int, width: int, *, key: PRNGKeyArray):
    """Initial parameters of `model` (the network is fully convolutional: any image size
    divisible by `model.downsample` works with them). Convolution kernels are LeCun-normal
    (std 1 / sqrt(fan_in)), biases 0. The parameter shapes come from an abstract
    evaluation of `model.init` and all kernels from one normal draw, which is much cheaper
    to compile than flax's per-parameter initialisers. `model` a `RAFTStereo`; `height`,
    `width` positive integers divisible by `model.downsample` (ValueErrors otherwise).
    The parameters do not depend on the image size, so a side above
    `INIT_SIDE_CAP x model.downsample` is traced at that cap (the same parameters; the
    full size's correlation volume is never sized)."""
    check_instance("model", model, RAFTStereo)
    height = check_positive_int("height", height)
    width = check_positive_int("width", width)
    if height % model.downsample or width % model.downsample:
        raise ValueError(
            f"height, width: expected multiples of downsample={model.downsample}, "
            f"received {height}, {width}"
        )
    cap = INIT_SIDE_CAP * model.downsample  # a multiple of downsample, as height and width
    x = jax.ShapeDtypeStruct((1, min(height, cap), min(width, cap), 3), model.dtype)
    shapes = jax.eval_shape(lambda k, a: model.init(k, a, a, 1), key, x)["params"]
    flat, tree = jax.tree_util.tree_flatten_with_path(shapes)
    z = _normal(key, sum(math.prod(s.shape) for _, s in flat), jnp.dtype(model.dtype))
    leaves, start = [], 0
    for path, s in flat:
        size = math.prod(s.shape)
        if getattr(path[-1], "key", None) == "kernel":
            fan_in = math.prod(s.shape[:-1])
            leaves.append(z[start : start + size].reshape(s.shape) / math.sqrt(fan_in))
        else:
            leaves.append(jnp.zeros(s.shape, s.dtype))
        start += size
    return jax.tree_util.tree_unflatten(tree, leaves)


def raft_loss(
    model: RAFTStereo, params, left, right, disparity, valid, *, n_iters: int, gamma: float = 0.9
) -> Float[Array, ""]:
    """Sequence loss sum_i gamma^(N-i) mean_{valid} |d_i - d_gt| on a batch (B, H, W, 3),
    disparity (B, H, W) (values ignored where `valid` (B, H, W) is False).

    `left`, `right`: finite `(B, H, W, 3)` (H, W divisible by `model.downsample`);
    `disparity` finite where `valid` (a bool `(B, H, W)`) is True; `n_iters` a positive
    integer up to `MAX_ITERS`; `gamma` finite > 0 (ValueErrors naming the argument;
    values are checked when concrete, shapes also inside `jit`)."""
    check_instance("model", model, RAFTStereo)
    sizes = check_array("left", left, shape=("B", "H", "W", 3), dtype=jnp.floating)
    check_array("right", right, shape=("B", "H", "W", 3), dtype=jnp.floating, sizes=sizes)
    check_array("disparity", disparity, shape=("B", "H", "W"), dtype=jnp.floating, sizes=sizes)
    check_array("valid", valid, shape=("B", "H", "W"), dtype=jnp.bool_, sizes=sizes)
    _check_pair(left, right, n_iters, model.downsample)
    check_finite("disparity", disparity, where=valid)
    gamma = check_real("gamma", gamma, low=0.0, low_inclusive=False)
    preds = cast(jax.Array, model.apply({"params": params}, left, right, n_iters))
    gt = jnp.where(valid, disparity, 0.0).astype(preds.dtype)
    v = valid.astype(preds.dtype)
    err = jnp.sum(jnp.abs(preds - gt[None]) * v[None], axis=(1, 2, 3)) / jnp.maximum(
        jnp.sum(v), 1.0
    )
    weights = gamma ** jnp.arange(n_iters - 1, -1, -1, dtype=preds.dtype)
    return jnp.sum(weights * err)


def _jitter(img, key):
    """Photometric jitter of one (H, W, 3) image in [0, 1]."""
    k = jax.random.split(key, 5)
    dt = img.dtype
    u = lambda kk, lo, hi, shape=(): jax.random.uniform(kk, shape, dt, lo, hi)  # noqa: E731
    img = jnp.clip(img, 0.0, 1.0) ** u(k[0], 0.8, 1.25)
    img = img * u(k[1], 0.8, 1.2, (3,))[None, None] * u(k[2], 0.8, 1.2)
    mean = img.mean()
    img = mean + (img - mean) * u(k[3], 0.8, 1.2)
    return jnp.clip(img + 0.01 * jax.random.normal(k[4], img.shape, dt), 0.0, 1.0)


def raft_optimizer(
    learning_rate: float = 4e-4, weight_decay: float = 1e-5, steps: int = 300
) -> optax.GradientTransformation:
    """`train_raft`'s default: AdamW with linear warm-up (5 % of `steps`) and cosine decay
    to 5 % of `learning_rate` at `steps`, global-norm clipping at 1 (RAFT-Stereo's
    recipe, shortened). Build it once and pass it to several `train_raft` calls to reuse
    the compiled step. `learning_rate` finite > 0, `weight_decay` finite >= 0, `steps` a
    positive integer (ValueErrors naming the argument)."""
    learning_rate = check_real("learning_rate", learning_rate, low=0.0, low_inclusive=False)
    weight_decay = check_real("weight_decay", weight_decay, low=0.0)
    steps = check_positive_int("steps", steps)
    schedule = optax.warmup_cosine_decay_schedule(
        0.0, learning_rate, max(1, steps // 20), steps, learning_rate * 0.05
    )
    return optax.chain(
        optax.clip_by_global_norm(1.0), optax.adamw(schedule, weight_decay=weight_decay)
    )


class RaftStep(AbstractStep):
    """One RAFT-Stereo update: a random batch of pairs (drawn without replacement when
    there are enough), optional photometric jitter, `raft_loss`, one optimiser update.

    State `(params, opt_state)`; aux `loss`. `init(params, key)` starts from `params`, or
    from `init_raft(model, H, W, key=key)` when `params` is None.

    **Arguments:**

    - `model`: a `RAFTStereo`; `left`, `right` `(N, H, W, 3)` images in [0, 1];
      `disparity` `(N, H, W)` ground truth (values ignored where `valid` is False);
      `valid` `(N, H, W)` bool.
    - `optimizer`: an optax transformation (`train_raft`: `raft_optimizer(...)`).
    - `batch_size`, `n_iters` (refinement iterations), `gamma` (sequence-loss decay),
      `augment` (photometric jitter).

    Paper: P15; RAFT-Stereo (Lipson, Teed & Deng, 2021).
    """

    left: Float[Array, "N H W 3"]
    right: Float[Array, "N H W 3"]
    disparity: Float[Array, "N H W"]
    valid: Bool[Array, "N H W"]
    model: RAFTStereo = eqx.field(static=True)
    optimizer: optax.GradientTransformation = eqx.field(static=True)
    batch_size: int = eqx.field(static=True, default=4)
    n_iters: int = eqx.field(static=True, default=6)
    gamma: float = eqx.field(static=True, default=0.9)
    augment: bool = eqx.field(static=True, default=True)

    def init(self, model, key):
        params = model
        if params is None:
            params = init_raft(self.model, self.left.shape[1], self.left.shape[2], key=key)
        return params, self.optimizer.init(params)

    def step(self, state, key):
        params, opt_state = state
        ki, ka = jax.random.split(key)
        n, bs = self.left.shape[0], self.batch_size
        idx = jax.random.choice(ki, n, (bs,), replace=n < bs)

        def batch_loss(p):
            a, b = self.left[idx], self.right[idx]
            if self.augment:
                k1, k2 = jax.random.split(ka)
                a = jax.vmap(_jitter)(a, jax.random.split(k1, bs))
                b = jax.vmap(_jitter)(b, jax.random.split(k2, bs))
            return raft_loss(
                self.model,
                p,
                a,
                b,
                self.disparity[idx],
                self.valid[idx],
                n_iters=self.n_iters,
                gamma=self.gamma,
            )

        loss, g = jax.value_and_grad(batch_loss)(params)
        upd, opt_state = optimizer_update(self.optimizer, g, opt_state, params)
        return (optax.apply_updates(params, upd), opt_state), {"loss": loss}


def train_raft(
    model: RAFTStereo,
    left: Float[Array, "N H W 3"],
    right: Float[Array, "N H W 3"],
    disparity: Float[Array, "N H W"],
    *,
    key: PRNGKeyArray,
    params=None,
    mask=None,
    steps: int = 300,
    batch_size: int = 4,
    n_iters: int = 6,
    gamma: float = 0.9,
    augment: bool = True,
    optimizer: optax.GradientTransformation | None = None,
    driver: Driver | None = None,
) -> tuple[Any, History]:
    """Train `model` on stereo pairs with ground-truth disparity (`RaftStep` on the driver).

    **Arguments:**

    - `model`: a `RAFTStereo`; `left`, `right`: `(N, H, W, 3)` images in [0, 1];
      `disparity`: `(N, H, W)` ground truth in pixels (NaN/inf = unknown, not supervised).
    - `key`: PRNG key (keyword-only): initialisation from its first split when `params`
      is None, step `i` (batch, augmentation) from `fold_in(second split, i)`.
    - `mask`: optional `(N, H, W)` bool restricting supervision.
    - `steps`, `batch_size`, `n_iters`, `gamma`, `augment`: training settings.
    - `optimizer`: default `raft_optimizer(4e-4, 1e-5, steps)` (build your own with
      `raft_optimizer(learning_rate, weight_decay, steps)`).
    - `driver`: a `jaxlab.Driver`: its chunk (steps between progress updates and saves
      when `checkpointer.every` is None; 50 here when left at the default), checkpointer
      (save/resume), progress; `StepLoop()` unless it names a loop.

    **Returns:** `(params, history)`, `history.losses` `(steps,)` the per-step training
    losses.

    Bad inputs raise a ValueError naming the argument: images non-finite or of other
    shapes, `steps` beyond `MAX_STEPS`, `n_iters` beyond `MAX_ITERS`, a `batch_size`
    whose activations (an estimate) exceed the memory available.
    """
    check_instance("model", model, RAFTStereo)
    sizes = check_array("left", left, shape=("N", "H", "W", 3), dtype=jnp.floating)
    check_array("right", right, shape=("N", "H", "W", 3), dtype=jnp.floating, sizes=sizes)
    check_array("disparity", disparity, shape=("N", "H", "W"), dtype=jnp.floating, sizes=sizes)
    check_finite("left", left)
    check_finite("right", right)
    if mask is not None:
        check_array("mask", mask, shape=("N", "H", "W"), sizes=sizes)
    steps = check_size("steps", steps, cap=MAX_STEPS, why="MAX_STEPS")
    batch_size = check_positive_int("batch_size", batch_size)
    n_iters = _check_n_iters(n_iters)
    _check_pair(left[:1], right[:1], n_iters, model.downsample)
    gamma = check_real("gamma", gamma, low=0.0, low_inclusive=False)
    check_memory(
        "batch_size", _activation_bytes(model, batch_size, sizes["H"], sizes["W"], n_iters)
    )
    dt = model.dtype
    valid = np.isfinite(np.asarray(disparity))
    if mask is not None:
        valid &= np.asarray(mask, bool)
    if optimizer is None:
        optimizer = raft_optimizer(4e-4, 1e-5, steps)
    step = RaftStep(
        jnp.asarray(left, dt),
        jnp.asarray(right, dt),
        jnp.asarray(np.where(valid, np.asarray(disparity), 0.0), dt),
        jnp.asarray(valid),
        model,
        optimizer,
        batch_size,
        n_iters,
        float(gamma),
        augment,
    )
    k_init, k_data = jax.random.split(key)
    (params, _), hist = run_steps(
        step,
        step.init(params, k_init),
        key=k_data,
        steps=steps,
        driver=driver_for(driver, chunk=50, loop=StepLoop()),
    )
    return params, hist


def raft_predictor(model: RAFTStereo, params, *, n_iters: int = 6):
    """A predictor `predict(left, right) -> disparity` jit-compiled once for these params:
    left, right (H, W, 3) or (B, H, W, 3) images in [0, 1]; returns the final-iteration
    disparity (H, W) or (B, H, W), in pixels, >= 0. Bad inputs raise ValueError
    (`n_iters` a positive integer up to `MAX_ITERS`; images finite, of one shape,
    H and W divisible by `model.downsample`)."""
    check_instance("model", model, RAFTStereo)
    _check_n_iters(n_iters)
    fn = jax.jit(lambda p, a, b: model.apply({"params": p}, a, b, n_iters)[-1])

    def predict(left, right):
        _check_pair(left, right, n_iters, model.downsample)
        a = jnp.asarray(left, model.dtype)
        b = jnp.asarray(right, model.dtype)
        if a.ndim == 3:
            return fn(params, a[None], b[None])[0]
        return fn(params, a, b)

    return predict


def raft_disparity(model: RAFTStereo, params, left, right, *, n_iters: int = 6):
    """Disparity (H, W) or (B, H, W) of a rectified pair with trained `params` (one-off
    call; use `raft_predictor` to compile once for many pairs)."""
    check_instance("model", model, RAFTStereo)
    _check_pair(left, right, n_iters, model.downsample)
    return raft_predictor(model, params, n_iters=n_iters)(left, right)
