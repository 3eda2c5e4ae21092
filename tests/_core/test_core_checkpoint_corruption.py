"""Issue 30, Build 3: a corruption sweep of a real checkpoint (`save_checkpoint` of a small
training state: float and int arrays of several ranks, an optax state, a scalar step):
truncations at every field boundary of its `.npy` records and a spread through the
file, and flipped bytes in every record's header (magic, version, header length, the
dtype/shape dictionary). `load_checkpoint` must raise one ValueError naming the file.

The array bytes themselves carry no checksum (`eqx.tree_serialise_leaves` writes plain
`np.save` records), so flips there are not part of the sweep: a changed weight is a
valid weight. The default run takes a deterministic subset; `-m slow` runs every case.
"""

from __future__ import annotations

import ast
import struct

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

from jaxlab._core import load_checkpoint, save_checkpoint

from ..corruption import Field, cuts, flips, report, subset, sweep


def _state():
    params = {
        "w": jnp.arange(24.0, dtype=jnp.float32).reshape(4, 6),
        "b": jnp.linspace(-1.0, 1.0, 6),
        "table": jnp.arange(10, dtype=jnp.int32),
    }
    opt = optax.adam(1e-3).init(params)
    return {"params": params, "opt": opt, "step": jnp.asarray(7, jnp.int32)}


def npy_fields(data: bytes) -> list[Field]:
    """The `.npy` records one after the other: magic, version, header length, header
    (the dict text: struct, every byte read by numpy), array bytes."""
    out, off = [], 0
    i = 0
    while off < len(data):
        assert data[off : off + 6] == b"\x93NUMPY", off
        major = data[off + 6]
        width = 2 if major == 1 else 4
        (hlen,) = struct.unpack_from("<H" if width == 2 else "<I", data, off + 8)
        header = data[off + 8 + width : off + 8 + width + hlen].decode("latin1")
        meta = ast.literal_eval(header)  # a dict literal, as numpy itself reads it
        n = int(np.prod(meta["shape"], dtype=np.int64)) * np.dtype(meta["descr"]).itemsize
        out += [
            Field(off, 6, f"magic of record {i}"),
            Field(off + 6, 2, f"version of record {i}"),
            Field(off + 8, width, f"header length of record {i}"),
        ]
        h0 = off + 8 + width
        for key in ("descr", "fortran_order", "shape"):
            at = header.index(f"'{key}'")
            end = header.index(",", header.index(":", at)) if key != "shape" else None
            end = header.index(")", at) + 1 if end is None else end
            out.append(Field(h0 + at, end - at, f"{key} of record {i}"))
        out.append(Field(h0 + hlen - 1, 1, f"header end of record {i}"))
        off = h0 + hlen
        out.append(Field(off, n, f"array bytes of record {i}", "data"))
        off += n
        i += 1
    return out


@pytest.fixture(scope="module")
def real(tmp_path_factory):
    path = tmp_path_factory.mktemp("ckpt") / "state.eqx"
    like = _state()
    save_checkpoint(path, like)
    data = path.read_bytes()
    return path, data, npy_fields(data), like


def _read(like):
    def read(path):
        return load_checkpoint(path, like)

    return read


def _accept(like):
    ref = jax.tree.leaves(like)

    def accept(damage, got, caught):
        leaves = jax.tree.leaves(got)
        same = len(leaves) == len(ref) and all(
            a.dtype == b.dtype and a.shape == b.shape and bool(jnp.all(a == b))
            for a, b in zip(leaves, ref, strict=True)
        )
        # a header rewritten to an equivalent one ("<f4" read as "<f4") loads the same
        return "a header byte numpy ignores (loaded state unchanged)" if same else None

    return accept


def _damages(data, fields):
    header = [f for f in fields if f.kind != "data"]
    return cuts(fields, len(data), spread=32), flips(header)


def test_npy_walk_covers_the_checkpoint(real):
    _, data, fields, like = real
    records = [f for f in fields if f.label.startswith("array bytes")]
    assert len(records) == len(jax.tree.leaves(like))
    assert fields[-1].start + fields[-1].size == len(data)


def test_checkpoint_corruption_sweep_subset(real, record_property):
    path, data, fields, like = real
    c, fl = _damages(data, fields)
    damages = subset(c, 10) + subset(fl, 10)
    report(record_property, "checkpoint (subset)", sweep(path, _read(like), damages, _accept(like)))


@pytest.mark.slow
def test_checkpoint_corruption_sweep_every_field(real, record_property):
    path, data, fields, like = real
    c, fl = _damages(data, fields)
    report(record_property, "checkpoint", sweep(path, _read(like), c + fl, _accept(like)))
