"""`pallas_sym_grad`: the cotangents of the symmetric real LAPLEX operator by the same
reduce-then-scan Pallas kernels as `pallas_sym_matvec` (natural order, no transposes).

For sorted anchors `s` (one array for both roles), a real decay `lam`, a weight `c`,
values `x` and an output cotangent `w`, with `y = c K x`, `K_kj = exp(-lam |s_k - s_j|)`,
the cotangents of `sum(w * y)` are

- `x`: `c K w` (K is symmetric: the same operator on the cotangent);
- `s`: `-lam c (w_k (S x)_k + x_k (S' w)_k)` with `S_kj = sign(s_k - s_j) K_kj` and
  `S'_ki = -sign(s_i - s_k) K_ki`, `sign(0) = +1` (JAX's d|u|/du = 1 at u = 0, the
  convention of autodiff through the dense matrix): a tied pair (k, j), j != k, adds
  `w_k x_j - x_k w_j` (the diagonal cancels);
- `lam`: `-c sum_k w_k (J x)_k` with `J_kj = |s_k - s_j| K_kj`;
- `c`: `sum_k w_k (K x)_k`.

One pass-1 kernel (`_grad_ends`) reads `s, x, w` once and writes, per chunk, the
one-sided end sums of both columns and the first-moment (Jordan) sums of `x`,
`G = sum_i (s_last - s_i) exp(-lam (s_last - s_i)) x_i` (and its mirror at the chunk's
first anchor). The carry scan over chunks (plain JAX, one element per chunk) is the
2x2 Jordan-block recurrence `F' = alpha F + f`, `G' = alpha (G + delta F) + g` as an
associative scan. One pass-2 kernel (`_grad_apply`) reads `s, x, w` again and writes `c K w`
and the anchors' cotangent per element plus, per chunk, `sum w K x` and `sum w J x`:
inside a chunk each row's own (lanes x lanes) block is dense (`K`, the signs and the
distance weights, all formed from the anchors in the kernel, every exponential
argument <= 0); earlier and later rows enter through their end sums, moved to a row's
first (last) anchor by the (rows x rows) decay matrix, the Jordan sums by
`G + delta F`. Same constructs as `pallas_sym_matvec` (contiguous (rows, lanes) tiles,
iota masks, reductions; no gathers, no dynamic indexing), so it lowers for Triton and
Mosaic alike.

Ties follow that convention inside the kernels, with no extra pass: in a row's own
block `x`'s sign counts a tied anchor as left (+1) and `w`'s as right (-1); across rows,
an anchor tied with a later row can only be that row's first anchor and equal this row's
last (and mirrored for earlier rows), so one tie sum per row end (`x` tied with a row's
first anchor, `w` with its last) and a (rows x rows) match of row ends fix the signs
the row sums give by position; across chunks the same per-chunk tie sums are carried by a 0/1-decay
scan (a constant chunk continues its neighbour's run).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl
from jaxtyping import Array, Float

from ._pallas import chunk_tiles, compiler_params

__all__ = ["chunk_carries", "pallas_sym_grad"]


def _grad_ends(s_ref, x_ref, w_ref, lam_ref, *out_refs):
    fx_ref, gx_ref, bx_ref, gbx_ref, fw_ref, bw_ref, tw_ref, tx_ref = out_refs
    rows, lanes = s_ref.shape
    s = s_ref[...]
    x = x_ref[...]
    w = w_ref[...]
    lam = lam_ref[0, 0]
    last = s_ref[rows - 1, lanes - 1]
    first = s_ref[0, 0]
    dl = last - s  # distance to the chunk's last anchor, >= 0
    dr = s - first  # distance from its first anchor, >= 0
    el = jnp.exp(-lam * dl)
    er = jnp.exp(-lam * dr)
    fx_ref[...] = jnp.sum(el * x, keepdims=True)
    gx_ref[...] = jnp.sum(dl * el * x, keepdims=True)
    bx_ref[...] = jnp.sum(er * x, keepdims=True)
    gbx_ref[...] = jnp.sum(dr * er * x, keepdims=True)
    fw_ref[...] = jnp.sum(el * w, keepdims=True)
    bw_ref[...] = jnp.sum(er * w, keepdims=True)
    # tie sums: w tied with the chunk's last anchor, x tied with its first
    tw_ref[...] = jnp.sum(jnp.where(s == last, w, 0), keepdims=True)
    tx_ref[...] = jnp.sum(jnp.where(s == first, x, 0), keepdims=True)


def _grad_apply(s_ref, x_ref, w_ref, side_ref, vbar_ref, sbar_ref, cpart_ref, apart_ref):
    rows, lanes = s_ref.shape
    s = s_ref[...]  # (rows, lanes): row g holds `lanes` consecutive sorted anchors
    x = x_ref[...]
    w = w_ref[...]
    fx_in, gx_in, bx_in, gbx_in = side_ref[0, 0], side_ref[0, 1], side_ref[0, 2], side_ref[0, 3]
    fw_in, bw_in = side_ref[0, 4], side_ref[0, 5]
    e_prev, f_next = side_ref[0, 6], side_ref[0, 7]
    lam, c = side_ref[0, 8], side_ref[0, 9]
    tw_in, tx_in = side_ref[0, 10], side_ref[0, 11]  # tie carries at e_prev and f_next
    # each row's own block: distances, decays and the signs of the convention (x: a tie
    # counts as left, +1; w: as right, -1; the diagonal's two terms cancel)
    diff = s[:, :, None] - s[:, None, :]
    dist = jnp.abs(diff)
    kern = jnp.exp(-lam * dist)
    sign_x = jnp.where(diff >= 0, 1.0, -1.0).astype(s.dtype)
    sign_w = jnp.where(diff > 0, 1.0, -1.0).astype(s.dtype)
    e = s_ref[:, pl.ds(lanes - 1, 1)]  # (rows, 1) each row's last and first anchor
    f = s_ref[:, pl.ds(0, 1)]
    dl = e - s
    dr = s - f
    el = jnp.exp(-lam * dl)  # decay from an anchor to its row's last one
    er = jnp.exp(-lam * dr)  # and from its row's first one
    g = jax.lax.broadcasted_iota(jnp.int32, (rows, rows), 0)
    h = jax.lax.broadcasted_iota(jnp.int32, (rows, rows), 1)
    d_left = jnp.maximum(f - e.T, 0)  # [g, h]: from row h's last anchor to row g's first
    e_left = jnp.where(h < g, jnp.exp(-lam * d_left), 0)
    d_right = jnp.maximum(f.T - e, 0)  # [g, h]: from row g's last anchor to row h's first
    e_right = jnp.where(h > g, jnp.exp(-lam * d_right), 0)
    d0 = jnp.maximum(f - e_prev, 0)  # previous chunk's end to each row's first anchor
    e0 = jnp.exp(-lam * d0)
    d1 = jnp.maximum(f_next - e, 0)  # each row's last anchor to the next chunk's start
    e1 = jnp.exp(-lam * d1)

    def incoming(col, f_in, b_in):
        """Left state at each row's first anchor and right state at its last one."""
        f_row = jnp.sum(el * col, axis=1, keepdims=True)
        b_row = jnp.sum(er * col, axis=1, keepdims=True)
        p_in = jnp.sum(e_left * f_row.T, axis=1, keepdims=True) + e0 * f_in
        q_in = jnp.sum(e_right * b_row.T, axis=1, keepdims=True) + e1 * b_in
        return f_row, b_row, p_in, q_in

    def sums(col, sign, p_in, q_in):
        colj = col[:, None, :]
        local = jnp.sum(kern * colj, axis=2)
        signed = jnp.sum(sign * kern * colj, axis=2)
        op = local + er * p_in + el * q_in
        sgn = signed + er * p_in - el * q_in
        return op, sgn

    fx_row, bx_row, px, qx = incoming(x, fx_in, bx_in)
    _, _, pw, qw = incoming(w, fw_in, bw_in)
    kx, sx = sums(x, sign_x, px, qx)
    kw, sw = sums(w, sign_w, pw, qw)
    # ties across rows: the row sums count a tied anchor of a later row as right and of
    # an earlier row as left. x's tied with row g's last anchor e_g in later rows (those
    # rows start at e_g) must count as left: +2 each; w's tied with its first anchor f_g
    # in earlier rows (they end at f_g) as right: -2 each
    tx_row = jnp.sum(jnp.where(s == f, x, 0), axis=1, keepdims=True)  # x tied with f_h
    tw_row = jnp.sum(jnp.where(s == e, w, 0), axis=1, keepdims=True)  # w tied with e_h
    tie_r = jnp.where((h > g) & (e == f.T), tx_row.T, 0)
    tie_r = jnp.sum(tie_r, axis=1, keepdims=True) + jnp.where(f_next == e, tx_in, 0)
    tie_l = jnp.where((h < g) & (f == e.T), tw_row.T, 0)
    tie_l = jnp.sum(tie_l, axis=1, keepdims=True) + jnp.where(e_prev == f, tw_in, 0)
    sx = sx + 2 * jnp.where(s == e, tie_r, 0)
    sw = sw - 2 * jnp.where(s == f, tie_l, 0)
    # Jordan sums of x: sum_j |s_k - s_j| exp(-lam |s_k - s_j|) x_j
    gx_row = jnp.sum(dl * el * x, axis=1, keepdims=True)
    gbx_row = jnp.sum(dr * er * x, axis=1, keepdims=True)
    pg = jnp.sum(e_left * (gx_row.T + d_left * fx_row.T), axis=1, keepdims=True)
    pg = pg + e0 * (gx_in + d0 * fx_in)
    qg = jnp.sum(e_right * (gbx_row.T + d_right * bx_row.T), axis=1, keepdims=True)
    qg = qg + e1 * (gbx_in + d1 * bx_in)
    jx = jnp.sum(dist * kern * x[:, None, :], axis=2)
    jx = jx + er * (dr * px + pg) + el * (dl * qx + qg)
    vbar_ref[...] = c * kw
    sbar_ref[...] = -lam * c * (w * sx + x * sw)
    cpart_ref[...] = jnp.sum(w * kx, keepdims=True)
    apart_ref[...] = jnp.sum(w * jx, keepdims=True)


def _jordan_combine(left, right):
    a1, b1, f1, g1 = left
    a2, b2, f2, g2 = right
    return a1 * a2, a2 * b1 + b2 * a1, a2 * f1 + f2, a2 * g1 + b2 * f1 + g2


def _jordan_scan(gap, lam, f, g, *, reverse):
    """Chunk-level carries: `F_k = alpha_k F_prev + f_k`,
    `G_k = alpha_k (G_prev + gap_k F_prev) + g_k` (`prev` = k - 1, or k + 1 when
    `reverse`), `alpha_k = exp(-lam gap_k)`; f, g (nb, C)."""
    alpha = jnp.exp(-lam * gap)[:, None]
    beta = alpha * gap[:, None]
    alpha, beta = jnp.broadcast_to(alpha, f.shape), jnp.broadcast_to(beta, f.shape)
    out = jax.lax.associative_scan(_jordan_combine, (alpha, beta, f, g), reverse=reverse)
    return out[2], out[3]


def _tie_scan(keep, x, *, reverse):
    """`T_k = x_k + keep_k T_prev` over chunks (`prev` = k - 1, or k + 1 when `reverse`)."""
    out = jax.lax.associative_scan(
        lambda lo, hi: (lo[0] * hi[0], hi[0] * lo[1] + hi[1]), (keep, x), reverse=reverse
    )
    return out[1]


def chunk_carries(first, last, lam, fx, gx, bx, gbx, fw, bw, tw, tx):
    """The carry scan over chunks of the symmetric gradient kernels (one element per chunk,
    plain JAX; real or complex `lam` and sums alike).

    From each chunk's first and last anchor (nb,) and its pass-1 sums (each (nb,)): the end
    sums of `x` (`fx` at the last anchor, `bx` at the first) with their Jordan sums (`gx`,
    `gbx`), those of `w` (`fw`, `bw`) and the tie sums (`tw`: w tied with the last anchor,
    `tx`: x tied with the first), the states entering each chunk by the 2x2 Jordan-block
    recurrence `F' = alpha F + f`, `G' = alpha (G + delta F) + g`: from the left at the
    previous chunk's last anchor, from the right at the next chunk's first; the tie carries
    by a 0/1-decay scan (a constant chunk continues its neighbour's run).

    **Returns:** `(fx_in, gx_in, bx_in, gbx_in, fw_in, bw_in, tw_in, tx_in)`, each (nb,).
    """
    nb, dt = fx.shape[0], fx.dtype
    zero = jnp.zeros((1,), first.dtype)
    zero_sums = jnp.zeros_like(gx)
    gap_l = jnp.concatenate([zero, last[1:] - last[:-1]]).astype(dt)
    f_tot, g_tot = _jordan_scan(
        gap_l, lam, jnp.stack([fx, fw], 1), jnp.stack([gx, zero_sums], 1), reverse=False
    )
    gap_r = jnp.concatenate([first[1:] - first[:-1], zero]).astype(dt)
    b_tot, gb_tot = _jordan_scan(
        gap_r, lam, jnp.stack([bx, bw], 1), jnp.stack([gbx, zero_sums], 1), reverse=True
    )
    e_prev = jnp.concatenate([first[:1], last[:-1]])
    f_next = jnp.concatenate([first[1:], last[-1:]])
    const = first == last
    keep_w = (const & (e_prev == last) & (jnp.arange(nb) > 0)).astype(dt)
    keep_x = (const & (f_next == first) & (jnp.arange(nb) < nb - 1)).astype(dt)
    tw_tot = _tie_scan(keep_w, tw, reverse=False)
    tx_tot = _tie_scan(keep_x, tx, reverse=True)

    def from_left(z):  # the state of all chunks before k
        return jnp.concatenate([jnp.zeros_like(z[:1]), z[:-1]])

    def from_right(z):  # of all chunks after k
        return jnp.concatenate([z[1:], jnp.zeros_like(z[:1])])

    return (
        from_left(f_tot[:, 0]),
        from_left(g_tot[:, 0]),
        from_right(b_tot[:, 0]),
        from_right(gb_tot[:, 0]),
        from_left(f_tot[:, 1]),
        from_right(b_tot[:, 1]),
        from_left(tw_tot),
        from_right(tx_tot),
    )


def pallas_sym_grad(
    x: Float[Array, " N"],
    w: Float[Array, " N"],
    s: Float[Array, " N"],
    lam: Float[Array, ""],
    c: Float[Array, ""],
    *,
    rows: int = 64,
    lanes: int = 16,
    interpret: bool = False,
    target: str = "auto",
) -> tuple[Array, Array, Array, Array]:
    """Cotangents of `sum(w * c K x)`, `K_kj = exp(-lam |s_k - s_j|)`, for sorted anchors
    `s` (one head, one real column), by the reduce-then-scan kernels of this module.

    **Arguments:**

    - `x`: (N,) values and `w`: (N,) output cotangent, in the anchors' (sorted) order.
    - `s`: (N,) anchors, sorted ascending.
    - `lam`: scalar decay (> 0); `c`: scalar weight; both of `x`'s real dtype.
    - `rows`, `lanes`: a chunk is `rows x lanes` consecutive anchors (powers of two).
    - `interpret`: run the kernels through the Pallas interpreter (CPU).
    - `target`: "gpu" (Triton), "tpu" (Mosaic) or "auto" (the default backend's).

    **Returns:**

    `(x_bar, s_bar, lam_bar, c_bar)`: `c K w` (N,), the anchors' cotangent (N,; both
    roles of `s` summed), and the scalar cotangents of `lam` and `c`.
    """
    n = x.shape[0]
    dt = x.dtype
    nb, s2, (x2, w2), first, last = chunk_tiles(s, [x, w], rows, lanes)
    lam = jnp.asarray(lam, dt)
    c = jnp.asarray(c, dt)
    params = compiler_params(target)
    tile = pl.BlockSpec((rows, lanes), lambda i: (i, 0))
    one = pl.BlockSpec((None, 1, 1), lambda i: (i, 0, 0))
    per_chunk = jax.ShapeDtypeStruct((nb, 1, 1), dt)
    ends = pl.pallas_call(
        _grad_ends,
        out_shape=[per_chunk] * 8,
        grid=(nb,),
        in_specs=[tile, tile, tile, pl.BlockSpec((1, 1), lambda i: (0, 0))],
        out_specs=[one] * 8,
        interpret=interpret,
        name="laplex_grad_ends",
        compiler_params=params,
    )(s2, x2, w2, lam.reshape(1, 1))
    fx, gx, bx, gbx, fw, bw, tw, tx = (e.reshape(nb) for e in ends)
    f_in, g_in, b_in, gb_in, fw_in, bw_in, tw_in, tx_in = chunk_carries(
        first, last, lam, fx, gx, bx, gbx, fw, bw, tw, tx
    )
    e_prev = jnp.concatenate([first[:1], last[:-1]])
    f_next = jnp.concatenate([first[1:], last[-1:]])
    cols = [f_in, g_in, b_in, gb_in, fw_in, bw_in]
    side = jnp.stack(
        cols
        + [e_prev, f_next, jnp.full_like(e_prev, lam), jnp.full_like(e_prev, c), tw_in, tx_in]
        + [jnp.zeros_like(e_prev)] * 4,
        axis=1,
    )[:, None, :]
    vbar, sbar, cpart, apart = pl.pallas_call(
        _grad_apply,
        out_shape=[jax.ShapeDtypeStruct((nb * rows, lanes), dt)] * 2 + [per_chunk] * 2,
        grid=(nb,),
        in_specs=[tile, tile, tile, pl.BlockSpec((None, 1, 16), lambda i: (i, 0, 0))],
        out_specs=[tile, tile, one, one],
        interpret=interpret,
        name="laplex_grad_apply",
        compiler_params=params,
    )(s2, x2, w2, side)
    vbar, sbar = vbar.reshape(-1)[:n], sbar.reshape(-1)[:n]
    return vbar, sbar, -c * jnp.sum(apart), jnp.sum(cpart)
