"""Closed-loop simulation of plant + observer with diffrax, and error metrics.

Paper: P2, "Provably stable neural-network observers".
"""

from __future__ import annotations

from typing import Any, cast

import diffrax
import equinox as eqx
import jax
import jax.numpy as jnp
from jaxtyping import Array, Float

from jaxlab._core import check_array

from ._noise import SensorNoise
from ._observer import AbstractObserver
from ._systems import AbstractPlant

__all__ = ["Trajectory", "simulate", "state_mse"]


class Trajectory(eqx.Module):
    """Saved trajectory: `ts (T,)`, `x (T, n)`, `x_hat (T, n)`, `d_hat (T, nd)`, and the
    `ok` flag (False when the solver failed, e.g. a diverging observer)."""

    ts: Float[Array, " T"]
    x: Float[Array, "T n"]
    x_hat: Float[Array, "T n"]
    d_hat: Float[Array, "T nd"]
    ok: Array


def joint_field(t, state, args):
    """The joint vector field of `(x, observer state)` (shared by `simulate` and `rollout`);
    `args = (plant, observer)` or `(plant, observer, noise)` with `noise(t)` added to the
    output the observer sees."""
    plant, observer = args[:2]
    x, obs = state
    u = plant.control(t, x)
    y = plant.output(x)
    if len(args) > 2 and args[2] is not None:
        y = y + args[2](t)
    return plant.true_field(t, x), observer.vector_field(t, obs, y, u)


def simulate(
    plant: AbstractPlant,
    observer: AbstractObserver,
    x0,
    x_hat0,
    ts,
    *,
    rtol: float = 1e-6,
    atol: float = 1e-8,
    max_steps: int = 100_000,
    noise: SensorNoise | None = None,
) -> Trajectory:
    """Integrate the plant and the observer jointly (Tsit5, adaptive steps).

    **Arguments:** `plant`; `observer`; `x0 (n,)` true initial state; `x_hat0 (n,)`
    initial estimate; `ts (T,)` increasing save times (from `ts[0]`); `rtol`, `atol` the
    step-size controller's tolerances; `noise`: a `SensorNoise` added to the output the
    observer sees (None: exact measurements); the solver steps exactly to its hold times.

    **Returns:** a `Trajectory`. A failed solve (divergence, step limit) does not
    raise: its values are inf/NaN and `ok` is False.
    """
    sizes = check_array("x0", x0, shape=("n",), sizes={"n": plant.state_dim})
    check_array("x_hat0", x_hat0, shape=("n",), sizes=sizes)
    check_array("ts", ts, ndim=1)

    controller = diffrax.PIDController(rtol=rtol, atol=atol)
    if noise is not None:
        jumps = jnp.asarray(noise.jump_ts())
        controller = diffrax.ClipStepSizeController(controller, jump_ts=jumps)
    sol = diffrax.diffeqsolve(
        diffrax.ODETerm(joint_field),
        diffrax.Tsit5(),
        t0=ts[0],
        t1=ts[-1],
        dt0=None,
        y0=(x0, observer.init(x_hat0)),
        saveat=diffrax.SaveAt(ts=ts),
        stepsize_controller=controller,
        args=(plant, observer, noise),
        max_steps=max_steps,
        throw=False,
    )
    xs, obs = cast(tuple[Array, Any], sol.ys)  # SaveAt(ts=...) always saves
    x_hat, d_hat = jax.vmap(observer.estimate)(obs)
    ok = sol.result == diffrax.RESULTS.successful
    return Trajectory(ts=ts, x=xs, x_hat=x_hat, d_hat=d_hat, ok=ok)


def state_mse(traj: Trajectory, *, start: int = 0):
    """Mean squared state-estimation error over time (from index `start`) and states;
    `inf` when the solve failed."""
    err = jnp.mean((traj.x[start:] - traj.x_hat[start:]) ** 2)
    return jnp.where(traj.ok & jnp.isfinite(err), err, jnp.inf)
