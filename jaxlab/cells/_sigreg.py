"""SIGReg: sketched isotropic-Gaussian regularisation with the Epps–Pulley statistic.

For embeddings z (N x D), draw K random unit directions, project, and compare
each projection's empirical characteristic function with the standard normal's,
phi(t) = exp(-t^2 / 2):

    EP(x) = N * integral_{-t_max}^{t_max} |phi_N(t) - phi(t)|^2 phi(t) dt,

with phi_N(t) = mean_i exp(i t x_i), integrated by the trapezoid rule on
`n_points` nodes of [0, t_max] (the integrand is even, so the weights are
doubled). SIGReg is the mean of EP over the K slices; the directions are
resampled every call from the given key.

Under the null (z ~ N(0, I)), E[EP] = integral (1 - phi(t)^2) phi(t) dt ~= 1.05
for t_max = 3 whatever N is; a shift or anisotropy makes it grow like N.

Paper: P5 (LeCellModel), after LeJEPA's SIGReg (Balestriero & LeCun, 2025).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from jaxtyping import Array, Float

from jaxlab._core import as_array, check_memory, check_positive_int, check_real

__all__ = ["epps_pulley", "sigreg", "epps_pulley_null_mean"]


def _nodes(t_max: float, n_points: int, dtype):
    t = jnp.linspace(0.0, t_max, n_points, dtype=dtype)
    dt = t_max / (n_points - 1)
    w = jnp.full((n_points,), 2 * dt, dtype=dtype).at[jnp.array([0, -1])].set(dt)
    phi = jnp.exp(-0.5 * t**2)
    return t, phi, w * phi


def _check_quadrature(t_max, n_points) -> tuple[float, int]:
    """`t_max` a finite number > 0, `n_points` an odd integer >= 3."""
    t_max = check_real("t_max", t_max, low=0.0, low_inclusive=False)
    n_points = check_positive_int("n_points", n_points)
    if n_points < 3 or n_points % 2 == 0:
        raise ValueError(f"n_points: expected an odd integer >= 3, received {n_points!r}")
    return t_max, n_points


def epps_pulley(
    x: Float[Array, "N K"], *, t_max: float = 3.0, n_points: int = 17
) -> Float[Array, " K"]:
    """Epps–Pulley normality statistic of each column of `x` against N(0, 1).

    **Arguments:** `x` `(N, K)` finite floats with N >= 1; `t_max` a finite number > 0;
    `n_points` an odd integer >= 3. Anything else raises a `ValueError` naming it.
    """
    x = as_array("x", x, ndim=2, dtype=jnp.floating, finite=True)
    if x.shape[0] == 0:
        raise ValueError(f"x: expected at least one sample (row), received shape {x.shape}")
    t_max, n_points = _check_quadrature(t_max, n_points)
    check_memory("n_points", 3.0 * x.size * n_points * x.dtype.itemsize)  # (N, K, T) cos/sin
    t, phi, w = _nodes(t_max, n_points, x.dtype)
    xt = x[..., None] * t[None, None]  # (N, K, T)
    err = (jnp.mean(jnp.cos(xt), 0) - phi[None]) ** 2 + jnp.mean(jnp.sin(xt), 0) ** 2
    return x.shape[0] * (err @ w)


def epps_pulley_null_mean(t_max: float = 3.0, n_points: int = 17) -> float:
    """E[EP] under N(0, 1) samples, integral of (1 - phi^2) phi with the same quadrature.

    `t_max` a finite number > 0, `n_points` an odd integer >= 3 (else a `ValueError`).
    """
    t_max, n_points = _check_quadrature(t_max, n_points)
    check_memory("n_points", 8.0 * 4 * n_points)
    t, phi, w = _nodes(
        t_max, n_points, jnp.float64 if jax.config.read("jax_enable_x64") else jnp.float32
    )
    return float(jnp.sum((1 - phi**2) * w))


def sigreg(
    z: Float[Array, "N D"],
    *,
    key: jax.Array,
    n_slices: int = 256,
    t_max: float = 3.0,
    n_points: int = 17,
) -> Float[Array, ""]:
    """Mean Epps–Pulley statistic over `n_slices` random unit projections of `z`.

    **Arguments:** `z` `(N, D)` finite floats with N, D >= 1; `key`; `n_slices` a
    positive integer; `t_max`, `n_points` as in `epps_pulley`. Anything else raises a
    `ValueError` naming the argument.
    """
    z = as_array("z", z, ndim=2, dtype=jnp.floating, finite=True, nonempty=True)
    n_slices = check_positive_int("n_slices", n_slices)
    _, n_points = _check_quadrature(t_max, n_points)
    check_memory("n_slices", 3.0 * z.shape[0] * n_slices * n_points * z.dtype.itemsize)
    a = jax.random.normal(key, (z.shape[1], n_slices), z.dtype)
    a = a / jnp.linalg.norm(a, axis=0, keepdims=True)
    return jnp.mean(epps_pulley(z @ a, t_max=t_max, n_points=n_points))
