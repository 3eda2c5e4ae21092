"""Weight-only quantised projections: int8 or 4-bit weights, dequantised inside the matmul.

A `QuantWeight` stores an (N, K) weight as integer levels with one scale and one
offset per block of 32 weights of a row, `W[n, k] = q[n, k] * scale[n, k // 32] +
offset[n, k // 32]`: int8 levels (1.25 bytes per weight with the float32 scales),
or two 4-bit levels per byte (0.75 bytes per weight), against 4 bytes for float32.
Batch-1 decode is bound by the bytes of weights it reads, so it reads ~1/3 (int8)
or ~1/5 (4-bit) of the float32 path's.

From GGUF (`load(..., weights=...)`, `_gguf_levels.py`): the levels, scales and
offsets are read straight from the file's blocks; Q4_0, Q4_1, Q4_K (4-bit or int8),
Q5_0, Q5_1, Q5_K and Q8_0 (int8) map exactly, so a quantised model computes the same
weights as the float32 one; Q6_K maps exactly where a block's two sub-block scales
allow and is otherwise re-quantised per block of 32 to 8 bits, like the remaining
formats (`quantize`: asymmetric, error at most half a step of (max - min) / 255).

Every projection of `_model.py` goes through `project` (and the token lookup
through `embed_rows`): float arrays as `x @ w.T`, `QuantWeight`s through the C++
kernel of `jaxlab._kernels.lm` on CPU for up to `KERNEL_MAX_ROWS` rows of x (decode,
small batches: XLA's CPU dot does not fuse the int-to-float conversion, so a
dequantise-then-dot reads and writes a float32 copy of every weight), and
otherwise through the pure-JAX dequantise-then-matmul, which is also the oracle
and the path on other backends. Gradients with respect to x flow through both.

Reference: LLM.int8() (Dettmers et al. 2022) and GPTQ (Frantar et al. 2023) for
weight-only quantisation; the block formats are llama.cpp's (Gerganov et al.).
"""

from __future__ import annotations

import functools

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float, Int

from jaxlab._core import as_array

__all__ = [
    "QuantWeight",
    "quantize",
    "minmax_levels",
    "project",
    "embed_rows",
    "WEIGHTS",
    "KERNEL_MAX_ROWS",
]

BLOCK = 32
#: weight formats accepted by `jaxlab.lm.load(..., weights=...)`.
WEIGHTS = ("float32", "int8", "int4")
"""The weight formats `jaxlab.lm.load(..., weights=...)` accepts."""
#: rows of x up to which `project` uses the C++ kernel (beyond: dequantise + XLA dot).
KERNEL_MAX_ROWS = 64


class QuantWeight(eqx.Module):
    """An (..., N, K) weight as integer levels with per-block-of-32 scales and offsets.

    **Attributes:**
        q: (..., N, K) int8 levels (`bits=8`), or (..., N, K/2) uint8 holding two
            4-bit levels per byte (`bits=4`: low nibble weight j, high nibble weight
            j + 16 of each block of 32).
        scale, offset: (..., N, K/32) float32.
        bits: 8 or 4 (static).

    Leading axes (the layer axis of `Layers`) slice like any pytree under `lax.scan`.
    """

    q: Int[Array, "... N Kq"]
    scale: Float[Array, "... N B"]
    offset: Float[Array, "... N B"]
    bits: int = eqx.field(static=True)

    @property
    def shape(self) -> tuple[int, ...]:
        """Shape of the dequantised weight."""
        return (*self.scale.shape[:-1], self.scale.shape[-1] * BLOCK)

    @property
    def nbytes(self) -> int:
        """Bytes held (levels, scales and offsets)."""
        return int(self.q.size * self.q.dtype.itemsize + 4 * (self.scale.size + self.offset.size))

    def levels(self) -> Int[Array, "... N K"]:
        """The integer levels as (..., N, K) int32."""
        if self.bits == 8:
            return self.q.astype(jnp.int32)
        b = self.q.reshape(*self.q.shape[:-1], -1, BLOCK // 2).astype(jnp.int32)
        lv = jnp.concatenate([b & 0x0F, b >> 4], axis=-1)
        return lv.reshape(*self.q.shape[:-1], -1)

    def dequantize(self) -> Float[Array, "... N K"]:
        """The float32 weight."""
        lv = self.levels().astype(jnp.float32)
        lv = lv.reshape(*self.scale.shape, BLOCK)
        w = lv * self.scale[..., None] + self.offset[..., None]
        return w.reshape(self.shape)


def _pack4(levels: np.ndarray) -> np.ndarray:
    b = levels.reshape(*levels.shape[:-1], -1, 2, BLOCK // 2).astype(np.uint8)
    return (b[..., 0, :] | (b[..., 1, :] << 4)).reshape(*levels.shape[:-1], -1)


def _from_levels(levels, scale, offset, bits) -> QuantWeight:
    q = _pack4(levels) if bits == 4 else levels.astype(np.int8)
    return QuantWeight(
        jnp.asarray(q), jnp.asarray(scale, jnp.float32), jnp.asarray(offset, jnp.float32), bits
    )


def minmax_levels(blocks: np.ndarray, bits: int):
    """Asymmetric min-max levels of float32 blocks (..., 32): (levels, scale, offset).

    Levels are int8 (`bits=8`, centred: 0..255 shifted by -128) or uint8 0..15 (`bits=4`,
    unpacked); each value is within half a step, (max - min) / (2^bits - 1) / 2 of its
    block, of `levels * scale + offset`.
    """
    lo, hi = blocks.min(-1), blocks.max(-1)
    top = (1 << bits) - 1
    scale = ((hi - lo) / np.float32(top)).astype(np.float32)
    safe = np.where(scale > 0, scale, np.float32(1.0))
    lv = np.clip(np.rint((blocks - lo[..., None]) / safe[..., None]), 0, top)
    shift = 128 if bits == 8 else 0  # int8 levels are centred on zero
    offset = (lo + np.float32(shift) * scale).astype(np.float32)
    levels = (lv - shift).astype(np.int8) if bits == 8 else lv.astype(np.uint8)
    return levels, scale, offset


def quantize(w, *, bits: int = 8) -> QuantWeight:
    """Quantise a float (..., N, K) weight per block of 32 (asymmetric, min-max).

    **Arguments:**

    - `w`: float array, K a multiple of 32.
    - `bits`: 8 (256 levels) or 4 (16 levels).

    **Returns:** a `QuantWeight`; each weight is within half a step
    ((max - min) / (2^bits - 1) of its block) of `w`.
    """
    if bits not in (4, 8):
        raise ValueError(f"bits must be 4 or 8, got {bits!r}")
    if w is None or isinstance(w, str | bytes) or np.asarray(w).dtype.kind not in "biuf":
        raise ValueError(f"w: expected a numeric array, received {type(w).__name__}")
    w = np.asarray(w, np.float32)  # numpy throughout
    if w.size == 0 or not np.isfinite(w).all():
        raise ValueError(f"w: expected a non-empty array of finite values, received {w.shape}")
    if w.ndim < 2 or w.shape[-1] % BLOCK:
        raise ValueError(
            f"w: expected (..., N, K) with K a multiple of {BLOCK}, received {w.shape}"
        )
    levels, scale, offset = minmax_levels(w.reshape(*w.shape[:-1], -1, BLOCK), bits)
    return _from_levels(levels.reshape(w.shape), scale, offset, bits)


def _reference(x, q, scale, offset, bits):
    w = QuantWeight(q, scale, offset, bits).dequantize()
    return x @ w.T


@functools.cache
def _kernel_op(bits: int):
    from jaxlab._kernels.lm import qmatmul_cpu

    @jax.custom_batching.custom_vmap
    def op(x, q, scale, offset):
        return qmatmul_cpu(x, q, scale, offset, bits=bits)

    @op.def_vmap
    def _rule(axis_size, in_batched, x, q, scale, offset):
        xb, *wb = in_batched
        if any(wb):  # batched weights: the vmappable reference
            axes = tuple(0 if b else None for b in in_batched)
            out = jax.vmap(functools.partial(_reference, bits=bits), in_axes=axes)(
                x, q, scale, offset
            )
            return out, True
        m, k = x.shape[-2:]
        out = op(x.reshape(axis_size * m, k), q, scale, offset)
        return out.reshape(axis_size, m, -1), True

    @jax.custom_vjp
    def f(x, q, scale, offset):
        return op(x, q, scale, offset)

    def fwd(x, q, scale, offset):
        return op(x, q, scale, offset), (q, scale, offset)

    def bwd(res, g):
        q, scale, offset = res
        return g @ QuantWeight(q, scale, offset, bits).dequantize(), None, None, None

    f.defvjp(fwd, bwd)
    return f


@functools.cache
def _kernel_ready() -> bool:
    try:
        from jaxlab._kernels.lm import qmatmul_kernel_available
    except ImportError:
        return False
    return qmatmul_kernel_available()


def project(x: Float[Array, "... K"], w) -> Float[Array, "... N"]:
    """x @ W.T for a float (N, K) array or a `QuantWeight` (dequantised in the matmul).

    **Arguments:**

    - `x`: (..., K) activations.
    - `w`: (N, K) float array, or `QuantWeight` of shape (N, K).

    **Returns:** (..., N) in x's dtype. A float W is cast to x's dtype; below float32
    (bfloat16 compute) the products accumulate in float32 before the result is rounded.
    Concrete inputs are checked (finite, float, `x`'s last axis = K); an empty batch of
    rows `x (0, K)` is valid and gives `(0, N)`.
    """
    x = as_array("x", x, dtype=jnp.floating, finite=True)
    if x.ndim < 1:
        raise ValueError(f"x: expected (..., K) activations, received shape {tuple(x.shape)}")
    if not isinstance(w, QuantWeight):
        w = as_array("w", w, ndim=2, dtype=jnp.floating, finite=True, nonempty=True)
    if x.shape[-1] != w.shape[-1]:
        raise ValueError(f"x: expected last axis K = {w.shape[-1]} (w's), received {x.shape}")
    return project_f32(x, w).astype(x.dtype)


def project_f32(x: Float[Array, "... K"], w) -> Float[Array, "... N"]:
    """`project` with the float32 result (accumulated in float32), e.g. for logits.

    For float32 `x` and W this is `x @ W.T`; for bfloat16 the operands stay bfloat16
    (no float32 copy of W) with `preferred_element_type=float32`.
    """
    if not isinstance(w, QuantWeight):
        w = w.astype(x.dtype)
        if x.dtype == jnp.float32:
            return x @ w.T
        return jnp.matmul(x, w.T, preferred_element_type=jnp.float32)
    lead, k = x.shape[:-1], x.shape[-1]
    x2 = x.reshape(-1, k).astype(jnp.float32)
    if x2.shape[0] <= KERNEL_MAX_ROWS and jax.default_backend() == "cpu" and _kernel_ready():
        out = _kernel_op(w.bits)(x2, w.q, w.scale, w.offset)
    else:
        out = x2 @ w.dequantize().T
    return out.reshape(*lead, -1)


def slice_rows(w, start: Int[Array, ""], size: int):
    """Rows `start .. start + size - 1` of a float (N, K) array or a `QuantWeight`
    (`start` may be traced; `size` is static), in the same representation."""
    if not isinstance(w, QuantWeight):
        return jax.lax.dynamic_slice_in_dim(w, start, size, axis=0)
    q, scale, offset = (
        jax.lax.dynamic_slice_in_dim(a, start, size, axis=0) for a in (w.q, w.scale, w.offset)
    )
    return QuantWeight(q, scale, offset, w.bits)


def embed_rows(w, tokens: Int[Array, " T"]) -> Float[Array, "T d"]:
    """Rows `tokens` of an embedding table (float array or `QuantWeight`), as float32."""
    if not isinstance(w, QuantWeight):
        return jnp.take(w, tokens, axis=0).astype(jnp.float32)
    rows = QuantWeight(
        jnp.take(w.q, tokens, axis=0),
        jnp.take(w.scale, tokens, axis=0),
        jnp.take(w.offset, tokens, axis=0),
        w.bits,
    )
    return rows.dequantize()
