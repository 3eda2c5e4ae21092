"""GGUF blocks -> `QuantWeight` levels, read straight from the memory-mapped bytes.

`quantize_tensor` turns one 2-D GGUF tensor into the arrays of a `QuantWeight`
(levels, one scale and one offset per block of 32 weights of a row, `W = q * scale +
offset`) with vectorised NumPy on the file's raw blocks, a bounded chunk of rows at a
time (about `CHUNK_BYTES` of file data): no float32 copy of a whole tensor is made.

How each format maps (llama.cpp's block layouts, as `gguf.quants` decodes them):

- **Exact** (the dequantised weights equal the `gguf` package's `dequantize` bit for
  bit in float32: every product below is exact in float32 and the one addition rounds
  as `gguf`'s does):
  Q4_0 (`d * (q - 8)`), Q4_1 (`d * q + m`): 4-bit levels (`bits=4`: the file's nibbles,
  already packed as `QuantWeight` packs them) or int8;
  Q4_K (super-blocks of 256 = 8 sub-blocks of 32, each with 6-bit scale `sc` and min
  `m`: `w = d * sc * q - dmin * m`): 4-bit or int8 levels `q`, scale `d * sc`, offset
  `-dmin * m`;
  Q5_0, Q5_1, Q5_K (the same with a fifth bit), Q8_0: int8 levels.
- **Q6_K** (sub-blocks of 16 with int8 scales `s`: `w = d * s * q`, `q` in -32..31): a
  block of 32 spans two sub-blocks (scales `s_a`, `s_b`). With `g = gcd(s_a, s_b)`
  the levels `q * s / g` and scale `d * g` are exact when they fit int8 (`max(|s_a|,
  |s_b|) / g <= 4`, e.g. equal scales); the other blocks are re-quantised per block of
  32 from their dequantised float32 values to 8 bits (min-max, `quantize`): error at
  most half a step, `(max - min) / 510` of the block, which is at most
  `64 * d * max(|s_a|, |s_b|) / 510` (about 1/8 of the file's own coarser step `d *
  max(|s_a|, |s_b|)`).
- **Others** (Q2_K, Q3_K, F16, BF16, F32): dequantised one chunk of rows at a time and
  re-quantised per block of 32 to 8 bits (the same bound).

`bits=4` asks for 4-bit levels where the file's blocks are 4-bit (Q4_0, Q4_1, Q4_K);
every other format stays int8 (`bits_for`).
"""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np

from ._quant import BLOCK, QuantWeight, minmax_levels

__all__ = ["quantize_tensor", "stacked_levels", "bits_for", "tensor_levels"]

#: file bytes decoded per chunk (bounds the temporaries of one tensor's conversion).
CHUNK_BYTES = 4 << 20

FOUR_BIT = frozenset(["Q4_0", "Q4_1", "Q4_K"])
# legacy blocks of 32: type -> (bytes per block, f16 minimum after d)
_LEGACY = {"Q4_0": (18, False), "Q4_1": (20, True), "Q5_0": (22, False), "Q5_1": (24, True)}
_KQUANT_BYTES = {"Q4_K": 144, "Q5_K": 176, "Q6_K": 210}


def bits_for(type_names, bits: int) -> int:
    """4 when `bits == 4` and every tensor type in `type_names` is 4-bit, else 8."""
    return 4 if bits == 4 and all(t in FOUR_BIT for t in type_names) else 8


def _f16(blocks: np.ndarray, col: int) -> np.ndarray:
    """The float16 at byte `col` of each block, as float32 (B,)."""
    return np.ascontiguousarray(blocks[:, col : col + 2]).view(np.float16)[:, 0].astype(np.float32)


def _pack4(lv: np.ndarray) -> np.ndarray:
    """(..., 32) levels 0..15 -> (..., 16) bytes: low nibble j, high nibble j + 16."""
    return lv[..., :16] | (lv[..., 16:] << 4)


def _nibbles32(qs: np.ndarray) -> np.ndarray:
    """(B, 16) bytes of a legacy block -> (B, 32) levels (low nibbles then high)."""
    return np.concatenate([qs & 0x0F, qs >> 4], axis=-1)


def _legacy(blocks: np.ndarray, type_name: str, bits: int):
    """Q4_0/Q4_1/Q5_0/Q5_1 blocks (B, bytes) -> levels (B, 32 or 16), scale, offset (B,)."""
    _, has_min = _LEGACY[type_name]
    d = _f16(blocks, 0)
    body = 4 if has_min else 2
    m = _f16(blocks, 2) if has_min else np.zeros_like(d)
    if type_name in ("Q4_0", "Q4_1"):
        qs = blocks[:, body:]
        offset = m if has_min else np.float32(-8.0) * d  # d * (q - 8) = q * d - 8 d
        lv = qs if bits == 4 else _nibbles32(qs).view(np.int8)
        return lv, d, offset
    qh = np.unpackbits(blocks[:, body : body + 4], axis=-1, bitorder="little")  # bit j: weight j
    q = _nibbles32(blocks[:, body + 4 :]) | (qh << 4)
    offset = m if has_min else np.float32(-16.0) * d
    return q.view(np.int8), d, offset


def _scale_min_k4(sc12: np.ndarray):
    """The 8 six-bit scales and mins packed in 12 bytes (Q4_K/Q5_K) -> two (B, 8) arrays."""
    a, b, c = sc12[:, 0:4], sc12[:, 4:8], sc12[:, 8:12]
    sc = np.concatenate([a & 63, (c & 0x0F) | ((a >> 6) << 4)], axis=-1)
    mn = np.concatenate([b & 63, (c >> 4) | ((b >> 6) << 4)], axis=-1)
    return sc.astype(np.float32), mn.astype(np.float32)


def _kquant45(blocks: np.ndarray, type_name: str, bits: int):
    """Q4_K/Q5_K super-blocks (B, bytes) -> levels (B, 8, 32 or 16), scale, offset (B, 8)."""
    n = blocks.shape[0]
    d, dmin = _f16(blocks, 0), _f16(blocks, 2)
    sc, mn = _scale_min_k4(blocks[:, 4:16])
    scale = d[:, None] * sc
    offset = -(dmin[:, None] * mn)
    qs = blocks[:, -128:].reshape(n, 4, 32)  # chunk c: low nibbles sub-block 2c, high 2c + 1
    if type_name == "Q4_K" and bits == 4:
        lo, hi = qs[..., :16], qs[..., 16:]
        packed = np.stack([(lo & 0x0F) | (hi << 4), (lo >> 4) | (hi & 0xF0)], axis=2)
        return packed.reshape(n, 8, 16), scale, offset
    q = np.stack([qs & 0x0F, qs >> 4], axis=2).reshape(n, 8, 32)
    if type_name == "Q5_K":  # bit i of byte j of qh: weight j of sub-block i
        qh = np.unpackbits(blocks[:, 16:48].reshape(n, 32, 1), axis=-1, bitorder="little")
        q = q | (qh.transpose(0, 2, 1) << 4)
    return q.view(np.int8), scale, offset


def _q6k(blocks: np.ndarray):
    """Q6_K super-blocks (B, 210) -> int8 levels (B, 8, 32), scale, offset (B, 8): exact
    where the two sub-block scales allow (see the module docstring), else re-quantised."""
    n = blocks.shape[0]
    ql = blocks[:, :128].reshape(n, 2, 1, 2, 32)  # half, -, which 32 of 64, byte
    ql = np.concatenate([ql & 0x0F, ql >> 4], axis=2)  # half, nibble, which 32, byte
    qh = blocks[:, 128:192].reshape(n, 2, 1, 32) >> np.array([0, 2, 4, 6], np.uint8)[:, None]
    q = ((ql.reshape(n, 8, 32) | ((qh & 3).reshape(n, 8, 32) << 4)).astype(np.int16)) - 32
    s = blocks[:, 192:208].view(np.int8).astype(np.int16).reshape(n, 8, 2)
    d = _f16(blocks, 208)
    g = np.gcd(s[..., 0], s[..., 1])
    g = np.where(g == 0, 1, g)
    lv = (q.reshape(n, 8, 2, 16) * (s // g[..., None])[..., None]).reshape(n, 8, 32)
    ok = (lv.min(-1) >= -128) & (lv.max(-1) <= 127)
    scale = d[:, None] * g.astype(np.float32)
    offset = np.zeros_like(scale)
    levels = np.where(ok[..., None], lv, 0).astype(np.int8)
    if not ok.all():
        bad = ~ok
        ds = (d[:, None, None] * s.astype(np.float32))[bad]  # (nb, 2) = d * s as gguf forms it
        vals = (ds[:, :, None] * q.reshape(n, 8, 2, 16)[bad].astype(np.float32)).reshape(-1, 32)
        rl, rs, ro = minmax_levels(vals, 8)
        levels[bad], scale[bad], offset[bad] = rl, rs, ro
    return levels, scale, offset


def _decode(type_name: str, rows: np.ndarray, k: int, bits: int, gguf_mod):
    """One chunk of rows (R, row bytes) -> (levels (R, K or K/2), scale, offset (R, K/32))."""
    r = rows.shape[0]
    if type_name == "Q8_0":
        blocks = rows.reshape(-1, 34)
        lv, scale, offset = blocks[:, 2:].view(np.int8), _f16(blocks, 0), None
    elif type_name in _LEGACY:
        lv, scale, offset = _legacy(rows.reshape(-1, _LEGACY[type_name][0]), type_name, bits)
    elif type_name in ("Q4_K", "Q5_K"):
        lv, scale, offset = _kquant45(rows.reshape(-1, _KQUANT_BYTES[type_name]), type_name, bits)
    elif type_name == "Q6_K":
        lv, scale, offset = _q6k(rows.reshape(-1, 210))
    else:  # F32, F16, BF16, Q2_K, Q3_K: dequantise this chunk and re-quantise to 8 bits
        qtype = gguf_mod.GGMLQuantizationType[type_name]
        w = np.asarray(gguf_mod.quants.dequantize(rows, qtype), np.float32)
        w = w.reshape(-1, BLOCK)
        if not np.isfinite(w).all():
            return None
        lv, scale, offset = minmax_levels(w, 8)
    if offset is None:
        offset = np.zeros_like(scale)
    scale = scale.reshape(r, k // BLOCK)
    offset = offset.reshape(r, k // BLOCK)
    return lv.reshape(r, -1), scale, offset


def tensor_levels(gguf_file, name: str, *, bits: int, out=None):
    """NumPy arrays (q, scale, offset) of tensor `name` as a `QuantWeight` with `bits`
    (4 only for 4-bit formats: see `bits_for`), written into `out` (a tuple of such
    arrays, e.g. one layer of a stacked field) when given.

    **Raises:**
        ValueError: the tensor is not 2-D, or its scales or values are NaN/inf
            (corrupted data).
    """
    type_name, rows = gguf_file.raw_rows(name)
    if rows.ndim != 2 or len(gguf_file.tensors[name].shape) != 2:
        raise ValueError(f"{name!r}: only 2-D tensors are quantised, shape {rows.shape}")
    bits = bits_for([type_name], bits)
    n, k = gguf_file.tensors[name].shape
    if out is None:
        q_shape = (n, k // 2) if bits == 4 else (n, k)
        out = (
            np.empty(q_shape, np.uint8 if bits == 4 else np.int8),
            np.empty((n, k // BLOCK), np.float32),
            np.empty((n, k // BLOCK), np.float32),
        )
    q_out, s_out, o_out = out
    step = max(1, CHUNK_BYTES // max(1, rows.shape[1]))
    import gguf

    for r0 in range(0, n, step):
        got = _decode(type_name, np.asarray(rows[r0 : r0 + step]), k, bits, gguf)
        bad = got is None or not (np.isfinite(got[1]).all() and np.isfinite(got[2]).all())
        if bad:
            raise ValueError(
                f"GGUF file {str(gguf_file.path)!r}: tensor {name!r} ({type_name}) holds "
                "NaN/inf scales or values (corrupted data or a tensor type that does not "
                "match its bytes)"
            )
        assert got is not None
        q_out[r0 : r0 + step], s_out[r0 : r0 + step], o_out[r0 : r0 + step] = got
    gguf_file.release(name)
    return q_out, s_out, o_out


def quantize_tensor(gguf_file, name: str, *, bits: int) -> QuantWeight:
    """One 2-D GGUF tensor as a `QuantWeight` (see the module docstring for each format).

    **Arguments:**

    - `gguf_file`: an open `GGUFFile`.
    - `name`: the tensor.
    - `bits`: 8, or 4 for 4-bit levels where the tensor's blocks are 4-bit.
    """
    q, scale, offset = tensor_levels(gguf_file, name, bits=bits)
    b = bits_for([_type(gguf_file, name)], bits)
    return QuantWeight(jnp.asarray(q), jnp.asarray(scale), jnp.asarray(offset), b)


def _type(gguf_file, name: str) -> str:
    return gguf_file.tensors[name].type_name


def stacked_levels(gguf_file, names: list[str], *, bits: int) -> QuantWeight:
    """The tensors `names` (one per layer, equal shapes) as one stacked `QuantWeight`
    (leading layer axis), 4-bit only when every one of them is 4-bit; each layer is
    written into the stacked arrays directly (no per-layer copies to stack)."""
    b = bits_for([_type(gguf_file, nm) for nm in names], bits)
    n, k = gguf_file.tensors[names[0]].shape
    L = len(names)
    q = np.empty((L, n, k // 2) if b == 4 else (L, n, k), np.uint8 if b == 4 else np.int8)
    scale = np.empty((L, n, k // BLOCK), np.float32)
    offset = np.empty((L, n, k // BLOCK), np.float32)
    for i, nm in enumerate(names):
        tensor_levels(gguf_file, nm, bits=b, out=(q[i], scale[i], offset[i]))
    return QuantWeight(jnp.asarray(q), jnp.asarray(scale), jnp.asarray(offset), b)
