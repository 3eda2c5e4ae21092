"""Ready-made interventions for `forward(intervene=...)` (steering and ablation).

They are `eqx.Module`s, so their arrays are traced: changing a vector or a scale
does not recompile the jitted forward. Turner et al. 2023 ("Activation
Addition"), Arditi et al. 2024 (directional ablation).
"""

from __future__ import annotations

import equinox as eqx
import jax.numpy as jnp
from jaxtyping import Array, Float

__all__ = ["Steer", "ProjectOut"]


class Steer(eqx.Module):
    """Add `scale * vector` to the activation at every position."""

    vector: Float[Array, " d"]
    scale: Float[Array, ""]

    def __init__(self, vector, scale: float | Float[Array, ""] = 1.0):
        self.vector = jnp.asarray(vector, jnp.float32)
        self.scale = jnp.asarray(scale, jnp.float32)
        if self.vector.ndim != 1:
            raise ValueError(f"vector must be 1-D (d_model,), got shape {self.vector.shape}")

    def __call__(self, x: Float[Array, "T d"]) -> Float[Array, "T d"]:
        return x + jnp.broadcast_to(self.scale * self.vector, x.shape)


class ProjectOut(eqx.Module):
    """Remove the component along `direction` (normalised) at every position."""

    direction: Float[Array, " d"]

    def __init__(self, direction):
        d = jnp.asarray(direction, jnp.float32)
        if d.ndim != 1:
            raise ValueError(f"direction must be 1-D (d_model,), got shape {d.shape}")
        self.direction = d / jnp.linalg.norm(d)

    def __call__(self, x: Float[Array, "T d"]) -> Float[Array, "T d"]:
        return x - (x @ self.direction)[:, None] * self.direction[None, :]
