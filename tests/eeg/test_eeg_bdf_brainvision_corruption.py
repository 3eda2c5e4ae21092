"""Issue 30, Build 3: corruption sweeps of a BDF file and of a BrainVision recording
(.vhdr, .vmrk, .eeg), both written from their specifications (tests/eeg/raw_files.py),
read through the reader `read_dataset` uses for one file; and the path confinement of
the BrainVision header's `DataFile=` / `MarkerFile=`.

BDF: truncations at every header field boundary and a spread through the data records,
flips in every header field (the EDF layout with 24-bit samples). BrainVision: every
line of the two text files is a field (its key, and its value split at the commas of
channel and marker entries), truncated at and flipped in; the binary data file is
truncated at spread offsets (it has no header; flipped samples cannot be detected). The
default run takes a deterministic subset; `-m slow` runs every case.
"""

from __future__ import annotations

import numpy as np
import pytest

from jaxlab import eeg
from jaxlab.eeg._io import _read_raw

from ..corruption import Field, cuts, flips, report, subset, sweep
from .raw_files import CHANNELS, SFREQ, signals, write_bdf, write_brainvision
from .test_eeg_edf_corruption import _accept as _edf_accept
from .test_eeg_edf_corruption import _read as _edf_read
from .test_eeg_edf_corruption import edf_fields

# ------------------------------------------------------------------------------- BDF


@pytest.fixture(scope="module")
def bdf(tmp_path_factory):
    path = tmp_path_factory.mktemp("bdf") / "sub0_ses0_cond0.bdf"
    want = write_bdf(path, signals())
    data = path.read_bytes()
    ref = _edf_read(path)
    return path, data, edf_fields(data), ref, want


def _bdf_damages(data, fields):
    header = [f for f in fields if f.kind != "data"]
    return cuts(fields, len(data), spread=24), flips(header)


def test_bdf_reads_the_values_written(bdf):
    # oracle: the BDF scaling computed in NumPy from the stored 24-bit integers
    _, data, fields, (x, sfreq, names), want = bdf
    assert data[:8] == b"\xffBIOSEMI"
    assert (sfreq, names) == (SFREQ, CHANNELS)
    np.testing.assert_allclose(x, want, rtol=0, atol=1e-15)
    assert sum(f.label.startswith("data record") for f in fields) == want.shape[1] // SFREQ


def test_bdf_corruption_sweep_subset(bdf, record_property):
    path, data, fields, ref, _ = bdf
    c, fl = _bdf_damages(data, fields)
    damages = subset(c, 6) + subset(fl, 12)
    report(
        record_property, "eeg.bdf (subset)", sweep(path, _edf_read, damages, _edf_accept(path, ref))
    )


@pytest.mark.slow
def test_bdf_corruption_sweep_every_field(bdf, record_property):
    path, data, fields, ref, _ = bdf
    c, fl = _bdf_damages(data, fields)
    report(record_property, "eeg.bdf", sweep(path, _edf_read, c + fl, _edf_accept(path, ref)))


# ----------------------------------------------------------------------- BrainVision

_STRUCT_KEYS = {
    "codepage", "datafile", "markerfile", "dataformat", "dataorientation", "numberofchannels",
    "datapoints", "samplinginterval", "binaryformat",
}  # fmt: skip
# the comma-separated parts of a channel entry and of a marker entry
_CHANNEL = ("payload", "payload", "struct", "struct")  # name, reference, resolution, unit
_MARKER = ("payload", "payload", "struct", "struct", "struct", "value")  # type, text, position,
# size, channel, date


def text_fields(data: bytes) -> list[Field]:
    """Every line of a BrainVision text file: the identification line and section names
    ("struct"), comments and the [Comment] section ("payload"), and of each `key=value`
    the key ("struct") and the value (by key; channel and marker entries split at their
    commas)."""
    out: list[Field] = []
    at, comment = 0, False
    for i, line in enumerate(data.split(b"\n")):
        text = line.rstrip(b"\r")
        if not text.strip():
            pass
        elif i == 0:
            out.append(Field(at, len(text), "identification line"))
        elif text.startswith(b"["):
            comment = text.strip() == b"[Comment]"
            out.append(Field(at, len(text), f"section {text.decode()}"))
        elif comment or text.startswith(b";"):
            out.append(Field(at, len(text), f"comment at byte {at}", "payload"))
        else:
            key, _, value = text.partition(b"=")
            name = key.decode().strip()
            out.append(Field(at, len(key), f"key {name}"))
            start = at + len(key) + 1
            if name.lower() in _STRUCT_KEYS:
                out.append(Field(start, len(value), f"value of {name}"))
            else:
                kinds = _CHANNEL if name.startswith("Ch") else _MARKER
                for j, part in enumerate(value.split(b",")):
                    kind = kinds[j] if j < len(kinds) else "payload"
                    if part:
                        out.append(Field(start, len(part), f"part {j} of {name}", kind))
                    start += len(part) + 1
        at += len(line) + 1
    return out


def _bv_read(vhdr):
    def read(_):
        raw = _read_raw(vhdr)
        ann = raw.annotations
        return (
            raw.get_data(),
            float(raw.info["sfreq"]),
            tuple(raw.ch_names),
            tuple(np.round(ann.onset, 9)),
            tuple(ann.description),
            raw.info["meas_date"],
        )

    return read


@pytest.fixture(scope="module")
def brainvision(tmp_path_factory):
    folder = tmp_path_factory.mktemp("brainvision")
    vhdr = folder / "sub0_ses0_cond0.vhdr"
    volts, markers = write_brainvision(vhdr, signals())
    ref = _bv_read(vhdr)(vhdr)
    return vhdr, ref, volts, markers


def _bv_accept(damaged, ref):
    x0, sfreq0, names0, onsets0, texts0, date0 = ref

    def accept(damage, got, caught):
        x, sfreq, names, onsets, texts, date = got
        same_data = sfreq == sfreq0 and np.array_equal(x, x0)
        if same_data and got[2:] == ref[2:] and not caught:
            return "a field the reader does not use (read result unchanged)"
        if damage.kind == "payload" and same_data:
            return "changed characters in free text (names, marker texts, comments)"
        if damage.kind == "value" and same_data and (names, onsets, texts) == ref[2:5]:
            return "the recording date of the New Segment marker (any date is valid)"
        if (
            damage.kind == "truncate"
            and any(str(damaged) in w and "truncated BrainVision" in w for w in caught)
            and (sfreq, names) == (sfreq0, names0)
            and 0 < x.shape[1] < x0.shape[1]
            and np.array_equal(x, x0[:, : x.shape[1]])
        ):
            return "data file cut at a whole sample: RuntimeWarning naming it, the rest read"
        n = len(onsets)
        if (
            damage.kind == "truncate"
            and damaged.suffix == ".vmrk"
            and same_data
            and names == names0
            and n < len(onsets0)
            and (onsets, texts) == (onsets0[:n], texts0[:n])
            and date in (date0, None)
        ):
            return "marker file cut at a line end: it states no count, the markers before are read"
        if (
            same_data
            and got[2:] == ref[2:]
            and any("MarkerFile" in w and "not found; using" in w for w in caught)
        ):
            return "MarkerFile= names a missing file: MNE warns and reads the header's .vmrk"
        return None

    return accept


def _bv_damages(path):
    data = path.read_bytes()
    if path.suffix == ".eeg":  # no header: truncations only, at sample boundaries and not
        frame = 2 * len(CHANNELS)
        c = cuts(
            [Field(k * frame, frame, f"sample {k}") for k in (0, 1, 100, 383)], len(data), spread=24
        )
        return c, []
    fields = text_fields(data)
    return cuts(fields, len(data), spread=12), flips(fields)


def test_brainvision_reads_the_values_written(brainvision):
    # oracle: stored int16 x resolution, markers at their positions (1-based samples)
    vhdr, (x, sfreq, names, onsets, texts, date), volts, markers = brainvision
    np.testing.assert_allclose(x, volts, rtol=0, atol=1e-15)
    assert (sfreq, names) == (SFREQ, CHANNELS)
    assert list(zip(onsets, texts, strict=True)) == [(t, f"Stimulus/{d}") for t, d in markers]
    assert date is not None
    assert date.year == 2026
    fields = text_fields(vhdr.read_bytes())
    assert sum(f.label.startswith("part 3 of Ch") for f in fields) == len(CHANNELS)


@pytest.mark.parametrize("suffix", [".vhdr", ".vmrk", ".eeg"])
def test_brainvision_corruption_sweep_subset(brainvision, record_property, suffix):
    vhdr, ref, _, _ = brainvision
    path = vhdr.with_suffix(suffix)
    c, fl = _bv_damages(path)
    damages = subset(c, 4) + subset(fl, 8)
    res = sweep(path, _bv_read(vhdr), damages, _bv_accept(path, ref))
    report(record_property, f"eeg.brainvision {suffix} (subset)", res)


@pytest.mark.slow
@pytest.mark.parametrize("suffix", [".vhdr", ".vmrk", ".eeg"])
def test_brainvision_corruption_sweep_every_field(brainvision, record_property, suffix):
    vhdr, ref, _, _ = brainvision
    path = vhdr.with_suffix(suffix)
    c, fl = _bv_damages(path)
    res = sweep(path, _bv_read(vhdr), c + fl, _bv_accept(path, ref))
    report(record_property, f"eeg.brainvision {suffix}", res)


# --------------------------------------------------------------- paths in the header


def _rewrite(vhdr, key, value):
    lines = vhdr.read_text(encoding="utf-8").splitlines(keepends=True)
    lines = [f"{key}={value}\n" if ln.startswith(f"{key}=") else ln for ln in lines]
    vhdr.write_text("".join(lines), encoding="utf-8")


@pytest.mark.parametrize("key", ["DataFile", "MarkerFile"])
def test_brainvision_paths_are_confined_to_the_header_folder(tmp_path, key):
    outside = tmp_path / "outside"
    outside.mkdir()
    inner = tmp_path / "rec"
    inner.mkdir()
    vhdr = inner / "sub0.vhdr"
    write_brainvision(vhdr, signals())
    write_brainvision(outside / "secret.vhdr", signals(seed=1))
    ext = ".eeg" if key == "DataFile" else ".vmrk"
    for value in (f"../outside/secret{ext}", str(outside / f"secret{ext}")):
        _rewrite(vhdr, key, value)
        with pytest.raises(ValueError, match=f"{vhdr}: {key}=.*outside the header's folder"):
            _read_raw(vhdr)
        with pytest.raises(ValueError, match="outside the header's folder"):
            eeg.read_dataset({(0, 0, 0): vhdr}, [0])
    _rewrite(vhdr, key, f"./sub0{ext}")  # a name inside the folder, however spelled, is fine
    assert _read_raw(vhdr).ch_names == list(CHANNELS)


def test_brainvision_eeg_channel_with_a_non_voltage_unit_is_refused(tmp_path):
    # MNE reads an unknown unit as a misc channel, unscaled: 1e6 times too large as uV
    vhdr = tmp_path / "unit.vhdr"
    write_brainvision(vhdr, signals())
    text = vhdr.read_text(encoding="utf-8").replace("Ch3=F3,,0.1,µV", "Ch3=F3,,0.1,µW")
    vhdr.write_text(text, encoding="utf-8")
    with pytest.raises(ValueError, match=f"{vhdr}: EEG channel 'F3' has unit 'µW'"):
        _read_raw(vhdr)
