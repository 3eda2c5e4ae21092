"""The low-rank RNN simulated directly in N-dimensional neuron space."""

from __future__ import annotations

import equinox as eqx
import jax
import jax.numpy as jnp
from jaxtyping import Array, Float

from jaxlab._core import check_array, check_finite

from ._activation import AbstractActivation
from ._layout import OverlapLayout
from ._tasks import Task

__all__ = ["LowRankRNN", "network_outputs", "network_loss"]


class LowRankRNN(eqx.Module):
    """Low-rank RNN `dx/dt = -x + J phi(x) + sum_k I_k u_k`, `J = (1/N) sum_r m_r n_r^T`.

    The readout is `z = (1/N) w^T phi(x)`. Time is discretised with forward
    Euler of step `dt` from `x(0) = 0`, and `J` is never formed (cost `O(R N)`
    per step). Paper P1.

    **Fields:** `m`, `n`: `(R, N)`; `inputs`: `(K, N)`; `readout`: `(N,)`;
    `activation`: an `AbstractActivation`.
    """

    m: Float[Array, "R N"]
    n: Float[Array, "R N"]
    inputs: Float[Array, "K N"]
    readout: Float[Array, " N"]
    activation: AbstractActivation

    def __init__(self, m, n, inputs, readout, activation: AbstractActivation):
        sizes = check_array("m", m, shape=("R", "N"), dtype=jnp.floating)
        check_array("n", n, shape=("R", "N"), dtype=jnp.floating, sizes=sizes)
        check_array("inputs", inputs, shape=("K", "N"), dtype=jnp.floating, sizes=sizes)
        check_array("readout", readout, shape=("N",), dtype=jnp.floating, sizes=sizes)
        if not isinstance(activation, AbstractActivation):
            raise ValueError(f"activation: expected an AbstractActivation, received {activation!r}")
        self.m, self.n, self.inputs, self.readout = m, n, inputs, readout
        self.activation = activation

    @property
    def layout(self) -> OverlapLayout:
        return OverlapLayout(self.m.shape[0], self.inputs.shape[0])

    def vectors(self) -> Float[Array, "P N"]:
        """Stacked vectors `[m; n; I; w]`, shape `(P, N)` (see `OverlapLayout`)."""
        return jnp.concatenate([self.m, self.n, self.inputs, self.readout[None]], axis=0)

    @classmethod
    def from_vectors(cls, vectors, layout: OverlapLayout, activation: AbstractActivation):
        """Inverse of `vectors()`."""
        check_array("vectors", vectors, shape=(layout.size, "N"), dtype=jnp.floating)
        return cls(
            vectors[layout.m_rows],
            vectors[layout.n_rows],
            vectors[layout.input_rows],
            vectors[layout.readout_row],
            activation,
        )

    def simulate(self, u: Float[Array, "T K"], *, dt: float) -> tuple[Array, Array]:
        """Run one trial. Returns `(x, z)`: activity `(T, N)` and output `(T,)`.

        `x[t]` and `z[t]` are taken after the Euler step driven by `u[t]`.
        """
        n_neurons = self.m.shape[1]

        def step(x, u_t):
            r = self.activation(x)
            rec = (self.n @ r) / n_neurons  # (R,)
            x = x + dt * (-x + self.m.T @ rec + self.inputs.T @ u_t)
            z = self.readout @ self.activation(x) / n_neurons
            return x, (x, z)

        x0 = jnp.zeros((n_neurons,), self.m.dtype)
        _, (xs, zs) = jax.lax.scan(step, x0, u)
        return xs, zs


def network_outputs(
    vectors: Float[Array, "P N"],
    task: Task,
    layout: OverlapLayout,
    activation: AbstractActivation,
) -> Float[Array, "B T"]:
    """Outputs `(B, T)` of the N-space network with stacked `vectors` on every trial of `task`."""
    check_array("vectors", vectors, shape=(layout.size, "N"), dtype=jnp.floating)
    check_finite("vectors", vectors)
    if task.n_inputs != layout.n_inputs:
        raise ValueError(
            f"task: has {task.n_inputs} input channels, layout expects {layout.n_inputs}"
        )
    net = LowRankRNN.from_vectors(vectors, layout, activation)
    u = task.inputs.astype(vectors.dtype)
    return jax.vmap(lambda ui: net.simulate(ui, dt=task.dt)[1])(u)


def network_loss(
    vectors: Float[Array, "P N"],
    task: Task,
    layout: OverlapLayout,
    activation: AbstractActivation,
) -> Float[Array, ""]:
    """Task loss `sum(mask (z - y)^2) / (2 sum mask)` of the N-space network.

    This is the ground truth the overlap theory reduces; its gradient with respect
    to `vectors` drives full N-space gradient descent.
    """
    z = network_outputs(vectors, task, layout, activation)
    y = task.targets.astype(z.dtype)
    mask = task.mask.astype(z.dtype)
    return 0.5 * jnp.sum(mask * (z - y) ** 2) / jnp.sum(mask)
