"""Loss objects: the same task loss seen from neuron space and from overlap space."""

from __future__ import annotations

import equinox as eqx
import jax.numpy as jnp
from jaxtyping import Array, Float

from ._activation import AbstractActivation
from ._layout import OverlapLayout
from ._network import network_loss
from ._reduced import overlap_loss
from ._tasks import Task

__all__ = ["NetworkLoss", "OverlapLoss"]


class NetworkLoss(eqx.Module):
    """`V (P, N) -> loss`: the N-space network loss plus `weight_decay/(2N) sum |v_a|^2`.

    **Fields:** `task`, `layout`, `activation`, `weight_decay` (>= 0).
    """

    task: Task
    layout: OverlapLayout
    activation: AbstractActivation
    weight_decay: float | Array = 0.0

    def __call__(self, vectors: Float[Array, "P N"]) -> Float[Array, ""]:
        penalty = 0.5 * self.weight_decay * jnp.sum(vectors**2) / vectors.shape[1]
        return network_loss(vectors, self.task, self.layout, self.activation) + penalty


class OverlapLoss(eqx.Module):
    """`G (P, P) -> loss`: the overlap-space loss plus `weight_decay/2 trace(G)`.

    Equals `NetworkLoss` at `G = gram(V)` (exactly for linear units), so its
    gradient generates the overlap flow. Paper P1.
    """

    task: Task
    layout: OverlapLayout
    activation: AbstractActivation
    weight_decay: float | Array = 0.0

    def __call__(self, g: Float[Array, "P P"]) -> Float[Array, ""]:
        penalty = 0.5 * self.weight_decay * jnp.trace(g)
        return overlap_loss(g, self.task, self.layout, self.activation) + penalty
