"""Closed-loop simulation of plant + observer with diffrax, and error metrics.

Paper: P2, "Provably stable neural-network observers".
"""

from __future__ import annotations

from typing import Any, cast

import diffrax
import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jax.core import Tracer
from jaxtyping import Array, Float

from jaxlab._core import as_array, check_finite, check_positive_int, check_real

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
    initial estimate (finite floats); `ts (T,)` non-decreasing finite save times (from
    `ts[0]`, `T >= 1`); `rtol`, `atol` the step-size controller's tolerances (finite,
    `> 0`); `max_steps` a positive int (the solver's step limit); `noise`: a
    `SensorNoise` added to the output the observer sees (None: exact measurements); the
    solver steps exactly to its hold times.

    **Returns:** a `Trajectory`. A failed solve (divergence, step limit) does not
    raise: its values are inf/NaN and `ok` is False.
    """
    kw = {"dtype": jnp.floating, "finite": True}
    x0 = as_array("x0", x0, shape=(plant.state_dim,), **kw)
    x_hat0 = as_array("x_hat0", x_hat0, shape=(plant.state_dim,), **kw)
    ts = as_array("ts", ts, ndim=1, nonempty=True, **kw)
    # NumPy on a concrete ts: under an outer jit, jnp ops on a closed-over constant trace
    if not isinstance(ts, Tracer) and bool(np.any(np.diff(np.asarray(ts)) < 0)):
        raise ValueError("ts: expected non-decreasing save times")
    rtol = check_real("rtol", rtol, low=0.0, low_inclusive=False)
    atol = check_real("atol", atol, low=0.0, low_inclusive=False)
    max_steps = check_positive_int("max_steps", max_steps)

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
    `inf` when the solve failed.

    **Arguments:** `traj` a `Trajectory` whose `x` and `x_hat` are real `(T, n)` arrays of
    one shape (NaN/inf only where `traj.ok` is False: a failed solve); `start` an int in
    `[0, T)`. Anything else raises `ValueError` naming the field or `start`.
    """
    sizes: dict[str, int] = {}
    x = as_array("traj.x", traj.x, shape=("T", "n"), sizes=sizes, real=True)
    x_hat = as_array("traj.x_hat", traj.x_hat, shape=("T", "n"), sizes=sizes, real=True)
    T = sizes["T"]
    if isinstance(start, bool) or not isinstance(start, int | np.integer) or not 0 <= start < T:
        raise ValueError(f"start: expected an int in [0, T={T}), received {start!r}")
    if not isinstance(traj.ok, Tracer) and bool(traj.ok):
        check_finite("traj.x", x)
        check_finite("traj.x_hat", x_hat)
    err = jnp.mean((x[start:] - x_hat[start:]) ** 2)
    return jnp.where(traj.ok & jnp.isfinite(err), err, jnp.inf)
