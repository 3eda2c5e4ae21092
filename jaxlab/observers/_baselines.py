"""The comparison observers of the P2 experiments, built from a plant's known model:
a linear high-gain extended-state observer (ESO) and an extended Kalman filter on the
state augmented with the disturbance.

ESO. With the linearised model `(A, B, C, E) = linear_model(plant)` and the scaled error
`eta = (e_x / epsilon, e_d)`, a linear output injection `L` gives the error dynamics
(fast time `tau = t / epsilon`)

    d eta / d tau = (A_eps + L C_eps) eta + epsilon [0; I] d',
    A_eps = [[epsilon A, E], [0, 0]],   C_eps = [C, 0]   (`extended_error_model`),

and `L` is placed so that `eig(A_eps + L C_eps) = poles` (`place_gain`): the observer
is a `NeuralObserver` without hidden layers whose gain is `L`.

EKF. An `ExtendedKalmanFilter` on `z = (x, d)` with the random-walk disturbance model
and the diagonal noise covariances

    Q = diag(q_x I_n, q_d I_nd),   R = r I_p,   S(0) = I_(n+nd).

Paper: P2 (its comparison with an ESO and an EKF).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from jaxlab._core import check_real

from ._observer import ExtendedKalmanFilter, NeuralObserver, place_gain
from ._systems import AbstractPlant, extended_error_model, linear_model

__all__ = ["high_gain_eso", "disturbance_ekf"]


def _check_plant(plant) -> None:
    if not isinstance(plant, AbstractPlant):
        raise ValueError(f"plant: expected an AbstractPlant, received {type(plant).__name__}")


def high_gain_eso(plant: AbstractPlant, *, epsilon: float, poles, key: jax.Array) -> NeuralObserver:
    """Linear high-gain ESO of `plant` with the scaled error poles `poles` (fast time).

    **Arguments:** `plant`; `epsilon > 0` (the high-gain scale: the error poles in real
    time are `poles / epsilon`); `poles (n + nd,)` in the open left half-plane (complex
    ones in conjugate pairs); `key` (keyword-only), passed to `NeuralObserver.from_plant`.

    **Returns:** a `NeuralObserver` with no hidden layer and gain `L`,
    `eig(A_eps + L C_eps) = poles`.
    """
    _check_plant(plant)
    if not (isinstance(epsilon, int | float) and epsilon > 0):
        raise ValueError(f"epsilon: expected a positive float, received {epsilon!r}")
    A, _, C, E = linear_model(plant)
    A_eps, C_eps, _ = extended_error_model(A, C, E, epsilon)
    L = place_gain(A_eps, C_eps, poles)
    return NeuralObserver.from_plant(plant, (), epsilon=epsilon, key=key, gain=L)


def disturbance_ekf(
    plant: AbstractPlant,
    *,
    state_noise: float = 1e-2,
    disturbance_noise: float = 10.0,
    measurement_noise: float = 1e-2,
) -> ExtendedKalmanFilter:
    """EKF of `plant` on the state augmented with its disturbance, diagonal covariances.

    **Arguments:** `plant`; `state_noise` (`q_x`), `disturbance_noise` (`q_d`: how fast
    the disturbance may wander), `measurement_noise` (`r`), each > 0.

    **Returns:** `ExtendedKalmanFilter(plant, Q = diag(q_x I_n, q_d I_nd), R = r I_p,
    S(0) = I)`.
    """
    _check_plant(plant)
    state_noise, disturbance_noise, measurement_noise = (
        check_real(name, v, low=0.0, low_inclusive=False)
        for name, v in (
            ("state_noise", state_noise),
            ("disturbance_noise", disturbance_noise),
            ("measurement_noise", measurement_noise),
        )
    )
    n, nd = plant.state_dim, plant.disturbance_dim
    p = plant.C.shape[0]
    dt = plant.C.dtype
    Q = jnp.diag(
        jnp.concatenate([jnp.full((n,), state_noise, dt), jnp.full((nd,), disturbance_noise, dt)])
    )
    return ExtendedKalmanFilter(
        plant=plant,
        process_noise=Q,
        measurement_noise=measurement_noise * jnp.eye(p, dtype=dt),
        initial_cov=jnp.eye(n + nd, dtype=dt),
    )
