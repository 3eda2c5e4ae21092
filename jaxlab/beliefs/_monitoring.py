"""Self-report analysis: verbal ratings read by option likelihood, and partial correlation.

P13's third finding is that models monitor their own belief states: a self-reported
confidence should track how strongly the belief dominates beyond what the evidence
balance alone explains. `expected_rating` turns the log-likelihoods of a verbal scale
("low", "medium", "high") into the expected value of the scale; `partial_correlation` is
the Pearson correlation of two variables after regressing both on covariates (weighted,
so `jaxlab.interp.bootstrap_ci` resamples it).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from jax.core import Tracer
from jaxtyping import Array, Float

from .._core import as_array, check_array, check_finite


def _float_dtype(*arrays):
    """float64 when any input is float64 (x64 tests, oracles), else float32."""
    return jnp.float64 if any(a.dtype == jnp.float64 for a in arrays) else jnp.float32


__all__ = ["expected_rating", "partial_correlation"]


def expected_rating(
    logliks: Float[Array, "*B K"], values: Float[Array, " K"]
) -> Float[Array, "*B"]:
    """Expected value `sum_k softmax(logliks)_k values_k` of a verbal scale.

    **Arguments:** `logliks` (..., K) option log-likelihoods (`jaxlab.lm.score`); `values`
    (K,) the number each option stands for (e.g. 0, 0.5, 1 for low, medium, high).

    **Returns:** (...) expected ratings.
    """
    x = as_array("logliks", logliks)
    v = as_array("values", values, ndim=1, finite=True)
    if x.ndim < 1 or x.shape[-1] != v.shape[0] or v.shape[0] < 2:
        raise ValueError(
            f"logliks: expected shape (..., {v.shape[0]}) with >= 2 options (one per value), "
            f"received {x.shape}"
        )
    check_finite("logliks", x)
    dt = _float_dtype(x, v)
    return jax.nn.softmax(x.astype(dt), axis=-1) @ v.astype(dt)


def partial_correlation(
    x: Float[Array, " n"],
    y: Float[Array, " n"],
    covariates: Float[Array, "n m"],
    *,
    weights: Float[Array, " n"] | None = None,
) -> Float[Array, ""]:
    """Pearson correlation of x and y after removing what `covariates` explain linearly.

    `r = corr_w(x - Z b_x, y - Z b_y)` with `b` the weighted least-squares coefficients on
    `Z = [1, covariates]`; for one covariate this equals
    `(r_xy - r_xz r_yz) / sqrt((1 - r_xz^2)(1 - r_yz^2))`. Weights replicate rows.

    **Arguments:** `x`, `y` (n,) non-constant, n >= m + 3; `covariates` (n, m) (or (n,));
    `weights` (n,) >= 0, not all zero (else a `ValueError` naming the argument).

    **Returns:** () partial correlation in [-1, 1].
    """
    x, y = as_array("x", x, finite=True), as_array("y", y, finite=True)
    z = as_array("covariates", covariates, finite=True)
    if z.ndim == 1:
        z = z[:, None]
    sizes = check_array("x", x, shape=("n",))
    check_array("y", y, shape=("n",), sizes=sizes)
    check_array("covariates", z, shape=("n", "m"), sizes=sizes)
    dt = _float_dtype(x, y, z)
    x, y, z = x.astype(dt), y.astype(dt), z.astype(dt)
    n = x.shape[0]
    if weights is None:
        w = jnp.ones((n,), dt)
    else:
        w = as_array("weights", weights, shape=(n,), finite=True, low=0.0).astype(dt)
        _check_total_weight(w)
    m = 1 if z.ndim == 1 else z.shape[1]
    if n < m + 3:
        raise ValueError(
            f"x: expected at least {m + 3} rows (m + 3 for {m} covariates), received {n}"
        )
    for name, v in (("x", x), ("y", y)):
        if not isinstance(v, Tracer) and float(jnp.ptp(v)) == 0:
            raise ValueError(f"{name}: expected non-constant values (a correlation needs them)")
    return _partial(x, y, z, w)


def _check_total_weight(w) -> None:
    """Weights >= 0 must not all be zero (a weighted mean over none is NaN)."""
    if not isinstance(w, Tracer) and not float(jnp.sum(w)) > 0:
        raise ValueError("weights: expected a positive total weight, received all zeros")


@jax.jit
def _partial(x, y, z, w):
    n, dt = x.shape[0], x.dtype
    Z = jnp.concatenate([jnp.ones((n, 1), dt), z], axis=1)
    xy = jnp.stack([x, y], axis=1)
    G = (Z * w[:, None]).T @ Z
    # a tiny ridge keeps the normal equations solvable when a dummy covariate is absent
    # from a (bootstrap) sample, or a covariate repeats another; it changes the residuals
    # by O(1e-10) relative in float64, O(1e-6) in float32 (a 1e-10 ridge is below float32
    # resolution there: collinear covariates gave NaN)
    ridge = max(1e-10, 10 * float(jnp.finfo(dt).eps))
    G = G + ridge * jnp.trace(G) / G.shape[0] * jnp.eye(G.shape[0], dtype=dt)
    coef = jnp.linalg.solve(G, (Z * w[:, None]).T @ xy)
    r = xy - Z @ coef
    rx, ry = r[:, 0], r[:, 1]
    rx = rx - jnp.sum(w * rx) / jnp.sum(w)
    ry = ry - jnp.sum(w * ry) / jnp.sum(w)
    return jnp.sum(w * rx * ry) / jnp.sqrt(jnp.sum(w * rx**2) * jnp.sum(w * ry**2))
