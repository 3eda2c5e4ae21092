"""Training of the P11 models: one optax loop, parameterised by the objective.

Objectives (hashable strategy objects, so a jitted chunk of steps compiles once per
model configuration and is reused across data sets):

- `SRObjective`: SR-only net, L1 or L2 reconstruction loss;
- `SegObjective`: segmentation-only net, class-balanced BCE on boundaries;
- `JointObjective`: joint net, SR loss + `seg_weight` x balanced BCE (segmentation as
  an auxiliary task for SR); with a `"prior"` in the batch the segmentation decoder
  is guided by it (fine-tuning on refined structural priors);
- `DenoiserObjective`: epsilon-prediction MSE of the refiner's denoiser on noised
  HR embeddings, conditioned on SR embeddings.

`fit` runs jitted Adam steps (minibatches drawn with replacement) in chunks under a
tqdm bar, saves `(params, opt_state, step)` with
`jaxlab._core.save_checkpoint` after every chunk when `checkpoint` is given, and
continues from it with `resume=True` (same result as an uninterrupted run).
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import optax
from tqdm.auto import tqdm

from jaxlab._core import check_positive_int, load_checkpoint, optimizer_update, save_checkpoint

from ._diffusion import Denoiser, make_schedule, q_sample

__all__ = [
    "balanced_bce",
    "reconstruction_loss",
    "SRObjective",
    "SegObjective",
    "JointObjective",
    "DenoiserObjective",
    "fit",
    "init_params",
]


def balanced_bce(logits: jax.Array, targets: jax.Array) -> jax.Array:
    """Class-balanced binary cross-entropy: positives and negatives each weigh one half.

    **Arguments:** `logits`, `targets` (in {0, 1}) of the same shape.

    **Returns:** scalar `0.5 mean_pos(-log p) + 0.5 mean_neg(-log(1 - p))`.
    """
    t = jnp.asarray(targets, logits.dtype)
    pos = -jax.nn.log_sigmoid(logits)
    neg = -jax.nn.log_sigmoid(-logits)
    n_pos = jnp.maximum(jnp.sum(t), 1)
    n_neg = jnp.maximum(jnp.sum(1 - t), 1)
    return 0.5 * jnp.sum(t * pos) / n_pos + 0.5 * jnp.sum((1 - t) * neg) / n_neg


def reconstruction_loss(pred: jax.Array, target: jax.Array, norm: str = "l1") -> jax.Array:
    """Mean absolute (`"l1"`) or squared (`"l2"`) error."""
    d = pred - jnp.asarray(target, pred.dtype)
    if norm == "l1":
        return jnp.mean(jnp.abs(d))
    if norm == "l2":
        return jnp.mean(d**2)
    raise ValueError(f"norm: expected 'l1' or 'l2', received {norm!r}")


@dataclasses.dataclass(frozen=True)
class SRObjective:
    """SR-only loss; batch keys `"lr"` `(B, h, w)`, `"hr"` `(B, H, W)`."""

    model: nn.Module
    norm: str = "l1"

    def __call__(self, params, batch, key):
        del key
        return reconstruction_loss(self.model.apply(params, batch["lr"]), batch["hr"], self.norm)


@dataclasses.dataclass(frozen=True)
class SegObjective:
    """Segmentation-only loss; batch keys `"image"` `(B, H, W)`, `"boundary"` `(B, H, W)`."""

    model: nn.Module

    def __call__(self, params, batch, key):
        del key
        return balanced_bce(self.model.apply(params, batch["image"]), batch["boundary"])


@dataclasses.dataclass(frozen=True)
class JointObjective:
    """Joint SR + segmentation loss; batch keys `"lr"`, `"hr"`, `"boundary"` and optional
    `"prior"` `(B, H, W, C_e)` (structural prior for the segmentation decoder)."""

    model: nn.Module
    seg_weight: float = 0.5
    norm: str = "l1"

    def __call__(self, params, batch, key):
        del key
        out = self.model.apply(params, batch["lr"], batch.get("prior"))
        sr = reconstruction_loss(out.sr, batch["hr"], self.norm)
        return sr + self.seg_weight * balanced_bce(out.boundary_logits, batch["boundary"])


@dataclasses.dataclass(frozen=True)
class DenoiserObjective:
    """Epsilon-prediction MSE (Ho et al. 2020): x_0 = HR embedding `"target"`, condition
    = SR embedding `"cond"` (both `(B, H, W, C)`); t uniform in 1..T under the
    denoiser's schedule. `min_snr_gamma` weighs each sample's MSE by
    min(SNR_t, gamma) / SNR_t (Min-SNR weighting, Hang et al. 2023; None: unweighted)."""

    model: Denoiser
    min_snr_gamma: float | None = 5.0

    def __call__(self, params, batch, key):
        x0 = batch["target"]
        sched = make_schedule(self.model.schedule, self.model.num_steps, dtype=x0.dtype)
        kt, kn = jax.random.split(key)
        t = jax.random.randint(kt, (x0.shape[0],), 1, self.model.num_steps + 1)
        noise = jax.random.normal(kn, x0.shape, x0.dtype)
        x_t = q_sample(sched, x0, t, noise)
        eps = self.model.apply(params, x_t, t, batch["cond"])
        per_sample = jnp.mean((eps - noise) ** 2, axis=tuple(range(1, x0.ndim)))
        if self.min_snr_gamma is None:
            return jnp.mean(per_sample)
        ab = sched.alpha_bars[t]
        snr = ab / (1 - ab)
        return jnp.mean(jnp.minimum(snr, self.min_snr_gamma) / snr * per_sample)


def init_params(model: nn.Module, *args: Any, key: jax.Array) -> Any:
    """Flax variables of `model` for example inputs `args`, jitted.

    The parameters are drawn from an "rbg" PRNG key derived from `key` (deterministic
    per `key`): XLA:CPU compile time of the default threefry generator grows with every
    parameter tensor and dominates the cost of initialising a U-Net on CPU.
    """
    data = np.asarray(jax.random.key_data(key)).ravel().astype(np.uint32)
    seed = int(np.bitwise_xor.reduce(data * np.uint32(2654435761)) & np.uint32(0x7FFFFFFF))
    return jax.jit(model.init)(jax.random.key(seed, impl="rbg"), *args)


@functools.cache
def _adam(learning_rate: float) -> optax.GradientTransformation:
    return optax.adam(learning_rate)


@functools.partial(jax.jit, static_argnames=("objective", "learning_rate", "batch_size"))
def _step(objective, learning_rate, batch_size, params, opt_state, data, key):
    # One jitted step driven from Python: on XLA:CPU, convolutions inside a
    # `lax.scan` body run an order of magnitude slower than in a top-level computation.
    n = jax.tree_util.tree_leaves(data)[0].shape[0]
    ki, kl = jax.random.split(key)
    idx = jax.random.randint(ki, (batch_size,), 0, n)
    batch = {name: v[idx] for name, v in data.items()}
    loss, grads = jax.value_and_grad(objective)(params, batch, kl)
    updates, opt_state = optimizer_update(_adam(learning_rate), grads, opt_state, params)
    return optax.apply_updates(params, updates), opt_state, loss


def fit(
    objective: Any,
    params: Any,
    data: Mapping[str, Any],
    *,
    key: jax.Array,
    steps: int,
    batch_size: int = 8,
    learning_rate: float = 1e-3,
    chunk: int = 25,
    checkpoint: str | Path | None = None,
    resume: bool = False,
    progress: bool = True,
    desc: str = "em",
) -> tuple[Any, np.ndarray]:
    """Minimise `objective(params, batch, key)` with Adam on random minibatches of `data`.

    **Arguments:** `objective` one of the objectives above (any hashable callable);
    `params` initial flax variables; `data` name -> array with a common leading axis N
    (the keys the objective reads); `key` PRNG key (keyword-only); `steps` total steps;
    `checkpoint` file written after every `chunk` steps;
    `resume` continue from `checkpoint` when it exists.

    **Returns:** `(params, losses)`, losses `(steps,)` per-step training loss (NaN for
    steps done before a resume).
    """
    steps = check_positive_int("steps", steps)
    chunk = check_positive_int("chunk", chunk)
    batch_size = check_positive_int("batch_size", batch_size)
    data = {k: jnp.asarray(v) for k, v in data.items()}
    if not data:
        raise ValueError("data: expected at least one array")
    sizes = {k: v.shape[0] if v.ndim else None for k, v in data.items()}
    if len(set(sizes.values())) != 1 or None in sizes.values():
        raise ValueError(f"data: expected arrays with a common leading axis, received {sizes}")
    lr = float(learning_rate)
    opt_state = _adam(lr).init(params)
    ref_dtype = jax.tree_util.tree_leaves(params)[0].dtype
    losses = np.full((steps,), np.nan, np.dtype(ref_dtype))
    done = 0
    ckpt = Path(checkpoint) if checkpoint is not None else None
    if resume and ckpt is not None and ckpt.is_file():
        params, opt_state, done_arr = load_checkpoint(ckpt, (params, opt_state, jnp.array(0)))
        done = int(done_arr)
    bar = tqdm(total=steps, initial=min(done, steps), desc=desc, disable=not progress,
               leave=False)
    while done < steps:
        n = min(chunk, steps - done)
        ls = []
        for i in range(done, done + n):
            params, opt_state, loss = _step(objective, lr, batch_size, params, opt_state,
                                            data, jax.random.fold_in(key, i))
            ls.append(loss)
        losses[done:done + n] = np.asarray(jnp.stack(ls))
        done += n
        bar.update(n)
        bar.set_postfix(loss=float(ls[-1]))
        if ckpt is not None:
            save_checkpoint(ckpt, (params, opt_state, jnp.array(done)))
    bar.close()
    return params, losses
