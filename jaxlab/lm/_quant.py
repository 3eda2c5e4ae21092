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
Inside the model's `lax.scan` over layers, a layer-stacked (L, N, K) `QuantWeight` reaches
the kernel whole, with the traced layer index (`LayerWeight`): a slice of the stack as a
scanned input would be copied by XLA before each custom call, doubling the bytes a
decode step reads.

Quantised activations (`QuantWeight.activations = "int8"`, `with_activations`,
`load(..., activations="int8")`; ggml's Q8_0 x Q8_0 / Q4_1 x Q8_0 scheme). Each row
of x is rounded per block b of 32 to int8 with one float32 scale,

    d[m, b] = max_j |x[m, 32 b + j]| / 127,   a[m, k] = round(x[m, k] * (1 / d[m, b]))

(half away from zero; a = 0 where d = 0; |a| <= 127, |x - d a| <= d / 2), and

    out[m, n] = sum_b d[m, b] (scale[n, b] sum_j a[m,b,j] q[n,b,j]
                               + offset[n, b] sum_j a[m,b,j]),

which is `(d a) @ W.T`: the block sums are integer dot products (AVX-512 VNNI
`vpdpbusd`, AVX2 `vpmaddubsw` + `vpmaddwd`, or portable C++; `lm_q8matmul.cc`), so the
kernel reads the same weight bytes as the float path but does ~4x less arithmetic per
weight. Against the float path each output moves by at most
`sum_b d[m, b] / 2 * sum_j |W[n, 32 b + j]|`. Not on CPU, or beyond `KERNEL_MAX_ROWS`
rows, the same rounding is emulated in JAX (`quantize_activations`) before the float
dot, so every backend computes the same function up to float32 rounding. The
derivative with respect to x is the float path's (straight-through estimator: the
rounding is treated as the identity). The default stays "float32" (exact).

Reference: LLM.int8() (Dettmers et al. 2022) and GPTQ (Frantar et al. 2023) for
weight-only quantisation; the block formats are llama.cpp's (Gerganov et al.).
"""

from __future__ import annotations

import functools
import math

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
    "ACTIVATIONS",
    "with_activations",
    "KERNEL_MAX_ROWS",
]

BLOCK = 32
#: weight formats accepted by `jaxlab.lm.load(..., weights=...)`.
WEIGHTS = ("float32", "int8", "int4")
"""The weight formats `jaxlab.lm.load(..., weights=...)` accepts."""
#: how a `QuantWeight` multiplies its activations (`jaxlab.lm.load(..., activations=...)`).
ACTIVATIONS = ("float32", "int8")
"""The activation formats of a `QuantWeight` product: float32 (exact) or int8 (Q8_0)."""
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
        activations: "float32" (default: x @ W.T with float x) or "int8" (static): x is
            first rounded per block b of 32 to int8 with one float32 scale (ggml's Q8_0:
            `d = max|x| / 127`, `a = round(x / d)`), and the block products are integer
            dot products, `out[n] = sum_b d_b (scale[n, b] a_b . q[n, b] + offset[n, b]
            sum(a_b))`; each output moves by at most `sum_b d_b / 2 * sum |W[n, b]|`
            from the float path's. Gradients with respect to x are the float path's
            (straight-through).

    Leading axes (the layer axis of `Layers`) slice like any pytree under `lax.scan`.
    """

    q: Int[Array, "... N Kq"]
    scale: Float[Array, "... N B"]
    offset: Float[Array, "... N B"]
    bits: int = eqx.field(static=True)
    activations: str = eqx.field(static=True, default="float32")

    def __check_init__(self):
        if self.activations not in ACTIVATIONS:
            raise ValueError(f"activations must be one of {ACTIVATIONS}, got {self.activations!r}")

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


def _check_activations(activations) -> None:
    if not isinstance(activations, str) or activations not in ACTIVATIONS:
        raise ValueError(f"activations must be one of {ACTIVATIONS}, got {activations!r}")


def with_activations(tree, activations: str):
    """Set how every `QuantWeight` of a model multiplies its activations.

    **Arguments:**

    - `tree`: a model, a `QuantWeight`, or any pytree holding them.
    - `activations`: "float32" (exact float products) or "int8" (x rounded per block of
      32 to int8 with one scale, then integer dot products in the CPU kernel; the
      rounding is emulated in JAX elsewhere; see `QuantWeight`).

    **Returns:** `tree` with every `QuantWeight`'s `activations` set (float weights and
    every other leaf unchanged). Raises ValueError for another `activations`.
    """
    _check_activations(activations)

    def setf(a):
        if not isinstance(a, QuantWeight):
            return a
        return QuantWeight(a.q, a.scale, a.offset, a.bits, activations)

    return jax.tree_util.tree_map(setf, tree, is_leaf=lambda a: isinstance(a, QuantWeight))


@jax.custom_jvp
def quantize_activations(x: Float[Array, "... K"]) -> Float[Array, "... K"]:
    """x rounded as the int8-activation kernel rounds it, returned as float32 `d * a`:
    per block of 32, `d = max|x| / 127`, `a = round(x * (1 / d))` half away from zero
    (0 where d = 0). Straight-through: the derivative is the identity."""
    xb = x.astype(jnp.float32).reshape(*x.shape[:-1], -1, BLOCK)
    d = jnp.max(jnp.abs(xb), axis=-1, keepdims=True) / jnp.float32(127)
    inv = jnp.where(d != 0, 1.0 / jnp.where(d != 0, d, 1.0), 0.0)
    v = xb * inv
    t = jnp.trunc(v)
    a = t + jnp.where(jnp.abs(v - t) >= 0.5, jnp.sign(v), 0.0)
    return (a * d).reshape(x.shape)


@quantize_activations.defjvp
def _quantize_activations_jvp(primals, tangents):
    return quantize_activations(primals[0]), tangents[0]


def _reference(x, q, scale, offset, bits, activations="float32", layer=None):
    if layer is not None:  # one layer of a stack
        q, scale, offset = q[layer], scale[layer], offset[layer]
    w = QuantWeight(q, scale, offset, bits).dequantize()
    return (quantize_activations(x) if activations == "int8" else x) @ w.T


@functools.cache
def _kernel_op(bits: int, activations: str = "float32"):
    """f(x, q, scale, offset, layer): the kernel for 2-D weights (`layer` ignored, pass 0)
    or for layer `layer` of a stack (L, N, K'), with a batching rule and the float path's
    derivative with respect to x."""
    from jaxlab._kernels.lm import q8matmul_cpu, qmatmul_cpu

    kernel = q8matmul_cpu if activations == "int8" else qmatmul_cpu

    def layer_of(q, layer):
        return layer if q.ndim == 3 else None

    @jax.custom_batching.custom_vmap
    def op(x, q, scale, offset, layer):
        return kernel(x, q, scale, offset, bits=bits, layer=layer_of(q, layer))

    @op.def_vmap
    def _rule(axis_size, in_batched, x, q, scale, offset, layer):
        xb, *wb = in_batched
        if any(wb):  # batched weights or layer index: the vmappable reference
            axes = tuple(0 if b else None for b in in_batched)

            def ref(x, q, scale, offset, layer):
                return _reference(x, q, scale, offset, bits, activations, layer_of(q, layer))

            out = jax.vmap(ref, in_axes=axes)(x, q, scale, offset, layer)
            return out, True
        m, k = x.shape[-2:]
        out = op(x.reshape(axis_size * m, k), q, scale, offset, layer)
        return out.reshape(axis_size, m, -1), True

    @jax.custom_vjp
    def f(x, q, scale, offset, layer):
        return op(x, q, scale, offset, layer)

    def fwd(x, q, scale, offset, layer):
        return op(x, q, scale, offset, layer), (q, scale, offset, layer)

    def bwd(res, g):  # the float path's: straight-through for int8 activations
        q, scale, offset, layer = res
        if q.ndim == 3:
            q, scale, offset = q[layer], scale[layer], offset[layer]
        return g @ QuantWeight(q, scale, offset, bits).dequantize(), None, None, None, None

    f.defvjp(fwd, bwd)
    return f


@functools.cache
def _kernel_ready(activations: str = "float32") -> bool:
    try:
        from jaxlab._kernels.lm import q8matmul_kernel_available, qmatmul_kernel_available
    except ImportError:
        return False
    if activations == "int8":
        return q8matmul_kernel_available()
    return qmatmul_kernel_available()


def kernel_rows(rows: int, activations: str = "float32") -> bool:
    """Whether `project` multiplies `rows` rows of x by a `QuantWeight` in the C++
    kernel (CPU backend, kernel built, rows <= `KERNEL_MAX_ROWS`)."""
    return rows <= KERNEL_MAX_ROWS and jax.default_backend() == "cpu" and _kernel_ready(activations)


class LayerWeight(eqx.Module):
    """Layer `layer` of a layer-stacked `QuantWeight`, for `project`, without slicing it.

    Inside the model's `lax.scan` over layers, a weight sliced from the stack (a scanned
    input) is copied by XLA before the kernel's custom call on every step; this view
    instead hands the kernel the whole stack (a loop invariant) and the traced index, and
    the kernel offsets its pointers (`jaxlab._kernels.lm`). Where `project` does not use
    the kernel, it slices the stack (`get`) like the scan did.

    **Attributes:**
        stack: a `QuantWeight` of shape (L, N, K).
        layer: () int32 index into L.
    """

    stack: QuantWeight
    layer: Int[Array, ""]

    @property
    def shape(self) -> tuple[int, ...]:
        """Shape of the dequantised layer, (N, K)."""
        return self.stack.shape[1:]

    @property
    def activations(self) -> str:
        """The stack's activation format."""
        return self.stack.activations

    def get(self) -> QuantWeight:
        """Layer `layer` as an (N, K) `QuantWeight` (a dynamic slice of the stack)."""
        w = self.stack
        i = self.layer
        return QuantWeight(w.q[i], w.scale[i], w.offset[i], w.bits, w.activations)


def project(x: Float[Array, "... K"], w) -> Float[Array, "... N"]:
    """x @ W.T for a float (N, K) array or a `QuantWeight` (dequantised in the matmul).

    **Arguments:**

    - `x`: (..., K) activations.
    - `w`: (N, K) float array, or `QuantWeight` of shape (N, K) (with
      `activations="int8"`, x is first rounded to int8 per block of 32: see `QuantWeight`),
      or a `LayerWeight` (one layer of an (L, N, K) stack, multiplied without a copy).

    **Returns:** (..., N) in x's dtype. A float W is cast to x's dtype; below float32
    (bfloat16 compute) the products accumulate in float32 before the result is rounded.
    Concrete inputs are checked (finite, float, `x`'s last axis = K); an empty batch of
    rows `x (0, K)` is valid and gives `(0, N)`.
    """
    x = as_array("x", x, dtype=jnp.floating, finite=True)
    if x.ndim < 1:
        raise ValueError(f"x: expected (..., K) activations, received shape {tuple(x.shape)}")
    if not isinstance(w, QuantWeight | LayerWeight):
        w = as_array("w", w, ndim=2, dtype=jnp.floating, finite=True, nonempty=True)
    if x.shape[-1] != w.shape[-1]:
        raise ValueError(f"x: expected last axis K = {w.shape[-1]} (w's), received {x.shape}")
    return project_f32(x, w).astype(x.dtype)


def project_f32(x: Float[Array, "... K"], w) -> Float[Array, "... N"]:
    """`project` with the float32 result (accumulated in float32), e.g. for logits.

    For float32 `x` and W this is `x @ W.T`; for bfloat16 the operands stay bfloat16
    (no float32 copy of W) with `preferred_element_type=float32`.
    """
    layer = jnp.int32(0)
    if isinstance(w, LayerWeight):
        if not kernel_rows(math.prod(x.shape[:-1]), w.activations):
            return project_f32(x, w.get())
        w, layer = w.stack, w.layer.astype(jnp.int32)
    if not isinstance(w, QuantWeight):
        w = w.astype(x.dtype)
        if x.dtype == jnp.float32:
            return x @ w.T
        return jnp.matmul(x, w.T, preferred_element_type=jnp.float32)
    lead, k = x.shape[:-1], x.shape[-1]
    x2 = x.reshape(-1, k).astype(jnp.float32)
    act = w.activations
    if kernel_rows(x2.shape[0], act):
        out = _kernel_op(w.bits, act)(x2, w.q, w.scale, w.offset, layer)
    else:
        out = (quantize_activations(x2) if act == "int8" else x2) @ w.dequantize().T
    return out.reshape(*lead, -1)


def slice_rows(w, start: Int[Array, ""], size: int):
    """Rows `start .. start + size - 1` of a float (N, K) array or a `QuantWeight`
    (`start` may be traced; `size` is static), in the same representation."""
    if not isinstance(w, QuantWeight):
        return jax.lax.dynamic_slice_in_dim(w, start, size, axis=0)
    q, scale, offset = (
        jax.lax.dynamic_slice_in_dim(a, start, size, axis=0) for a in (w.q, w.scale, w.offset)
    )
    return QuantWeight(q, scale, offset, w.bits, w.activations)


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
