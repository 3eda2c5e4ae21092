"""Reading GGUF files: metadata, tensors and dequantisation, with validation.

GGUF is llama.cpp's single-file model format. This module parses the header
itself (bounds-checked, fast even for 262k-token vocabularies), memory-maps the
tensor data and dequantises it with the `gguf` package's numpy kernels; every way
a file can be malformed (wrong magic, truncated, tensor data beyond the end of the
file, shapes that disagree with the metadata) into a `ValueError` naming the
problem, before any array is touched.

Dequantisation goes to float32 by default: every supported block format
(Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q2_K..Q6_K, F16, BF16, F32) has at most 8
significant bits per weight plus a float16 scale, so float32 holds the
dequantised values exactly; bfloat16 (8 mantissa bits) halves the memory at the
cost of rounding the scaled values (relative error <= 2**-8), and on CPUs
XLA's bfloat16 matmuls are not faster, so float32 is the accurate and usually
the fast choice.
"""

from __future__ import annotations

import dataclasses
import mmap
import os
import struct
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

__all__ = ["GGUFFile", "read_gguf"]

_MAGIC = b"GGUF"
# Smallest valid file: magic (4) + version (4) + tensor count (8) + kv count (8).
_MIN_HEADER = 24


@dataclasses.dataclass(frozen=True)
class GGUFTensorInfo:
    """Where one tensor lives: its name, numpy shape (row-major), GGML type name."""

    name: str
    shape: tuple[int, ...]
    type_name: str


class _Cursor:
    """Bounds-checked little-endian reads from a memory map (truncation -> ValueError)."""

    def __init__(self, buf: np.ndarray, path: Path):
        self.buf, self.off, self.path = buf, 0, path

    def take(self, n: int, what: str) -> np.ndarray:
        if n < 0 or self.off + n > self.buf.size:
            raise ValueError(
                f"GGUF file {str(self.path)!r} is truncated: reading {what} needs bytes "
                f"{self.off}..{self.off + n} but the file has {self.buf.size}"
            )
        out = self.buf[self.off : self.off + n]
        self.off += n
        return out

    def scalar(self, fmt: str, what: str):
        dt = np.dtype(fmt)
        return self.take(dt.itemsize, what).view(dt)[0].item()

    def string(self, what: str) -> str:
        n = self.scalar("<u8", what)
        if n > self.buf.size:
            raise ValueError(f"GGUF file {str(self.path)!r}: {what} has impossible length {n}")
        raw = self.take(n, what).tobytes()
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError:
            return raw.decode("utf-8", errors="replace")


# GGUF metadata value types -> numpy dtypes (8 = string, 9 = array).
_VALUE_TYPES = {
    0: "<u1",
    1: "<i1",
    2: "<u2",
    3: "<i2",
    4: "<u4",
    5: "<i4",
    6: "<f4",
    7: "<u1",
    10: "<u8",
    11: "<i8",
    12: "<f8",
}


def _read_strings(cur: _Cursor, count: int, key: str) -> list[str]:
    # Fast path for vocabularies (262k strings): struct on a memoryview, one bounds
    # check per string.
    mv, off, size, out = cur.buf.data, cur.off, cur.buf.size, []
    unpack = struct.Struct("<Q").unpack_from
    for _ in range(count):
        if off + 8 > size:
            break
        (n,) = unpack(mv, off)
        if off + 8 + n > size:
            break
        out.append(bytes(mv[off + 8 : off + 8 + n]).decode("utf-8", errors="replace"))
        off += 8 + n
    if len(out) != count:
        raise ValueError(f"GGUF file {str(cur.path)!r} is truncated inside string array {key!r}")
    cur.off = off
    return out


def _read_value(cur: _Cursor, vtype: int, key: str, depth: int = 0):
    if vtype == 8:
        return cur.string(f"value of {key!r}")
    if vtype == 9:
        if depth > 2:
            raise ValueError(f"GGUF file {str(cur.path)!r}: {key!r} nests arrays too deeply")
        etype = cur.scalar("<u4", f"array type of {key!r}")
        count = cur.scalar("<u8", f"array length of {key!r}")
        if etype in _VALUE_TYPES:
            dt = np.dtype(_VALUE_TYPES[etype])
            if count * dt.itemsize > cur.buf.size:
                raise ValueError(
                    f"GGUF file {str(cur.path)!r} is truncated: array {key!r} "
                    f"of {count} elements does not fit"
                )
            arr = cur.take(count * dt.itemsize, f"array {key!r}").view(dt)
            if etype == 7:
                return [_bool(cur, int(x), key) for x in arr]
            return arr.tolist()
        if count > cur.buf.size:
            raise ValueError(
                f"GGUF file {str(cur.path)!r}: array {key!r} has impossible length {count}"
            )
        if etype == 8:
            return _read_strings(cur, count, key)
        return [_read_value(cur, etype, key, depth + 1) for _ in range(count)]
    if vtype not in _VALUE_TYPES:
        raise ValueError(
            f"GGUF file {str(cur.path)!r}: metadata {key!r} has unknown value type {vtype}"
        )
    v = cur.scalar(_VALUE_TYPES[vtype], f"value of {key!r}")
    return _bool(cur, v, key) if vtype == 7 else v


def _bool(cur: _Cursor, v: int, key: str) -> bool:
    """A GGUF bool is one byte, 0 or 1; any other byte is damage, not `True`."""
    if v not in (0, 1):
        raise ValueError(f"GGUF file {str(cur.path)!r}: bool {key!r} holds byte {v} (0 or 1)")
    return bool(v)


class GGUFFile:
    """A validated, memory-mapped GGUF file (version 2 or 3).

    The header is parsed here with bounds-checked reads (fast, and every malformed
    byte becomes a `ValueError`); the `gguf` package dequantises tensor data.

    **Attributes:**
        path: the file.
        metadata: key -> Python value (str, int, float, bool, or list of those).
        tensors: tensor name -> `GGUFTensorInfo` (shape in numpy row-major order,
            i.e. 2-D weights are `(out_features, in_features)`).

    Use `array(name, dtype)` to dequantise one tensor.
    """

    def __init__(self, path: str | os.PathLike):
        import gguf

        path = Path(path)
        if not path.is_file():
            raise ValueError(f"GGUF file {str(path)!r} does not exist or is not a file")
        size = path.stat().st_size
        if size < 4:
            raise ValueError(f"GGUF file {str(path)!r} is truncated: {size} bytes")
        buf = np.memmap(path, dtype=np.uint8, mode="r")
        if buf[:4].tobytes() != _MAGIC:
            raise ValueError(
                f"{str(path)!r} is not a GGUF file: wrong magic "
                f"{buf[:4].tobytes()!r} (expected {_MAGIC!r})"
            )
        cur = _Cursor(buf, path)
        cur.take(4, "magic")
        version = cur.scalar("<u4", "version")
        if version not in (2, 3):
            raise ValueError(f"GGUF file {str(path)!r}: unsupported version {version} (2 or 3)")
        n_tensors = cur.scalar("<u8", "tensor count")
        n_kv = cur.scalar("<u8", "metadata count")
        if n_tensors > size or n_kv > size:
            raise ValueError(
                f"GGUF file {str(path)!r}: impossible counts "
                f"({n_tensors} tensors, {n_kv} metadata entries)"
            )
        metadata: dict[str, Any] = {}
        for _ in range(n_kv):
            key = cur.string("metadata key")
            vtype = cur.scalar("<u4", f"type of {key!r}")
            metadata[key] = _read_value(cur, vtype, key)
        raw_infos = []
        for _ in range(n_tensors):
            name = cur.string("tensor name")
            n_dims = cur.scalar("<u4", f"rank of {name!r}")
            if not 1 <= n_dims <= 4:
                raise ValueError(f"GGUF file {str(path)!r}: tensor {name!r} has rank {n_dims}")
            dims = [cur.scalar("<u8", f"shape of {name!r}") for _ in range(n_dims)]
            ttype = cur.scalar("<u4", f"type of {name!r}")
            offset = cur.scalar("<u8", f"offset of {name!r}")
            raw_infos.append((name, dims, ttype, offset))
        align = int(metadata.get("general.alignment", 32))
        if align <= 0 or align & (align - 1):
            raise ValueError(f"GGUF file {str(path)!r}: alignment {align} is not a power of 2")
        data_start = -(-cur.off // align) * align
        tensors: dict[str, GGUFTensorInfo] = {}
        self._raw: dict[str, tuple[Any, int, int, tuple[int, ...]]] = {}
        for name, dims, ttype, offset in raw_infos:
            try:
                qtype = gguf.GGMLQuantizationType(ttype)
            except ValueError:
                raise ValueError(
                    f"GGUF file {str(path)!r}: tensor {name!r} has unknown type id {ttype}"
                ) from None
            if qtype.name not in _SUPPORTED:
                raise ValueError(
                    f"GGUF file {str(path)!r}: tensor {name!r} has unsupported type {qtype.name}"
                )
            block, type_bytes = gguf.GGML_QUANT_SIZES[qtype]
            if dims[0] % block:
                raise ValueError(
                    f"GGUF file {str(path)!r}: tensor {name!r} row length "
                    f"{dims[0]} is not a multiple of the {qtype.name} block {block}"
                )
            n = int(np.prod(dims, dtype=np.float64))
            nbytes = n // block * type_bytes
            if offset % align:
                raise ValueError(
                    f"GGUF file {str(path)!r}: tensor {name!r} offset {offset} is not a "
                    f"multiple of the alignment {align}"
                )
            begin = data_start + offset
            if begin + nbytes > size:
                raise ValueError(
                    f"GGUF file {str(path)!r} is truncated: tensor {name!r} needs "
                    f"bytes up to {begin + nbytes} but the file has {size}"
                )
            if name in tensors:
                raise ValueError(f"GGUF file {str(path)!r}: duplicate tensor {name!r}")
            shape = tuple(int(x) for x in reversed(dims))
            tensors[name] = GGUFTensorInfo(name, shape, qtype.name)
            self._raw[name] = (qtype, begin, nbytes, shape)
        _check_layout(path, self._raw, align)
        self.path = path
        self.version = version
        self.metadata: Mapping[str, Any] = metadata
        self.tensors: Mapping[str, GGUFTensorInfo] = tensors
        self._buf = buf
        self._gguf = gguf

    def get(self, key: str, default: Any = None) -> Any:
        """Metadata value for `key`, or `default`."""
        return self.metadata.get(key, default)

    def require(self, key: str) -> Any:
        """Metadata value for `key`; ValueError naming the key if it is missing."""
        if key not in self.metadata:
            raise ValueError(f"GGUF file {str(self.path)!r} lacks metadata key {key!r}")
        return self.metadata[key]

    def array(self, name: str, dtype: Any = np.float32) -> np.ndarray:
        """Dequantise tensor `name` to a numpy array of `dtype` (float32 or bfloat16).

        **Returns:**
            array of shape `self.tensors[name].shape` (row-major; 2-D weights are
            `(out_features, in_features)`).
        """
        if name not in self._raw:
            raise ValueError(f"GGUF file {str(self.path)!r} has no tensor {name!r}")
        qtype, begin, nbytes, shape = self._raw[name]
        raw = self._buf[begin : begin + nbytes]
        if qtype.name == "F32":
            out = raw.view(np.float32)
        elif qtype.name == "F16":
            out = raw.view(np.float16).astype(np.float32)
        else:
            row_bytes = (
                nbytes // int(np.prod(shape[:-1], dtype=np.int64)) if len(shape) > 1 else nbytes
            )
            out = self._gguf.quants.dequantize(raw.reshape(-1, row_bytes), qtype)
        out = np.asarray(out, dtype=np.float32).reshape(shape)
        if not np.all(np.isfinite(out)):
            raise ValueError(
                f"GGUF file {str(self.path)!r}: tensor {name!r} ({qtype.name}) holds "
                f"{int(out.size - np.count_nonzero(np.isfinite(out)))} NaN/inf values "
                "(corrupted data or a tensor type that does not match its bytes)"
            )
        if np.dtype(dtype) != np.float32:
            import ml_dtypes

            if np.dtype(dtype) != np.dtype(ml_dtypes.bfloat16):
                raise ValueError(f"dtype must be float32 or bfloat16, got {dtype}")
            out = out.astype(ml_dtypes.bfloat16)
        return out

    def raw_rows(self, name: str) -> tuple[str, np.ndarray]:
        """Tensor `name`'s bytes as they are in the file, without decoding them.

        **Returns:**
            (type name, read-only uint8 view of the memory map of shape (rows, bytes per
            row)); rows are the product of all but the last axis of the tensor's shape
            (one row for a 1-D tensor). The sizes were checked against the file when it
            was opened.
        """
        if name not in self._raw:
            raise ValueError(f"GGUF file {str(self.path)!r} has no tensor {name!r}")
        qtype, begin, nbytes, shape = self._raw[name]
        n_rows = int(np.prod(shape[:-1], dtype=np.int64)) if len(shape) > 1 else 1
        raw = self._buf[begin : begin + nbytes]
        return qtype.name, np.asarray(raw).reshape(n_rows, nbytes // n_rows)

    def release(self, name: str) -> None:
        """Let the OS drop tensor `name`'s pages of the memory map from this process's
        resident memory (they are read again from the file if touched again); keeps a
        loader's peak RSS near what it builds rather than what it has read."""
        qtype, begin, nbytes, shape = self._raw[name]
        mm = getattr(self._buf, "_mmap", None)
        if mm is None or not hasattr(mm, "madvise") or not hasattr(mmap, "MADV_DONTNEED"):
            return
        page = mmap.PAGESIZE
        start = -(-begin // page) * page  # whole pages inside the tensor only
        end = (begin + nbytes) // page * page
        if end > start:
            mm.madvise(mmap.MADV_DONTNEED, start, end - start)


def _check_layout(path: Path, raw: Mapping[str, tuple[Any, int, int, Any]], align: int) -> None:
    """Tensor data must not overlap, and consecutive tensors must follow each other.

    GGUF writers place each tensor right after the previous one, padded to `align`; a
    larger gap or an overlap means a tensor's declared type or shape does not match the
    bytes the file holds for it (e.g. a changed type id).
    """
    spans = sorted((begin, begin + nbytes, name) for name, (_, begin, nbytes, _) in raw.items())
    for (b0, e0, n0), (b1, _, n1) in zip(spans, spans[1:], strict=False):
        if b1 < e0:
            raise ValueError(
                f"GGUF file {str(path)!r}: tensors {n0!r} and {n1!r} overlap "
                f"(bytes {b0}..{e0} and {b1}..)"
            )
        if b1 - e0 >= align:
            raise ValueError(
                f"GGUF file {str(path)!r}: {b1 - e0} unused bytes between tensors {n0!r} "
                f"and {n1!r}: the declared type or shape of {n0!r} does not match its data"
            )


_SUPPORTED = frozenset(
    [
        "F32",
        "F16",
        "BF16",
        "Q4_0",
        "Q4_1",
        "Q5_0",
        "Q5_1",
        "Q8_0",
        "Q2_K",
        "Q3_K",
        "Q4_K",
        "Q5_K",
        "Q6_K",
    ]
)


def read_gguf(path: str | os.PathLike) -> GGUFFile:
    """Open and validate a GGUF file (memory-mapped; tensors are dequantised lazily).

    **Arguments:**
        path: a `.gguf` file.

    **Returns:**
        a `GGUFFile` with `.metadata`, `.tensors` and `.array(name, dtype)`.

    **Raises:**
        ValueError: the file is missing, has the wrong magic, is truncated, or a
            tensor has an unsupported type or inconsistent size.
    """
    return GGUFFile(path)
