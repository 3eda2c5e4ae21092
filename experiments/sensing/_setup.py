"""Shared set-up of the two P4 sensing experiments: simulate probes, train the model."""

from __future__ import annotations

import dataclasses

import jax

from experiments._harness import RunContext, log
from jaxlab import sensing
from jaxlab._core import TqdmProgress


@dataclasses.dataclass(frozen=True)
class SensingConfig:
    """QUICK settings of the simulated probes and the VAE shared by the P4 experiments;
    `FULL_OVERRIDES` are the paper-scale values of FULL."""

    n_flowers: int = 1024
    n_probes: int = 16
    latent_dim: int = 6
    width: int = 64
    steps: int = 3000


FULL_OVERRIDES = {"n_flowers": 32768, "n_probes": 32, "latent_dim": 8, "width": 256, "steps": 50000}
UNSEEN = {"kinds": (1,), "curvature_range": (1.0, 1.6), "contrast_range": (0.25, 0.4)}


def trained_model(
    config: SensingConfig, key: jax.Array, ctx: RunContext
) -> tuple[sensing.MultimodalVAE, jax.Array]:
    """Train the multimodal VAE on simulated probes of training-condition flowers."""
    kd, km, kt = jax.random.split(key, 3)
    data = sensing.simulate_probes(config.n_flowers, config.n_probes, key=kd)
    model = sensing.MultimodalVAE(latent_dim=config.latent_dim, width=config.width, key=km)
    model, losses = sensing.train_model(
        model,
        data,
        key=kt,
        steps=config.steps,
        checkpointer=ctx.checkpointer("vae"),
        progress=TqdmProgress(desc="sensing: ELBO"),
    )
    log.info("sensing VAE: -ELBO %.1f -> %.1f", float(losses[0]), float(losses[-1]))
    return model, losses
