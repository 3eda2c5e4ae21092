"""Jacobian log-volume: the quantity behind JEPA-SCORE, shared by `LeCellModel.score` and
`jepa_score` (one place, so the model and the scoring functions cannot drift apart).

For a function f: R^G -> R^D (D <= G) with Jacobian J = J_f(x) (D x G) and singular
values s_1..s_D, the log-volume is

    logvol(J) = sum_i log max(s_i, CLIP),    CLIP = 1e-6,

i.e. 0.5 log det(J J^T) with each singular value clipped away from zero.
"""

from __future__ import annotations

from collections.abc import Callable

import jax
import jax.numpy as jnp
from jaxtyping import Array, Float

from jaxlab._core import check_array

__all__ = ["CLIP", "jacobian_log_volume", "log_volume"]

CLIP = 1e-6


def log_volume(jac: Float[Array, "D G"]) -> Float[Array, ""]:
    """Sum of the log singular values of `jac`, each clipped at `CLIP` from below."""
    s = jnp.linalg.svd(jac, compute_uv=False)
    return jnp.sum(jnp.log(jnp.maximum(s, CLIP)))


def jacobian_log_volume(
    fn: Callable[[Float[Array, " G"]], Float[Array, " D"]], x: Float[Array, " G"]
) -> Float[Array, ""]:
    """`log_volume` of the reverse-mode Jacobian of `fn` at `x` (G,) (D backward passes)."""
    check_array("x", x, ndim=1, dtype=jnp.floating)
    return log_volume(jax.jacrev(fn)(x))
