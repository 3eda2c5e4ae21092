"""Issue 30, Build 3: corruption sweeps of a real HDF5 file (a CREMI-layout volume written
by h5py with its defaults: superblock v0, version-1 object headers, no checksums):
truncations at every superblock / object-header / B-tree / heap field boundary and at
spread offsets through the data, and flipped bytes in every one of those fields; and of
the same volume written with `libver="latest"` (superblock v3, every metadata block
checksummed: every 4-byte word of every block flipped).

Each damaged copy goes through `em.load_em_volume` (the raw volume, contiguous uint8,
and the default labels, chunked + gzip uint64). The default run takes a deterministic
subset; `-m slow` runs every case (outcomes: tests/corruption.py). The crafted cases of
the issue (external storage, external links, virtual datasets, fill-value bombs) are in
tests/em/test_em_bad_files.py.
"""

from __future__ import annotations

import re
import struct

import h5py
import numpy as np
import pytest

from jaxlab import em

from ..corruption import Field, cuts, flips, report, subset, sweep

_KEYS = ("/", "volumes", "volumes/raw", "volumes/labels", "volumes/labels/neuron_ids")
_MESSAGES = {
    0x0000: "NIL",
    0x0001: "dataspace",
    0x0003: "datatype",
    0x0005: "fill value",
    0x0008: "layout",
    0x000B: "filter pipeline",
    0x0010: "continuation",
    0x0011: "symbol table",
    0x0012: "modification time",
}


def _words(out: list[Field], start: int, size: int, label: str, kind: str) -> None:
    """A message body as 4-byte fields (each gets its low and high byte flipped)."""
    for at in range(start, start + size, 4):
        out.append(Field(at, min(4, start + size - at), f"{label} bytes {at - start}..", kind))


def hdf5_fields(data: bytes, headers: dict[str, int], *, chunk_rank: int) -> list[Field]:
    """The file's metadata fields, walked from the format specification (superblock v0,
    v1 object headers at `headers`' addresses, v1 B-tree nodes, local heaps, symbol table
    nodes found by their signatures), plus each dataset's stored data ("data")."""
    out: list[Field] = []
    at = 0
    for size, what in [(8, "signature"), (1, "superblock version"),
                       (1, "free-space version"), (1, "root symbol table version"),
                       (1, "reserved"), (1, "shared header version"), (1, "offset size"),
                       (1, "length size"), (1, "reserved 2"), (2, "group leaf K"),
                       (2, "group internal K"), (4, "consistency flags"), (8, "base address"),
                       (8, "free-space address"), (8, "EOF address"), (8, "driver address"),
                       (8, "root link name offset"), (8, "root object header address"),
                       (4, "root cache type"), (4, "root reserved"),
                       (16, "root scratch pad")]:  # fmt: skip
        kind = "payload" if "reserved" in what or "scratch" in what else "struct"
        out.append(Field(at, size, f"superblock {what}", kind))
        at += size
    for key, addr in headers.items():
        label = f"object header of {key!r}"
        version, _, n_msgs, _, size = struct.unpack_from("<BBHII", data, addr)
        assert version == 1, (key, version)
        for off, width, what in [(0, 1, "version"), (2, 2, "message count"),
                                 (4, 4, "reference count"), (8, 4, "size")]:  # fmt: skip
            out.append(Field(addr + off, width, f"{what} of {label}"))
        at, end = addr + 16, addr + 16 + size
        for _ in range(n_msgs):
            if at + 8 > end:
                break
            mtype, msize, _ = struct.unpack_from("<HHB", data, at)
            name = _MESSAGES.get(mtype, f"type {mtype:#x}")
            out.append(Field(at, 2, f"{name} message type in {label}"))
            out.append(Field(at + 2, 2, f"{name} message size in {label}"))
            out.append(Field(at + 4, 1, f"{name} message flags in {label}"))
            kind = {"NIL": "payload", "modification time": "value"}.get(name, "struct")
            _words(out, at + 8, msize, f"{name} message of {label}", kind)
            at += 8 + msize
    for m in re.finditer(b"TREE", data):
        at = m.start()
        node_type, _, used = struct.unpack_from("<BBH", data, at + 4)
        # group nodes: keys are heap offsets; chunk nodes: size, filter mask, offsets
        key = (
            [(8, "name offset")]
            if node_type == 0
            else [(4, "chunk size"), (4, "filter mask")]
            + [(8, f"offset {d}") for d in range(chunk_rank + 1)]
        )
        parts = [(4, "signature"), (1, "node type"), (1, "level"), (2, "entries used"),
                 (8, "left sibling"), (8, "right sibling")]  # fmt: skip
        for i in range(used):
            parts += [(n, f"{w} of key {i}") for n, w in key] + [(8, f"child {i}")]
        parts += [(n, f"{w} of key {used}") for n, w in key]
        for size, what in parts:
            out.append(Field(at, size, f"{what} of the TREE node at {m.start()}"))
            at += size
    for sig, parts in {
        b"HEAP": [(4, "signature"), (1, "version"), (3, "reserved"), (8, "data size"),
                  (8, "free list offset"), (8, "data address")],
        b"SNOD": [(4, "signature"), (1, "version"), (1, "reserved"), (2, "symbol count"),
                  (8, "entry 0 name offset"), (8, "entry 0 object header address")],
    }.items():  # fmt: skip
        for m in re.finditer(re.escape(sig), data):
            at = m.start()
            for size, what in parts:
                kind = "payload" if what == "reserved" else "struct"
                out.append(
                    Field(at, size, f"{what} of the {sig.decode()} node at {m.start()}", kind)
                )
                at += size
    return sorted(out, key=lambda f: f.start)


def _read(path):
    return em.load_em_volume(path)


def _write_volume(path, **file_kw):
    """A CREMI-layout file: contiguous uint8 raw, chunked + gzip uint64 labels."""
    raw = (np.arange(4 * 16 * 16) % 251).astype(np.uint8).reshape(4, 16, 16)
    labels = (np.arange(4 * 16 * 16) // 37).astype(np.uint64).reshape(4, 16, 16)
    with h5py.File(path, "w", **file_kw) as f:
        f.create_dataset("volumes/raw", data=raw)
        f.create_dataset(
            "volumes/labels/neuron_ids", data=labels, chunks=(1, 16, 16), compression="gzip"
        )
    got = _read(path)
    np.testing.assert_array_equal(got[0], raw / np.float32(255))
    np.testing.assert_array_equal(got[1], labels)
    with h5py.File(path, "r") as f:
        headers = {k: h5py.h5o.get_info(f[k].id).addr for k in _KEYS}
        stored = [(f["volumes/raw"].id.get_offset(), raw.nbytes, "data of 'volumes/raw'")]
        f["volumes/labels/neuron_ids"].id.chunk_iter(
            lambda c: stored.append((c.byte_offset, c.size, f"chunk {c.chunk_offset} of labels"))
        )
    return got, headers, [Field(off, size, what, "data") for off, size, what in stored]


@pytest.fixture(scope="module")
def real(tmp_path_factory):
    path = tmp_path_factory.mktemp("hdf5") / "sample_C.hdf"
    got, headers, stored = _write_volume(path)
    data = path.read_bytes()
    fields = hdf5_fields(data, headers, chunk_rank=3) + stored[:1]
    return path, data, fields, got


# signatures of the checksummed metadata blocks of the newer format (object headers,
# chunk indexes, B-tree v2, fractal heaps, free-space managers, shared messages)
_BLOCKS = (
    b"OHDR", b"OCHK", b"FAHD", b"FADB", b"EAHD", b"EAIB", b"EASB", b"EADB", b"BTHD",
    b"BTIN", b"BTLF", b"FRHP", b"FHDB", b"FHIB", b"FSHD", b"FSSE", b"SMTB", b"SMLI",
)  # fmt: skip


def hdf5_latest_fields(data: bytes, stored: list[Field]) -> list[Field]:
    """A `libver="latest"` file (superblock v3, every metadata block checksummed): the
    superblock's fields, then every 4-byte word of every metadata block (found by its
    signature; a block ends at the next one, the last at the last non-zero byte before
    the first data)."""
    out, at = [], 0
    for size, what in [(8, "signature"), (1, "version"), (1, "offset size"),
                       (1, "length size"), (1, "flags"), (8, "base address"),
                       (8, "extension address"), (8, "EOF address"),
                       (8, "root object header address"), (4, "checksum")]:  # fmt: skip
        out.append(Field(at, size, f"superblock {what}"))
        at += size
    assert data[8] == 3, data[8]
    first_data = min(f.start for f in stored)
    end = len(data[:first_data].rstrip(b"\0"))
    starts = sorted(m.start() for sig in _BLOCKS for m in re.finditer(re.escape(sig), data[:end]))
    for k, start in enumerate(starts):
        stop = starts[k + 1] if k + 1 < len(starts) else end
        sig = data[start : start + 4].decode()
        for w in range(start, stop, 4):
            label = f"bytes {w - start}.. of the {sig} block at {start}"
            out.append(Field(w, min(4, stop - w), label))
    return out


@pytest.fixture(scope="module")
def latest(tmp_path_factory):
    path = tmp_path_factory.mktemp("hdf5") / "sample_C_v3.hdf"
    got, _, stored = _write_volume(path, libver="latest")
    data = path.read_bytes()
    return path, data, hdf5_latest_fields(data, stored) + stored, got


def _accept(ref):
    raw0, labels0 = ref

    def accept(damage, got, caught):
        raw, labels = got
        same = np.array_equal(raw, raw0) and labels is not None and np.array_equal(labels, labels0)
        if same and not caught:
            return "a field the reader does not use (read result unchanged)"
        return None

    return accept


def _damages(data, fields):
    header = [f for f in fields if f.kind != "data"]
    return cuts(fields, len(data), spread=24), flips(header)


def test_hdf5_field_walk_covers_the_metadata(real):
    path, data, fields, _ = real
    labels = [f.label for f in fields]
    assert sum(x.startswith("signature of the TREE") for x in labels) >= 3  # groups + chunks
    assert sum("dataspace message type" in x for x in labels) == 2
    assert sum("layout message type" in x for x in labels) == 2
    assert any("filter pipeline" in x for x in labels)  # the gzip labels
    assert all(f.start >= 0 and f.start + f.size <= len(data) for f in fields)


def test_hdf5_corruption_sweep_subset(real, record_property):
    path, data, fields, ref = real
    c, fl = _damages(data, fields)
    damages = subset(c, 6) + subset(fl, 24)
    report(record_property, "em.hdf5 (subset)", sweep(path, _read, damages, _accept(ref)))


@pytest.mark.slow
def test_hdf5_corruption_sweep_every_field(real, record_property):
    path, data, fields, ref = real
    c, fl = _damages(data, fields)
    report(record_property, "em.hdf5", sweep(path, _read, c + fl, _accept(ref)))


# ------------------------------------------- what the sweep found (each failed before)


def _chunked(path, direct=(), **kw):
    """A CREMI-layout file with chunked labels; `direct`: (chunk offset, bytes, filter
    mask) written with `write_direct_chunk` in the same session (a chunk's own size)."""
    labels = (np.arange(4 * 16 * 16) // 37).astype(np.uint64).reshape(4, 16, 16)
    with h5py.File(path, "w") as f:
        f.create_dataset("volumes/raw", data=np.zeros((4, 16, 16), np.uint8))
        d = f.create_dataset("volumes/labels/neuron_ids", data=labels, chunks=(1, 16, 16), **kw)
        for offset, stored, mask in direct:
            d.id.write_direct_chunk(offset, stored, filter_mask=mask)
    return labels


def test_chunk_key_that_no_longer_sorts_is_refused(tmp_path):
    # the element-offset slot of chunk 0's key (always 0) made huge: the listing still
    # finds the chunk, the read's lookup does not and returned fill values for it
    path = tmp_path / "key.h5"
    labels = _chunked(path, compression="gzip")
    data = bytearray(path.read_bytes())
    tree = next(
        m.start() for m in re.finditer(b"TREE", data) if data[m.start() + 4] == 1
    )  # the chunk index (node type 1)
    data[tree + 24 + 8 + 8 * labels.ndim + 7] ^= 0xFF
    path.write_bytes(bytes(data))
    with pytest.raises(ValueError, match=f"{path}.*lookup by its coordinates"):
        em.load_em_volume(path)


def test_chunk_whose_filter_mask_skips_gzip_is_refused(tmp_path):
    import zlib

    path = tmp_path / "mask.h5"
    plane = _chunked(tmp_path / "plain.h5")[1].tobytes()
    _chunked(path, [((1, 0, 0), zlib.compress(plane), 1)], compression="gzip")
    with pytest.raises(ValueError, match=f"{path}.*filter mask 0x1 over 1 filters"):
        em.load_em_volume(path)  # compressed bytes marked "gzip skipped" read as garbage
    labels = _chunked(path, [((1, 0, 0), plane, 1)], compression="gzip")
    _, got = em.load_em_volume(path)  # the same mask on raw bytes is legitimate
    np.testing.assert_array_equal(got, labels)


def test_uncompressed_chunk_of_the_wrong_size_is_refused(tmp_path):
    # what a lost filter-pipeline message looks like: compressed chunks, no filter
    import zlib

    path = tmp_path / "size.h5"
    plane = _chunked(tmp_path / "plain.h5")[2].tobytes()
    _chunked(path, [((2, 0, 0), zlib.compress(plane), 0)])
    with pytest.raises(ValueError, match=f"{path}.*45 bytes for a chunk of 2048"):
        em.load_em_volume(path)


def test_listed_name_that_a_lookup_misses_is_refused(tmp_path):
    # a damaged key of the labels group's name index: the default (optional) labels
    # silently read as absent before
    path = tmp_path / "group.h5"
    _chunked(path)
    with h5py.File(path, "r") as f:
        addr = h5py.h5o.get_info(f["volumes/labels"].id).addr
    data = bytearray(path.read_bytes())
    # the group's symbol table message (type 0x11) gives its B-tree address
    at = addr + 16
    while struct.unpack_from("<H", data, at)[0] != 0x11:
        at += 8 + struct.unpack_from("<H", data, at + 2)[0]
    (tree,) = struct.unpack_from("<Q", data, at + 8)
    assert data[tree : tree + 5] == b"TREE\x00"
    data[tree + 24] ^= 0xFF  # key 0: the heap offset of the name bounding the child
    path.write_bytes(bytes(data))
    with pytest.raises(ValueError, match=f"{path}.*lists 'neuron_ids'.*damaged group index"):
        em.load_em_volume(path)


@pytest.mark.parametrize(
    ("raw", "labels", "message"),
    [
        (np.array([[[b"a", b"b"]]], object), None, "expected an integer or float image"),
        (np.full((2, 4, 4), np.nan, np.float32), None, "expected finite values"),
        (np.zeros((2, 2, 4, 4), np.uint8), None, "expected a 2-D image or 3-D stack"),
        (np.zeros((2, 4, 4), np.uint8), np.zeros((2, 4, 4), np.float32), "integer dtype"),
        (np.zeros((2, 4, 4), np.uint8), np.zeros((2, 4, 5), np.uint32), "does not match"),
    ],
)
def test_unusable_contents_are_refused_naming_the_file(tmp_path, raw, labels, message):
    path = tmp_path / "contents.h5"
    with h5py.File(path, "w") as f:
        kind = h5py.string_dtype() if raw.dtype == object else None
        f.create_dataset("volumes/raw", data=raw, dtype=kind)
        if labels is not None:
            f.create_dataset("volumes/labels/neuron_ids", data=labels)
    with pytest.raises(ValueError, match=f"{path}.*{message}"):
        em.load_em_volume(path)


def test_hdf5_latest_field_walk_covers_the_metadata(latest):
    _, data, fields, _ = latest
    blocks = {f.label.split(" of the ")[1][:4] for f in fields if " block at " in f.label}
    assert {"OHDR", "FAHD", "FADB"} <= blocks  # object headers and the labels' chunk index
    assert sum(f.label.startswith("bytes 0.. of the OHDR") for f in fields) == len(_KEYS)


def test_hdf5_latest_corruption_sweep_subset(latest, record_property):
    path, data, fields, ref = latest
    c, fl = _damages(data, fields)
    damages = subset(c, 4) + subset(fl, 16)
    report(record_property, "em.hdf5 v3 (subset)", sweep(path, _read, damages, _accept(ref)))


@pytest.mark.slow
def test_hdf5_latest_corruption_sweep_every_field(latest, record_property):
    path, data, fields, ref = latest
    c, fl = _damages(data, fields)
    report(record_property, "em.hdf5 v3", sweep(path, _read, c + fl, _accept(ref)))
