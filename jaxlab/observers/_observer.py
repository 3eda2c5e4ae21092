"""Observers: the neural extended-state observer, Luenberger, and the EKF baseline.

Every observer has the same interface, used by `simulate`:

- `init(x_hat0) -> state` (a pytree),
- `vector_field(t, state, y, u) -> d state / dt`,
- `estimate(state) -> (x_hat (n,), d_hat (nd,))`.

Paper: P2, "Provably stable neural-network observers".
"""

from __future__ import annotations

import abc
from typing import Any, cast

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import scipy.linalg
import scipy.signal
from jaxtyping import Array, Float

from jaxlab._core import as_array

from ._systems import AbstractPlant, extended_error_model, linear_model

__all__ = [
    "AbstractObserver",
    "NeuralObserver",
    "LuenbergerObserver",
    "ExtendedKalmanFilter",
    "place_gain",
    "trainable_filter",
]


def place_gain(A, C, poles) -> np.ndarray:
    """Output-injection gain `L` with `eig(A + L C) = poles` (pole placement).

    Sign convention: the error obeys `e' = (A + L C) e` (so `L` is minus the usual
    Luenberger gain). Uses `scipy.signal.place_poles` on the dual pair (falling back to
    a maximal independent subset of the outputs when they are redundant).

    **Arguments:** `A (n, n)`, `C (p, n)`, `poles (n,)` (complex poles in conjugate pairs).
    **Returns:** `L (n, p)` as a float64 numpy array.
    """
    n = {}
    A = np.asarray(as_array("A", A, shape=("n", "n"), dtype=np.number, sizes=n, finite=True))
    C = np.asarray(as_array("C", C, shape=(None, "n"), dtype=np.number, sizes=n, finite=True))
    for name, m in (("A", A), ("C", C)):
        if np.iscomplexobj(m):
            raise ValueError(f"{name}: expected a real matrix, received dtype {m.dtype}")
    A, C = A.astype(np.float64), C.astype(np.float64)
    if C.shape[0] == 0:
        raise ValueError("C: expected at least one output row, received shape (0, n)")
    poles = np.asarray(as_array("poles", poles, ndim=1, dtype=np.number, finite=True))
    if poles.shape != (A.shape[0],):
        raise ValueError(f"poles: expected shape ({A.shape[0]},), received {poles.shape}")
    if np.any(np.real(poles) >= 0):
        raise ValueError("poles: expected every pole in the open left half-plane")
    try:
        # Any: scipy types the result as a bare Bunch (fields gain_matrix, computed_poles, ...)
        K = cast(Any, scipy.signal.place_poles(A.T, C.T, poles)).gain_matrix
        return -K.T
    except ValueError:
        # scipy's YT algorithm can fail when outputs are redundant (e.g. the X-29's fifth,
        # normal-acceleration output is a combination of the others): place with a
        # maximal independent subset of outputs (pivoted QR) and give the rest zero gain.
        rank = np.linalg.matrix_rank(C)
        _, _, piv = cast(
            tuple[np.ndarray, np.ndarray, np.ndarray], scipy.linalg.qr(C.T, pivoting=True)
        )
        rows = np.sort(piv[:rank])
        if rank == C.shape[0]:
            raise
        K = cast(Any, scipy.signal.place_poles(A.T, C[rows].T, poles)).gain_matrix
        L = np.zeros((A.shape[0], C.shape[0]))
        L[:, rows] = -K.T
        return L


class AbstractObserver(eqx.Module):
    """Interface shared by all observers (neural extended-state, Luenberger, EKF), used by
    `simulate`: `init(x_hat0) -> state` (a pytree), `vector_field(t, state, y, u) ->
    d state / dt`, `estimate(state) -> (x_hat (n,), d_hat (nd,))`."""

    @abc.abstractmethod
    def init(self, x_hat0: Float[Array, " n"]):
        """Initial observer state for the state estimate `x_hat0`."""

    @abc.abstractmethod
    def vector_field(self, t, state, y: Float[Array, " p"], u: Float[Array, " m"]):
        """Time derivative of the observer state given measurement `y` and input `u`."""

    @abc.abstractmethod
    def estimate(self, state) -> tuple[Float[Array, " n"], Float[Array, " nd"]]:
        """`(x_hat, d_hat)` read from an observer state."""


def _glorot(key, shape, scale, dtype):
    fan_in = shape[1] if shape[1] > 0 else 1
    return scale * jax.random.normal(key, shape, dtype) / np.sqrt(fan_in)


class NeuralObserver(AbstractObserver):
    """High-gain extended-state observer with a neural output-injection correction.

    With `y_tilde = (y - C x_hat) / epsilon` and the injection
    `v(y_tilde) = L y_tilde + W_out tanh(W_K ... tanh(W_1 y_tilde))` (no biases, so
    `v(0) = 0`), the observer is

        x_hat' = A x_hat + B u + E d_hat - v_x,    d_hat' = -v_d / epsilon,

    and its scaled error `eta = ((x - x_hat)/epsilon, d - d_hat)` obeys
    `epsilon eta' = A_eps eta + v(C_eps eta) + epsilon [0; I] d'`
    (`extended_error_model`). With no hidden layers it is the linear high-gain ESO.

    **Fields:** `A (n, n)`, `B (n, m)`, `C (p, n)`, `E (n, nd)` nominal linear model;
    `epsilon` (high-gain parameter); `gain L (n+nd, p)`; `hidden` (tuple of
    `(h_k, h_{k-1})` weights, `h_0 = p`); `readout W_out (n+nd, h_K)`.

    Paper: P2 (observer = nominal model + output injection + tanh-MLP correction).
    """

    A: Float[Array, "n n"]
    B: Float[Array, "n m"]
    C: Float[Array, "p n"]
    E: Float[Array, "n nd"]
    gain: Float[Array, "ne p"]
    hidden: tuple[Float[Array, "h hp"], ...]
    readout: Float[Array, "ne hK"]
    epsilon: float = eqx.field(static=True)

    @classmethod
    def from_plant(
        cls,
        plant: AbstractPlant,
        hidden_sizes: tuple[int, ...],
        *,
        epsilon: float,
        key: jax.Array,
        gain=None,
        init_scale: float = 1.0,
        readout_scale: float = 0.1,
    ) -> NeuralObserver:
        """Build from a plant's linearised nominal model.

        **Arguments:** `plant`; `hidden_sizes` (e.g. `(32, 64, 32)`; `()` gives a linear
        ESO); `epsilon > 0`; `key` (keyword-only); `gain (n+nd, p)` finite real (else
        `ValueError` naming `gain`) or None for a random gain; `init_scale`,
        `readout_scale` scale the random weights.
        """
        if not (isinstance(epsilon, int | float) and epsilon > 0):
            raise ValueError(f"epsilon: expected a positive float, received {epsilon!r}")
        hidden_sizes = tuple(int(h) for h in hidden_sizes)
        if any(h <= 0 for h in hidden_sizes):
            raise ValueError(f"hidden_sizes: expected positive ints, received {hidden_sizes}")
        A, B, C, E = linear_model(plant)
        dt = A.dtype
        n, nd = E.shape
        p = C.shape[0]
        ne = n + nd
        keys = jax.random.split(key, len(hidden_sizes) + 2)
        sizes = (p,) + hidden_sizes
        hidden = tuple(
            _glorot(keys[k], (sizes[k + 1], sizes[k]), init_scale, dt)
            for k in range(len(hidden_sizes))
        )
        readout = _glorot(keys[-2], (ne, sizes[-1] if hidden_sizes else 0), readout_scale, dt)
        if gain is None:
            gain = _glorot(keys[-1], (ne, p), init_scale, dt)
        else:
            gain = as_array("gain", gain, shape=(ne, p), dtype=np.number, real=True, finite=True)
            gain = gain.astype(dt)
        return cls(
            A=A, B=B, C=C, E=E, gain=gain, hidden=hidden, readout=readout, epsilon=float(epsilon)
        )

    # ---- sizes and the scaled error model -------------------------------------------------
    @property
    def extended_dim(self) -> int:
        return self.E.shape[0] + self.E.shape[1]

    @property
    def hidden_dim(self) -> int:
        return int(sum(w.shape[0] for w in self.hidden))

    def error_model(self):
        """`(A_eps, C_eps, D)` of `extended_error_model` for this observer."""
        return extended_error_model(self.A, self.C, self.E, self.epsilon)

    def injection(self, y_tilde: Float[Array, " p"]) -> Float[Array, " ne"]:
        """`v(y_tilde) = L y_tilde + W_out tanh(W_K ... tanh(W_1 y_tilde))`."""
        h = y_tilde
        for w in self.hidden:
            h = jnp.tanh(w @ h)
        out = self.gain @ y_tilde
        if self.hidden:
            out = out + self.readout @ h
        return out

    def error_field(self, eta: Float[Array, " ne"]) -> Float[Array, " ne"]:
        """Nominal scaled error dynamics `f(eta) = A_eps eta + v(C_eps eta)` (`d' = 0`),
        in the fast time `tau = t / epsilon`."""
        A_eps, C_eps, _ = self.error_model()
        return A_eps @ eta + self.injection(C_eps @ eta)

    # ---- the observer itself --------------------------------------------------------------
    def init(self, x_hat0):
        nd = self.E.shape[1]
        return jnp.concatenate([x_hat0, jnp.zeros((nd,), x_hat0.dtype)])

    def vector_field(self, t, state, y, u):
        n = self.A.shape[0]
        x_hat, d_hat = state[:n], state[n:]
        v = self.injection((y - self.C @ x_hat) / self.epsilon)
        dx = self.A @ x_hat + self.B @ u + self.E @ d_hat - v[:n]
        dd = -v[n:] / self.epsilon
        return jnp.concatenate([dx, dd])

    def estimate(self, state):
        n = self.A.shape[0]
        return state[:n], state[n:]


def trainable_filter(observer: NeuralObserver):
    """Filter spec marking the trainable leaves (gain, hidden, readout) of an observer."""
    spec = jax.tree_util.tree_map(lambda _: False, observer)
    return eqx.tree_at(
        lambda o: (o.gain, o.hidden, o.readout),
        spec,
        (True, tuple(True for _ in observer.hidden), True),
    )


class LuenbergerObserver(AbstractObserver):
    """Classical Luenberger observer on the linear nominal model (no disturbance estimate).

    `x_hat' = A x_hat + B u - L (y - C x_hat)` with `eig(A + L C)` placed (`place_gain`).
    """

    A: Float[Array, "n n"]
    B: Float[Array, "n m"]
    C: Float[Array, "p n"]
    gain: Float[Array, "n p"]
    disturbance_dim: int = eqx.field(static=True)

    @classmethod
    def from_plant(cls, plant: AbstractPlant, poles) -> LuenbergerObserver:
        """Luenberger observer with the error poles `poles (n,)`."""
        A, B, C, E = linear_model(plant)
        L = place_gain(A, C, poles)
        return cls(A=A, B=B, C=C, gain=jnp.asarray(L, A.dtype), disturbance_dim=E.shape[1])

    def init(self, x_hat0):
        return x_hat0

    def vector_field(self, t, state, y, u):
        return self.A @ state + self.B @ u - self.gain @ (y - self.C @ state)

    def estimate(self, state):
        return state, jnp.full((self.disturbance_dim,), jnp.nan, state.dtype)


class ExtendedKalmanFilter(AbstractObserver):
    """Continuous-time extended Kalman(-Bucy) filter on the extended state `(x, d)`.

    Uses the *nonlinear* nominal model `f0` of the plant and a random-walk model for
    the disturbance: `z' = [f0(x, u) + E d; 0] + K (y - C x)`,
    `S' = F S + S F^T + Q - S H^T R^-1 H S`, `K = S H^T R^-1`.

    **Fields:** `plant` (only its known parts `nominal_field`, `C`, `E` are used),
    `process_noise Q (n+nd, n+nd)`, `measurement_noise R (p, p)`, `initial_cov (n+nd, n+nd)`.
    """

    plant: AbstractPlant
    process_noise: Float[Array, "ne ne"]
    measurement_noise: Float[Array, "p p"]
    initial_cov: Float[Array, "ne ne"]

    def _f(self, z, u):
        n = self.plant.state_dim
        x, d = z[:n], z[n:]
        return jnp.concatenate(
            [self.plant.nominal_field(x, u) + self.plant.E @ d, jnp.zeros_like(d)]
        )

    def init(self, x_hat0):
        nd = self.plant.disturbance_dim
        z = jnp.concatenate([x_hat0, jnp.zeros((nd,), x_hat0.dtype)])
        return z, self.initial_cov.astype(x_hat0.dtype)

    def vector_field(self, t, state, y, u):
        z, S = state
        n = self.plant.state_dim
        H = jnp.concatenate(
            [self.plant.C, jnp.zeros((self.plant.C.shape[0], z.shape[0] - n), z.dtype)], 1
        )
        F = jax.jacfwd(self._f)(z, u)
        Rinv_H = jnp.linalg.solve(self.measurement_noise, H)
        K = S @ H.T @ jnp.linalg.inv(self.measurement_noise)
        dz = self._f(z, u) + K @ (y - H @ z)
        dS = F @ S + S @ F.T + self.process_noise - S @ H.T @ Rinv_H @ S
        return dz, 0.5 * (dS + dS.T)

    def estimate(self, state):
        z, _ = state
        n = self.plant.state_dim
        return z[:n], z[n:]
