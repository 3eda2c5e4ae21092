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


def _check_width(name: str, v: Float[Array, " d"], x: Float[Array, "T d"]) -> None:
    # shapes are static, so this raises at trace time inside a jitted forward as well
    if x.shape[-1] != v.shape[0]:
        raise ValueError(
            f"{name}: expected shape ({x.shape[-1]},) (the width of the activation it edits), "
            f"received ({v.shape[0]},)"
        )


class Steer(eqx.Module):
    """Add `scale * vector` to the activation at every position."""

    vector: Float[Array, " d"]
    scale: Float[Array, ""]

    def __init__(self, vector, scale: float | Float[Array, ""] = 1.0):
        self.vector = jnp.asarray(vector, jnp.float32)
        self.scale = jnp.asarray(scale, jnp.float32)
        if self.vector.ndim != 1:
            raise ValueError(
                f"vector: expected shape (d_model,), received shape {self.vector.shape}"
            )
        if self.scale.ndim != 0:
            raise ValueError(f"scale: expected a scalar, received shape {self.scale.shape}")

    def __call__(self, x: Float[Array, "T d"]) -> Float[Array, "T d"]:
        _check_width("vector (the steering direction)", self.vector, x)
        # in the activation's dtype: a float64 (or bfloat16) activation is not promoted
        return x + jnp.broadcast_to((self.scale * self.vector).astype(x.dtype), x.shape)


class ProjectOut(eqx.Module):
    """Remove the component along `direction` (normalised) at every position."""

    direction: Float[Array, " d"]

    def __init__(self, direction):
        d = jnp.asarray(direction, jnp.float32)
        if d.ndim != 1:
            raise ValueError(f"direction: expected shape (d_model,), received shape {d.shape}")
        self.direction = d / jnp.linalg.norm(d)

    def __call__(self, x: Float[Array, "T d"]) -> Float[Array, "T d"]:
        _check_width("direction", self.direction, x)
        u = self.direction.astype(x.dtype)
        return x - (x @ u)[:, None] * u[None, :]
