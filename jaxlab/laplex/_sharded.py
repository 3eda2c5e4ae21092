"""Sharded LAPLEX matvec: the merged sorted order split into contiguous blocks.

For N beyond one device (P9's 1e9 regime) sources and targets are merged into
one sorted sequence (targets carry value 0) and cut into one contiguous block
per device. Each device scans its block locally; the block end states and
decay products (one number per device and right-hand side) are all-gathered,
each device folds the carries of the blocks before it, and fixes up its block
in one elementwise pass. The reverse direction is the same program on the
flipped sequence. A target's output is the forward plus reverse state at its
merged position.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import Mesh, PartitionSpec
from jaxtyping import Array, Float, Inexact

from jaxlab._kernels.laplex import AbstractScan, scan_for_platform

from ._matvec import _COMPLEX, _validate

__all__ = ["sharded_matvec"]


def _sharded_forward(scan, alpha, x, mesh, axis):
    ndev = mesh.shape[axis]

    def body(a_loc, x_loc):
        h = scan(a_loc, x_loc)
        p = jnp.cumprod(a_loc)
        ends = jax.lax.all_gather(h[-1], axis)  # (D, K)
        prods = jax.lax.all_gather(p[-1], axis)  # (D,)
        me = jax.lax.axis_index(axis)
        carry = jnp.zeros_like(h[-1])
        for d in range(ndev - 1):  # D is small and static: fold blocks before `me`
            carry = jnp.where(d < me, prods[d] * carry + ends[d], carry)
        return h + p[:, None] * carry[None]

    spec = PartitionSpec(axis)
    return jax.shard_map(body, mesh=mesh, in_specs=(spec, spec), out_specs=spec, check_vma=False)(
        alpha, x
    )


def sharded_matvec(
    v: Inexact[Array, "N K"],
    t: Float[Array, "H M"],
    s: Float[Array, "H N"],
    a: Float[Array, " H"],
    b: Float[Array, " H"] | None = None,
    c: Float[Array, " H"] | None = None,
    *,
    devices=None,
    scan: AbstractScan | None = None,
) -> Inexact[Array, "M K"]:
    """LAPLEX `K v` (as `matmat`) with the merged order sharded over `devices` (P9).

    **Arguments:** as `matmat` (`v` is (N, K)); `devices` defaults to all devices.

    **Returns:** (M, K), equal to `matmat` up to rounding. Forward only (for
    gradients use `matvec`, whose custom VJP runs on one device).
    """
    v, t, s, a, b, c = _validate(v, t, s, a, b, c, None)  # lists/NumPy converted once
    if v.ndim != 2:
        raise ValueError(f"v: expected shape (N, K), received shape {tuple(v.shape)}")
    devices = list(jax.devices() if devices is None else devices)
    mesh = Mesh(np.asarray(devices), ("blocks",))
    scan = scan_for_platform(devices[0].platform) if scan is None else scan
    return _sharded_jit(scan, mesh, v, t, s, a, b, c)


@functools.partial(jax.jit, static_argnums=(0, 1))
def _sharded_jit(scan, mesh, v, t, s, a, b, c):
    ndev = mesh.shape["blocks"]
    n, k = v.shape
    m = t.shape[1]
    wd = jnp.dtype(v.dtype)
    if b is not None and not jnp.issubdtype(wd, jnp.complexfloating):
        wd = _COMPLEX[wd]
    length = n + m
    padded = -(-length // ndev) * ndev
    x_all = jnp.concatenate([jnp.asarray(v, wd), jnp.zeros((m, k), wd)], axis=0)
    out = jnp.zeros((m, k), wd)
    for h in range(t.shape[0]):
        lam = (a[h] if b is None else jax.lax.complex(a[h], b[h])).astype(wd)
        z = jnp.concatenate([s[h], t[h]])
        order = jnp.argsort(z, stable=True)
        zs = z[order]
        xs = x_all[order]
        gap = jnp.concatenate([jnp.zeros((1,), zs.dtype), zs[1:] - zs[:-1]])
        alpha = jnp.exp(-lam * gap.astype(wd))
        pad = padded - length
        a_f = jnp.pad(alpha, (0, pad))
        x_f = jnp.pad(xs, ((0, pad), (0, 0)))
        # reverse recurrence = forward recurrence on the flipped sequence
        a_r = jnp.pad(jnp.flip(jnp.concatenate([alpha[1:], jnp.zeros((1,), wd)])), (0, pad))
        x_r = jnp.pad(jnp.flip(xs, axis=0), ((0, pad), (0, 0)))
        fwd = _sharded_forward(scan, a_f, x_f, mesh, "blocks")[:length]
        rev = jnp.flip(_sharded_forward(scan, a_r, x_r, mesh, "blocks")[:length], axis=0)
        inv = jnp.argsort(order)
        pos = inv[n:]
        out = out + c[h].astype(wd) * (fwd[pos] + rev[pos])
    return out
