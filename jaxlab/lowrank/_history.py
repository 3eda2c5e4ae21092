"""Training histories: overlap gradient flows on a sequence of tasks, one after another."""

from __future__ import annotations

from collections.abc import Sequence

import diffrax
import jax.numpy as jnp
from jaxtyping import Array, Bool, Float

from jaxlab._core import check_array, check_positive_int

from ._activation import AbstractActivation, Linear
from ._flow import solve_overlap_flow
from ._layout import OverlapLayout
from ._losses import OverlapLoss
from ._tasks import Task

__all__ = ["train_history"]


def train_history(
    g0: Float[Array, "P P"],
    phases: Sequence[tuple[Task, float | Float[Array, ""]]],
    trained: Bool[Array, " P"],
    *,
    rank: int = 1,
    activation: AbstractActivation = Linear(),
    weight_decay: float | Float[Array, ""] = 0.0,
    rtol: float = 1e-7,
) -> Float[Array, "P P"]:
    """The overlaps after training on the `phases` in order, each for its duration.

    Phase `(task, duration)` integrates the overlap flow (`solve_overlap_flow`) of
    `OverlapLoss(task, OverlapLayout(rank, task.n_inputs), activation, weight_decay)`
    from the previous phase's end point for `duration` time units (adaptive Tsit5 with
    `PIDController(rtol, atol=rtol/100)`). Which tasks came first is then stored in the
    overlaps the last task's loss cannot see (paper P1, "loss-invisible overlaps keep the
    training history"). Unbatched: `jax.vmap` it over initial overlaps; durations may be
    arrays, so one compiled function serves histories of the same structure.

    **Arguments:**

    - `g0`: initial overlaps `(P, P)`, symmetric positive semi-definite.
    - `phases`: `[(task, duration), ...]`; every task has the input count the layout of
      `rank` and `P` needs (`P = 2 rank + K + 1`).
    - `trained`: `(P,)` boolean mask of trained vectors (`OverlapLayout.trained_mask`).
    - `rank`: the RNN's rank `R`.
    - `activation`: `Linear()` (exact overlap ODE) or `Tanh()` (large-N limit).
    - `weight_decay`: the `weight_decay/2 trace(G)` penalty of every phase.
    - `rtol`: relative tolerance of the adaptive solver.

    **Returns:** the final overlaps `(P, P)`.
    """
    sizes = check_array("g0", g0, shape=("P", "P"), dtype=jnp.floating)
    check_array("trained", trained, shape=("P",), dtype=jnp.bool_, sizes=sizes)
    check_positive_int("rank", rank)
    if not (isinstance(rtol, float | int) and rtol > 0):
        raise ValueError(f"rtol: expected a positive float, received {rtol!r}")
    controller = diffrax.PIDController(rtol=rtol, atol=rtol * 1e-2)
    g = g0
    for i, phase in enumerate(phases):
        if not (isinstance(phase, tuple | list) and len(phase) == 2 and isinstance(phase[0], Task)):
            raise ValueError(
                f"phases[{i}]: expected a (Task, duration) pair, received {type(phase).__name__}"
            )
        task, duration = phase
        layout = OverlapLayout(rank, task.n_inputs)
        if layout.size != g.shape[0]:
            raise ValueError(
                f"phases[{i}]: a rank-{rank} layout with {task.n_inputs} inputs has "
                f"{layout.size} vectors, but g0 is {g.shape[0]} x {g.shape[0]}"
            )
        loss = OverlapLoss(
            task, layout, activation, weight_decay=jnp.asarray(weight_decay, g.dtype)
        )
        d = jnp.asarray(duration, g.dtype)
        ts = jnp.stack([jnp.zeros_like(d), d])
        g = solve_overlap_flow(loss, g, trained, ts, stepsize_controller=controller)[-1]
    return g
