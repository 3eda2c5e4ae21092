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

__all__ = ["DirectSDPStepper", "train_direct_sdp"]


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


class DirectSDPStepper:
    """The direct method's training state, one step at a time: `solve()` the margin SDP
    of the current weights, then `update(solution)` takes the gradient step along its dual.

    Built once (the parametrised cvxpy SDP, the compiled gradient step), so a step costs
    what a step of `train_direct_sdp` costs: `stepper()` (solve, then update if solved)
    is what a timing of one direct-SDP training step calls.

    **Arguments:** `observer` (initial weights); `key` (keyword-only, split once per
    update); `config` (uses `learning_rate`, `lmi_est_weight`, sampling fields); `solver`.
    """

    def __init__(
        self,
        observer: NeuralObserver,
        *,
        key: jax.Array,
        config: ObserverTrainConfig,
        solver: str = "CLARABEL",
    ):
        if not isinstance(observer, NeuralObserver):
            raise ValueError(
                f"observer: expected a NeuralObserver, received {type(observer).__name__}"
            )
        optimizer = optax.adam(config.learning_rate)
        trainable, frozen = eqx.partition(observer, trainable_filter(observer))
        self._frozen = frozen
        self._trainable = trainable
        self._opt_state = optimizer.init(trainable)
        self._key = key
        self._dt = observer.A.dtype

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

        self._step = step
        self._sdp = _MarginSDP(observer.extended_dim, observer.hidden_dim, solver)
        ne, nh, dt = observer.extended_dim, observer.hidden_dim, self._dt
        jax.block_until_ready(  # compile the gradient step now
            step(
                trainable,
                self._opt_state,
                jnp.eye(ne, dtype=dt),
                jnp.ones((nh,), dt),
                jnp.eye(ne + nh, dtype=dt),
                key,
            )
        )

    @property
    def observer(self) -> NeuralObserver:
        """The current weights."""
        return eqx.combine(self._trainable, self._frozen)

    def solve(self):
        """The margin SDP of the current weights: `(s, P, t, Z)` (margin, certificate,
        multipliers, the LMI's dual matrix), or None when the solver fails."""
        return self._sdp(self.observer)

    def update(self, solution) -> None:
        """One Adam step along `-d s*/dW` from `solution = (s, P, t, Z)` of `solve()`."""
        _, P, t, Z = solution
        dt = self._dt
        self._key, sub = jax.random.split(self._key)
        self._trainable, self._opt_state = self._step(
            self._trainable, self._opt_state, jnp.asarray(P, dt), jnp.asarray(t, dt),
            jnp.asarray(Z, dt), sub,
        )  # fmt: skip

    def __call__(self) -> float:
        """One training step (solve, then update if solved); returns the margin (-inf:
        the solver failed, no update)."""
        res = self.solve()
        if res is None:
            return -np.inf
        self.update(res)
        jax.block_until_ready(self._trainable)
        return res[0]


def train_direct_sdp(
    observer: NeuralObserver,
    *,
    key: jax.Array,
    config: ObserverTrainConfig,
    max_steps: int,
    solver: str = "CLARABEL",
    tol: float = 1e-7,
):
    """Train with one SDP solve per step until the certificate holds (`DirectSDPStepper`
    steps).

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
    margins = []
    sdp_seconds = 0.0
    certified = False
    steps = 0
    # set-up outside the clock: build the parametrised SDP, compile the gradient step
    t0 = time.perf_counter()
    stepper = DirectSDPStepper(observer, key=key, config=config, solver=solver)
    setup_seconds = time.perf_counter() - t0
    t0 = time.perf_counter()
    for steps in range(1, max_steps + 1):  # noqa: B007 -- the count is reported after the loop
        ts = time.perf_counter()
        res = stepper.solve()
        sdp_seconds += time.perf_counter() - ts
        if res is None:
            margins.append(-np.inf)
            break
        margins.append(res[0])
        if res[0] > tol:
            certified = True
            break
        stepper.update(res)
    result = stepper.observer
    info = {
        "steps": steps,
        "seconds": time.perf_counter() - t0,
        "certified": certified,
        "margins": np.asarray(margins),
        "sdp_seconds": sdp_seconds,
        "setup_seconds": setup_seconds,
    }
    return result, info
