"""Gradient descent on the vectors, closed in overlap space: dG/dt = F(G)."""

from __future__ import annotations

from collections.abc import Callable
from typing import cast

import diffrax
import equinox as eqx
import jax
import jax.core
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Bool, Float

from jaxlab._core import (
    as_array,
    check_array,
    check_finite,
    check_memory,
    check_positive_int,
    check_range,
)

__all__ = [
    "overlap_flow",
    "overlap_gd_step",
    "overlap_gd",
    "solve_overlap_flow",
]

OverlapLossFn = Callable[[Float[Array, "P P"]], Float[Array, ""]]


def _check_g_trained(g, trained, name: str = "g", loss_fn=None):
    """`g` square, `trained` of its size, and both of the size of `loss_fn`'s layout when
    it has one (an `OverlapLoss`), so a wrong size names the caller's argument."""
    size = getattr(getattr(loss_fn, "layout", None), "size", None)
    p = size if isinstance(size, int) else "P"
    sizes = check_array(name, g, shape=(p, p), dtype=jnp.floating)
    check_finite(name, g)
    check_array("trained", trained, shape=(p if p != "P" else sizes["P"],), dtype=jnp.bool_)


def _check_solve_inputs(y0_name: str, y0, trained, ts, dt0, max_steps):
    """The checks shared by `solve_overlap_flow` and `solve_network_flow`.

    A NaN/inf start or save time would otherwise surface as diffrax's "maximum number of
    solver steps" error. Returns `(y0, trained, ts)` as JAX arrays (lists/NumPy converted).
    """
    y0 = as_array(y0_name, y0, ndim=2, dtype=jnp.floating, finite=True)
    trained = as_array("trained", trained, ndim=1, dtype=jnp.bool_)
    ts = as_array("ts", ts, shape=(None,), dtype=jnp.floating, finite=True)
    if ts.shape[0] == 0:
        raise ValueError("ts: expected at least one save time, received shape (0,)")
    if not isinstance(ts, jax.core.Tracer) and bool(np.any(np.diff(np.asarray(ts)) < 0)):
        raise ValueError(f"ts: expected nondecreasing save times, received {ts}")
    if dt0 is not None:
        check_finite("dt0", dt0)
        check_range("dt0", dt0, low=0.0, low_inclusive=False)
    check_positive_int("max_steps", max_steps)
    return y0, trained, ts


def _mixing(loss_fn, g, trained):
    """`D S_hat` where `S_hat = dl/dG + (dl/dG)^T` and `D = diag(trained)`.

    For `L(V) = l(V V^T / N)`, `grad_V L = S_hat V / N`: the gradient of every
    vector is a combination of the vectors, with coefficients that depend on G only.
    """
    s = jax.grad(loss_fn)(g)
    s_hat = s + s.T
    return jnp.where(trained[:, None], s_hat, jnp.zeros_like(s_hat))


def overlap_flow(
    loss_fn: OverlapLossFn, g: Float[Array, "P P"], trained: Bool[Array, " P"]
) -> Float[Array, "P P"]:
    """The closed overlap ODE `dG/dt = -(D S_hat G + G S_hat D)`.

    Gradient flow `dv_a/dt = -N grad_{v_a} L` on the trained vectors (learning
    rate scaled by N, so overlaps move O(1) per unit time at every N) of a loss
    that depends on the vectors only through `G = V V^T / N` closes on G with
    this vector field; `S_hat` is obtained by autodiff of `loss_fn` (paper P1).

    **Arguments:**

    - `loss_fn`: `G (P, P) -> scalar`, e.g. an `OverlapLoss`.
    - `g`: overlaps `(P, P)`.
    - `trained`: `(P,)` boolean mask of trained vectors (`OverlapLayout.trained_mask`).

    **Returns:** `dG/dt`, `(P, P)`, symmetric.
    """
    _check_g_trained(g, trained, "g", loss_fn)
    a = _mixing(loss_fn, g, trained)
    return -(a @ g + g @ a.T)


def overlap_gd_step(
    loss_fn: OverlapLossFn, g: Float[Array, "P P"], trained: Bool[Array, " P"], eta: float
) -> Float[Array, "P P"]:
    """One exact step of discrete gradient descent, written in overlap space.

    A GD step with learning rate `N eta` maps `V -> (1 - eta D S_hat) V`, hence
    `G -> A G A^T` with `A = 1 - eta D S_hat(G)`: exact at every N for losses of G.
    """
    _check_g_trained(g, trained, "g", loss_fn)
    a = jnp.eye(g.shape[0], dtype=g.dtype) - eta * _mixing(loss_fn, g, trained)
    return a @ g @ a.T


@eqx.filter_jit
def _overlap_gd_scan(loss_fn, g0, trained, eta, n_steps):
    def step(g, _):
        g_next = overlap_gd_step(loss_fn, g, trained, eta)
        return g_next, g_next

    _, gs = jax.lax.scan(step, g0, None, length=n_steps)
    return jnp.concatenate([g0[None], gs], axis=0)


def overlap_gd(
    loss_fn: OverlapLossFn,
    g0: Float[Array, "P P"],
    trained: Bool[Array, " P"],
    *,
    eta: float,
    n_steps: int,
) -> Float[Array, "S P P"]:
    """`n_steps` of discrete GD in overlap space; returns `(n_steps + 1, P, P)` including `g0`."""
    g0 = as_array("g0", g0, ndim=2, dtype=jnp.floating, finite=True)
    trained = as_array("trained", trained, ndim=1, dtype=jnp.bool_)
    _check_g_trained(g0, trained, "g0", loss_fn)
    n_steps = check_positive_int("n_steps", n_steps)
    check_memory("n_steps", (n_steps + 1) * float(np.size(g0)) * jnp.dtype(g0.dtype).itemsize)
    return _overlap_gd_scan(loss_fn, g0, trained, jnp.asarray(eta, g0.dtype), n_steps)


@eqx.filter_jit
def _solve(flow, loss_fn, y0, trained, ts, solver, controller, dt0, max_steps) -> jax.Array:
    """`y' = flow(loss_fn, y, trained)` from `y0`, saved at `ts` (overlap or neuron space)."""
    term = diffrax.ODETerm(lambda t, y, args: flow(loss_fn, y, trained))
    sol = diffrax.diffeqsolve(
        term,
        solver,
        t0=ts[0],
        t1=ts[-1],
        dt0=dt0,
        y0=y0,
        saveat=diffrax.SaveAt(ts=ts),
        stepsize_controller=controller,
        max_steps=max_steps,
    )
    return cast(jax.Array, sol.ys)  # SaveAt(ts=...) always saves


def solve_overlap_flow(
    loss_fn: OverlapLossFn,
    g0: Float[Array, "P P"],
    trained: Bool[Array, " P"],
    ts: Float[Array, " S"],
    *,
    solver: diffrax.AbstractSolver | None = None,
    stepsize_controller: diffrax.AbstractStepSizeController | None = None,
    dt0: float | None = None,
    max_steps: int = 100_000,
) -> Float[Array, "S P P"]:
    """Integrate the overlap ODE with diffrax; returns `G(ts)`, `(S, P, P)`.

    **Arguments:**

    - `loss_fn`, `trained`: as in `overlap_flow`.
    - `g0`: initial overlaps `(P, P)`.
    - `ts`: increasing save times `(S,)`, the first being the initial time.
    - `solver`: a diffrax solver (default `Tsit5()`).
    - `stepsize_controller`: default `PIDController(rtol=1e-8, atol=1e-10)`;
      with `ConstantStepSize()` pass `dt0`.
    """
    g0, trained, ts = _check_solve_inputs("g0", g0, trained, ts, dt0, max_steps)
    _check_g_trained(g0, trained, "g0", loss_fn)
    solver = diffrax.Tsit5() if solver is None else solver
    if stepsize_controller is None:
        stepsize_controller = diffrax.PIDController(rtol=1e-8, atol=1e-10)
    if dt0 is None and isinstance(stepsize_controller, diffrax.ConstantStepSize):
        raise ValueError("dt0: required with ConstantStepSize")
    # An array dt0 is traced, so changing it does not recompile.
    dt0_arr = None if dt0 is None else jnp.asarray(dt0, g0.dtype)
    return _solve(
        overlap_flow,
        loss_fn,
        g0,
        trained,
        ts.astype(g0.dtype),
        solver,
        stepsize_controller,
        dt0_arr,
        max_steps,
    )
