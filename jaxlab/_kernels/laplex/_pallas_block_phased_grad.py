"""`pallas_sym_grad_phased`: the cotangents of the symmetric phased (complex) LAPLEX
operator by the reduce-then-scan Pallas kernels of `pallas_sym_grad`, in real arithmetic.

For sorted anchors `s` (one array for both roles), a complex decay `lam = a + i b`
(`a > 0`), a real weight `c`, values `x` (real or complex) and a complex output cotangent
`w`, with `y = c K x`, `K_kj = exp(-lam |s_k - s_j|)` (complex symmetric), the
cotangents follow JAX's convention (a holomorphic map's transpose, no conjugation; a real
input takes the real part of `w * dy/dp`), as autodiff through the dense matrix gives:

- `x`: `c K w` (K is symmetric; a real `x` takes its real part);
- `s`: `Re(-lam c (w_k (S x)_k + x_k (S' w)_k))`, `S`, `S'` the signed kernels of
  `pallas_sym_grad` with JAX's tie convention (`sign(0) = +1`);
- `a`: `Re(Lam)`, `b`: `-Im(Lam)` with `Lam = -c sum_k w_k (J x)_k`,
  `J_kj = |s_k - s_j| K_kj` (`d/dlam` of the kernel is `-|u| exp(-lam |u|)`; `b` enters
  as `i b`, so its cotangent is `Re(i Lam)`);
- `c`: `Re(sum_k w_k (K x)_k)`.

Complex numbers are carried as (real, imaginary) pairs of real tiles (Triton and Mosaic
take no complex dtypes); each decay `E(d) = exp(-a d) (cos(b d) - i sin(b d))` is formed
in the kernel from an anchor distance `d >= 0` (every exponential argument <= 0, never a
product of decays). A real `x` has no imaginary tile: nothing is read or multiplied for
it. Passes and layout are those of `pallas_sym_grad` (module `_pallas_block_grad`): one
pass-1 kernel (`_ends`) reads `s, x, w` and writes per chunk the complex one-sided end
sums of `x` and `w`, `x`'s Jordan (first-moment) sums and the tie sums; the carry scan over
chunks is the 2x2 Jordan-block recurrence with complex decays (plain JAX, one element per
chunk); one pass-2 kernel (`_apply`) reads `s, x, w` again and writes `c K w`, the
anchors' cotangent and per-chunk partial sums for `c` and `lam` (dense in-row blocks; rows
before and after through their end sums, moved by the (rows x rows) matrix of `E` between
row ends; ties fixed by the same row-end and chunk carries as the real kernel).
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl
from jaxtyping import Array, Float, Inexact

from ._pallas import chunk_tiles, compiler_params
from ._pallas_block_grad import chunk_carries
from ._pallas_block_phased import _decay

__all__ = ["pallas_sym_grad_phased"]


class _Pair:
    """A complex value as its real and imaginary parts (`im` None: a real value, nothing
    stored or multiplied for it); `*` takes a pair or a real array."""

    def __init__(self, re, im=None):
        self.re, self.im = re, im

    def _parts(self):
        return self.re, self.im

    def __add__(self, other):
        im = _add(self.im, other.im)
        return _Pair(self.re + other.re, im)

    def __sub__(self, other):
        im = _add(self.im, None if other.im is None else -other.im)
        return _Pair(self.re - other.re, im)

    def __mul__(self, other):
        if not isinstance(other, _Pair):  # a real factor
            return _Pair(self.re * other, None if self.im is None else self.im * other)
        (pr, pi), (qr, qi) = self._parts(), other._parts()
        if pi is None and qi is None:
            return _Pair(pr * qr)
        if qi is None:
            return _Pair(pr * qr, pi * qr)
        if pi is None:
            return _Pair(pr * qr, pr * qi)
        return _Pair(pr * qr - pi * qi, pr * qi + pi * qr)

    def map(self, fn):
        """`fn` on both parts (a real-linear map: sums, masks, transposes, indexing)."""
        return _Pair(fn(self.re), None if self.im is None else fn(self.im))

    def sum(self, axis=None, keepdims=True):
        return self.map(lambda z: jnp.sum(z, axis=axis, keepdims=keepdims))

    def where(self, mask):
        return self.map(lambda z: jnp.where(mask, z, 0))

    @property
    def T(self):  # noqa: N802 (as an array's)
        return self.map(lambda z: z.T)


def _add(p, q):
    if p is None:
        return q
    return p if q is None else p + q


def _decay_pair(d, a, b):
    return _Pair(*_decay(d, a, b))


def _write(refs, pair):
    """A pair into its (re, im) refs (a real pair writes zeros for im)."""
    re_ref, im_ref = refs
    re_ref[...] = pair.re
    im_ref[...] = jnp.zeros_like(pair.re) if pair.im is None else pair.im


def _inputs(refs, cx):
    """`(s, x, w, rest)` from the kernel's refs: s, x's re (and im when `cx`), w's re, im."""
    s_ref, xr_ref = refs[0], refs[1]
    k = 3 if cx else 2
    x = _Pair(xr_ref[...], refs[2][...] if cx else None)
    w = _Pair(refs[k][...], refs[k + 1][...])
    return s_ref, x, w, refs[k + 2 :]


def _ends(*refs, cx):
    s_ref, x, w, (ab_ref, *out) = _inputs(refs, cx)
    rows, lanes = s_ref.shape
    s = s_ref[...]
    a, b = ab_ref[0, 0], ab_ref[0, 1]
    last = s_ref[rows - 1, lanes - 1]
    first = s_ref[0, 0]
    dl = last - s  # distance to the chunk's last anchor, >= 0
    dr = s - first  # distance from its first anchor, >= 0
    el, er = _decay_pair(dl, a, b), _decay_pair(dr, a, b)
    elx, erx = el * x, er * x
    sums = [
        elx.sum(),  # F of x at the chunk's last anchor
        (elx * dl).sum(),  # its Jordan sum G
        erx.sum(),  # B of x at the chunk's first anchor
        (erx * dr).sum(),
        (el * w).sum(),
        (er * w).sum(),
        w.where(s == last).sum(),  # w tied with the chunk's last anchor
        x.where(s == first).sum(),  # x tied with its first
    ]
    for k, pair in enumerate(sums):
        _write(out[2 * k : 2 * k + 2], pair)


def _apply(*refs, cx):
    s_ref, x, w, (side_ref, *out) = _inputs(refs, cx)
    rows, lanes = s_ref.shape
    s = s_ref[...]  # (rows, lanes): row g holds `lanes` consecutive sorted anchors

    def side(k):  # a complex carry from side columns k, k + 1
        return _Pair(side_ref[0, k], side_ref[0, k + 1])

    fx_in, gx_in, bx_in, gbx_in, fw_in, bw_in = (side(k) for k in range(0, 12, 2))
    e_prev, f_next = side_ref[0, 12], side_ref[0, 13]
    a, b, c = side_ref[0, 14], side_ref[0, 15], side_ref[0, 16]
    tw_in, tx_in = side(17), side(19)  # tie carries at e_prev and f_next
    # each row's own block: distances, decays and the signs of the convention (x: a tie
    # counts as left, +1; w: as right, -1; the diagonal's two terms cancel)
    diff = s[:, :, None] - s[:, None, :]
    dist = jnp.abs(diff)
    kern = _decay_pair(dist, a, b)
    sign_x = jnp.where(diff >= 0, 1.0, -1.0).astype(s.dtype)
    sign_w = jnp.where(diff > 0, 1.0, -1.0).astype(s.dtype)
    e = s_ref[:, pl.ds(lanes - 1, 1)]  # (rows, 1) each row's last and first anchor
    f = s_ref[:, pl.ds(0, 1)]
    dl = e - s
    dr = s - f
    el = _decay_pair(dl, a, b)  # decay from an anchor to its row's last one
    er = _decay_pair(dr, a, b)  # and from its row's first one
    g = jax.lax.broadcasted_iota(jnp.int32, (rows, rows), 0)
    h = jax.lax.broadcasted_iota(jnp.int32, (rows, rows), 1)
    d_left = jnp.maximum(f - e.T, 0)  # [g, h]: from row h's last anchor to row g's first
    m_left = _decay_pair(d_left, a, b)
    e_left = m_left.where(h < g)
    # [g, h]: from row g's last anchor to row h's first: the transposes (no cos/sin again)
    d_right = d_left.T
    e_right = m_left.T.where(h > g)
    d0 = jnp.maximum(f - e_prev, 0)  # previous chunk's end to each row's first anchor
    e0 = _decay_pair(d0, a, b)
    d1 = jnp.maximum(f_next - e, 0)  # each row's last anchor to the next chunk's start
    e1 = _decay_pair(d1, a, b)

    def incoming(col, f_in, b_in):
        """Left state at each row's first anchor and right state at its last one."""
        f_row = (el * col).sum(1)
        b_row = (er * col).sum(1)
        p_in = (e_left * f_row.T).sum(1) + e0 * f_in
        q_in = (e_right * b_row.T).sum(1) + e1 * b_in
        return f_row, b_row, p_in, q_in

    def sums(col, sign, p_in, q_in):
        kc = kern * col.map(lambda z: z[:, None, :])
        op = kc.sum(2, keepdims=False)
        signed = (kc * sign).sum(2, keepdims=False)
        ep, lq = er * p_in, el * q_in
        return op + ep + lq, signed + ep - lq, kc

    fx_row, bx_row, px, qx = incoming(x, fx_in, bx_in)
    _, _, pw, qw = incoming(w, fw_in, bw_in)
    kx, sx, kcx = sums(x, sign_x, px, qx)
    kw, sw, _ = sums(w, sign_w, pw, qw)
    # ties across rows and chunks, as in `pallas_sym_grad`: x's tied with row g's last
    # anchor in later rows count as left (+2 each), w's tied with its first anchor in
    # earlier rows as right (-2 each); a tie has distance 0, so decay 1
    tx_row = x.where(s == f).sum(1)  # x tied with f_h
    tw_row = w.where(s == e).sum(1)  # w tied with e_h
    tie_r = tx_row.T.where((h > g) & (e == f.T)).sum(1) + tx_in.where(f_next == e)
    tie_l = tw_row.T.where((h < g) & (f == e.T)).sum(1) + tw_in.where(e_prev == f)
    sx = sx + tie_r.where(s == e) * 2.0
    sw = sw - tie_l.where(s == f) * 2.0
    # Jordan sums of x: sum_j |s_k - s_j| E(|s_k - s_j|) x_j
    gx_row = (el * x * dl).sum(1)
    gbx_row = (er * x * dr).sum(1)
    pg = (e_left * (gx_row.T + fx_row.T * d_left)).sum(1) + e0 * (gx_in + fx_in * d0)
    qg = (e_right * (gbx_row.T + bx_row.T * d_right)).sum(1) + e1 * (gbx_in + bx_in * d1)
    jx = (kcx * dist).sum(2, keepdims=False)
    jx = jx + er * (px * dr + pg) + el * (qx * dl + qg)
    vbar_refs, (sbar_ref, cpart_ref, ar_ref, ai_ref) = out[: 1 + cx], out[1 + cx :]
    vbar_refs[0][...] = c * kw.re
    if cx:
        vbar_refs[1][...] = c * kw.im
    # Re(-lam c z) with lam = a + i b
    z = w * sx + x * sw
    sbar_ref[...] = -c * (a * z.re - b * z.im)
    cpart_ref[...] = (w * kx).sum().re
    lam_part = (w * jx).sum()
    ar_ref[...] = lam_part.re
    ai_ref[...] = lam_part.im


def pallas_sym_grad_phased(
    x: Inexact[Array, " N"],
    w: Inexact[Array, " N"],
    s: Float[Array, " N"],
    a: Float[Array, ""],
    b: Float[Array, ""],
    c: Float[Array, ""],
    *,
    rows: int = 64,
    lanes: int = 16,
    interpret: bool = False,
    target: str = "auto",
) -> tuple[Array, Array, Array, Array, Array]:
    """Cotangents of `y = c K x`, `K_kj = exp(-(a + i b) |s_k - s_j|)`, at the output
    cotangent `w`, for sorted anchors `s` (one head, one column), by the reduce-then-scan
    kernels of this module: the VJP of `pallas_sym_matvec_phased` (JAX's complex
    convention, equal to autodiff through the dense matrix).

    **Arguments:**

    - `x`: (N,) values, real or complex, and `w`: (N,) output cotangent (complex; a
      real one is taken as such), in the anchors' (sorted) order.
    - `s`: (N,) anchors, sorted ascending.
    - `a`: scalar decay (> 0); `b`: scalar phase; `c`: scalar real weight; all of `s`'s
      dtype.
    - `rows`, `lanes`: a chunk is `rows x lanes` consecutive anchors (powers of two).
    - `interpret`: run the kernels through the Pallas interpreter (CPU).
    - `target`: "gpu" (Triton), "tpu" (Mosaic) or "auto" (the default backend's).

    **Returns:**

    `(x_bar, s_bar, a_bar, b_bar, c_bar)`: `c K w` (N,; its real part for a real `x`),
    the anchors' cotangent (N,; both roles of `s` summed), and the scalar cotangents of
    `a`, `b` and `c`.
    """
    n, dt = s.shape[0], s.dtype
    a, b, c = (jnp.asarray(z, dt) for z in (a, b, c))
    cx = bool(jnp.issubdtype(x.dtype, jnp.complexfloating))
    cols = [jnp.real(x).astype(dt)] + ([jnp.imag(x).astype(dt)] if cx else [])
    cols += [jnp.real(w).astype(dt), jnp.imag(w).astype(dt)]
    nb, s2, cols2, first, last = chunk_tiles(s, cols, rows, lanes)
    params = compiler_params(target)
    tile = pl.BlockSpec((rows, lanes), lambda i: (i, 0))
    one = pl.BlockSpec((None, 1, 1), lambda i: (i, 0, 0))
    per_chunk = jax.ShapeDtypeStruct((nb, 1, 1), dt)
    ends = pl.pallas_call(
        functools.partial(_ends, cx=cx),
        out_shape=[per_chunk] * 16,
        grid=(nb,),
        in_specs=[tile] * (1 + len(cols2)) + [pl.BlockSpec((1, 2), lambda i: (0, 0))],
        out_specs=[one] * 16,
        interpret=interpret,
        name="laplex_phgrad_ends",
        compiler_params=params,
    )(s2, *cols2, jnp.stack([a, b]).reshape(1, 2))
    ends = [z.reshape(nb) for z in ends]
    fx, gx, bx, gbx, fw, bw, tw, tx = (
        jax.lax.complex(re, im) for re, im in zip(ends[::2], ends[1::2], strict=True)
    )
    lam = jax.lax.complex(a, b)
    f_in, g_in, b_in, gb_in, fw_in, bw_in, tw_in, tx_in = chunk_carries(
        first, last, lam, fx, gx, bx, gbx, fw, bw, tw, tx
    )
    e_prev = jnp.concatenate([first[:1], last[:-1]])
    f_next = jnp.concatenate([first[1:], last[-1:]])
    carries = [f_in, g_in, b_in, gb_in, fw_in, bw_in]
    cols_side = [part(z) for z in carries for part in (jnp.real, jnp.imag)]
    cols_side += [e_prev, f_next] + [jnp.full_like(e_prev, z) for z in (a, b, c)]
    cols_side += [part(z) for z in (tw_in, tx_in) for part in (jnp.real, jnp.imag)]
    side = jnp.stack(cols_side + [jnp.zeros_like(e_prev)] * 11, axis=1)[:, None, :]
    full = jax.ShapeDtypeStruct((nb * rows, lanes), dt)
    outs = pl.pallas_call(
        functools.partial(_apply, cx=cx),
        out_shape=[full] * (2 + cx) + [per_chunk] * 3,
        grid=(nb,),
        in_specs=[tile] * (1 + len(cols2)) + [pl.BlockSpec((None, 1, 32), lambda i: (i, 0, 0))],
        out_specs=[tile] * (2 + cx) + [one] * 3,
        interpret=interpret,
        name="laplex_phgrad_apply",
        compiler_params=params,
    )(s2, *cols2, side)
    vbar = outs[0].reshape(-1)[:n]
    if cx:
        vbar = jax.lax.complex(vbar, outs[1].reshape(-1)[:n])
    sbar, cpart, ar, ai = outs[1 + cx :]
    # Lam = -c sum w J x; a_bar = Re(Lam), b_bar = -Im(Lam)
    return vbar, sbar.reshape(-1)[:n], -c * jnp.sum(ar), c * jnp.sum(ai), jnp.sum(cpart)
