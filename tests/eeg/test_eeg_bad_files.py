"""Issue 30 finding 7: EEG files that lie. A truncated EDF warns (it silently shortened
every block), an empty digital range raises (values were off by ~1.7e6 uV), MNE's bare
AssertionErrors come out as one ValueError naming the file."""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np
import pytest

from jaxlab import eeg

from .edf_blocks import tiny_dataset, write_edf_blocks


@pytest.fixture(scope="module")
def recordings(tmp_path_factory):
    data = tiny_dataset()
    return data, write_edf_blocks(data, tmp_path_factory.mktemp("edf"))


def _ns(raw: bytes) -> int:
    return int(raw[252:256].decode().strip())


def _with(paths, key, tmp_path, content: bytes):
    bad = dict(paths)
    bad[key] = tmp_path / "bad.edf"
    bad[key].write_bytes(content)
    return bad


def test_truncated_edf_warns_naming_the_file(recordings, tmp_path):
    data, paths = recordings
    whole = paths[(1, 0, 1)].read_bytes()
    n_records = int(whole[236:244].decode().strip())
    header = 256 * (_ns(whole) + 1)
    record = (len(whole) - header) // n_records
    cut = header + (n_records - 1) * record + 10  # the last record half written
    bad = _with(paths, (1, 0, 1), tmp_path, whole[:cut])
    with pytest.warns(RuntimeWarning) as rec:
        out = eeg.read_dataset(bad, np.asarray(data.group), dtype=jnp.float64)
    messages = [str(w.message) for w in rec]
    assert any("bad.edf: truncated EDF file" in m for m in messages), messages
    assert any("blocks [(1, 0, 1)] are much shorter than the longest" in m for m in messages)
    assert out.signals.shape[-1] < data.signals.shape[-1]


def test_edf_digmin_equal_digmax_is_an_error(recordings, tmp_path):
    data, paths = recordings
    raw = bytearray(paths[(0, 1, 0)].read_bytes())
    ns = _ns(bytes(raw))
    base = 256 + ns * (16 + 80 + 8)
    digmin_at = base + 16 * ns + 8 * 2  # signal 2
    digmax_at = base + 24 * ns + 8 * 2
    raw[digmin_at : digmin_at + 8] = raw[digmax_at : digmax_at + 8]
    bad = _with(paths, (0, 1, 0), tmp_path, bytes(raw))
    with pytest.raises(ValueError, match=r"bad.edf: signal 2 has digital_min .* >= digital_max"):
        eeg.read_dataset(bad, np.asarray(data.group))


@pytest.mark.parametrize(
    "damage",
    ["short_header", "ns_zero", "ns_huge", "nonnumeric_ns", "garbage"],
)
def test_broken_edf_headers_raise_value_error_naming_the_file(recordings, tmp_path, damage):
    data, paths = recordings
    raw = bytearray(paths[(0, 0, 0)].read_bytes())
    if damage == "short_header":
        raw = raw[:100]
    elif damage == "ns_zero":
        raw[252:256] = b"0   "
    elif damage == "ns_huge":
        raw[252:256] = b"9999"
    elif damage == "nonnumeric_ns":
        raw[252:256] = b"ab  "
    else:
        raw = bytearray(b"\x00" * 256 + bytes(range(256)) * 8)
    bad = _with(paths, (0, 0, 0), tmp_path, bytes(raw))
    with pytest.raises(ValueError, match="bad.edf"):
        eeg.read_dataset(bad, np.asarray(data.group))


def test_mne_assertion_errors_are_wrapped(recordings, tmp_path):
    """A corrupt BrainVision header set: MNE raises bare errors; we name the file."""
    data, paths = recordings
    vhdr = tmp_path / "bad.vhdr"
    vhdr.write_text("Brain Vision Data Exchange Header File Version 1.0\n[Common Infos]\n")
    bad = dict(paths)
    bad[(1, 1, 1)] = vhdr
    with pytest.raises(ValueError, match=r"bad.vhdr: cannot read this EEG recording"):
        eeg.read_dataset(bad, np.asarray(data.group))
