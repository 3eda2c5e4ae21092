"""Issue 30, Build 3: a corruption sweep of a real EDF file (written by MNE's exporter,
one 4 s block of the tiny simulated data set): truncations at every header field
boundary and a spread through the data records, and flipped bytes in every header field.

Each damaged copy goes through the reader `read_dataset` uses for one file (the header
check, then MNE). The default run takes a deterministic subset; `-m slow` runs every case
(outcomes: tests/corruption.py).
"""

from __future__ import annotations

import mne
import numpy as np
import pytest

from jaxlab import eeg
from jaxlab.eeg._io import _read_raw

from ..corruption import Field, cuts, flips, report, subset, sweep
from .edf_blocks import tiny_dataset

# (name, width, kind) of the fixed header, then of each per-signal array
_FIXED = [
    ("version", 8, "struct"),
    ("patient", 80, "payload"),
    ("recording", 80, "payload"),
    ("start date", 8, "struct"),
    ("start time", 8, "struct"),
    ("header bytes", 8, "struct"),
    ("reserved", 44, "payload"),
    ("n_records", 8, "struct"),
    ("record duration", 8, "struct"),
    ("n_signals", 4, "struct"),
]
_SIGNAL = [
    ("label", 16, "payload"),
    ("transducer", 80, "payload"),
    ("physical dimension", 8, "struct"),
    ("physical_min", 8, "struct"),
    ("physical_max", 8, "struct"),
    ("digital_min", 8, "struct"),
    ("digital_max", 8, "struct"),
    ("prefiltering", 80, "payload"),
    ("samples_per_record", 8, "struct"),
    ("reserved", 32, "payload"),
]


def edf_fields(data: bytes) -> list[Field]:
    out, off = [], 0
    for name, width, kind in _FIXED:
        out.append(Field(off, width, name, kind))
        off += width
    ns = int(data[252:256].decode().strip())
    for name, width, kind in _SIGNAL:
        for i in range(ns):
            out.append(Field(off, width, f"{name}[{i}]", kind))
            off += width
    n_records = int(data[236:244].decode().strip())
    record = (len(data) - off) // n_records
    for r in range(n_records):
        out.append(Field(off + r * record, record, f"data record {r}", "data"))
    return out


def _read(path):
    raw = _read_raw(path)
    return raw.get_data(), float(raw.info["sfreq"]), tuple(raw.ch_names)


@pytest.fixture(scope="module")
def real(tmp_path_factory):
    path = tmp_path_factory.mktemp("edf") / "sub0_ses0_cond1.edf"
    raw = eeg.raw_from_block(tiny_dataset(), 0, 0, 1)
    mne.export.export_raw(str(path), raw, fmt="edf", verbose="error")  # as edf_blocks does
    data = path.read_bytes()
    return path, data, edf_fields(data), _read(path)


def _accept(path, ref):
    x0, sfreq0, names0 = ref

    def accept(damage, got, caught):
        x, sfreq, names = got
        same = sfreq == sfreq0 and names == names0 and np.array_equal(x, x0)
        if same and not caught:
            return "a header field the reader does not use (read result unchanged)"
        if damage.kind == "payload" and sfreq == sfreq0 and np.array_equal(x, x0):
            return "changed characters in free text (labels, patient, recording, filters)"
        if (
            damage.kind == "truncate"
            and any(f"{path}: truncated EDF file" in w for w in caught)
            and (sfreq, names) == (sfreq0, names0)
            and 0 < x.shape[1] < x0.shape[1]
            and np.array_equal(x, x0[:, : x.shape[1]])
        ):
            return "data records cut: RuntimeWarning naming the file, the complete ones read"
        return None

    return accept


def _damages(data, fields):
    header = [f for f in fields if f.kind != "data"]
    return cuts(fields, len(data), spread=24), flips(header)


def test_edf_field_walk_covers_the_file(real):
    _, data, fields, (x, _, names) = real
    assert fields[-1].start + fields[-1].size == len(data)
    # MNE's exporter adds one "EDF Annotations" signal, which the reader does not return
    assert sum(f.label.startswith("label[") for f in fields) == len(names) + 1 == x.shape[0] + 1


def test_edf_corruption_sweep_subset(real, record_property):
    path, data, fields, ref = real
    c, fl = _damages(data, fields)
    damages = subset(c, 8) + subset(fl, 10)
    report(record_property, "eeg.edf (subset)", sweep(path, _read, damages, _accept(path, ref)))


@pytest.mark.slow
def test_edf_corruption_sweep_every_field(real, record_property):
    path, data, fields, ref = real
    c, fl = _damages(data, fields)
    report(record_property, "eeg.edf", sweep(path, _read, c + fl, _accept(path, ref)))


def test_edf_plus_without_its_annotations_signal_is_refused(real, tmp_path):
    # the full sweep's label[19] case: one bit of "EDF Annotations" changed made MNE read
    # the annotation bytes as a 20th EEG channel (and drop the record times), silently
    path, data, fields, (_, _, names) = real
    (label,) = [f for f in fields if f.label == f"label[{len(names)}]"]
    assert data[label.start : label.start + label.size].strip() == b"EDF Annotations"
    damaged = tmp_path / path.name
    for at in (label.start + label.size // 2, label.start):
        flipped = bytearray(data)
        flipped[at] ^= 0x01
        damaged.write_bytes(bytes(flipped))
        with pytest.raises(
            ValueError, match=f"{damaged}: EDF\\+C file without an 'EDF Annotations'"
        ):
            _read(damaged)
    plain = bytearray(data)  # the same file declared plain EDF: any labels are valid
    plain[192:197] = b"     "
    plain[label.start + label.size // 2] ^= 0x01
    damaged.write_bytes(bytes(plain))
    x, _, got = _read(damaged)
    assert got[: len(names)] == names
    assert x.shape[0] == len(names) + 1
