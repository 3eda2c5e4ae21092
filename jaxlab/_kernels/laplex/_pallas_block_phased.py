"""`pallas_sym_matvec_phased`: the symmetric phased (complex) LAPLEX operator by the
reduce-then-scan Pallas kernels of `pallas_sym_matvec`, in real arithmetic.

For sorted anchors `s` (one array for both roles), a decay `a > 0`, a phase `b` and a real
weight `c`, `y_k = c sum_j exp(-(a + i b) |s_k - s_j|) x_j`. Complex numbers are carried
as (real, imaginary) pairs of real tiles (Triton and Mosaic kernels take no complex
dtypes): each term is `E(d) = exp(-a d) (cos(b d) - i sin(b d))` formed in the kernel from
the anchor distance `d >= 0` (never a product of decays, so nothing overflows and the
phase is exact), and a complex product is four real ones. Layout and passes are those
of `pallas_sym_matvec` (module `_pallas_block`): pass 1 writes each chunk's complex
one-sided end sums, a carry scan over chunks (plain JAX, complex), pass 2 the dense
in-row blocks plus row summaries moved by the (rows x rows) matrix of `E` between row
ends. A complex `x` is its real and imaginary columns through the same kernels (the
operator is complex-linear: `K (u + i w) = K u + i K w`).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl
from jaxtyping import Array, Float, Inexact

from ._pallas import chunk_tiles, compiler_params
from ._scan import AssociativeScan

__all__ = ["pallas_sym_matvec_phased"]


def _decay(d, a, b):
    """`exp(-(a + i b) d)` as (re, im) for distances d >= 0."""
    mag = jnp.exp(-a * d)
    return mag * jnp.cos(b * d), -mag * jnp.sin(b * d)


def _cmul(ar, ai, br, bi):
    return ar * br - ai * bi, ar * bi + ai * br


def _phased_ends(s_ref, x_ref, ab_ref, fr_ref, fi_ref, br_ref, bi_ref):
    rows, lanes = s_ref.shape
    s = s_ref[...]
    x = x_ref[...]
    a, b = ab_ref[0, 0], ab_ref[0, 1]
    lr, li = _decay(s_ref[rows - 1, lanes - 1] - s, a, b)
    rr, ri = _decay(s - s_ref[0, 0], a, b)
    fr_ref[...] = jnp.sum(lr * x, keepdims=True)
    fi_ref[...] = jnp.sum(li * x, keepdims=True)
    br_ref[...] = jnp.sum(rr * x, keepdims=True)
    bi_ref[...] = jnp.sum(ri * x, keepdims=True)


def _phased_apply(s_ref, x_ref, side_ref, yr_ref, yi_ref):
    rows, lanes = s_ref.shape
    s = s_ref[...]  # (rows, lanes): row g holds `lanes` consecutive sorted anchors
    x = x_ref[...]
    fr_in, fi_in = side_ref[0, 0], side_ref[0, 1]  # left carry at the previous chunk's end
    br_in, bi_in = side_ref[0, 2], side_ref[0, 3]  # right carry at the next chunk's start
    e_prev, f_next = side_ref[0, 4], side_ref[0, 5]
    a, b, c = side_ref[0, 6], side_ref[0, 7], side_ref[0, 8]
    # each row's own block, dense: sum_j E(|s_k - s_j|) x_j
    kr, ki = _decay(jnp.abs(s[:, :, None] - s[:, None, :]), a, b)
    xj = x[:, None, :]
    loc_r, loc_i = jnp.sum(kr * xj, axis=2), jnp.sum(ki * xj, axis=2)
    e = s_ref[:, pl.ds(lanes - 1, 1)]  # (rows, 1) each row's last and first anchor
    f = s_ref[:, pl.ds(0, 1)]
    lr, li = _decay(e - s, a, b)  # from an anchor to its row's last one
    rr, ri = _decay(s - f, a, b)  # from its row's first one
    # row summaries: left sum at the row's last anchor, right sum at its first
    fr_row, fi_row = jnp.sum(lr * x, axis=1, keepdims=True), jnp.sum(li * x, axis=1, keepdims=True)
    br_row, bi_row = jnp.sum(rr * x, axis=1, keepdims=True), jnp.sum(ri * x, axis=1, keepdims=True)
    g = jax.lax.broadcasted_iota(jnp.int32, (rows, rows), 0)
    h = jax.lax.broadcasted_iota(jnp.int32, (rows, rows), 1)
    # state entering row g from the left, at its first anchor: rows h < g and the carry
    mr, mi = _decay(jnp.maximum(f - e.T, 0), a, b)
    mr, mi = jnp.where(h < g, mr, 0), jnp.where(h < g, mi, 0)
    pr, pi = _cmul(mr, mi, fr_row.T, fi_row.T)
    cr, ci = _decay(jnp.maximum(f - e_prev, 0), a, b)
    cr, ci = _cmul(cr, ci, fr_in, fi_in)
    pr = jnp.sum(pr, axis=1, keepdims=True) + cr
    pi = jnp.sum(pi, axis=1, keepdims=True) + ci
    # state entering row g from the right, at its last anchor: rows h > g and the carry
    mr, mi = _decay(jnp.maximum(f.T - e, 0), a, b)
    mr, mi = jnp.where(h > g, mr, 0), jnp.where(h > g, mi, 0)
    qr, qi = _cmul(mr, mi, br_row.T, bi_row.T)
    cr, ci = _decay(jnp.maximum(f_next - e, 0), a, b)
    cr, ci = _cmul(cr, ci, br_in, bi_in)
    qr = jnp.sum(qr, axis=1, keepdims=True) + cr
    qi = jnp.sum(qi, axis=1, keepdims=True) + ci
    ur, ui = _cmul(rr, ri, pr, pi)
    dr, di = _cmul(lr, li, qr, qi)
    yr_ref[...] = c * (loc_r + ur + dr)
    yi_ref[...] = c * (loc_i + ui + di)


def _phased_real(x, s, a, b, c, rows, lanes, interpret, target):
    """`(re, im)` of the operator on a real column `x`."""
    n = x.shape[0]
    dt = x.dtype
    nb, s2, (x2,), first, last = chunk_tiles(s, [x], rows, lanes)
    params = compiler_params(target)
    tile = pl.BlockSpec((rows, lanes), lambda i: (i, 0))
    one = pl.BlockSpec((None, 1, 1), lambda i: (i, 0, 0))
    ends = pl.pallas_call(
        _phased_ends,
        out_shape=[jax.ShapeDtypeStruct((nb, 1, 1), dt)] * 4,
        grid=(nb,),
        in_specs=[tile, tile, pl.BlockSpec((1, 2), lambda i: (0, 0))],
        out_specs=[one] * 4,
        interpret=interpret,
        name="laplex_phased_ends",
        compiler_params=params,
    )(s2, x2, jnp.stack([a, b]).reshape(1, 2))
    fr, fi, br, bi = (z.reshape(nb) for z in ends)
    lam = jax.lax.complex(a, b)
    zero = jnp.zeros((1,), dt)
    scan = AssociativeScan()
    # complex F at each chunk's last anchor (all chunks up to it), B at each chunk's first
    cd = lam.dtype
    alpha_f = jnp.exp(-lam * jnp.concatenate([zero, last[1:] - last[:-1]]).astype(cd))
    f_tot = scan(alpha_f, jax.lax.complex(fr, fi)[:, None])[:, 0]
    alpha_b = jnp.exp(-lam * jnp.concatenate([zero, first[1:] - first[:-1]]).astype(cd))
    b_tot = scan(alpha_b, jax.lax.complex(br, bi)[:, None], reverse=True)[:, 0]
    czero = jnp.zeros((1,), f_tot.dtype)
    f_in = jnp.concatenate([czero, f_tot[:-1]])
    b_in = jnp.concatenate([b_tot[1:], czero])
    e_prev = jnp.concatenate([first[:1], last[:-1]])
    f_next = jnp.concatenate([first[1:], last[-1:]])
    cols = [jnp.real(f_in), jnp.imag(f_in), jnp.real(b_in), jnp.imag(b_in), e_prev, f_next]
    cols += [jnp.full_like(e_prev, z) for z in (a, b, c)]
    side = jnp.stack(cols + [jnp.zeros_like(e_prev)] * 7, axis=1)[:, None, :]
    yr, yi = pl.pallas_call(
        _phased_apply,
        out_shape=[jax.ShapeDtypeStruct((nb * rows, lanes), dt)] * 2,
        grid=(nb,),
        in_specs=[tile, tile, pl.BlockSpec((None, 1, 16), lambda i: (i, 0, 0))],
        out_specs=[tile, tile],
        interpret=interpret,
        name="laplex_phased_apply",
        compiler_params=params,
    )(s2, x2, side)
    return yr.reshape(-1)[:n], yi.reshape(-1)[:n]


def pallas_sym_matvec_phased(
    x: Inexact[Array, " N"],
    s: Float[Array, " N"],
    a: Float[Array, ""],
    b: Float[Array, ""],
    c: Float[Array, ""],
    *,
    rows: int = 64,
    lanes: int = 16,
    interpret: bool = False,
    target: str = "auto",
) -> Inexact[Array, " N"]:
    """`y_k = c sum_j exp(-(a + i b) |s_k - s_j|) x_j` for sorted anchors `s` (one head, one
    column), by the reduce-then-scan kernels of this module.

    **Arguments:**

    - `x`: (N,) values in the anchors' (sorted) order, real or complex.
    - `s`: (N,) anchors, sorted ascending.
    - `a`: scalar decay (> 0); `b`: scalar phase; `c`: scalar real weight; all of `s`'s
      dtype.
    - `rows`, `lanes`: a chunk is `rows x lanes` consecutive anchors (powers of two).
    - `interpret`: run the kernels through the Pallas interpreter (CPU).
    - `target`: "gpu" (Triton), "tpu" (Mosaic) or "auto" (the default backend's).

    **Returns:**

    `y` (N,), complex, in the same order.
    """
    dt = s.dtype
    a, b, c = (jnp.asarray(z, dt) for z in (a, b, c))
    settings = (rows, lanes, interpret, target)
    yr, yi = _phased_real(jnp.real(x).astype(dt), s, a, b, c, *settings)
    if jnp.issubdtype(x.dtype, jnp.complexfloating):
        zr, zi = _phased_real(jnp.imag(x).astype(dt), s, a, b, c, *settings)
        yr, yi = yr - zi, yi + zr
    return jax.lax.complex(yr, yi)
