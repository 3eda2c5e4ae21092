"""`fit_sae`: train an SAE from an array or an activation store through `run_steps`."""

from __future__ import annotations

from collections.abc import Callable

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import optax
from jaxtyping import Array, Float, PRNGKeyArray

from .._core import (
    Checkpointer,
    Driver,
    as_array,
    check_finite,
    check_instance,
    check_memory,
    check_positive_int,
    check_real,
    driver_for,
    run_steps,
)
from ._sae import AbstractSAE
from ._train import SAEState, SAEStep

__all__ = ["fit_sae", "NORMALIZE_ACTIVATIONS", "norm_scaling_factor", "fold_scaling_factor"]

#: `fit_sae`'s `normalize_activations` choices (SAELens' names). SAELens also has the
#: per-token run-time transforms "constant_norm_rescale" and "layer_norm", which jaxlab's
#: SAEs do not apply (refused with a ValueError).
NORMALIZE_ACTIVATIONS = ("none", "expected_average_only_in")
"""`fit_sae`'s `normalize_activations` choices (SAELens' names): `"none"`, or
`"expected_average_only_in"` (scale inputs to an average norm of sqrt(d))."""
_NORM_SAMPLE = 65536


def norm_scaling_factor(x) -> float:
    """SAELens' `expected_average_only_in` factor `s = sqrt(d) / mean_i ||x_i||`.

    **Arguments:** `x`: an (n, d) sample of activations.

    **Returns:** the float scale at which the sample's mean activation norm is sqrt(d).
    """
    x = np.asarray(as_array("x", x, dtype=jnp.floating), np.float64)
    if x.ndim != 2 or x.shape[0] == 0:
        raise ValueError(f"x: expected a non-empty (n, d) sample, received shape {x.shape}")
    mean_norm = float(np.mean(np.linalg.norm(x, axis=1)))
    if not np.isfinite(mean_norm) or mean_norm <= 0:
        raise ValueError(f"x: the mean norm must be positive and finite, received {mean_norm}")
    return float(np.sqrt(x.shape[1]) / mean_norm)


def fold_scaling_factor(sae: AbstractSAE, scale: float) -> AbstractSAE:
    """The SAE trained on `scale * x` as an SAE of the raw x (SAELens'
    `fold_activation_norm_scaling_factor`): `W_enc * s`, `W_dec / s`, `b_dec / s`, so
    `folded(x) == sae(s * x) / s` and `folded.encode(x) == sae.encode(s * x)`.

    **Arguments:** `sae`: an SAE trained on scaled activations; `scale`: the scale s, a
    finite real number > 0 (NaN, inf, strings and arrays are refused naming `scale`).

    **Returns:** the SAE of the raw activations (same class).
    """
    check_instance("sae", sae, AbstractSAE)
    s = jnp.float32(check_real("scale", scale, low=0.0, low_inclusive=False))
    return eqx.tree_at(
        lambda m: (m.W_enc, m.W_dec, m.b_dec), sae, (sae.W_enc * s, sae.W_dec / s, sae.b_dec / s)
    )


def _sample_rows(source, n: int) -> np.ndarray:
    if hasattr(source, "shards"):
        parts, held = [], 0
        for shard in source.shards():
            take = np.asarray(shard[: n - held], np.float32)
            parts.append(take)
            held += take.shape[0]
            if held >= n:
                break
        return np.concatenate(parts) if parts else np.zeros((0, int(source.d)), np.float32)
    return np.asarray(source[:n], np.float32)


def fit_sae(
    source,
    sae: AbstractSAE,
    *,
    key: PRNGKeyArray,
    steps: int,
    batch_size: int = 4096,
    optimizer: optax.GradientTransformation | None = None,
    buffer_size: int | None = None,
    driver: Driver | None = None,
    buffer_checkpointer: Callable[[int], Checkpointer] | None = None,
    scale: float = 1.0,
    normalize_activations: str = "none",
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
    - `driver`: a `jaxlab.Driver` (chunk, checkpointer, progress, stop) for
      `jaxlab.run_steps`; a store run is one run per buffer, each with this driver, so
      its checkpointer must be None there: use `buffer_checkpointer`.
    - `buffer_checkpointer`: for a store, a callable buffer index -> `Checkpointer` (each
      buffer's run saves and resumes with its own file); not for an array source.
    - `scale`: activations are multiplied by this before training (SAELens normalises so
      that the mean norm is sqrt(d_in); pass the same `input_scale` to `ce_loss_score`).
    - `normalize_activations`: SAELens' option of that name. `"none"` (default): train on
      `scale * x`. `"expected_average_only_in"`: the scale is estimated as
      `norm_scaling_factor` of the source's first 65,536 rows (`scale` must then stay
      1.0), the SAE trains on the scaled activations, and the returned SAE has the scale
      folded into its weights (`fold_scaling_factor`, as SAELens folds it before saving):
      it encodes and reconstructs the raw activations. The returned state's SAE stays in
      the scaled space (it is what a resumed run continues).
    - `**step_options`: further `SAEStep` fields (`aux_coefficient`, `dead_window`, ...).

    **Returns:** (trained SAE, final `SAEState`, list of the driver's `History` per buffer)
    (an exception to the `(model, History)` convention: the state resumes a run, and a
    store run has one `History` per buffer).

    **Raises:** `ValueError` naming `source` when a buffer of a store holds NaN/inf
    activations (each buffer is checked before it is trained on, not only the first) or
    the training loss becomes non-finite (the message names the step).
    """
    steps = check_positive_int("steps", steps)
    batch_size = check_positive_int("batch_size", batch_size)
    if isinstance(sae, AbstractSAE):  # a batch's activations, latents and gradients
        check_memory("batch_size", 16.0 * batch_size * (sae.d_in + sae.d_sae))
    optimizer = optax.adam(2e-4) if optimizer is None else optimizer
    driver = driver_for(driver)
    if buffer_checkpointer is not None and not callable(buffer_checkpointer):
        raise ValueError(
            "buffer_checkpointer: expected a callable buffer index -> Checkpointer, "
            f"received {type(buffer_checkpointer).__name__}"
        )
    if not scale > 0:
        raise ValueError(f"scale: expected a positive number, received {scale!r}")
    if normalize_activations not in NORMALIZE_ACTIVATIONS:
        raise ValueError(
            f"normalize_activations: expected one of {NORMALIZE_ACTIVATIONS}, received "
            f"{normalize_activations!r} (SAELens' per-token 'constant_norm_rescale' and "
            "'layer_norm' are run-time transforms that jaxlab's SAEs do not apply)"
        )
    if normalize_activations == "expected_average_only_in":
        if scale != 1.0:
            raise ValueError(
                "scale: leave it at 1.0 with normalize_activations='expected_average_only_in' "
                f"(the scale is estimated from the data), received {scale!r}"
            )
        est = norm_scaling_factor(_sample_rows(source, _NORM_SAMPLE))
        trained, state, hists = fit_sae(
            source,
            sae,
            key=key,
            steps=steps,
            batch_size=batch_size,
            optimizer=optimizer,
            buffer_size=buffer_size,
            driver=driver,
            buffer_checkpointer=buffer_checkpointer,
            scale=est,
            **step_options,
        )
        return fold_scaling_factor(trained, est), state, hists
    if hasattr(source, "batches"):
        return _fit_store(
            source,
            sae,
            key,
            steps,
            batch_size,
            optimizer,
            buffer_size,
            driver,
            buffer_checkpointer,
            scale,
            step_options,
        )
    if buffer_checkpointer is not None:
        raise ValueError(
            "buffer_checkpointer: only for an activation store source; for an array "
            "source pass driver=Driver(checkpointer=...)"
        )
    data = as_array("source", source, ndim=2, dtype=jnp.floating, finite=True, nonempty=True)
    if isinstance(sae, AbstractSAE) and data.shape[1] != sae.d_in:
        raise ValueError(
            f"source: expected width d_in={sae.d_in} of the SAE, received shape {data.shape}"
        )
    if scale != 1.0:
        data = data * jnp.asarray(scale, data.dtype)
    step = SAEStep(data, optimizer, batch_size, **step_options)
    state, hist = run_steps(
        step,
        step.init(sae, key),
        key=key,
        steps=steps,
        driver=driver.replace(chunk=min(driver.chunk, steps)),
    )
    _check_loss(hist, 0, "the array source")
    return state.sae, state, [hist]


def _check_loss(hist, offset: int, where: str) -> None:
    """Raise at the first non-finite training loss, naming the step (a fit that diverged
    or met a NaN is never returned as a trained SAE)."""
    loss = np.asarray(hist.aux["loss"])[: hist.steps_done]
    bad = np.flatnonzero(~np.all(np.isfinite(loss.reshape(loss.shape[0], -1)), axis=1))
    if bad.size:
        raise ValueError(
            f"source: the training loss became non-finite at step {offset + int(bad[0])} "
            f"({where}); check the activations and lower the optimizer's learning rate"
        )


def _fit_store(
    store,
    sae,
    key,
    steps,
    batch_size,
    optimizer,
    buffer_size,
    driver: Driver,
    buffer_checkpointer: Callable[[int], Checkpointer] | None,
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
    if driver.checkpointer is not None:
        raise ValueError(
            "driver: a store run is one run per buffer; pass buffer_checkpointer= (a "
            "callable buffer index -> Checkpointer) instead of driver.checkpointer"
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
            # every buffer, not only the first (step.init checks that one): a NaN row
            # later in the store trained the SAE to NaN silently
            check_finite(f"source: buffer {len(hists)} (from step {done})", buf)
            data: Float[Array, "n d"] = jnp.asarray(buf) * jnp.float32(scale)
            step = SAEStep(data, optimizer, batch_size, **step_options)
            if state is None:
                state = step.init(sae, key)
            n = min(per_buffer, steps - done)
            b = len(hists)
            ck = None if buffer_checkpointer is None else buffer_checkpointer(b)
            state, hist = run_steps(
                step,
                state,
                key=jax.random.fold_in(key, 2 * b + 1),
                steps=n,
                driver=driver.replace(chunk=min(driver.chunk, n), checkpointer=ck),
            )
            _check_loss(hist, done, f"buffer {b}")
            hists.append(hist)
            done += n
        epoch += 1
        if not hists:
            raise ValueError("source: the activation store yielded no buffers")
    assert state is not None  # set with the first buffer
    return state.sae, state, hists
