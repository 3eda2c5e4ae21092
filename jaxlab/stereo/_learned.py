"""Training and inference of the learned matcher (RAFT-Stereo-lite, `RAFTStereo`).

Loss (RAFT-Stereo): sum over iterations i = 1..N of gamma^(N - i) times the mean
absolute error between the i-th full-resolution disparity and the ground truth over
the pixels where the ground truth is finite (and, optionally, inside a given mask).
AdamW with a warm-up + cosine-decay learning rate and gradient clipping; light
photometric augmentation (per-image brightness, contrast, gamma, colour gain, noise;
left and right jittered independently). Steps run one jitted update at a time with a
tqdm bar; with `checkpoint`, (params, optimiser state, step) are saved every
`checkpoint_every` steps and `resume=True` continues from the saved step with the same
per-step random streams, so an interrupted and resumed run equals an uninterrupted one.

Paper: P15 (learned stereo matchers on synthetic faces).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import optax
from jaxtyping import Array, Float, PRNGKeyArray
from tqdm.auto import tqdm

from jaxlab._core import (
    check_array,
    check_finite,
    check_positive_int,
    load_checkpoint,
    optimizer_update,
    save_checkpoint,
)

from ._raft import RAFTStereo

__all__ = ["init_raft", "raft_loss", "train_raft", "raft_predictor", "raft_disparity"]


def _check_pair(left, right, n_iters, downsample):
    check_array("left", left, dtype=jnp.floating)
    if left.ndim not in (3, 4) or left.shape[-1] != 3:
        raise ValueError(f"left: expected (H, W, 3) or (B, H, W, 3), received {left.shape}")
    check_array("right", right, shape=tuple(left.shape), dtype=jnp.floating)
    check_finite("left", left)
    check_finite("right", right)
    check_positive_int("n_iters", n_iters)
    h, w = left.shape[-3], left.shape[-2]
    if h % downsample or w % downsample:
        raise ValueError(f"left: expected height and width divisible by {downsample}, "
                         f"received {left.shape}")


@functools.partial(jax.jit, static_argnums=(1, 2))
def _normal(key, n, dtype):
    return jax.random.normal(key, (n,), dtype)


def init_raft(model: RAFTStereo, height: int, width: int, *, key: PRNGKeyArray):
    """Initial parameters of `model` (the network is fully convolutional: any image size
    divisible by `model.downsample` works with them). Convolution kernels are LeCun-normal
    (std 1 / sqrt(fan_in)), biases 0. The parameter shapes come from an abstract
    evaluation of `model.init` and all kernels from one normal draw, which is much cheaper
    to compile than flax's per-parameter initialisers."""
    check_positive_int("height", height)
    check_positive_int("width", width)
    x = jax.ShapeDtypeStruct((1, height, width, 3), model.dtype)
    shapes = jax.eval_shape(lambda k, a: model.init(k, a, a, 1), key, x)["params"]
    flat, tree = jax.tree_util.tree_flatten_with_path(shapes)
    z = _normal(key, sum(math.prod(s.shape) for _, s in flat), jnp.dtype(model.dtype))
    leaves, start = [], 0
    for path, s in flat:
        size = math.prod(s.shape)
        if getattr(path[-1], "key", None) == "kernel":
            fan_in = math.prod(s.shape[:-1])
            leaves.append(z[start:start + size].reshape(s.shape) / math.sqrt(fan_in))
        else:
            leaves.append(jnp.zeros(s.shape, s.dtype))
        start += size
    return jax.tree_util.tree_unflatten(tree, leaves)


def raft_loss(model: RAFTStereo, params, left, right, disparity, valid, *, n_iters: int,
              gamma: float = 0.9) -> Float[Array, ""]:
    """Sequence loss sum_i gamma^(N-i) mean_{valid} |d_i - d_gt| on a batch (B, H, W, 3),
    disparity (B, H, W) (values ignored where `valid` (B, H, W) is False)."""
    preds = model.apply({"params": params}, left, right, n_iters)
    gt = jnp.where(valid, disparity, 0.0).astype(preds.dtype)
    v = valid.astype(preds.dtype)
    err = jnp.sum(jnp.abs(preds - gt) * v, axis=(1, 2, 3)) / jnp.maximum(jnp.sum(v), 1.0)
    weights = gamma ** jnp.arange(n_iters - 1, -1, -1, dtype=preds.dtype)
    return jnp.sum(weights * err)


def _jitter(img, key):
    """Photometric jitter of one (H, W, 3) image in [0, 1]."""
    k = jax.random.split(key, 5)
    dt = img.dtype
    u = lambda kk, lo, hi, shape=(): jax.random.uniform(kk, shape, dt, lo, hi)  # noqa: E731
    img = jnp.clip(img, 0.0, 1.0) ** u(k[0], 0.8, 1.25)
    img = img * u(k[1], 0.8, 1.2, (3,)) * u(k[2], 0.8, 1.2)
    mean = img.mean()
    img = mean + (img - mean) * u(k[3], 0.8, 1.2)
    return jnp.clip(img + 0.01 * jax.random.normal(k[4], img.shape, dt), 0.0, 1.0)


@functools.lru_cache(maxsize=8)
def _optimizer(learning_rate: float, weight_decay: float, steps: int):
    """AdamW with linear warm-up (5 %) and cosine decay to 5 %, global-norm clipping at 1
    (cached, so repeated training calls share one compiled step)."""
    schedule = optax.warmup_cosine_decay_schedule(
        0.0, learning_rate, max(1, steps // 20), steps, learning_rate * 0.05)
    return optax.chain(optax.clip_by_global_norm(1.0),
                       optax.adamw(schedule, weight_decay=weight_decay))


@functools.partial(jax.jit, static_argnames=("model", "opt", "batch_size", "n_iters", "gamma",
                                             "augment"))
def _train_step(params, opt_state, key, left, right, disp, valid, *, model, opt, batch_size,
                n_iters, gamma, augment):
    ki, ka = jax.random.split(key)
    n = left.shape[0]
    idx = jax.random.choice(ki, n, (batch_size,), replace=n < batch_size)

    def batch_loss(p):
        a, b = left[idx], right[idx]
        if augment:
            k1, k2 = jax.random.split(ka)
            a = jax.vmap(_jitter)(a, jax.random.split(k1, batch_size))
            b = jax.vmap(_jitter)(b, jax.random.split(k2, batch_size))
        return raft_loss(model, p, a, b, disp[idx], valid[idx], n_iters=n_iters, gamma=gamma)

    loss, g = jax.value_and_grad(batch_loss)(params)
    upd, opt_state = optimizer_update(opt, g, opt_state, params)
    return optax.apply_updates(params, upd), opt_state, loss


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
    learning_rate: float = 4e-4,
    weight_decay: float = 1e-5,
    gamma: float = 0.9,
    augment: bool = True,
    checkpoint: str | Path | None = None,
    checkpoint_every: int = 50,
    resume: bool = False,
    callback: Callable[[int, float], Any] | None = None,
    progress: bool = True,
):
    """Train `model` on stereo pairs with ground-truth disparity.

    Arguments:
        model: a `RAFTStereo`; left, right: (N, H, W, 3) images in [0, 1]; disparity:
        (N, H, W) ground truth in pixels (NaN/inf = unknown, not supervised); key: PRNG key
        (initialisation when `params` is None, batches, augmentation); mask: optional
        (N, H, W) bool restricting supervision; steps, batch_size, n_iters, learning_rate,
        weight_decay, gamma: optimisation settings; checkpoint: file for (params, optimiser
        state, step), written every `checkpoint_every` steps and at the end; resume: start
        from `checkpoint` when it exists; callback(step, loss) after every step.
    Returns:
        (params, losses) with losses (steps - start,) the per-step training losses.
    """
    sizes = check_array("left", left, shape=("N", "H", "W", 3), dtype=jnp.floating)
    check_array("right", right, shape=("N", "H", "W", 3), dtype=jnp.floating, sizes=sizes)
    check_array("disparity", disparity, shape=("N", "H", "W"), dtype=jnp.floating, sizes=sizes)
    check_finite("left", left)
    check_finite("right", right)
    if mask is not None:
        check_array("mask", mask, shape=("N", "H", "W"), sizes=sizes)
    for name, v in (("steps", steps), ("batch_size", batch_size), ("n_iters", n_iters),
                    ("checkpoint_every", checkpoint_every)):
        check_positive_int(name, v)
    _check_pair(left[:1], right[:1], n_iters, model.downsample)
    dt = model.dtype
    valid = np.isfinite(np.asarray(disparity))
    if mask is not None:
        valid &= np.asarray(mask, bool)
    left_d, right_d = jnp.asarray(left, dt), jnp.asarray(right, dt)
    disp_d = jnp.asarray(np.where(valid, np.asarray(disparity), 0.0), dt)
    valid_d = jnp.asarray(valid)
    k_init, k_data = jax.random.split(key)
    if params is None:
        params = init_raft(model, sizes["H"], sizes["W"], key=k_init)
    opt = _optimizer(float(learning_rate), float(weight_decay), steps)
    opt_state = opt.init(params)
    start = 0
    ckpt = None if checkpoint is None else Path(checkpoint)
    if resume and ckpt is not None and ckpt.is_file():
        params, opt_state, s = load_checkpoint(ckpt, (params, opt_state, jnp.zeros((), jnp.int32)))
        start = int(s)

    losses = []
    bar = tqdm(range(start, steps), desc="stereo: RAFT training", disable=not progress,
               initial=start, total=steps)
    for i in bar:
        params, opt_state, loss = _train_step(
            params, opt_state, jax.random.fold_in(k_data, i), left_d, right_d, disp_d, valid_d,
            model=model, opt=opt, batch_size=batch_size, n_iters=n_iters, gamma=float(gamma),
            augment=augment)
        losses.append(float(loss))
        bar.set_postfix(loss=f"{losses[-1]:.3f}")
        done = i + 1
        if ckpt is not None and (done % checkpoint_every == 0 or done == steps):
            save_checkpoint(ckpt, (params, opt_state, jnp.asarray(done, jnp.int32)))
        if callback is not None:
            callback(done, losses[-1])
    return params, np.asarray(losses)


def raft_predictor(model: RAFTStereo, params, *, n_iters: int = 6):
    """A predictor `predict(left, right) -> disparity` jit-compiled once for these params:
    left, right (H, W, 3) or (B, H, W, 3) images in [0, 1]; returns the final-iteration
    disparity (H, W) or (B, H, W), in pixels, >= 0. Bad inputs raise ValueError."""
    check_positive_int("n_iters", n_iters)
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
    _check_pair(left, right, n_iters, model.downsample)
    return raft_predictor(model, params, n_iters=n_iters)(left, right)
