"""The network and its loss as functions of the overlap matrix alone."""

from __future__ import annotations

import jax
import jax.numpy as jnp
from jaxtyping import Array, Float

from jaxlab._core import check_array, check_finite

from ._activation import AbstractActivation
from ._layout import OverlapLayout
from ._tasks import Task

__all__ = ["overlap_outputs", "overlap_loss"]


def _check(g, task, layout):
    check_array("g", g, shape=(layout.size, layout.size), dtype=jnp.floating)
    check_finite("g", g)
    if task.n_inputs != layout.n_inputs:
        raise ValueError(
            f"task: has {task.n_inputs} input channels, layout expects {layout.n_inputs}"
        )


def _trial_outputs(g, u, dt, layout: OverlapLayout, activation: AbstractActivation):
    # x(t) = sum_r kappa_r m_r + sum_k v_k I_k stays in span{m, I} from x(0) = 0.
    # Per neuron, h = a . (m_i, I_i) with a = (kappa, v); at large N the entries are
    # Gaussian with covariance G, so (1/N) n.phi(x) -> <phi'>(a^T G_xx a) G_nx a
    # (Stein's lemma), exactly G_nx a for linear units at every N.
    xs = layout.state_rows
    g_xx = g[xs][:, xs]
    g_nx = g[layout.n_rows][:, xs]
    g_wx = g[layout.readout_row, xs]
    r = layout.rank

    def step(a, u_t):
        gain = activation.mean_gain(a @ g_xx @ a)
        kappa = a[:r] + dt * (-a[:r] + gain * (g_nx @ a))
        v = a[r:] + dt * (-a[r:] + u_t)
        a = jnp.concatenate([kappa, v])
        z = activation.mean_gain(a @ g_xx @ a) * (g_wx @ a)
        return a, z

    a0 = jnp.zeros((xs.shape[0],), g.dtype)
    _, zs = jax.lax.scan(step, a0, u)
    return zs


def overlap_outputs(
    g: Float[Array, "P P"], task: Task, layout: OverlapLayout, activation: AbstractActivation
) -> Float[Array, "B T"]:
    """Network outputs `(B, T)` computed from the overlaps `G` `(P, P)` alone.

    Equal to `network_outputs(V, ...)` for any `V` with `gram(V) = G`: exactly
    for `Linear`, in the large-N Gaussian limit for nonlinear units (the
    Gaussian expectations use the activation's Gauss–Hermite mean gain). Paper P1.
    """
    _check(g, task, layout)
    u = task.inputs.astype(g.dtype)
    return jax.vmap(lambda ui: _trial_outputs(g, ui, task.dt, layout, activation))(u)


def overlap_loss(
    g: Float[Array, "P P"], task: Task, layout: OverlapLayout, activation: AbstractActivation
) -> Float[Array, ""]:
    """Task loss `sum(mask (z - y)^2) / (2 sum mask)` as a function of the overlaps `G`.

    Its autodiff gradient `dloss/dG` generates the closed overlap ODE
    (`overlap_flow`). Paper P1.
    """
    z = overlap_outputs(g, task, layout, activation)
    y = task.targets.astype(z.dtype)
    mask = task.mask.astype(z.dtype)
    return 0.5 * jnp.sum(mask * (z - y) ** 2) / jnp.sum(mask)
