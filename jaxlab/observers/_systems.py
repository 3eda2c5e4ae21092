"""Plants with an unknown lumped disturbance: Van der Pol, Duffing, pendulum, X-29.

Every plant is written as

    x' = f0(x, u) + E d(t, x),    y = C x,

where `f0` is the *known* nominal model, `E` the disturbance input matrix and
`d` the *unknown* lumped disturbance (model uncertainty plus an external
disturbance). Observers built on the linearisation (A, B) of `f0` at the origin
estimate the *total* disturbance relative to that linear model (the extended
state of an extended-state observer); the EKF baseline uses `f0` itself.

Paper: P2, "Provably stable neural-network observers" (X-29 ND-PA matrices from
the paper's public code configuration and the issue text).
"""

from __future__ import annotations

import abc

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import scipy.linalg
from jaxtyping import Array, Float

from jaxlab._core import as_array, check_real

__all__ = [
    "AbstractPlant",
    "LinearPlant",
    "VanDerPol",
    "Duffing",
    "DisturbedPendulum",
    "x29_longitudinal",
    "x29_lateral",
    "linear_model",
    "total_disturbance",
    "extended_error_model",
]


class AbstractPlant(eqx.Module):
    """A plant `x' = f0(x, u) + E d(t, x)`, `y = C x` with a state-feedback input law."""

    C: eqx.AbstractVar[Float[Array, "p n"]]
    E: eqx.AbstractVar[Float[Array, "n nd"]]

    @abc.abstractmethod
    def nominal_field(self, x: Float[Array, " n"], u: Float[Array, " m"]) -> Float[Array, " n"]:
        """The known model `f0(x, u)`."""

    @abc.abstractmethod
    def disturbance(self, t: Float[Array, ""], x: Float[Array, " n"]) -> Float[Array, " nd"]:
        """The unknown lumped disturbance `d(t, x)` (uncertainty + external)."""

    @abc.abstractmethod
    def control(self, t: Float[Array, ""], x: Float[Array, " n"]) -> Float[Array, " m"]:
        """The (known) input applied at time t; may use the true state (inner loop)."""

    @property
    def state_dim(self) -> int:
        return self.E.shape[0]

    @property
    def disturbance_dim(self) -> int:
        return self.E.shape[1]

    def output(self, x: Float[Array, " n"]) -> Float[Array, " p"]:
        return self.C @ x

    def true_field(self, t: Float[Array, ""], x: Float[Array, " n"]) -> Float[Array, " n"]:
        """The true dynamics `f0(x, u(t, x)) + E d(t, x)`."""
        u = self.control(t, x)
        return self.nominal_field(x, u) + self.E @ self.disturbance(t, x)


def _sines(t, amplitude, frequency):
    return amplitude * jnp.sin(frequency * t)


class LinearPlant(AbstractPlant):
    """Linear plant `x' = A x + B u + E d`, `d = E^+ dA x + a sin(w t)`, `u = -K x + r(t)`.

    **Fields:** `A (n, n)`, `B (n, m)`, `C (p, n)`, `E (n, nd)`, `delta_A (n, n)` (the
    model uncertainty, unknown to the observer; must lie in range(E)),
    `feedback (m, n)` (inner stabilising loop on the true state), `reference_amp (m,)`,
    `reference_freq (m,)`, `dist_amp (nd,)`, `dist_freq (nd,)`.
    """

    A: Float[Array, "n n"]
    B: Float[Array, "n m"]
    C: Float[Array, "p n"]
    E: Float[Array, "n nd"]
    delta_A: Float[Array, "n n"]
    feedback: Float[Array, "m n"]
    reference_amp: Float[Array, " m"]
    reference_freq: Float[Array, " m"]
    dist_amp: Float[Array, " nd"]
    dist_freq: Float[Array, " nd"]

    def nominal_field(self, x, u):
        return self.A @ x + self.B @ u

    def disturbance(self, t, x):
        lumped = jnp.linalg.pinv(self.E) @ (self.delta_A @ x)
        return lumped + _sines(t, self.dist_amp, self.dist_freq)

    def control(self, t, x):
        return -self.feedback @ x + _sines(t, self.reference_amp, self.reference_freq)


class VanDerPol(AbstractPlant):
    """`x1' = x2`, `x2' = mu (1 - x1^2) x2 - x1 + d(t)`, `y = x1`; `d = a sin(w t)` unknown."""

    mu: float = 1.0
    dist_amp: float = 0.5
    dist_freq: float = 1.3
    C: Float[Array, "1 2"] = eqx.field(default_factory=lambda: np.array([[1.0, 0.0]]))
    E: Float[Array, "2 1"] = eqx.field(default_factory=lambda: np.array([[0.0], [1.0]]))

    def nominal_field(self, x, u):
        return jnp.stack([x[1], self.mu * (1 - x[0] ** 2) * x[1] - x[0] + u[0]])

    def disturbance(self, t, x):
        return jnp.atleast_1d(self.dist_amp * jnp.sin(self.dist_freq * t))

    def control(self, t, x):
        return jnp.zeros((1,), dtype=x.dtype)


class Duffing(AbstractPlant):
    """`x1' = x2`, `x2' = -delta x2 - alpha x1 - beta x1^3 + gamma cos(w t) + d`, `y = x1`.

    The forcing `gamma cos(w t)` is the known input; `d` combines an unknown 10 %
    error in the cubic stiffness and an unknown external sinusoid.
    """

    delta: float = 0.3
    alpha: float = -1.0
    beta: float = 1.0
    gamma: float = 0.5
    omega: float = 1.2
    beta_error: float = 0.1
    dist_amp: float = 0.2
    dist_freq: float = 2.0
    C: Float[Array, "1 2"] = eqx.field(default_factory=lambda: np.array([[1.0, 0.0]]))
    E: Float[Array, "2 1"] = eqx.field(default_factory=lambda: np.array([[0.0], [1.0]]))

    def nominal_field(self, x, u):
        acc = -self.delta * x[1] - self.alpha * x[0] - self.beta * x[0] ** 3 + u[0]
        return jnp.stack([x[1], acc])

    def disturbance(self, t, x):
        d = -self.beta_error * self.beta * x[0] ** 3 + self.dist_amp * jnp.sin(self.dist_freq * t)
        return jnp.atleast_1d(d)

    def control(self, t, x):
        return jnp.atleast_1d(self.gamma * jnp.cos(self.omega * t)).astype(x.dtype)


class DisturbedPendulum(AbstractPlant):
    """`x1' = x2`, `x2' = -(g/l) sin x1 - b x2 + u + d`, `y = x1`; `d` unknown.

    `u = a_u sin(w_u t)` is a known torque; `d` combines an unknown 20 % error in the
    damping and an unknown square-ish gust `a tanh(5 sin(w t))`.
    """

    g_over_l: float = 9.81
    damping: float = 0.2
    damping_error: float = 0.2
    torque_amp: float = 2.0
    torque_freq: float = 0.7
    dist_amp: float = 1.0
    dist_freq: float = 1.1
    C: Float[Array, "1 2"] = eqx.field(default_factory=lambda: np.array([[1.0, 0.0]]))
    E: Float[Array, "2 1"] = eqx.field(default_factory=lambda: np.array([[0.0], [1.0]]))

    def nominal_field(self, x, u):
        return jnp.stack([x[1], -self.g_over_l * jnp.sin(x[0]) - self.damping * x[1] + u[0]])

    def disturbance(self, t, x):
        d = -self.damping_error * self.damping * x[1] + self.dist_amp * jnp.tanh(
            5.0 * jnp.sin(self.dist_freq * t)
        )
        return jnp.atleast_1d(d)

    def control(self, t, x):
        return jnp.atleast_1d(self.torque_amp * jnp.sin(self.torque_freq * t)).astype(x.dtype)


# X-29 ND-PA (normal digital, powered approach) matrices, as given in the issue.
_X29_A1 = np.array(
    [
        [-0.04272, -8.541, -0.4451, -32.16],
        [-7.881e-4, -0.5291, 0.9896, 1.639e-10],
        [4.010e-4, 3.542, -0.2228, 6.150e-9],
        [0.0, 0.0, 1.0, 0.0],
    ]
)
_X29_B1 = np.array(
    [
        [-0.03385, -0.09386, 0.004888],
        [-0.001028, -0.001297, -4.054e-4],
        [0.02718, -0.005744, -0.01351],
        [0.0, 0.0, 0.0],
    ]
)
# Longitudinal outputs (u ft/s; alpha, q, theta in degrees; normal-acceleration mix):
# the output map of the paper's public configuration.
_X29_C1 = np.array(
    [
        [1.0, 0.0, 0.0, 0.0],
        [0.0, 57.3, 0.0, 0.0],
        [0.0, 0.0, 57.3, 0.0],
        [0.0, 0.0, 0.0, 57.3],
        [0.007063, 4.567, 0.09867, -0.3809e-4],
    ]
)
_X29_A2 = np.array(
    [
        [-0.1817, 0.1496, -0.9825, 0.1119],
        [-3.569, -1.704, 0.9045, -5.531e-7],
        [1.218, -0.08208, -0.1826, -4.63e-8],
        [0.0, 1.0, 0.1513, 0.0],
    ]
)
_X29_B2 = np.array([[-4.327e-4, 3.901e-4], [0.3713, 0.05486], [0.02648, -0.01353], [0.0, 0.0]])
# Lateral outputs: beta, p, r, phi in degrees (a disturbance entering every state
# channel is only observable with a full-column-rank C).
_X29_C2 = 57.3 * np.eye(4)


def _lqr_gain(A, B, q, r):
    X = scipy.linalg.solve_continuous_are(A, B, q * np.eye(A.shape[0]), r * np.eye(B.shape[1]))
    return np.linalg.solve(r * np.eye(B.shape[1]), B.T @ X)


def _x29(A, B, C, uncertainty, dist_amp, dist_freq, ref_amp, ref_freq, dtype):
    n, m = B.shape
    as_array("uncertainty", uncertainty, dtype=jnp.floating)  # None, str, complex: named
    uncertainty = np.asarray(uncertainty, dtype=np.float64)
    if uncertainty.shape == ():
        uncertainty = uncertainty * np.ones((n, n))
    if uncertainty.shape != (n, n):
        raise ValueError(
            f"uncertainty: expected a scalar or shape {(n, n)}, received {uncertainty.shape}"
        )
    if not np.all(np.isfinite(uncertainty)):
        raise ValueError("uncertainty: expected finite values")
    K = _lqr_gain(A, B, 1.0, 1.0)  # inner flight-control loop keeps the unstable airframe bounded

    def as_arr(name, v, k):
        as_array(name, v, dtype=jnp.floating, finite=True)  # None, str, NaN/inf: named
        v = np.asarray(v, np.float64)
        if v.shape not in ((), (k,)):
            raise ValueError(f"{name}: expected a scalar or shape ({k},), received {v.shape}")
        return jnp.asarray(np.broadcast_to(v, (k,)), dtype)

    return LinearPlant(
        A=jnp.asarray(A, dtype),
        B=jnp.asarray(B, dtype),
        C=jnp.asarray(C, dtype),
        E=jnp.eye(n, dtype=dtype),
        delta_A=jnp.asarray(uncertainty * A, dtype),
        feedback=jnp.asarray(K, dtype),
        reference_amp=as_arr("ref_amp", ref_amp, m),
        reference_freq=as_arr("ref_freq", ref_freq, m),
        dist_amp=as_arr("dist_amp", dist_amp, n),
        dist_freq=as_arr("dist_freq", dist_freq, n),
    )


def x29_longitudinal(
    uncertainty: float | np.ndarray = 0.1,
    *,
    dist_amp: float | tuple[float, ...] | np.ndarray = (0.2, 0.01, 0.01, 0.0),
    dist_freq: float | tuple[float, ...] | np.ndarray = (0.5, 0.8, 1.1, 1.0),
    ref_amp: float | np.ndarray = 1.0,
    ref_freq: float | tuple[float, ...] | np.ndarray = (0.3, 0.5, 0.7),
    dtype=jnp.float64,
) -> LinearPlant:
    """X-29 longitudinal ND-PA model (states u, alpha, q, theta; 3 inputs; 5 outputs).

    **Arguments:**

    - `uncertainty`: relative model error, scalar or `(4, 4)`: the true matrix is
      `A (1 + uncertainty)` entrywise (unknown to the observers).
    - `dist_amp`, `dist_freq`: the external sinusoidal disturbance per state channel.
    - `ref_amp`, `ref_freq`: sinusoidal pilot reference added to the LQR inner loop.

    **Returns:** a `LinearPlant`.
    """
    return _x29(
        _X29_A1, _X29_B1, _X29_C1, uncertainty, dist_amp, dist_freq, ref_amp, ref_freq, dtype
    )


def x29_lateral(
    uncertainty: float | np.ndarray = 0.1,
    *,
    dist_amp: float | tuple[float, ...] | np.ndarray = (0.01, 0.05, 0.02, 0.0),
    dist_freq: float | tuple[float, ...] | np.ndarray = (0.6, 0.9, 1.2, 1.0),
    ref_amp: float | np.ndarray = 1.0,
    ref_freq: float | tuple[float, ...] | np.ndarray = (0.4, 0.6),
    dtype=jnp.float64,
) -> LinearPlant:
    """X-29 lateral-directional ND-PA model (states beta, p, r, phi; 2 inputs; 4 outputs).

    Arguments as `x29_longitudinal`. **Returns:** a `LinearPlant`.
    """
    return _x29(
        _X29_A2, _X29_B2, _X29_C2, uncertainty, dist_amp, dist_freq, ref_amp, ref_freq, dtype
    )


def linear_model(plant: AbstractPlant):
    """Linearise the nominal model at the origin.

    **Returns:** `(A (n, n), B (n, m), C (p, n), E (n, nd))`.
    """
    n = plant.state_dim
    x0 = jnp.zeros((n,), dtype=plant.C.dtype)
    u0 = jnp.zeros_like(plant.control(jnp.zeros((), x0.dtype), x0))
    A = jax.jacfwd(plant.nominal_field, argnums=0)(x0, u0)
    B = jax.jacfwd(plant.nominal_field, argnums=1)(x0, u0)
    return A, B, plant.C, plant.E


def total_disturbance(plant: AbstractPlant, t, x):
    """The disturbance relative to the linear model, `E^+ (f(t, x) - A x - B u)`.

    This is what an extended-state observer built on `linear_model(plant)` estimates.
    **Arguments:** `plant`; `t` a finite time (scalar); `x (n,)` a finite state.

    **Returns:** shape `(nd,)`.
    """
    t = as_array("t", t, shape=(), dtype=jnp.floating, finite=True)
    x = as_array("x", x, shape=(plant.state_dim,), dtype=jnp.floating, finite=True)
    A, B, _, E = linear_model(plant)
    u = plant.control(t, x)
    return jnp.linalg.pinv(E) @ (plant.true_field(t, x) - A @ x - B @ u)


def extended_error_model(A, C, E, epsilon):
    """Scaled extended error model of a high-gain extended-state observer.

    With `eta = (e_x / epsilon, e_d)`, the error of an observer with output injection
    `v` obeys `epsilon eta' = A_eps eta + v(C_eps eta) + epsilon [0; I] d'`.

    **Arguments:** `A (n, n)`, `C (p, n)`, `E (n, nd)`, `epsilon > 0`.

    **Returns:** `(A_eps (n+nd, n+nd), C_eps (p, n+nd), D (n+nd, nd))` with
    `A_eps = [[eps A, E], [0, 0]]`, `C_eps = [C, 0]` and `D = [0; I]`.
    """
    sizes: dict[str, int] = {}
    kw = {"dtype": jnp.floating, "finite": True, "nonempty": True, "sizes": sizes}
    A = as_array("A", A, shape=("n", "n"), **kw)
    C = as_array("C", C, shape=("p", "n"), **kw)
    E = as_array("E", E, shape=("n", "nd"), **kw)
    epsilon = check_real("epsilon", epsilon, low=0.0, low_inclusive=False)
    n, nd = E.shape
    p = C.shape[0]
    dt = A.dtype
    top = jnp.concatenate([epsilon * A, E.astype(dt)], axis=1)
    A_eps = jnp.concatenate([top, jnp.zeros((nd, n + nd), dt)], axis=0)
    C_eps = jnp.concatenate([C.astype(dt), jnp.zeros((p, nd), dt)], axis=1)
    D = jnp.concatenate([jnp.zeros((n, nd), dt), jnp.eye(nd, dtype=dt)], axis=0)
    return A_eps, C_eps, D
