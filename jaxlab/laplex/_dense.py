"""Dense LAPLEX matrix (the O(MN) oracle; also the routing view of small layers)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
from jaxtyping import Array, Float, Inexact

from jaxlab._core import check_memory

from ._matvec import validate_kernel

__all__ = ["dense_matrix"]


def dense_matrix(
    t: Float[Array, "H M"],
    s: Float[Array, "H N"],
    a: Float[Array, " H"],
    b: Float[Array, " H"] | None = None,
    c: Float[Array, " H"] | None = None,
) -> Inexact[Array, "M N"]:
    """`K[i, j] = sum_h c_h exp(-(a_h + i b_h) |t_h[i] - s_h[j]|)` as a dense matrix (P9).

    **Arguments:** anchors `t` (H, M) and `s` (H, N); decay `a` (H,) > 0; phase `b`
    (H,) or None (the default) for the real kernel; weight `c` (H,), required (the real
    kernel is `dense_matrix(t, s, a, c=c)`).

    **Returns:** (M, N), real if `b` is None else complex.
    """
    t, s, a, b, c, sizes = validate_kernel(t, s, a, b, c, call="dense_matrix(t, s, a, c=c)")
    # the (H, M, N) distances and kernel values (complex with b)
    check_memory("t", 16.0 * 2 * sizes["H"] * sizes["M"] * sizes["N"])
    d = jnp.abs(t[:, :, None] - s[:, None, :])
    if b is None:
        return jnp.sum(c[:, None, None] * jnp.exp(-a[:, None, None] * d), axis=0)
    lam = jax.lax.complex(a, b)
    k = jnp.exp(-lam[:, None, None] * d.astype(lam.dtype))
    return jnp.sum(c.astype(lam.dtype)[:, None, None] * k, axis=0)
