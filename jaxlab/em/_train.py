"""Training of the P11 models: one step object, parameterised by the objective.

Objectives (hashable strategy objects, so the driver compiles one step per model
configuration and reuses it across data sets):

- `SRObjective`: SR-only net, L1 or L2 reconstruction loss;
- `SegObjective`: segmentation-only net, class-balanced BCE on boundaries;
- `JointObjective`: joint net, SR loss + `seg_weight` x balanced BCE (segmentation as
  an auxiliary task for SR); with a `"prior"` in the batch the segmentation decoder
  is guided by it (fine-tuning on refined structural priors);
- `DenoiserObjective`: epsilon-prediction MSE of the refiner's denoiser on noised
  HR embeddings E(HR), conditioned on SR embeddings E(SR) (both precomputed by a frozen
  joint model, `jaxlab.em.embed_images`).

`ObjectiveStep` is one optimiser step on a random minibatch (drawn with replacement);
`fit` runs it with `jaxlab.run_steps` (one jitted call per step, `StepLoop`:
on XLA:CPU, convolutions inside a `lax.scan` body run an order of magnitude slower
than in a top-level computation), with checkpoints and exact resume from a
`Checkpointer`.
"""

from __future__ import annotations

import dataclasses
import inspect
from collections.abc import Mapping
from functools import partial
from typing import Any, cast

import equinox as eqx
import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import optax

from jaxlab._core import (
    AbstractStep,
    Driver,
    History,
    StepLoop,
    as_array,
    check_array,
    check_memory,
    check_positive_int,
    check_size,
    driver_for,
    optimizer_update,
    run_steps,
)

from ._diffusion import Denoiser, make_schedule, q_sample
from ._joint import JointOutput

__all__ = [
    "MAX_STEPS",
    "balanced_bce",
    "reconstruction_loss",
    "SRObjective",
    "SegObjective",
    "JointObjective",
    "DenoiserObjective",
    "ObjectiveStep",
    "fit",
    "init_params",
]


MAX_STEPS = 1_000_000
"""The most optimiser steps one `fit` runs (P11 trains for hundreds): a larger `steps` is a
`ValueError` naming it, instead of a run that does not end."""


def _check_batch(data: Mapping[str, jax.Array], name: str, like: str, *, unit: bool = False):
    """`data[name]` has the shape of `data[like]` (and with `unit`, values in [0, 1])."""
    check_array(f"data[{name!r}]", data[name], shape=data[like].shape)
    if unit:
        as_array(f"data[{name!r}]", data[name], low=0.0, high=1.0)


def balanced_bce(logits: jax.Array, targets: jax.Array) -> jax.Array:
    """Class-balanced binary cross-entropy: positives and negatives each weigh one half.

    **Arguments:** `logits`, `targets` (in {0, 1}) of the same shape.

    **Returns:** scalar `0.5 mean_pos(-log p) + 0.5 mean_neg(-log(1 - p))`.
    """
    logits = as_array("logits", logits, dtype=jnp.floating, finite=True, nonempty=True)
    t = as_array(
        "targets", targets, shape=logits.shape, dtype=np.number, finite=True, low=0.0, high=1.0
    ).astype(logits.dtype)
    pos = -jax.nn.log_sigmoid(logits)
    neg = -jax.nn.log_sigmoid(-logits)
    n_pos = jnp.maximum(jnp.sum(t), 1)
    n_neg = jnp.maximum(jnp.sum(1 - t), 1)
    return 0.5 * jnp.sum(t * pos) / n_pos + 0.5 * jnp.sum((1 - t) * neg) / n_neg


def reconstruction_loss(pred: jax.Array, target: jax.Array, norm: str = "l1") -> jax.Array:
    """Mean absolute (`"l1"`) or squared (`"l2"`) error of `pred` against `target`
    (float arrays of one shape, non-empty)."""
    pred = as_array("pred", pred, dtype=jnp.floating, finite=True, nonempty=True)
    target = as_array("target", target, shape=pred.shape, dtype=jnp.number, finite=True, real=True)
    d = pred - target.astype(pred.dtype)
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

    def check_data(self, data: Mapping[str, jax.Array]) -> None:
        """`"lr"` and `"hr"` present (`ObjectiveStep` checks them before the first step)."""
        _require(data, "lr", "hr")

    def __call__(self, params, batch, key):
        del key
        return reconstruction_loss(
            cast(jax.Array, self.model.apply(params, batch["lr"])), batch["hr"], self.norm
        )


@dataclasses.dataclass(frozen=True)
class SegObjective:
    """Segmentation-only loss; batch keys `"image"` `(B, H, W)`, `"boundary"` `(B, H, W)`."""

    model: nn.Module

    def check_data(self, data: Mapping[str, jax.Array]) -> None:
        """`"image"` and `"boundary"` of one shape, boundaries in [0, 1]."""
        _require(data, "image", "boundary")
        _check_batch(data, "boundary", "image", unit=True)

    def __call__(self, params, batch, key):
        del key
        return balanced_bce(
            cast(jax.Array, self.model.apply(params, batch["image"])), batch["boundary"]
        )


@dataclasses.dataclass(frozen=True)
class JointObjective:
    """Joint SR + segmentation loss; batch keys `"lr"`, `"hr"`, `"boundary"` and optional
    `"prior"` `(B, H, W, C_e)` (structural prior for the segmentation decoder)."""

    model: nn.Module
    seg_weight: float = 0.5
    norm: str = "l1"

    def check_data(self, data: Mapping[str, jax.Array]) -> None:
        """`"lr"`, `"hr"` and `"boundary"`; boundaries of the HR shape, in [0, 1]."""
        _require(data, "lr", "hr", "boundary")
        _check_batch(data, "boundary", "hr", unit=True)

    def __call__(self, params, batch, key):
        del key
        out = cast(JointOutput, self.model.apply(params, batch["lr"], batch.get("prior")))
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

    def check_data(self, data: Mapping[str, jax.Array]) -> None:
        """`"cond"` and `"target"` embeddings of one shape."""
        _require(data, "cond", "target")
        _check_batch(data, "cond", "target")

    def __call__(self, params, batch, key):
        x0 = batch["target"]
        sched = make_schedule(self.model.schedule, self.model.num_steps, dtype=x0.dtype)
        kt, kn = jax.random.split(key)
        t = jax.random.randint(kt, (x0.shape[0],), 1, self.model.num_steps + 1)
        noise = jax.random.normal(kn, x0.shape, x0.dtype)
        x_t = q_sample(sched, x0, t, noise)
        eps = cast(jax.Array, self.model.apply(params, x_t, t, batch["cond"]))
        per_sample = jnp.mean((eps - noise) ** 2, axis=tuple(range(1, x0.ndim)))
        if self.min_snr_gamma is None:
            return jnp.mean(per_sample)
        ab = sched.alpha_bars[t]
        snr = ab / (1 - ab)
        return jnp.mean(jnp.minimum(snr, self.min_snr_gamma) / snr * per_sample)


def _require(data: Mapping[str, Any], *names: str) -> None:
    missing = [n for n in names if n not in data]
    if missing:
        raise ValueError(f"data: expected the keys {names}, missing {missing}")


def init_params(model: nn.Module, *args: Any, key: jax.Array) -> Any:
    """Flax variables of `model` for example inputs `args`, jitted.

    `args` finite, non-empty arrays (lists convert) or None; a bad one is a `ValueError`
    naming the argument as `model.__call__` names it (e.g. `image`, `lr`).

    The parameters are drawn from an "rbg" PRNG key derived from `key` (deterministic
    per `key`): XLA:CPU compile time of the default threefry generator grows with every
    parameter tensor and dominates the cost of initialising a U-Net on CPU.
    """
    # the example inputs, checked at the boundary and named as the model's `__call__`
    # names them (None passes: an optional input left out)
    names = list(inspect.signature(type(model).__call__).parameters)[1:]
    args = tuple(
        a
        if a is None
        else as_array(names[i] if i < len(names) else f"args[{i}]", a, finite=True, nonempty=True)
        for i, a in enumerate(args)
    )
    data = np.asarray(jax.random.key_data(key)).ravel().astype(np.uint32)
    seed = int(np.bitwise_xor.reduce(data * np.uint32(2654435761)) & np.uint32(0x7FFFFFFF))
    return _init(model, jax.random.key(seed, impl="rbg"), *args)


# one jitted init per model configuration and input shapes: flax modules hash by value,
# so equal models built in later calls (seeds, settings) reuse the compiled init
@partial(jax.jit, static_argnums=0)
def _init(model: nn.Module, key: jax.Array, *args: Any) -> Any:
    return model.init(key, *args)


def _check_data(data: Mapping[str, Any]) -> dict[str, jax.Array]:
    """Each entry a finite, non-empty real array (a NaN image would train to NaN
    parameters), all with one leading axis."""
    if not isinstance(data, Mapping) or not data:
        raise ValueError(f"data: expected a non-empty mapping of arrays, received {data!r:.60}")
    data = {
        k: as_array(f"data[{k!r}]", v, finite=True, nonempty=True, real=True)
        for k, v in data.items()
    }
    sizes = {k: v.shape[0] if v.ndim else None for k, v in data.items()}
    if len(set(sizes.values())) != 1 or None in sizes.values():
        raise ValueError(f"data: expected arrays with a common leading axis, received {sizes}")
    return data


class ObjectiveStep(AbstractStep):
    """One optimiser step on `objective(params, batch, key)` for a random minibatch.

    The minibatch is `batch_size` rows of `data` drawn with replacement; state
    `(params, opt_state)` with `params` the flax variables; aux `loss`.

    **Arguments:**

    - `objective`: one of the objectives above (any hashable callable
      `(params, batch, key) -> scalar`).
    - `data`: name -> array with a common leading axis N (the keys the objective reads;
      finite, non-empty, real; an objective's `check_data(data)`, where it has one,
      checks the keys, shapes and ranges it needs).
    - `optimizer`: an optax transformation (`fit`: Adam(`learning_rate`)).
    - `batch_size`: rows per step.
    """

    data: dict[str, jax.Array]
    objective: Any = eqx.field(static=True)
    optimizer: optax.GradientTransformation = eqx.field(static=True)
    batch_size: int = eqx.field(static=True)

    def __init__(
        self,
        objective: Any,
        data: Mapping[str, Any],
        *,
        optimizer: optax.GradientTransformation,
        batch_size: int = 8,
    ):
        self.data = _check_data(data)
        check = getattr(objective, "check_data", None)
        if check is not None:  # the keys, shapes and ranges this objective reads
            check(self.data)
        self.objective = objective
        self.optimizer = optimizer
        self.batch_size = check_positive_int("batch_size", batch_size)
        # a minibatch is batch_size rows of every array (the activations come on top)
        row = sum(v.nbytes / v.shape[0] for v in self.data.values())
        check_memory("batch_size", 4.0 * self.batch_size * row)

    def init(self, model: Any, key: jax.Array):
        """`model`: the initial flax variables (see `init_params`)."""
        del key
        return model, self.optimizer.init(model)

    def step(self, state, key):
        params, opt_state = state
        n = jax.tree_util.tree_leaves(self.data)[0].shape[0]
        ki, kl = jax.random.split(key)
        idx = jax.random.randint(ki, (self.batch_size,), 0, n)
        batch = {name: v[idx] for name, v in self.data.items()}
        loss, grads = jax.value_and_grad(self.objective)(params, batch, kl)
        updates, opt_state = optimizer_update(self.optimizer, grads, opt_state, params)
        return (optax.apply_updates(params, updates), opt_state), {"loss": loss}


def fit(
    objective: Any,
    params: Any,
    data: Mapping[str, Any],
    *,
    key: jax.Array,
    steps: int,
    batch_size: int = 8,
    optimizer: optax.GradientTransformation | None = None,
    driver: Driver | None = None,
) -> tuple[Any, History]:
    """Minimise `objective(params, batch, key)` on random minibatches of `data`
    (`ObjectiveStep` run by `jaxlab.run_steps`).

    **Arguments:** `objective` one of the objectives above (any hashable callable);
    `params` initial flax variables; `data` name -> array with a common leading axis N
    (the keys the objective reads; finite and real; the objectives above check their
    keys, shapes and boundary ranges); `key` PRNG key (keyword-only; step `i` uses
    `fold_in(key, i)`); `steps` total steps (at most `MAX_STEPS`); `batch_size` rows per
    step (refused when a minibatch would not fit in memory); `optimizer` (default
    `optax.adam(1e-3)`; pass one object to several calls to reuse the compiled step); `driver` a
    `jaxlab.Driver`: its chunk (steps between progress updates, 25 here when left at the
    default; no effect on the results), checkpointer (saves every `checkpointer.every`
    steps, default every chunk; resumes exactly), progress; `StepLoop()` unless it names
    a loop.

    **Returns:** `(params, history)`, `history.losses` `(steps,)` per-step training loss.
    """
    steps = check_size("steps", steps, cap=MAX_STEPS, why="em.MAX_STEPS")
    if optimizer is None:
        optimizer = optax.adam(1e-3)
    step = ObjectiveStep(objective, data, optimizer=optimizer, batch_size=batch_size)
    (params, _), hist = run_steps(
        step,
        step.init(params, key),
        key=key,
        steps=steps,
        driver=driver_for(driver, chunk=25, loop=StepLoop()),
    )
    return params, hist
