"""Test helper: small BDF and BrainVision recordings written byte by byte from the
format specifications (MNE exports neither without optional packages), with the values a
reader must return computed independently in NumPy."""

from __future__ import annotations

from pathlib import Path

import numpy as np

CHANNELS = ("Fp1", "Fp2", "F3", "F4", "C3", "Cz", "C4", "P3", "P4", "O1", "O2")
SFREQ = 128
SECONDS = 3


def signals(seed: int = 0) -> np.ndarray:
    """`[channel, time]` microvolts: a 10 Hz alpha per channel plus noise."""
    rng = np.random.default_rng(seed)
    t = np.arange(SFREQ * SECONDS) / SFREQ
    phase = rng.uniform(0, 2 * np.pi, (len(CHANNELS), 1))
    return 20 * np.sin(2 * np.pi * 10 * t + phase) + 5 * rng.standard_normal(
        (len(CHANNELS), t.size)
    )


def _ascii(value, width: int) -> bytes:
    out = str(value).encode("ascii")
    assert len(out) <= width, (value, width)
    return out.ljust(width)


def write_bdf(path: Path, x_uv: np.ndarray) -> np.ndarray:
    """A plain BDF file (BioSemi: "\\xffBIOSEMI", "24BIT", 1 s records, 24-bit
    little-endian two's-complement samples). Returns what a reader must give back in
    volts: `pmin + (d - dmin) * (pmax - pmin) / (dmax - dmin)` microvolts of the stored
    digital values `d`."""
    n_ch, n_t = x_uv.shape
    dmin, dmax = -(1 << 23), (1 << 23) - 1
    pmax = float(np.ceil(np.abs(x_uv).max()))
    pmin = -pmax
    gain = (pmax - pmin) / (dmax - dmin)
    digital = np.clip(np.round((x_uv - pmin) / gain + dmin), dmin, dmax).astype(np.int64)
    n_records = n_t // SFREQ
    header = b"\xffBIOSEMI" + _ascii("X X X X", 80) + _ascii("Startdate X X X X", 80)
    header += _ascii("04.12.26", 8) + _ascii("05.30.00", 8) + _ascii(256 * (n_ch + 1), 8)
    header += _ascii("24BIT", 44) + _ascii(n_records, 8) + _ascii(1, 8) + _ascii(n_ch, 4)
    for width, value in [
        (16, None), (80, "Active Electrode"), (8, "uV"), (8, f"{pmin:g}"), (8, f"{pmax:g}"),
        (8, dmin), (8, dmax), (80, "HP: DC; LP: 104 Hz"), (8, SFREQ), (32, ""),
    ]:  # fmt: skip
        for name in CHANNELS:
            header += _ascii(name if value is None else value, width)
    assert len(header) == 256 * (n_ch + 1)
    records = digital[:, : n_records * SFREQ].reshape(n_ch, n_records, SFREQ).transpose(1, 0, 2)
    u = (records & 0xFFFFFF).astype("<u4").reshape(-1)
    body = np.stack([u & 0xFF, (u >> 8) & 0xFF, (u >> 16) & 0xFF], axis=-1).astype(np.uint8)
    path.write_bytes(header + body.tobytes())
    return (pmin + (digital[:, : n_records * SFREQ] - dmin) * gain) * 1e-6


def write_brainvision(path: Path, x_uv: np.ndarray, *, resolution: float = 0.1):
    """A BrainVision recording (.vhdr, .vmrk, .eeg: INT_16, MULTIPLEXED, DataPoints
    stated) with a "New Segment" marker and two stimulus markers. Returns the volts a
    reader must give back (stored integers x resolution x 1e-6) and the markers
    `(onset seconds, description)`."""
    n_ch, n_t = x_uv.shape
    stored = np.round(x_uv / resolution).astype("<i2")
    base = path.with_suffix("")
    path.with_suffix(".eeg").write_bytes(stored.T.tobytes())  # multiplexed: time-major
    channels = "".join(f"Ch{i + 1}={name},,{resolution:g},µV\n" for i, name in enumerate(CHANNELS))
    path.write_text(
        "Brain Vision Data Exchange Header File Version 1.0\n"
        "; Data created by the jaxlab tests\n\n"
        "[Common Infos]\n"
        "Codepage=UTF-8\n"
        f"DataFile={base.name}.eeg\n"
        f"MarkerFile={base.name}.vmrk\n"
        "DataFormat=BINARY\n"
        "; Data orientation: MULTIPLEXED=ch1,pt1, ch2,pt1 ...\n"
        "DataOrientation=MULTIPLEXED\n"
        f"NumberOfChannels={n_ch}\n"
        f"DataPoints={n_t}\n"
        "; Sampling interval in microseconds\n"
        f"SamplingInterval={1e6 / SFREQ:g}\n\n"
        "[Binary Infos]\n"
        "BinaryFormat=INT_16\n\n"
        "[Channel Infos]\n"
        "; Each entry: Ch<Channel number>=<Name>,<Reference channel name>,\n"
        '; <Resolution in "Unit">,<Unit>\n'
        f"{channels}\n"
        "[Comment]\n"
        "A small recording written from the BrainVision specification.\n",
        encoding="utf-8",
    )
    markers = [
        (0, "New Segment", ""),
        (SFREQ // 2, "Stimulus", "S  1"),
        (2 * SFREQ, "Stimulus", "S  2"),
    ]
    lines = "".join(
        f"Mk{i + 1}={kind},{desc},{pos + 1},1,0"
        + (",20261204053000000000" if i == 0 else "")
        + "\n"
        for i, (pos, kind, desc) in enumerate(markers)
    )
    path.with_suffix(".vmrk").write_text(
        "Brain Vision Data Exchange Marker File, Version 1.0\n\n"
        "[Common Infos]\n"
        "Codepage=UTF-8\n"
        f"DataFile={base.name}.eeg\n\n"
        "[Marker Infos]\n"
        "; Each entry: Mk<Marker number>=<Type>,<Description>,<Position in data points>,\n"
        "; <Size in data points>, <Channel number (0 = marker is related to all channels)>\n"
        f"{lines}",
        encoding="utf-8",
    )
    volts = stored.astype(np.float64) * resolution * 1e-6
    return volts, [(pos / SFREQ, desc) for pos, _, desc in markers[1:]]
