"""The "direct LMI-based" baseline: an SDP solve inside every training step.

Each step solves, with cvxpy, the normalised certificate problem of `certify_lmi`
for the current weights (maximise the margin `s` over `P`, `T`), reads the dual
matrix `Z` of the LMI constraint and takes a gradient step on the weights along
`-d s*/dW = d/dW <Z, H(P*, T*, W)>` (envelope theorem, as a differentiable
optimisation layer would give), plus the estimation loss. It stops when the SDP
margin exceeds `tol`. This is what the two-stage method avoids.

Paper: P2 (the "direct LMI-based methods" it compares against).
"""

from __future__ import annotations

import time
import warnings
from typing import Any

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import optax

from jaxlab._core import check_real, check_size, optimizer_update

from ._certify import numpy_lmi_blocks
from ._lmi import lmi_matrix
from ._observer import NeuralObserver, trainable_filter
from ._train import ObserverTrainConfig, estimation_term

__all__ = ["train_direct_sdp"]


class _MarginSDP:
    """The margin SDP of `certify_lmi` built once with cvxpy Parameters (DPP), so each
    training step only re-solves it (no re-canonicalisation)."""

    def __init__(self, ne: int, nh: int, solver: str):
        import cvxpy as cp

        self.cp = cp
        self.solver = solver
        self.A_cl = cp.Parameter((ne, ne))
        self.N_x = cp.Parameter((nh, ne))
        self.N_w = cp.Parameter((nh, nh))
        self.N_pw = cp.Parameter((ne, nh))
        self.P = cp.Variable((ne, ne), symmetric=True)
        self.t = cp.Variable(nh, nonneg=True)
        self.s = cp.Variable()
        T = cp.diag(self.t)
        P = self.P
        off = P @ self.N_pw + self.N_x.T @ T
        H = cp.bmat(
            [[self.A_cl.T @ P + P @ self.A_cl, off], [off.T, T @ self.N_w + self.N_w.T @ T - 2 * T]]
        )
        self.lmi = 0.5 * (H + H.T) << -self.s * np.eye(ne + nh)
        # list[Any]: cvxpy's `==` builds an Equality constraint, which its stubs type as bool
        constraints: list[Any] = [self.lmi, P >> (1e-2 / ne) * np.eye(ne), cp.trace(P) == 1]
        self.problem = cp.Problem(cp.Maximize(self.s), constraints)

    def __call__(self, observer: NeuralObserver):
        cp = self.cp
        for par, val in zip(
            (self.A_cl, self.N_x, self.N_w, self.N_pw), numpy_lmi_blocks(observer), strict=True
        ):
            par.value = val
        try:
            with warnings.catch_warnings():
                # an inaccurate solve still gives a usable ascent direction
                warnings.filterwarnings("ignore", message="Solution may be inaccurate")
                self.problem.solve(solver=self.solver)
        except cp.SolverError:
            return None
        if self.s.value is None or self.lmi.dual_value is None:
            return None
        return (
            float(self.s.value),
            np.asarray(self.P.value),
            np.maximum(np.asarray(self.t.value), 0.0),
            np.asarray(self.lmi.dual_value),
        )


MAX_DIRECT_STEPS = 100_000  # SDP solves of one `train_direct_sdp` run (each takes ms to s)


def train_direct_sdp(
    observer: NeuralObserver,
    *,
    key: jax.Array,
    config: ObserverTrainConfig,
    max_steps: int,
    solver: str = "CLARABEL",
    tol: float = 1e-7,
):
    """Train with one SDP solve per step until the certificate holds.

    **Arguments:** `observer` (initial weights); `key` (keyword-only); `config`
    (uses `learning_rate`, `lmi_est_weight`, sampling fields); `max_steps` an int in
    `[1, MAX_DIRECT_STEPS]` (one SDP solve each: a larger count would not end in useful
    time); `solver`; `tol` a finite real, the margin counted as certified.

    **Returns:** `(observer, info)` with `info = {"steps", "seconds", "certified",
    "margins" (np array), "sdp_seconds", "setup_seconds"}`; `seconds` excludes the
    one-off set-up (SDP construction, JIT compilation).
    """
    max_steps = check_size("max_steps", max_steps, cap=MAX_DIRECT_STEPS, why="MAX_DIRECT_STEPS")
    tol = check_real("tol", tol)
    optimizer = optax.adam(config.learning_rate)
    trainable, frozen = eqx.partition(observer, trainable_filter(observer))
    opt_state = optimizer.init(trainable)

    @eqx.filter_jit
    def step(trainable, opt_state, P, t, Z, key):
        def loss(tr):
            obs = eqx.combine(tr, frozen)
            val = jnp.sum(Z * lmi_matrix(obs, P, t))
            if config.lmi_est_weight > 0:
                val = val + config.lmi_est_weight * estimation_term(obs, config, key)
            return val

        grads = eqx.filter_grad(loss)(trainable)
        updates, opt_state = optimizer_update(optimizer, grads, opt_state, trainable)
        return eqx.apply_updates(trainable, updates), opt_state

    margins = []
    sdp_seconds = 0.0
    certified = False
    steps = 0
    dt = observer.A.dtype
    # set-up outside the clock: build the parametrised SDP, compile the gradient step
    t0 = time.perf_counter()
    sdp = _MarginSDP(observer.extended_dim, observer.hidden_dim, solver)
    ne, nh = observer.extended_dim, observer.hidden_dim
    jax.block_until_ready(
        step(
            trainable,
            opt_state,
            jnp.eye(ne, dtype=dt),
            jnp.ones((nh,), dt),
            jnp.eye(ne + nh, dtype=dt),
            key,
        )
    )
    setup_seconds = time.perf_counter() - t0
    t0 = time.perf_counter()
    for steps in range(1, max_steps + 1):  # noqa: B007 -- the count is reported after the loop
        current = eqx.combine(trainable, frozen)
        ts = time.perf_counter()
        res = sdp(current)
        sdp_seconds += time.perf_counter() - ts
        if res is None:
            margins.append(-np.inf)
            break
        s, P, t, Z = res
        margins.append(s)
        if s > tol:
            certified = True
            break
        key, sub = jax.random.split(key)
        trainable, opt_state = step(
            trainable, opt_state, jnp.asarray(P, dt), jnp.asarray(t, dt), jnp.asarray(Z, dt), sub
        )
    info = {
        "steps": steps,
        "seconds": time.perf_counter() - t0,
        "certified": certified,
        "margins": np.asarray(margins),
        "sdp_seconds": sdp_seconds,
        "setup_seconds": setup_seconds,
    }
    return eqx.combine(trainable, frozen), info
