"""`PallasBlockScan`: the symmetric LAPLEX operator as reduce-then-scan Pallas kernels.

For `t is s` (one sorted anchor array for both roles), a real decay `lam` and a weight
`c`, the operator is `y_j = c sum_i exp(-lam |s_j - s_i|) x_i`. The sequence stays in its
natural (sorted) order, cut into chunks of `rows x lanes` consecutive anchors; each
kernel instance owns one chunk, viewed as a (rows, lanes) tile (row g holds `lanes`
consecutive anchors), so every load and store is contiguous and nothing is transposed,
padded per lane, flipped or gathered around the kernel.

- Pass 1 (`_chunk_ends`): per chunk, the two one-sided sums at its ends,
  `F = sum_i exp(-lam (s_last - s_i)) x_i` and `B = sum_i exp(-lam (s_i - s_first)) x_i`
  (one exponential per element and direction, plain reductions).
- Carry scan (plain JAX, one element per chunk): the state entering each chunk from the
  left (all earlier chunks, decayed to the previous chunk's last anchor) and from the
  right.
- Pass 2 (`_chunk_apply`): inside a chunk, each row's own contribution is the dense
  (lanes x lanes) block `exp(-lam |s_j - s_i|)`; the rows before and after it are
  summarised by their end sums and combined by a (rows x rows) matrix of decays between
  row ends (plus the chunk carries), then decayed to each anchor by one exponential.

Every exponential has a non-positive argument (the anchors are sorted), so nothing
overflows and no decay product is accumulated: each term is `exp(-lam * distance)`
computed directly, as accurate as the dense matrix. Cost per element: `lanes + 4`
exponentials plus `2 rows / lanes` for the row matrix (16 + 4 + 8 with the defaults),
two reads of the anchors and values and one write: the ~20 bytes per element the
streaming floor assumes. Ties need no special case (the row block is symmetric in the
index, the cross-row sums are by position).

The decays are formed inside the kernels from the sorted anchors (never materialised).
`interpret=True` runs the same kernels through Pallas' interpreter on CPU (the tests check
them against the float64 dense matrix there); `target` picks the compiler: "gpu" lowers
through Triton, "tpu" through Mosaic, "auto" follows `jax.default_backend()`.
"""

from __future__ import annotations

import equinox as eqx
import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl
from jaxtyping import Array, Float

from ._pallas import PallasScan, compiler_params
from ._scan import AbstractScan, AssociativeScan

__all__ = ["PallasBlockScan", "pallas_sym_matvec", "pallas_sym_parts"]

_TARGETS = ("auto", "gpu", "tpu")


def _tiles(s, u, rows, lanes):
    """(chunks, anchors, values) as (chunks * rows, lanes) tiles; the padded anchors repeat
    the last one and carry zero values, so they add nothing to any sum."""
    n = u.shape[0]
    nb = max(1, -(-n // (rows * lanes)))
    pad = nb * rows * lanes - n
    s2 = jnp.concatenate([s, jnp.broadcast_to(s[-1:], (pad,))]).reshape(nb * rows, lanes)
    return nb, s2, jnp.pad(u, (0, pad)).reshape(nb * rows, lanes)


def _chunk_ends(s_ref, x_ref, lam_ref, f_ref, b_ref):
    rows, lanes = s_ref.shape
    s = s_ref[...]
    x = x_ref[...]
    lam = lam_ref[0, 0]
    last = s_ref[rows - 1, lanes - 1]
    first = s_ref[0, 0]
    f_ref[...] = jnp.sum(jnp.exp(-lam * (last - s)) * x, keepdims=True)
    b_ref[...] = jnp.sum(jnp.exp(-lam * (s - first)) * x, keepdims=True)


def _chunk_apply(s_ref, x_ref, side_ref, y_ref):
    rows, lanes = s_ref.shape
    s = s_ref[...]  # (rows, lanes): row g holds `lanes` consecutive sorted anchors
    x = x_ref[...]
    f_in, e_prev = side_ref[0, 0], side_ref[0, 1]  # left carry at the previous chunk's end
    b_in, f_next = side_ref[0, 2], side_ref[0, 3]  # right carry at the next chunk's start
    lam, c = side_ref[0, 4], side_ref[0, 5]
    # each row's own block, dense and symmetric: sum_i exp(-lam |s_j - s_i|) x_i
    d = jnp.abs(s[:, :, None] - s[:, None, :])
    local = jnp.sum(jnp.exp(-lam * d) * x[:, None, :], axis=2)
    # row summaries: left sum at the row's last anchor, right sum at its first
    e = s_ref[:, pl.ds(lanes - 1, 1)]  # (rows, 1)
    f = s_ref[:, pl.ds(0, 1)]
    f_end = jnp.sum(jnp.exp(-lam * (e - s)) * x, axis=1, keepdims=True)
    b_start = jnp.sum(jnp.exp(-lam * (s - f)) * x, axis=1, keepdims=True)
    g = jax.lax.broadcasted_iota(jnp.int32, (rows, rows), 0)
    h = jax.lax.broadcasted_iota(jnp.int32, (rows, rows), 1)
    # state entering row g from the left, at its first anchor f_g: rows h < g and the carry
    left = jnp.where(h < g, jnp.exp(-lam * jnp.maximum(f - e.T, 0)), 0)
    p_in = jnp.sum(left * f_end.T, axis=1, keepdims=True)
    p_in = p_in + jnp.exp(-lam * jnp.maximum(f - e_prev, 0)) * f_in
    # state entering row g from the right, at its last anchor e_g: rows h > g and the carry
    right = jnp.where(h > g, jnp.exp(-lam * jnp.maximum(f.T - e, 0)), 0)
    q_in = jnp.sum(right * b_start.T, axis=1, keepdims=True)
    q_in = q_in + jnp.exp(-lam * jnp.maximum(f_next - e, 0)) * b_in
    out = local + jnp.exp(-lam * (s - f)) * p_in + jnp.exp(-lam * (e - s)) * q_in
    y_ref[...] = c * out


def pallas_sym_matvec(
    x: Float[Array, " N"],
    s: Float[Array, " N"],
    lam: Float[Array, ""],
    c: Float[Array, ""],
    *,
    rows: int = 64,
    lanes: int = 16,
    interpret: bool = False,
    target: str = "auto",
) -> Float[Array, " N"]:
    """`y_j = c sum_i exp(-lam |s_j - s_i|) x_i` for sorted anchors `s` (one head, one
    real column), by the reduce-then-scan kernels of this module.

    **Arguments:**

    - `x`: (N,) values in the anchors' (sorted) order.
    - `s`: (N,) anchors, sorted ascending.
    - `lam`: scalar decay (> 0); `c`: scalar weight; both of `x`'s real dtype.
    - `rows`, `lanes`: a chunk is `rows x lanes` consecutive anchors (powers of two).
    - `interpret`: run the kernels through the Pallas interpreter (CPU).
    - `target`: "gpu" (Triton), "tpu" (Mosaic) or "auto" (the default backend's).

    **Returns:**

    `y` (N,) in the same order.
    """
    n, dt = x.shape[0], x.dtype
    nb, s2, x2 = _tiles(s, x, rows, lanes)
    lam = jnp.asarray(lam, dt)
    c = jnp.asarray(c, dt)
    params = compiler_params(target)
    tile = pl.BlockSpec((rows, lanes), lambda i: (i, 0))
    # per-chunk values as (nb, 1, k) arrays with squeezed (1, k) blocks: Mosaic wants a
    # block's last two dimensions to be whole (or multiples of (8, 128))
    one = pl.BlockSpec((None, 1, 1), lambda i: (i, 0, 0))
    f_end, b_start = pl.pallas_call(
        _chunk_ends,
        out_shape=[jax.ShapeDtypeStruct((nb, 1, 1), dt)] * 2,
        grid=(nb,),
        in_specs=[tile, tile, pl.BlockSpec((1, 1), lambda i: (0, 0))],
        out_specs=[one, one],
        interpret=interpret,
        name="laplex_chunk_ends",
        compiler_params=params,
    )(s2, x2, lam.reshape(1, 1))
    f_end, b_start = f_end.reshape(nb, 1), b_start.reshape(nb, 1)
    first = s2[::rows, 0]  # (nb,) each chunk's first and last anchor
    last = s2[rows - 1 :: rows, lanes - 1]
    zero = jnp.zeros((1,), dt)
    scan = AssociativeScan()
    # F at each chunk's last anchor (all chunks up to it), B at each chunk's first
    beta_f = jnp.expm1(-lam * jnp.concatenate([zero, last[1:] - last[:-1]]))
    f_tot = scan.scan_beta(beta_f, f_end)[:, 0]
    beta_b = jnp.expm1(-lam * jnp.concatenate([zero, first[1:] - first[:-1]]))
    b_tot = scan.scan_beta(beta_b, b_start, reverse=True)[:, 0]
    f_in = jnp.concatenate([zero, f_tot[:-1]])
    e_prev = jnp.concatenate([first[:1], last[:-1]])
    b_in = jnp.concatenate([b_tot[1:], zero])
    f_next = jnp.concatenate([first[1:], last[-1:]])
    side = jnp.stack(
        [f_in, e_prev, b_in, f_next, jnp.full_like(f_in, lam), jnp.full_like(f_in, c)]
        + [jnp.zeros_like(f_in)] * 2,
        axis=1,
    )[:, None, :]
    y = pl.pallas_call(
        _chunk_apply,
        out_shape=jax.ShapeDtypeStruct((nb * rows, lanes), dt),
        grid=(nb,),
        in_specs=[tile, tile, pl.BlockSpec((None, 1, 8), lambda i: (i, 0, 0))],
        out_specs=tile,
        interpret=interpret,
        name="laplex_chunk_apply",
        compiler_params=params,
    )(s2, x2, side)
    return y.reshape(-1)[:n]


def _chunk_summaries(s_ref, u_ref, lam_ref, f_ref, g_ref, b_ref, h_ref, te_ref, ts_ref):
    rows, lanes = s_ref.shape
    s = s_ref[...]
    u = u_ref[...]
    lam = lam_ref[0, 0]
    last = s_ref[rows - 1, lanes - 1]
    first = s_ref[0, 0]
    el, ef = jnp.exp(-lam * (last - s)) * u, jnp.exp(-lam * (s - first)) * u
    f_ref[...] = jnp.sum(el, keepdims=True)
    g_ref[...] = jnp.sum((last - s) * el, keepdims=True)
    b_ref[...] = jnp.sum(ef, keepdims=True)
    h_ref[...] = jnp.sum((s - first) * ef, keepdims=True)
    te_ref[...] = jnp.sum(jnp.where(s == last, u, 0), keepdims=True)
    ts_ref[...] = jnp.sum(jnp.where(s == first, u, 0), keepdims=True)


def _chunk_parts(s_ref, u_ref, side_ref, plain_ref, signed_ref, jordan_ref, tb_ref, ta_ref):
    rows, lanes = s_ref.shape
    s = s_ref[...]
    u = u_ref[...]
    f_in, g_in, e_prev, t_in = (side_ref[0, k] for k in range(4))  # left carries
    b_in, h_in, f_next, t_next = (side_ref[0, k] for k in range(4, 8))  # right carries
    lam = side_ref[0, 8]
    # in-row blocks: d[g, j, i] = s_j - s_i; sign by position, ties by equality
    d = s[:, :, None] - s[:, None, :]
    ek = jnp.exp(-lam * jnp.abs(d)) * u[:, None, :]
    j = jax.lax.broadcasted_iota(jnp.int32, (rows, lanes, lanes), 1)
    i = jax.lax.broadcasted_iota(jnp.int32, (rows, lanes, lanes), 2)
    tied = jnp.where(d == 0, u[:, None, :], 0)
    plain = jnp.sum(ek, axis=2)
    signed = jnp.sum(jnp.where(i < j, ek, 0), axis=2) - jnp.sum(jnp.where(i > j, ek, 0), axis=2)
    jordan = jnp.sum(jnp.abs(d) * ek, axis=2)
    tb = jnp.sum(jnp.where(i < j, tied, 0), axis=2)
    ta = jnp.sum(jnp.where(i > j, tied, 0), axis=2)
    # row summaries at each row's last (e) and first (f) anchor
    e = s_ref[:, pl.ds(lanes - 1, 1)]
    f = s_ref[:, pl.ds(0, 1)]
    el, ef = jnp.exp(-lam * (e - s)) * u, jnp.exp(-lam * (s - f)) * u
    f_end = jnp.sum(el, axis=1, keepdims=True)
    g_end = jnp.sum((e - s) * el, axis=1, keepdims=True)
    b_start = jnp.sum(ef, axis=1, keepdims=True)
    h_start = jnp.sum((s - f) * ef, axis=1, keepdims=True)
    t_end = jnp.sum(jnp.where(s == e, u, 0), axis=1, keepdims=True)
    t_start = jnp.sum(jnp.where(s == f, u, 0), axis=1, keepdims=True)
    rg = jax.lax.broadcasted_iota(jnp.int32, (rows, rows), 0)
    rh = jax.lax.broadcasted_iota(jnp.int32, (rows, rows), 1)
    # from the left, at each row's first anchor: value P, Jordan sum G, tied sum T
    dl = jnp.maximum(f - e.T, 0)
    ml = jnp.where(rh < rg, jnp.exp(-lam * dl), 0)
    cl = jnp.exp(-lam * jnp.maximum(f - e_prev, 0))
    p_in = jnp.sum(ml * f_end.T, axis=1, keepdims=True) + cl * f_in
    g_row = jnp.sum(ml * (dl * f_end.T + g_end.T), axis=1, keepdims=True)
    g_row = g_row + cl * ((f - e_prev) * f_in + g_in)
    t_row = jnp.sum(jnp.where((rh < rg) & (f == e.T), t_end.T, 0), axis=1, keepdims=True)
    t_row = t_row + jnp.where(e_prev == f, t_in, 0)
    # from the right, at each row's last anchor: value Q, Jordan sum H, tied sum
    dr = jnp.maximum(f.T - e, 0)
    mr = jnp.where(rh > rg, jnp.exp(-lam * dr), 0)
    cr = jnp.exp(-lam * jnp.maximum(f_next - e, 0))
    q_in = jnp.sum(mr * b_start.T, axis=1, keepdims=True) + cr * b_in
    h_row = jnp.sum(mr * (dr * b_start.T + h_start.T), axis=1, keepdims=True)
    h_row = h_row + cr * ((f_next - e) * b_in + h_in)
    a_row = jnp.sum(jnp.where((rh > rg) & (e == f.T), t_start.T, 0), axis=1, keepdims=True)
    a_row = a_row + jnp.where(f_next == e, t_next, 0)
    al, ar = jnp.exp(-lam * (s - f)), jnp.exp(-lam * (e - s))
    plain_ref[...] = plain + al * p_in + ar * q_in
    signed_ref[...] = signed + al * p_in - ar * q_in
    jordan_ref[...] = jordan + al * ((s - f) * p_in + g_row) + ar * ((e - s) * q_in + h_row)
    tb_ref[...] = tb + jnp.where(s == f, t_row, 0)
    ta_ref[...] = ta + jnp.where(s == e, a_row, 0)


def pallas_sym_parts(
    u: Float[Array, " N"],
    s: Float[Array, " N"],
    lam: Float[Array, ""],
    *,
    rows: int = 64,
    lanes: int = 16,
    interpret: bool = False,
    target: str = "auto",
) -> dict[str, Float[Array, " N"]]:
    """The sums the symmetric operator's gradients read, for sorted anchors `s` and one
    value vector `u` (sorted order), by reduce-then-scan kernels as `pallas_sym_matvec`:

    - `plain[j] = sum_i exp(-lam |s_j - s_i|) u_i`;
    - `signed[j]`: the same over positions i < j minus over i > j;
    - `jordan[j] = sum_i |s_j - s_i| exp(-lam |s_j - s_i|) u_i` (the decay's derivative);
    - `tie_before[j]`, `tie_after[j]`: sums of `u_i` over tied anchors `s_i == s_j` at
      positions before / after j (the tie conventions of the anchor gradients).

    Each is carried across rows and chunks by its own end sums (the Jordan sums as the
    2x2 recurrence `G_j = alpha_j (G_{j-1} + d_j F_{j-1})`, the tied sums by equality).
    Arguments as `pallas_sym_matvec`; returns a dict of (N,) arrays.
    """
    n, dt = u.shape[0], u.dtype
    nb, s2, u2 = _tiles(s, u, rows, lanes)
    lam = jnp.asarray(lam, dt)
    params = compiler_params(target)
    tile = pl.BlockSpec((rows, lanes), lambda k: (k, 0))
    one = pl.BlockSpec((None, 1, 1), lambda k: (k, 0, 0))
    sums = pl.pallas_call(
        _chunk_summaries,
        out_shape=[jax.ShapeDtypeStruct((nb, 1, 1), dt)] * 6,
        grid=(nb,),
        in_specs=[tile, tile, pl.BlockSpec((1, 1), lambda k: (0, 0))],
        out_specs=[one] * 6,
        interpret=interpret,
        compiler_params=params,
        name="laplex_chunk_summaries",
    )(s2, u2, lam.reshape(1, 1))
    fc, gc, bc, hc, tec, tsc = (z.reshape(nb, 1) for z in sums)
    first = s2[::rows, 0]
    last = s2[rows - 1 :: rows, lanes - 1]
    zero = jnp.zeros((1,), dt)
    scan = AssociativeScan()
    # left: F and the Jordan sum G at each chunk's last anchor, the tied sum there
    dlast = jnp.concatenate([zero, last[1:] - last[:-1]])
    beta = jnp.expm1(-lam * dlast)
    f_tot = scan.scan_beta(beta, fc)
    f_prev = jnp.concatenate([jnp.zeros((1, 1), dt), f_tot[:-1]])
    g_tot = scan.scan_beta(beta, (beta + 1)[:, None] * dlast[:, None] * f_prev + gc)
    t_tot = scan.scan_beta((dlast == 0).astype(dt) - 1, tec)
    # right: B and the Jordan sum H at each chunk's first anchor, the tied sum there
    dfirst = jnp.concatenate([zero, first[1:] - first[:-1]])
    beta_r = jnp.expm1(-lam * dfirst)
    b_tot = scan.scan_beta(beta_r, bc, reverse=True)
    b_next = jnp.concatenate([b_tot[1:], jnp.zeros((1, 1), dt)])
    w_next = jnp.concatenate([(beta_r + 1)[1:] * dfirst[1:], zero])
    h_tot = scan.scan_beta(beta_r, w_next[:, None] * b_next + hc, reverse=True)
    ts_tot = scan.scan_beta((dfirst == 0).astype(dt) - 1, tsc, reverse=True)

    def prev(z):
        return jnp.concatenate([zero, z[:-1, 0]])

    def nxt(z):
        return jnp.concatenate([z[1:, 0], zero])

    e_prev = jnp.concatenate([first[:1], last[:-1]])
    f_next = jnp.concatenate([first[1:], last[-1:]])
    cols = [prev(f_tot), prev(g_tot), e_prev, prev(t_tot)]
    cols += [nxt(b_tot), nxt(h_tot), f_next, nxt(ts_tot), jnp.full((nb,), lam, dt)]
    side = jnp.stack(cols + [jnp.zeros((nb,), dt)] * 7, axis=1)[:, None, :]
    out = pl.pallas_call(
        _chunk_parts,
        out_shape=[jax.ShapeDtypeStruct((nb * rows, lanes), dt)] * 5,
        grid=(nb,),
        in_specs=[tile, tile, pl.BlockSpec((None, 1, 16), lambda k: (k, 0, 0))],
        out_specs=[tile] * 5,
        interpret=interpret,
        compiler_params=params,
        name="laplex_chunk_parts",
    )(s2, u2, side)
    names = ("plain", "signed", "jordan", "tie_before", "tie_after")
    return {k: z.reshape(-1)[:n] for k, z in zip(names, out, strict=True)}


class PallasBlockScan(AbstractScan):
    """LAPLEX on GPU/TPU with the sequence in its natural order: the symmetric real
    operator (`t is s`, no phase) runs as the reduce-then-scan kernels of
    `pallas_sym_matvec` (no transposes, decays formed in the kernels from the sorted
    anchors); every other pass (M != N, phased kernels, the gradients' scans) runs the
    plain recurrence through `PallasScan`'s chunked kernel.

    - `rows`, `lanes`: a chunk of the symmetric kernels is `rows x lanes` consecutive
      anchors (powers of two; `lanes` exponentials per element for the in-row block).
    - `interpret`: run through the Pallas interpreter (CPU testing).
    - `target`: "gpu" (Triton), "tpu" (Mosaic) or "auto" (the default backend's).
    """

    rows: int = eqx.field(static=True, default=64)
    lanes: int = eqx.field(static=True, default=16)
    interpret: bool = eqx.field(static=True, default=False)
    target: str = eqx.field(static=True, default="auto")

    def __check_init__(self):
        for name in ("rows", "lanes"):
            val = getattr(self, name)
            if not isinstance(val, int) or val < 1 or val & (val - 1):
                raise ValueError(f"{name}: expected a positive power of two, got {val!r}")
        if self.target not in _TARGETS:
            raise ValueError(f"target: expected one of {_TARGETS}, got {self.target!r}")

    def forward(self, alpha, x):
        return PallasScan(interpret=self.interpret).forward(alpha, x)

    def sym_parts(self, u, s, lam):
        """The gradient sums of the symmetric operator (sorted order); see
        `pallas_sym_parts`."""
        return pallas_sym_parts(u, s, lam, **self._settings())

    def sym_matvec(self, x, s, lam, c):
        """The symmetric real operator for one head and one column (sorted order); see
        `pallas_sym_matvec`."""
        return pallas_sym_matvec(x, s, lam, c, **self._settings())

    def _settings(self) -> dict:
        return {
            "rows": self.rows,
            "lanes": self.lanes,
            "interpret": self.interpret,
            "target": self.target,
        }
