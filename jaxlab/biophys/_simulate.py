"""Fixed-step simulation of one neuron under a sampled input current, on diffrax solvers.

The input is sampled at the recording rate (30 kHz in P12) and held constant
over each step, so the simulation is a `lax.scan` whose body is one step of a
`diffrax` solver (`Euler`, `Heun`, `Midpoint`, `Tsit5`, ...) on the model's
vector field, followed by the model's threshold/reset. `made_jump=True` makes
FSAL solvers re-evaluate the vector field after the input or a reset changed.
Everything is differentiable (HH exactly, LIF/AdEx through surrogate spikes)
and `jax.vmap`s over neurons.
"""

from __future__ import annotations

import diffrax
import equinox as eqx
import jax
import jax.core
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, ArrayLike, Float

from jaxlab._core import as_array, check_array, check_range

from ._neurons import AbstractNeuron

__all__ = ["Trajectory", "simulate"]


def check_stable(voltage: ArrayLike, dt: float) -> None:
    """Raise a `ValueError` naming `dt` when a concrete simulated `voltage` holds NaN/inf.

    A fixed-step explicit solver diverges when `dt` exceeds its stability limit (a
    ball-and-stick cell at `dt = 0.1` ms): the trajectory would be NaN silently. Tracers
    (under `jit`/`vmap`) pass unchecked.
    """
    if isinstance(voltage, jax.core.Tracer):
        return
    v = np.asarray(voltage)
    if not np.all(np.isfinite(v)):
        raise ValueError(
            f"dt: the simulation diverged (NaN/inf voltage) at dt = {dt} ms; use a smaller "
            "step or a more stable solver"
        )


class Trajectory(eqx.Module):
    """Result of `simulate`: one row per step, taken after the step (and reset).

    - `states`: `(T, D)` state vectors.
    - `voltage`: `(T,)` somatic membrane potential (mV).
    - `spikes`: `(T,)` 0/1 spike indicator (surrogate gradient for LIF/AdEx).
    """

    states: Float[Array, "T D"]
    voltage: Float[Array, " T"]
    spikes: Float[Array, " T"]


def simulate(
    neuron: AbstractNeuron,
    current: Float[ArrayLike, " T"],
    *,
    dt: float,
    solver: diffrax.AbstractSolver | None = None,
    y0: Float[ArrayLike, " D"] | None = None,
    unroll: int = 1,
) -> Trajectory:
    """Integrate `neuron` for `len(current)` steps of `dt` ms.

    **Arguments:**

    - `neuron`: an `AbstractNeuron` (LIF, AdEx, HodgkinHuxley, BallAndStick).
    - `current`: `(T,)` input held constant over each step (the model's units).
    - `dt`: step in ms (1/30 ms for 30 kHz).
    - `solver`: a fixed-step-capable diffrax solver; default `diffrax.Heun()`.
    - `y0`: `(D,)` initial state; default `neuron.init_state()`.
    - `unroll`: steps per `lax.scan` iteration (speed only; results are identical).

    **Returns:** a `Trajectory` with `T` rows. Paper: P12.
    """
    if not isinstance(neuron, AbstractNeuron):
        raise ValueError(f"neuron: expected an AbstractNeuron, received {type(neuron).__name__}")
    current = as_array("current", current, ndim=1, dtype=jnp.floating, finite=True, nonempty=True)
    if not isinstance(dt, int | float) or not dt > 0:
        raise ValueError(f"dt: expected a positive number of ms, received {dt!r}")
    y_init = neuron.init_state() if y0 is None else jnp.asarray(y0)
    check_array("y0", y_init, shape=neuron.init_state().shape, dtype=jnp.floating)
    check_range("dt", dt, low=0.0, low_inclusive=False)
    y_init = y_init.astype(current.dtype)
    solver = diffrax.Heun() if solver is None else solver
    dtype = current.dtype
    # Keep the state in the input's dtype whatever the model's constants promote to
    # (e.g. float32 inputs with jax_enable_x64 switched on elsewhere in the process).
    term = diffrax.ODETerm(lambda t, y, i: neuron.vector_field(t, y, i).astype(dtype))
    dt_arr = jnp.asarray(dt, dtype=current.dtype)
    t0 = jnp.zeros((), dtype=current.dtype)
    state0 = solver.init(term, t0, t0 + dt_arr, y_init, current[0])

    def step(carry, inp):
        y, solver_state = carry
        k, i_k = inp
        t = k * dt_arr
        y_next, _, _, solver_state, _ = solver.step(
            term, t, t + dt_arr, y, i_k, solver_state, made_jump=True
        )
        y_next, spike = neuron.spike_and_reset(y, y_next.astype(dtype))
        y_next, spike = y_next.astype(dtype), spike.astype(dtype)
        return (y_next, solver_state), (y_next, neuron.voltage(y_next), spike)

    steps = jnp.arange(current.shape[0], dtype=current.dtype)
    _, (ys, vs, ss) = jax.lax.scan(step, (y_init, state0), (steps, current), unroll=unroll)
    check_stable(vs, dt)
    return Trajectory(states=ys, voltage=vs, spikes=ss)
