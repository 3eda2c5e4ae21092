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

from ._pallas import PallasScan, chunk_tiles, compiler_params
from ._pallas_block_grad import pallas_sym_grad
from ._pallas_block_phased import pallas_sym_matvec_phased
from ._pallas_block_phased_grad import pallas_sym_grad_phased
from ._scan import AbstractScan, AssociativeScan

__all__ = ["PallasBlockScan", "pallas_sym_matvec"]

_TARGETS = ("auto", "gpu", "tpu")


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
    nb, s2, (x2,), first, last = chunk_tiles(s, [x], rows, lanes)
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


class PallasBlockScan(AbstractScan):
    """LAPLEX on GPU/TPU with the sequence in its natural order: every LAPLEX operator
    runs as reduce-then-scan Pallas kernels (no transposes, decays formed in the kernels
    from the sorted anchors). The symmetric real operator (`t is s`, no phase):
    `pallas_sym_matvec`, its gradients (v, anchors, decay, weight) `pallas_sym_grad`; the
    phased (complex, or a complex `v`) symmetric operator: `pallas_sym_matvec_phased`, its
    gradients (v, anchors, a, b, c) `pallas_sym_grad_phased`. Targets other than the
    sources (`t` not `s`, M != N), real or phased, value and gradients: the same kernels
    on each head's merged sequence of targets and sources (`jaxlab.laplex.matvec`: values
    at the sources, zeros at the targets; the output cotangent at the targets). `forward`
    (the `AbstractScan` interface, which no LAPLEX operator path of this strategy uses)
    runs the plain recurrence through `PallasScan`'s chunked kernel.

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

    def sym_grad(self, x, w, s, lam, c):
        """Cotangents of `sum(w * sym_matvec(x, s, lam, c))` (one head and one column, sorted
        order): `(x_bar, s_bar, lam_bar, c_bar)`; see `pallas_sym_grad`."""
        return pallas_sym_grad(x, w, s, lam, c, **self._settings())

    def sym_grad_phased(self, x, w, s, a, b, c):
        """Cotangents of the symmetric phased operator for one head and one (real or
        complex) column (sorted order): `(x_bar, s_bar, a_bar, b_bar, c_bar)`; see
        `pallas_sym_grad_phased`."""
        return pallas_sym_grad_phased(x, w, s, a, b, c, **self._settings())

    def sym_matvec_phased(self, x, s, a, b, c):
        """The symmetric phased operator for one head and one (real or complex) column
        (sorted order); see `pallas_sym_matvec_phased`."""
        return pallas_sym_matvec_phased(x, s, a, b, c, **self._settings())

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
