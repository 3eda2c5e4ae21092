"""`fit_sae`: train an SAE from an array or an activation store through `run_steps`."""

from __future__ import annotations

from collections.abc import Callable

import jax
import jax.numpy as jnp
import optax
from jaxtyping import Array, Float, PRNGKeyArray

from .._core import Checkpointer, NoProgress, check_positive_int, run_steps
from ._sae import AbstractSAE
from ._train import SAEState, SAEStep

__all__ = ["fit_sae"]


def fit_sae(
    source,
    sae: AbstractSAE,
    *,
    key: PRNGKeyArray,
    steps: int,
    batch_size: int = 4096,
    optimizer: optax.GradientTransformation | None = None,
    buffer_size: int | None = None,
    checkpointer=None,
    progress=None,
    chunk: int = 100,
    scale: float = 1.0,
    **step_options,
):
    """Train `sae` for `steps` steps of `SAEStep` on activations from `source`.

    **Arguments:**

    - `source`: an (N, d_in) float array (sampled from in memory), or an activation store
      with `.batches(size, *, key, shuffle=True)` and `.n_tokens` (e.g.
      `jaxlab.lm.collect(...)`), streamed as shuffled buffers of `buffer_size` tokens,
      each trained on for `buffer_size // batch_size` steps.
    - `sae`: the initial `TopKSAE`, `BatchTopKSAE` or `ReLUSAE`.
    - `key`: PRNG key (batches, buffers, resampling).
    - `steps`, `batch_size`: optimiser steps and tokens per step.
    - `optimizer`: default `optax.adam(2e-4)`.
    - `buffer_size`: tokens per store buffer (default 64 batches, at most the store).
    - `checkpointer`, `progress`, `chunk`: passed to `jaxlab._core.run_steps` (arrays; a
      store run checkpoints per buffer when `checkpointer` is a callable buffer -> Checkpointer).
    - `scale`: activations are multiplied by this before training (SAELens normalises so
      that the mean norm is sqrt(d_in); pass the same `input_scale` to `ce_loss_score`).
    - `**step_options`: further `SAEStep` fields (`aux_coefficient`, `dead_window`, ...).

    **Returns:** (trained SAE, final `SAEState`, list of the driver's `History` per buffer).
    """
    steps = check_positive_int("steps", steps)
    batch_size = check_positive_int("batch_size", batch_size)
    optimizer = optax.adam(2e-4) if optimizer is None else optimizer
    progress = NoProgress() if progress is None else progress
    if not scale > 0:
        raise ValueError(f"scale: expected a positive number, received {scale!r}")
    if hasattr(source, "batches"):
        return _fit_store(
            source,
            sae,
            key,
            steps,
            batch_size,
            optimizer,
            buffer_size,
            checkpointer,
            progress,
            chunk,
            scale,
            step_options,
        )
    data = jnp.asarray(source)
    if scale != 1.0:
        data = data * jnp.asarray(scale, data.dtype)
    step = SAEStep(data, optimizer, batch_size, **step_options)
    state, hist = run_steps(
        step,
        step.init(sae, key),
        key=key,
        steps=steps,
        chunk=min(chunk, steps),
        checkpointer=checkpointer,
        progress=progress,
    )
    return state.sae, state, [hist]


def _fit_store(
    store,
    sae,
    key,
    steps,
    batch_size,
    optimizer,
    buffer_size,
    checkpointer: Callable[[int], Checkpointer] | None,
    progress,
    chunk,
    scale,
    step_options,
):
    n_tokens = int(store.n_tokens)
    if n_tokens == 0:
        raise ValueError("source: expected a non-empty activation store, received 0 tokens")
    if int(store.d) != sae.d_in:
        raise ValueError(
            f"source: expected activations of width d_in={sae.d_in}, received a "
            f"store of width {store.d}"
        )
    if checkpointer is not None and not callable(checkpointer):
        raise ValueError(
            "checkpointer: for a store, expected a callable buffer index -> "
            f"Checkpointer, received {type(checkpointer).__name__}"
        )
    size = min(
        64 * batch_size if buffer_size is None else check_positive_int("buffer_size", buffer_size),
        n_tokens,
    )
    per_buffer = max(size // batch_size, 1)
    state: SAEState | None = None
    hists = []
    done, epoch = 0, 0
    while done < steps:
        kb = jax.random.fold_in(key, 2 * epoch)
        for buf in store.batches(size, key=kb, shuffle=True, buffer=max(size, 65536)):
            if done >= steps:
                break
            data: Float[Array, "n d"] = jnp.asarray(buf) * jnp.float32(scale)
            step = SAEStep(data, optimizer, batch_size, **step_options)
            if state is None:
                state = step.init(sae, key)
            n = min(per_buffer, steps - done)
            b = len(hists)
            ck = checkpointer(b) if callable(checkpointer) else None
            state, hist = run_steps(
                step,
                state,
                key=jax.random.fold_in(key, 2 * b + 1),
                steps=n,
                chunk=min(chunk, n),
                checkpointer=ck,
                progress=progress,
            )
            hists.append(hist)
            done += n
        epoch += 1
        if not hists:
            raise ValueError("source: the activation store yielded no buffers")
    assert state is not None  # set with the first buffer
    return state.sae, state, hists
