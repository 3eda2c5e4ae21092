"""Checks of a BrainVision header (.vhdr) that MNE's reader does not make (issue 30).

A BrainVision recording is three files: the text header (.vhdr), which names the binary
data file (`DataFile=`) and the marker file (`MarkerFile=`) relative to its own folder,
and those two. MNE joins those names to the folder as they are, so `../` or an absolute
path reads any file; and it takes the number of samples from the data file's size, so a
truncated data file reads as a shorter recording without a word.
"""

from __future__ import annotations

import math
import re
import warnings
from pathlib import Path

from ._montage import STANDARD_1020

# bytes per sample of the binary formats MNE reads
_SAMPLE_BYTES = {"INT_16": 2, "INT_32": 4, "IEEE_FLOAT_32": 4}
# the units MNE scales to volts; an empty unit means microvolts (the specification's default)
_VOLTS = {"V", "mV", "µV", "uV", "nV", ""}
_MAX_TEXT_BYTES = 1 << 24
# the identification line MNE accepts (versions 1.0 and 2.0)
_IDENTIFICATION = r"Brain ?Vision( Core| V-Amp)? Data( Exchange)? %s File,? Version [12]\.0"


def _text(path: Path, kind: str) -> str:
    """The text of a BrainVision header or marker file, after its identification line
    and completeness checks (MNE only warns, or reads on, past either)."""
    size = path.stat().st_size
    if size > _MAX_TEXT_BYTES:
        raise ValueError(f"{path}: a BrainVision {kind} file of {size} bytes is not one")
    raw = path.read_bytes()
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        text = raw.decode("latin-1")  # MNE's fallback for old (ANSI) files
    first = text.split("\n", 1)[0]
    if not re.search(_IDENTIFICATION % kind.capitalize(), first):
        raise ValueError(
            f"{path}: not a BrainVision {kind} file (first line {first[:80]!r}; truncated "
            "or damaged?)"
        )
    body = text.split("[Comment]", 1)[0]
    if body == text and not text.endswith("\n"):
        # every writer ends its lines; a cut line reads as another value (a resolution
        # "0." or an empty one, a marker position 25 for 257) without an error
        raise ValueError(f"{path}: truncated BrainVision {kind} file (its last line is cut)")
    return body


def _sections(text: str) -> dict[str, dict[str, str]]:
    """`[Section]` -> lower-case key -> value, as configparser reads it."""
    out: dict[str, dict[str, str]] = {}
    section = None
    for line in text.splitlines()[1:]:
        line = line.strip()
        if not line or line.startswith(";"):
            continue
        if line.startswith("[") and line.endswith("]"):
            section = out.setdefault(line[1:-1].strip().lower(), {})
        elif section is not None and "=" in line:
            key, value = line.split("=", 1)
            section[key.strip().lower()] = value.strip()
    return out


def _confined(path: Path, key: str, value: str) -> Path:
    """`value` (a file name from the header) resolved inside the header's folder."""
    folder = path.parent.resolve()
    target = (folder / value).resolve()
    if Path(value).is_absolute() or not target.is_relative_to(folder):
        raise ValueError(
            f"{path}: {key}={value!r} points outside the header's folder {folder}; "
            "readers are confined to it"
        )
    return target


def check_brainvision_header(path: Path) -> tuple[Path, ...]:
    """Check a .vhdr before MNE reads it; return the data and marker files it names.

    Raises `ValueError` naming the file for a `DataFile=`/`MarkerFile=` outside the
    header's folder (absolute, or with `..`), a missing data file, a data file that is not
    a whole number of samples, or that holds more samples than `DataPoints=` states, and
    a 10-20 EEG channel whose unit is not a voltage (MNE would read it unscaled, 1e6 times
    too large); warns (`RuntimeWarning`) when the data file holds fewer samples than
    `DataPoints=` states (only those are read).
    """
    cfg = _sections(_text(path, "header"))
    common = cfg.get("common infos", {})
    if "datafile" not in common:
        return ()  # MNE reports it (wrapped into a ValueError naming the file)
    data = _confined(path, "DataFile", common["datafile"])
    files = [data]
    if common.get("markerfile"):
        marker = _confined(path, "MarkerFile", common["markerfile"])
        files.append(marker)
    else:
        marker = path.with_suffix(".vmrk")
        if marker.is_file():
            raise ValueError(
                f"{path}: names no MarkerFile= but {marker.name} lies beside it (a damaged "
                "key? its markers would be dropped)"
            )
    if not data.is_file():
        raise ValueError(f"{path}: the data file {data} it names does not exist")
    if not marker.is_file():
        marker = path.with_suffix(".vmrk")  # MNE falls back to the header's sibling
    if marker.is_file() and "marker infos" not in _sections(_text(marker, "marker")):
        raise ValueError(f"{marker}: BrainVision marker file without a [Marker Infos] section")
    eeg = {c.lower() for c in STANDARD_1020}
    for value in cfg.get("channel infos", {}).values():
        props = value.split(",")
        name, unit = props[0], props[3].replace("\xc2", "") if len(props) >= 4 else ""
        if name.lower() in eeg and unit not in _VOLTS:
            raise ValueError(
                f"{path}: EEG channel {name!r} has unit {unit!r}, not a voltage "
                f"(one of {sorted(_VOLTS - {''})})"
            )
        resolution = props[2].strip() if len(props) >= 3 else ""
        try:
            r = float(resolution) if resolution else 1.0
        except ValueError:
            continue  # not a number: MNE reports it
        if not (math.isfinite(r) and r > 0):
            raise ValueError(
                f"{path}: channel {name!r} has resolution {resolution!r} (a positive number "
                "of units per stored value)"
            )
    try:
        n_channels = int(common.get("numberofchannels", ""))
    except ValueError:
        return tuple(files)  # MNE reports it
    width = _SAMPLE_BYTES.get(cfg.get("binary infos", {}).get("binaryformat", ""))
    if width is None or n_channels < 1 or common.get("dataformat") != "BINARY":
        return tuple(files)
    frame = n_channels * width
    size = data.stat().st_size
    if size % frame:
        raise ValueError(
            f"{path}: the data file {data} has {size} bytes, not a whole number of samples "
            f"of {n_channels} channels x {width} bytes (truncated or damaged)"
        )
    if common.get("datapoints"):
        try:
            stated = int(common["datapoints"])
        except ValueError:
            raise ValueError(
                f"{path}: DataPoints={common['datapoints']!r} is not a number"
            ) from None
        held = size // frame
        if held > stated:
            raise ValueError(
                f"{path}: the data file {data} holds {held} samples, more than the "
                f"DataPoints={stated} the header states"
            )
        if held < stated:
            warnings.warn(
                f"{path}: truncated BrainVision data file {data}: the header states "
                f"{stated} samples, the file holds {held}; only those are read",
                RuntimeWarning,
                stacklevel=3,
            )
    return tuple(files)
