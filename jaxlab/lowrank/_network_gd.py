"""Full N-space gradient descent on the connectivity vectors (the ground truth)."""

from __future__ import annotations

from collections.abc import Callable
from typing import cast

import diffrax
import equinox as eqx
import jax
import jax.numpy as jnp
import optax
from jaxtyping import Array, Bool, Float

from jaxlab._core import (
    AbstractStep,
    Driver,
    check_array,
    check_finite,
    check_memory,
    check_positive_int,
    optimizer_update,
    run_steps,
)

from ._flow import _check_solve_inputs, _solve
from ._gram import gram

__all__ = [
    "NetworkGDState",
    "NetworkGDStep",
    "network_gd_init",
    "network_gd_step",
    "network_gd",
    "network_flow",
    "solve_network_flow",
]

NetworkLossFn = Callable[[Float[Array, "P N"]], Float[Array, ""]]


def _check_v_trained(v, trained, name: str = "vectors"):
    sizes = check_array(name, v, shape=("P", "N"), dtype=jnp.floating)
    check_finite(name, v)
    check_array("trained", trained, shape=("P",), dtype=jnp.bool_, sizes=sizes)


def network_flow(
    loss_fn: NetworkLossFn, vectors: Float[Array, "P N"], trained: Bool[Array, " P"]
) -> Float[Array, "P N"]:
    """N-space gradient flow `dv_a/dt = -N dL/dv_a` on trained vectors, `(P, N)`.

    The factor N (learning rate `N eta` in discrete time) makes overlaps change
    O(1) per unit time independently of N, the scaling under which the overlap
    ODE `overlap_flow` holds (paper P1).
    """
    _check_v_trained(vectors, trained)
    grad = jax.grad(loss_fn)(vectors)
    n = jnp.asarray(vectors.shape[1], vectors.dtype)
    return jnp.where(trained[:, None], -n * grad, jnp.zeros_like(grad))


def solve_network_flow(
    loss_fn: NetworkLossFn,
    v0: Float[Array, "P N"],
    trained: Bool[Array, " P"],
    ts: Float[Array, " S"],
    *,
    solver: diffrax.AbstractSolver | None = None,
    stepsize_controller: diffrax.AbstractStepSizeController | None = None,
    dt0: float | None = None,
    max_steps: int = 100_000,
) -> Float[Array, "S P N"]:
    """Integrate the N-space gradient flow with diffrax; returns `V(ts)`, `(S, P, N)`.

    Same solver options as `solve_overlap_flow` (defaults `Tsit5`, rtol 1e-8,
    atol 1e-10), so the two can be compared at equal tolerance.
    """
    v0, trained, ts = _check_solve_inputs("v0", v0, trained, ts, dt0, max_steps)
    _check_v_trained(v0, trained, "v0")
    solver = diffrax.Tsit5() if solver is None else solver
    if stepsize_controller is None:
        stepsize_controller = diffrax.PIDController(rtol=1e-8, atol=1e-10)
    if dt0 is None and isinstance(stepsize_controller, diffrax.ConstantStepSize):
        raise ValueError("dt0: required with ConstantStepSize")
    # An array dt0 is traced, so changing it does not recompile.
    dt0_arr = None if dt0 is None else jnp.asarray(dt0, v0.dtype)
    return _solve(
        network_flow,
        loss_fn,
        v0,
        trained,
        ts.astype(v0.dtype),
        solver,
        stepsize_controller,
        dt0_arr,
        max_steps,
    )


class NetworkGDState(eqx.Module):
    """State of N-space SGD: the vectors `(P, N)`, the optax state and the step count."""

    vectors: Float[Array, "P N"]
    opt_state: optax.OptState
    step: Array


def _optimizer(eta, n_neurons):
    return optax.sgd(learning_rate=eta * n_neurons)


def network_gd_init(vectors: Float[Array, "P N"], *, eta: float) -> NetworkGDState:
    """Initial state of plain gradient descent with learning rate `N eta` (optax SGD)."""
    check_array("vectors", vectors, shape=("P", "N"), dtype=jnp.floating)
    check_finite("vectors", vectors)
    if 0 in vectors.shape:
        raise ValueError(f"vectors: expected a non-empty array, received shape {vectors.shape}")
    opt = _optimizer(eta, vectors.shape[1])
    return NetworkGDState(vectors, opt.init(vectors), jnp.zeros((), jnp.int32))


def _sgd_step(loss_fn, optimizer, state: NetworkGDState, trained):
    v = state.vectors
    loss, grad = jax.value_and_grad(loss_fn)(v)
    grad = jnp.where(trained[:, None], grad, jnp.zeros_like(grad))
    updates, opt_state = optimizer_update(optimizer, grad, state.opt_state, v)
    new_v = cast(jax.Array, optax.apply_updates(v, updates))  # same structure as v: an array
    return NetworkGDState(new_v, opt_state, state.step + 1), loss


def network_gd_step(
    loss_fn: NetworkLossFn, state: NetworkGDState, trained: Bool[Array, " P"], *, eta: float
) -> tuple[NetworkGDState, Float[Array, ""]]:
    """One SGD step on the trained vectors; returns `(new_state, loss before the step)`.

    `trained` is a `(P,)` boolean array matching `state.vectors` `(P, N)`; the vectors
    must be finite (a `ValueError` naming the argument otherwise)."""
    _check_v_trained(state.vectors, trained, "state.vectors")
    return _sgd_step(loss_fn, _optimizer(eta, state.vectors.shape[1]), state, trained)


class NetworkGDStep(AbstractStep):
    """N-space gradient descent on the trained vectors, a step of `jaxlab.run_steps`.

    **Arguments:**

    - `loss_fn`: `loss_fn(vectors (P, N)) -> scalar`.
    - `trained`: `(P,)` booleans, which vectors move (the others keep their values).
    - `optimizer`: an optax transformation (`network_gd` uses SGD with rate `N eta`).

    `init(vectors, key)` returns a `NetworkGDState`; `step(state, key)` returns the next
    state and `{"loss": loss before the step, "gram": overlaps after it (P, P)}`. The
    step is deterministic (the key is not used).
    """

    loss_fn: NetworkLossFn  # a function or an equinox module (its arrays are traced)
    trained: Bool[Array, " P"]
    optimizer: optax.GradientTransformation = eqx.field(static=True)

    def init(self, model: Float[Array, "P N"], key: jax.Array) -> NetworkGDState:
        del key
        check_array("vectors", model, shape=("P", "N"), dtype=jnp.floating)
        return NetworkGDState(model, self.optimizer.init(model), jnp.zeros((), jnp.int32))

    def step(self, state: NetworkGDState, key: jax.Array):
        del key
        new, loss = _sgd_step(self.loss_fn, self.optimizer, state, self.trained)
        return new, {"loss": loss, "gram": gram(new.vectors)}


def network_gd(
    loss_fn: NetworkLossFn,
    v0: Float[Array, "P N"],
    trained: Bool[Array, " P"],
    *,
    eta: float,
    n_steps: int,
) -> tuple[Float[Array, "P N"], Float[Array, "S P P"], Float[Array, " S1"]]:
    """`n_steps` of optax SGD (learning rate `N eta`) in neuron space: `NetworkGDStep`
    through `jaxlab.run_steps` (one jitted scan).

    **Returns:** `(final vectors (P, N), overlaps after each step (n_steps + 1, P, P)
    including the initial ones, losses before each step (n_steps,))`.
    """
    _check_v_trained(v0, trained, "v0")
    n_steps = check_positive_int("n_steps", n_steps)
    # the history keeps (n_steps + 1) overlap matrices
    check_memory("n_steps", (n_steps + 1) * float(v0.shape[0]) ** 2 * jnp.dtype(v0.dtype).itemsize)
    step = NetworkGDStep(loss_fn, trained, _optimizer(eta, v0.shape[1]))
    key = jax.random.key(0)  # the step draws no randomness
    state, hist = run_steps(
        step, step.init(v0, key), key=key, steps=n_steps, driver=Driver(chunk=n_steps)
    )
    gs = jnp.asarray(hist.aux["gram"], v0.dtype)
    return state.vectors, jnp.concatenate([gram(v0)[None], gs], axis=0), jnp.asarray(hist.losses)
