"""Shared set-up of the two P4 sensing experiments: simulate probes, train the model."""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import json
from pathlib import Path
from typing import Any

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import optax

from experiments._harness import RunContext, cache_dir, file_sha256, load_npz, log, save_npz
from jaxlab import (
    Driver,
    TqdmProgress,
    ValidatedStep,
    load_checkpoint,
    run_steps,
    save_checkpoint,
    sensing,
)


@dataclasses.dataclass(frozen=True)
class SensingConfig:
    """QUICK settings of the simulated probes and the VAE shared by the P4 experiments;
    `FULL_OVERRIDES` are the paper-scale values of FULL."""

    n_flowers: int = 1024
    n_probes: int = 16
    latent_dim: int = 6
    width: int = 64
    steps: int = 3000
    lr: float = 1e-3
    cosine: bool = False  # cosine decay of the learning rate over `steps` (to 5%)
    # plateau stop on a validation -ELBO (held-out flowers, `val_context` probes as
    # context); 0 validation flowers: no validation, a fixed number of steps
    val_flowers: int = 0
    val_context: int = 3
    val_every: int = 500
    patience: int = 4
    min_rel_improvement: float = 0.005
    # keep the trained model in the harness cache (`cache_dir("sensing")`) under a hash of
    # the training settings, the key and the code that trains it (`model_cache_key`)
    cache: bool = True


FULL_OVERRIDES: dict[str, Any] = {
    "n_flowers": 32768,
    "n_probes": 32,
    "latent_dim": 8,
    "width": 256,
    "steps": 50000,
}
UNSEEN = {"kinds": (1,), "curvature_range": (1.0, 1.6), "contrast_range": (0.25, 0.4)}


def train_seconds(config: SensingConfig) -> float:
    """Rough seconds of the VAE's training steps on this CPU (compilations not counted):
    10 ms of overhead a step and its multiply-adds (64 flowers x probes x width^2 x ~10
    layers) at 1e10 a second; validations at the same rate."""
    per_probe = config.width**2 * 10 / 1e10
    step = 0.01 + 64 * config.n_probes * per_probe
    val = config.steps / config.val_every * config.val_flowers * config.n_probes * per_probe
    return config.steps * step + val


def _val_neg_elbo(inner_state, val, *, static, n_context):
    """Mean -ELBO of held-out flowers with `n_context` context probes (fixed key)."""
    data, key = val
    model = eqx.combine(inner_state[0], static)
    keys = jax.random.split(key, data.actions.shape[0])
    return -jnp.mean(
        jax.vmap(lambda v, m, a, k: sensing.elbo(model, v, m, a, key=k, n_context=n_context))(
            data.visual, data.mechano, data.actions, keys
        )
    )


# the training settings of `SensingConfig` (everything the trained model depends on besides
# the key and the code); `cache` and the evaluation settings of subclasses are not among them
TRAIN_FIELDS = tuple(f.name for f in dataclasses.fields(SensingConfig) if f.name != "cache")
# the files whose code determines the trained model
_CODE = (
    Path(__file__),
    *(Path(sensing.__file__).parent / f for f in ("_flower.py", "_model.py", "_train.py")),
)


def model_cache_key(config: SensingConfig, key: jax.Array) -> str:
    """Hash naming a trained model in the cache: the training fields of `config`
    (`TRAIN_FIELDS`), the key's data, the SHA-256 of the code that trains it (`_CODE`)
    and the JAX version."""
    k = jax.random.key_data(key) if jnp.issubdtype(key.dtype, jax.dtypes.prng_key) else key
    text = json.dumps(
        {
            "config": {f: getattr(config, f) for f in TRAIN_FIELDS},
            "key": np.asarray(k).tolist(),
            "code": [file_sha256(p) for p in _CODE],
            "jax": jax.__version__,
        },
        sort_keys=True,
    )
    return hashlib.sha256(text.encode()).hexdigest()[:24]


def trained_model(
    config: SensingConfig, key: jax.Array, ctx: RunContext
) -> tuple[sensing.MultimodalVAE, np.ndarray]:
    """Train the multimodal VAE on simulated probes of training-condition flowers.

    With `config.val_flowers > 0` the run is scored on held-out flowers every
    `val_every` steps (`jaxlab.ValidatedStep`), stops after `patience` evaluations without
    a relative improvement of `min_rel_improvement`, and returns the best-validation
    model; `losses` are then the steps that ran (see `trained_model_validated`)."""
    return trained_model_validated(config, key, ctx)[:2]


def trained_model_validated(
    config: SensingConfig, key: jax.Array, ctx: RunContext, *, tag: str = "vae"
):
    """`trained_model` plus the validation record `(steps, val_loss)` (empty without
    validation flowers) and the step the returned model was taken at. With
    `config.cache` the result is read from / written to the harness cache
    (`model_cache_key`); `tag` names the training's checkpoint."""
    if not config.cache:
        return _train(config, key, ctx, tag)
    path = cache_dir("sensing") / f"vae-{model_cache_key(config, key)}"
    like = sensing.MultimodalVAE(
        latent_dim=config.latent_dim, width=config.width, key=jax.random.split(key, 3)[1]
    )
    rec = load_npz(path.with_suffix(".npz"))
    if rec is not None and path.with_suffix(".eqx").is_file():
        try:
            model = load_checkpoint(path.with_suffix(".eqx"), like)
            log.info("sensing VAE: cached %s", path.name)
            return (
                model,
                rec["losses"],
                (rec["val_at"], rec["val_loss"]),
                int(rec["best_step"]),
            )
        except ValueError:
            pass  # a damaged cache file is retrained
    out = _train(config, key, ctx, tag)
    model, losses, (val_at, val_loss), best_step = out
    save_checkpoint(path.with_suffix(".eqx"), model)
    save_npz(
        path.with_suffix(".npz"),
        {
            "losses": np.asarray(losses),
            "val_at": np.asarray(val_at),
            "val_loss": np.asarray(val_loss),
            "best_step": np.asarray(best_step),
        },
    )
    return out


def _train(config: SensingConfig, key: jax.Array, ctx: RunContext, tag: str):
    kd, km, kt = jax.random.split(key, 3)
    data = sensing.simulate_probes(config.n_flowers, config.n_probes, key=kd)
    model = sensing.MultimodalVAE(latent_dim=config.latent_dim, width=config.width, key=km)
    lr = (
        optax.cosine_decay_schedule(config.lr, config.steps, alpha=0.05)
        if config.cosine
        else config.lr
    )
    if config.val_flowers == 0:
        model, hist = sensing.train_model(
            model,
            data,
            key=kt,
            steps=config.steps,
            optimizer=optax.adam(lr),
            driver=Driver(
                checkpointer=ctx.checkpointer(tag), progress=TqdmProgress(desc="sensing: ELBO")
            ),
        )
        losses = hist.losses
        log.info("sensing VAE: -ELBO %.1f -> %.1f", float(losses[0]), float(losses[-1]))
        return model, losses, (np.zeros(0, int), np.zeros(0)), len(losses)
    # held-out flowers from a key the training set never uses
    val = sensing.simulate_probes(
        config.val_flowers, config.n_probes, key=jax.random.fold_in(kd, 1)
    )
    inner = sensing.VAEStep(model, data, optimizer=optax.adam(lr))
    step = ValidatedStep(
        inner,
        functools.partial(_val_neg_elbo, static=inner.static, n_context=config.val_context),
        (val, jax.random.fold_in(kd, 2)),
        every=config.val_every,
        patience=config.patience,
        min_rel_improvement=config.min_rel_improvement,
    )
    state, hist = run_steps(
        step,
        step.init(model, kt),
        key=kt,
        steps=config.steps,
        driver=Driver(
            checkpointer=ctx.checkpointer(tag),
            progress=TqdmProgress(desc="sensing: ELBO"),
            stop=step.stop,
        ),
    )
    losses = hist.losses[: hist.steps_done]
    val_loss = hist.aux["val_loss"][: hist.steps_done]
    at = np.flatnonzero(np.isfinite(val_loss))
    log.info(
        "sensing VAE: -ELBO %.1f -> %.1f in %d steps; validation -ELBO %.1f at step %d (best)",
        float(losses[0]),
        float(losses[-1]),
        hist.steps_done,
        float(state.best_loss),
        int(state.best_step),
    )
    return inner.model(state.best), losses, (at + 1, val_loss[at]), int(state.best_step)
