"""`PallasScan`: the LAPLEX recurrence as a chunked Pallas kernel (GPU/TPU).

Pattern (as in recurrentgemma's Pallas LRU scan): the sequence is cut into
chunks of `chunk` steps laid out as columns of a (chunk, lanes) array, one lane
per (chunk, right-hand side). Each kernel instance owns a tile of `tile` lanes
and walks the `chunk` rows sequentially, keeping the running state in
registers, and also emits the running product of `alpha` (what a carry entering
the chunk is multiplied by). The short scan over chunk carries and the fix-up
`h + P * carry_in` are plain JAX (XLA fuses the fix-up into one pass).

Complex recurrences are run on (real, imaginary) pairs inside the kernel,
because Triton has no complex type. `interpret=True` runs the same kernel on
CPU through Pallas' interpreter; the tests use it to check exactness.
"""

from __future__ import annotations

import functools

import equinox as eqx
import jax
import jax.numpy as jnp
from jax import lax
from jax.experimental import pallas as pl

from ._scan import AbstractScan

__all__ = ["PallasScan", "compiler_params"]


def compiler_params(target: str = "auto"):
    """Triton's parameters on GPUs (newer JAX defaults to Mosaic GPU, which these kernels
    are not written for), Mosaic's defaults on TPUs."""
    if target == "auto":
        target = "tpu" if jax.default_backend() == "tpu" else "gpu"
    if target == "gpu":
        from jax.experimental.pallas import triton as pl_triton

        # `CompilerParams` since JAX 0.6; `TritonCompilerParams` before (our lower bound 0.5)
        params = getattr(pl_triton, "CompilerParams", None)
        if params is None:
            params = getattr(pl_triton, "TritonCompilerParams")  # noqa: B009
        return params()
    return None


def chunk_tiles(s, cols, rows: int, lanes: int):
    """Sorted anchors `s` (N,) and value columns (each (N,)) as `(nb * rows, lanes)` tiles,
    `nb` chunks of `rows x lanes` consecutive anchors (the reduce-then-scan kernels' layout):
    padded anchors repeat the last one and padded values are zero, so they add nothing.

    **Returns:** `(nb, s2, cols2, first, last)`, with each chunk's first and last anchor (nb,).
    """
    n = s.shape[0]
    nb = max(1, -(-n // (rows * lanes)))
    pad = nb * rows * lanes - n
    s2 = jnp.concatenate([s, jnp.broadcast_to(s[-1:], (pad,))]).reshape(nb * rows, lanes)
    cols2 = [jnp.pad(x, (0, pad)).reshape(nb * rows, lanes) for x in cols]
    return nb, s2, cols2, s2[::rows, 0], s2[rows - 1 :: rows, lanes - 1]


def _kernel_real(a_ref, x_ref, h_ref, p_ref, *, chunk):
    tile = a_ref.shape[1]

    def body(j, carry):
        h, p = carry
        a = a_ref[pl.ds(j, 1), :]
        h = a * h + x_ref[pl.ds(j, 1), :]
        p = a * p
        h_ref[pl.ds(j, 1), :] = h
        p_ref[pl.ds(j, 1), :] = p
        return h, p

    zero = jnp.zeros((1, tile), a_ref.dtype)
    lax.fori_loop(0, chunk, body, (zero, zero + 1))


def _kernel_complex(ar_ref, ai_ref, xr_ref, xi_ref, hr_ref, hi_ref, pr_ref, pi_ref, *, chunk):
    tile = ar_ref.shape[1]

    def body(j, carry):
        hr, hi, qr, qi = carry
        ar = ar_ref[pl.ds(j, 1), :]
        ai = ai_ref[pl.ds(j, 1), :]
        hr, hi = (
            ar * hr - ai * hi + xr_ref[pl.ds(j, 1), :],
            ar * hi + ai * hr + xi_ref[pl.ds(j, 1), :],
        )
        qr, qi = ar * qr - ai * qi, ar * qi + ai * qr
        hr_ref[pl.ds(j, 1), :] = hr
        hi_ref[pl.ds(j, 1), :] = hi
        pr_ref[pl.ds(j, 1), :] = qr
        pi_ref[pl.ds(j, 1), :] = qi
        return hr, hi, qr, qi

    zero = jnp.zeros((1, tile), ar_ref.dtype)
    lax.fori_loop(0, chunk, body, (zero, zero, zero + 1, zero))


class PallasScan(AbstractScan):
    """The LAPLEX recurrence as a chunked Pallas kernel (GPU/TPU), as recurrentgemma's
    Pallas LRU scan: the sequence is cut into chunks of `chunk` steps, each kernel
    instance walks the rows of a tile of `tile` lanes sequentially (state in registers)
    and emits the running product of `alpha`; the short scan over chunk carries and the
    fix-up are plain JAX. Complex recurrences run on (real, imaginary) pairs;
    `interpret=True` runs the same kernel on CPU (the tests check exactness so).

    - `chunk`: sequential steps per chunk (rows of a block; a power of two, as
      Triton blocks must be: shorter sequences use the next power of two above
      their length, padded).
    - `tile`: lanes per kernel instance (a power of two; 128 suits GPUs and TPUs).
    - `interpret`: run through the Pallas interpreter (CPU testing).

    Measured on one H200 (docs/gpu.md): this layout (coalesced rows, XLA transposes
    around the kernel) ran 6x faster than walking strided columns of the
    untransposed sequence inside the kernel.
    """

    chunk: int = eqx.field(static=True, default=256)
    tile: int = eqx.field(static=True, default=128)
    interpret: bool = eqx.field(static=True, default=False)

    def __check_init__(self):
        for name in ("chunk", "tile"):
            val = getattr(self, name)
            if val < 1 or val & (val - 1):
                raise ValueError(f"{name}: expected a positive power of two, got {val}")

    def _local(self, a2, x2):
        c, lanes = a2.shape
        spec = pl.BlockSpec((c, self.tile), lambda i: (0, i))
        grid = (lanes // self.tile,)
        if jnp.issubdtype(a2.dtype, jnp.complexfloating):
            rdt = jnp.real(a2).dtype
            outs = pl.pallas_call(
                functools.partial(_kernel_complex, chunk=c),
                out_shape=[jax.ShapeDtypeStruct((c, lanes), rdt)] * 4,
                grid=grid,
                in_specs=[spec] * 4,
                out_specs=[spec] * 4,
                interpret=self.interpret,
                compiler_params=compiler_params(),
            )(jnp.real(a2), jnp.imag(a2), jnp.real(x2), jnp.imag(x2))
            hr, hi, pr, pi = outs
            return lax.complex(hr, hi), lax.complex(pr, pi)
        h, p = pl.pallas_call(
            functools.partial(_kernel_real, chunk=c),
            out_shape=[jax.ShapeDtypeStruct((c, lanes), a2.dtype)] * 2,
            grid=grid,
            in_specs=[spec] * 2,
            out_specs=[spec] * 2,
            interpret=self.interpret,
            compiler_params=compiler_params(),
        )(a2, x2)
        return h, p

    def forward(self, alpha, x):
        n, k = x.shape
        c = min(self.chunk, 1 << max(0, (n - 1).bit_length()))
        nb = -(-n // c)
        pad = nb * c - n
        # lanes are (chunk index, column) pairs; padded lanes carry zeros
        a = jnp.broadcast_to(jnp.pad(alpha, (0, pad))[:, None], (nb * c, k))
        a2 = a.reshape(nb, c, k).transpose(1, 0, 2).reshape(c, nb * k)
        x2 = jnp.pad(x, ((0, pad), (0, 0))).reshape(nb, c, k).transpose(1, 0, 2)
        x2 = x2.reshape(c, nb * k)
        lanes = nb * k
        lanes_p = -(-lanes // self.tile) * self.tile
        a2 = jnp.pad(a2, ((0, 0), (0, lanes_p - lanes)))
        x2 = jnp.pad(x2, ((0, 0), (0, lanes_p - lanes)))
        h, p = self._local(a2, x2)
        h = h[:, :lanes].reshape(c, nb, k)
        p = p[:, :lanes].reshape(c, nb, k)
        _, carry = lax.associative_scan(_combine_lanes, (p[-1], h[-1]))
        carry_in = jnp.concatenate([jnp.zeros((1, k), x.dtype), carry[:-1]], axis=0)
        out = h + p * carry_in[None]
        return out.transpose(1, 0, 2).reshape(nb * c, k)[:n]


def _combine_lanes(left, right):
    a1, h1 = left
    a2, h2 = right
    return a1 * a2, a2 * h1 + h2
