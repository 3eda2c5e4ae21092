"""Loaders for real recordings (P10): MNE Raw and Epochs objects, EDF/BDF/BrainVision
files, and BIDS folders (via mne-bids).

MNE is an optional dependency (extra `eeg`); it is imported only when a loader is
called. Nothing is downloaded.
"""

from __future__ import annotations

import configparser
import contextlib
import csv
import os
import warnings
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path

import jax.numpy as jnp
import numpy as np

from jaxlab._core import check_ids, check_instance, check_strings

from ._brainvision import check_brainvision_header
from ._data import CONDITIONS, GROUPS, SESSIONS, EEGDataset, EpochTable
from ._montage import STANDARD_1020, channel_indices, channel_positions

__all__ = [
    "dataset_from_raws",
    "read_dataset",
    "raw_from_block",
    "table_from_epochs",
    "concat_tables",
    "read_bids",
]


def _montage_channels(available, what: str) -> tuple[str, ...]:
    """The 10-20 channels present in `available`, in montage order."""
    present = {c.lower() for c in available}
    ch_names = tuple(c for c in STANDARD_1020 if c.lower() in present)
    if not ch_names:
        raise ValueError(f"{what}: no 10-20 channel found among {list(available)}")
    return ch_names


def _edf_field(header: bytes, start: int, width: int, n: int, what: str, path) -> list[float]:
    out = []
    for i in range(n):
        raw = header[start + i * width : start + (i + 1) * width].decode("ascii", "replace")
        try:
            out.append(float(raw.strip()))
        except ValueError:
            raise ValueError(
                f"{path}: EDF header field {what}[{i}] is not a number: {raw!r}"
            ) from None
    return out


def _check_edf_header(path: str | Path) -> None:
    """Check what MNE does not in an EDF/BDF header; warn when the file is truncated.

    Raises `ValueError` naming the file for a short or unparsable header, a signal whose
    digital range is empty (`digmin >= digmax`: MNE would divide by zero and return
    values off by orders of magnitude) or whose physical range is empty, a unit that is
    not printable text, and an EDF+/BDF+ file without its annotations signal; warns
    (`RuntimeWarning`) when the file holds fewer data records than its header states
    (MNE silently reads only those, which shortens every block of a data set).
    """
    path = Path(path)
    width = 3 if path.suffix.lower() == ".bdf" else 2
    size = path.stat().st_size
    with open(path, "rb") as fh:
        fixed = fh.read(256)
        if len(fixed) < 256:
            raise ValueError(f"{path}: truncated EDF header ({len(fixed)} of 256 bytes)")
        (n_records,) = _edf_field(fixed, 236, 8, 1, "n_records", path)
        (ns,) = _edf_field(fixed, 252, 4, 1, "n_signals", path)
        if ns < 1 or ns != int(ns) or 256 * (ns + 1) > size:
            raise ValueError(f"{path}: EDF header declares {ns} signals, impossible for its size")
        ns = int(ns)
        head = fixed + fh.read(256 * ns)
    base = 256 + ns * (16 + 80 + 8)
    pmin = _edf_field(head, base, 8, ns, "physical_min", path)
    pmax = _edf_field(head, base + 8 * ns, 8, ns, "physical_max", path)
    dmin = _edf_field(head, base + 16 * ns, 8, ns, "digital_min", path)
    dmax = _edf_field(head, base + 24 * ns, 8, ns, "digital_max", path)
    nsamp = _edf_field(head, base + 32 * ns + 80 * ns, 8, ns, "samples_per_record", path)
    # the unit scales every sample (MNE reads an unknown one as volts, silently): EDF
    # headers are printable ASCII; 'µ' (latin-1 or UTF-8) is allowed, writers use it
    dims = 256 + ns * (16 + 80)
    for i in range(ns):
        unit = head[dims + 8 * i : dims + 8 * (i + 1)]
        if any(not (32 <= b <= 126 or b in (0xB5, 0xC2)) for b in unit):
            raise ValueError(
                f"{path}: EDF header field physical_dimension[{i}] is not a unit: {unit!r}"
            )
    # EDF+/BDF+ (reserved field "EDF+C"/"EDF+D") must hold an annotations signal, which
    # MNE recognises by its exact label: with a damaged label it is read as one more EEG
    # channel of text bytes (and the record times are lost), without an error
    labels = [head[256 + 16 * i : 256 + 16 * (i + 1)].strip() for i in range(ns)]
    if fixed[192:196] in (b"EDF+", b"BDF+") and not any(
        lab in (b"EDF Annotations", b"BDF Annotations") for lab in labels
    ):
        raise ValueError(
            f"{path}: {fixed[192:197].decode('ascii', 'replace')} file without an "
            "'EDF Annotations' signal (required by EDF+; a damaged signal label?)"
        )
    for i in range(ns):
        if not dmin[i] < dmax[i]:
            raise ValueError(
                f"{path}: signal {i} has digital_min {dmin[i]:g} >= digital_max {dmax[i]:g} "
                "(an empty digital range: the samples cannot be scaled)"
            )
        if pmin[i] == pmax[i]:
            raise ValueError(f"{path}: signal {i} has physical_min == physical_max {pmin[i]:g}")
    record = int(sum(nsamp)) * width
    if n_records > 0 and record > 0:
        held = (size - 256 * (ns + 1)) // record
        if held < n_records:
            warnings.warn(
                f"{path}: truncated EDF file: the header states {int(n_records)} data records, "
                f"the file holds {held} complete ones; only those are read",
                RuntimeWarning,
                stacklevel=3,
            )


def _check_header(path: Path) -> tuple[Path, ...]:
    """The checks MNE does not make, by format; returns the other files the recording
    reads (BrainVision's data and marker files)."""
    suffix = path.suffix.lower()
    if suffix in (".edf", ".bdf"):
        _check_edf_header(path)
    elif suffix == ".vhdr":
        return check_brainvision_header(path)
    return ()


@contextlib.contextmanager
def _mne_errors(path, also: Sequence[Path] = ()) -> Iterator[None]:
    """MNE's reader errors (often a bare AssertionError; configparser's, a LookupError
    for an unknown codepage, NotImplementedError for an unknown format) as one
    ValueError naming the file and the files it refers to."""
    try:
        yield
    except (
        AssertionError,
        RuntimeError,
        ValueError,
        OSError,
        LookupError,
        NotImplementedError,
        ArithmeticError,
        configparser.Error,
    ) as e:
        files = f" (with {', '.join(map(str, also))})" if also else ""
        raise ValueError(
            f"{path}{files}: cannot read this EEG recording ({type(e).__name__}: {e})"
        ) from e


def _read_raw(path):
    import mne

    path = Path(path)
    also = _check_header(path)
    with _mne_errors(path, also):
        return mne.io.read_raw(str(path), preload=True, verbose="error")


def dataset_from_raws(
    raws: Mapping,
    group: Sequence[int] | np.ndarray,
    *,
    ch_names=None,
    subject_names=None,
    dtype=jnp.float32,
) -> EEGDataset:
    """Assemble an `EEGDataset` from MNE `Raw` recordings.

    **Arguments:**

    - `raws`: mapping `(subject, session, condition) -> mne.io.BaseRaw` covering every
      subject in `range(len(group))`, sessions (0 pre, 1 post), conditions (0 rest,
      1 meditation).
    - `group`: group index per subject (0 SA-TA-NA-MA, 1 Hare Krishna, 2 Breath Focus).
    - `ch_names`: channels to keep (default: the 10-20 channels present in the first
      recording, in montage order).
    - `subject_names`: optional subject labels stored in the data set.

    **Returns:** `EEGDataset` in microvolts, every block cropped to the shortest one.

    **Raises:** `ValueError` for missing blocks, sampling rates that differ between
    recordings, channels absent from a recording or outside the 10-20 montage, NaN samples,
    and a `group` that is not a non-empty 1-D array of indices in [0, 3) (never wrapped).
    """
    gids = check_ids("group", group, len(GROUPS), what="group indices")
    if gids.ndim != 1 or not gids.size:
        raise ValueError(f"group: expected (subject,) group indices, received shape {gids.shape}")
    if not isinstance(raws, Mapping):
        raise ValueError(f"raws: expected a mapping of blocks, received {type(raws).__name__}")
    n_subj = len(gids)
    missing = [
        (s, e, c) for s in range(n_subj) for e in (0, 1) for c in (0, 1) if (s, e, c) not in raws
    ]
    if missing:
        raise ValueError(
            f"raws: missing (subject, session, condition) blocks {missing[:5]} for the "
            f"{n_subj} subjects of group"
        )
    first = raws[(0, 0, 0)]
    if ch_names is None:
        ch_names = _montage_channels(first.ch_names, "raws")
    ch_names = tuple(ch_names)
    channel_positions(ch_names)
    sfreq = float(first.info["sfreq"])
    blocks = {}
    for k, raw in raws.items():
        if float(raw.info["sfreq"]) != sfreq:
            raise ValueError(
                f"raws[{k}]: sampling rate {raw.info['sfreq']} Hz differs from "
                f"{sfreq} Hz of the first recording; resample first"
            )
        idx = channel_indices(raw.ch_names, ch_names)
        x = raw.get_data()[idx] * 1e6  # volts -> microvolts
        if not np.all(np.isfinite(x)):
            raise ValueError(f"raws[{k}]: contains NaN or infinite samples")
        blocks[k] = x
    n_t = min(b.shape[-1] for b in blocks.values())
    longest = max(b.shape[-1] for b in blocks.values())
    if n_t < 0.9 * longest:
        short = [k for k, b in blocks.items() if b.shape[-1] < 0.9 * longest]
        warnings.warn(
            f"raws: blocks {short[:5]} are much shorter than the longest ({n_t} vs {longest} "
            f"samples); every block is cropped to {n_t} samples (a truncated recording?)",
            RuntimeWarning,
            stacklevel=2,
        )
    signals = np.stack(
        [
            np.stack([np.stack([blocks[(s, e, c)][:, :n_t] for c in (0, 1)]) for e in (0, 1)])
            for s in range(n_subj)
        ]
    )
    return EEGDataset(
        signals=jnp.asarray(signals, dtype),
        group=jnp.asarray(gids),
        sfreq=sfreq,
        ch_names=ch_names,
        subject_names=None if subject_names is None else tuple(subject_names),
    )


def read_dataset(
    paths: Mapping, group: Sequence[int], *, ch_names=None, dtype=jnp.float32
) -> EEGDataset:
    """Read EDF/BDF/BrainVision files (`(subject, session, condition) -> path`) with
    `mne.io.read_raw` and assemble them like `dataset_from_raws`.

    **Arguments:**

    - `paths`: mapping `(subject, session, condition) -> path` of `.edf`, `.bdf` or
      `.vhdr` files (a BrainVision header names its data and marker files, which must
      lie in the header's folder).
    - `group`, `ch_names`, `dtype`: as in `dataset_from_raws`.

    **Returns:** `EEGDataset` in microvolts.

    **Raises:** `ValueError` naming the file for a damaged or truncated header, an
    EDF+ file without its annotations signal, a BrainVision `DataFile=`/`MarkerFile=`
    outside the header's folder, a BrainVision data file that is not a whole number of
    samples, an EEG channel whose unit is not a voltage, and everything MNE or
    `dataset_from_raws` rejects. Warns (`RuntimeWarning`, naming the file) when a file
    holds fewer data records or samples than its header states (only those are read).
    """
    gids = check_ids("group", group, len(GROUPS), what="group indices")
    if gids.ndim != 1 or not gids.size:
        raise ValueError(f"group: expected (subject,) group indices, received shape {gids.shape}")
    if not isinstance(paths, Mapping):
        raise ValueError(f"paths: expected a mapping of files, received {type(paths).__name__}")
    raws = {k: _read_raw(p) for k, p in paths.items()}
    return dataset_from_raws(raws, gids, ch_names=ch_names, dtype=dtype)


def raw_from_block(data: EEGDataset, subject: int, session: int, condition: int):
    """One block of `data` as an `mne.io.RawArray` (volts), e.g. to export it as EDF.

    `subject`, `session`, `condition` are integer indices in range of `data.signals`'s
    first three axes (a negative or too large index is refused naming it, never wrapped).
    """
    import mne

    check_instance("data", data, EEGDataset)
    idx = []
    for name, v, n in zip(
        ("subject", "session", "condition"),
        (subject, session, condition),
        data.signals.shape[:3],
        strict=True,
    ):
        arr = check_ids(name, v, n, what="index")
        if arr.ndim != 0:
            raise ValueError(f"{name}: expected one integer index, received shape {arr.shape}")
        idx.append(int(arr))
    subject, session, condition = idx

    info = mne.create_info(list(data.ch_names), data.sfreq, ch_types="eeg")
    x = np.asarray(data.signals[subject, session, condition], np.float64) * 1e-6
    return mne.io.RawArray(x, info, verbose="error")


def _label_indices(values, names: Sequence[str], what: str) -> np.ndarray:
    """Map labels (indices into `names`, or the names themselves, case-insensitive)
    to integer indices; `ValueError` naming `what` for anything else."""
    lower = [n.lower() for n in names]
    out = []
    for v in np.asarray(values, dtype=object).reshape(-1):
        if isinstance(v, str):
            if v.lower() not in lower:
                raise ValueError(f"{what}: unknown label {v!r}; expected one of {tuple(names)}")
            out.append(lower.index(v.lower()))
        elif isinstance(v, int | np.integer) and 0 <= int(v) < len(names):
            out.append(int(v))
        else:
            raise ValueError(
                f"{what}: expected an index in [0, {len(names)}) or one of "
                f"{tuple(names)}, got {v!r}"
            )
    return np.asarray(out, np.int32)


def _conditions_from_events(epochs) -> np.ndarray:
    """Condition per epoch from event names: an event named (or tagged, as in
    `"meditation/satanama"`) `rest` or `meditation`."""
    by_code = {}
    for name, code in epochs.event_id.items():
        tags = [t.lower() for t in name.split("/")]
        hits = [i for i, c in enumerate(CONDITIONS) if c in tags]
        if len(hits) != 1:
            raise ValueError(
                f"condition: event {name!r} names none or several of {CONDITIONS}; "
                "pass condition= or an epochs.metadata 'condition' column"
            )
        by_code[code] = hits[0]
    return np.asarray([by_code[c] for c in epochs.events[:, 2]], np.int32)


def table_from_epochs(
    epochs,
    *,
    subject=None,
    session=None,
    condition=None,
    group=None,
    ch_names=None,
    dtype=jnp.float32,
) -> EpochTable:
    """Convert an MNE `Epochs` object into an `EpochTable` (microvolts) with per-epoch
    metadata (P10 data model).

    **Arguments:**

    - `epochs`: `mne.Epochs` / `mne.EpochsArray` (EEG channels in volts).
    - `subject`, `session`, `condition`, `group`: a scalar for every epoch or one value per
      epoch; sessions, conditions and groups may be given as indices or as names from
      `SESSIONS`, `CONDITIONS`, `GROUPS`. When omitted, the column of the same name in
      `epochs.metadata` is used; the condition may also come from the event names
      (`"rest"`, `"meditation"`, or tags such as `"meditation/breath"`). `subject` and
      `session` default to 0 when neither is given; `group` must be given. Each is a
      scalar or 1-D (a 2-D array is refused naming it).
    - `ch_names`: channels to keep (default: 10-20 channels present, montage order).

    **Returns:** `EpochTable` with `x` `(N, C, L)` and `keep` all True.

    **Raises:** `ValueError` for unknown channels or labels, wrong-length metadata, NaN.
    """
    n = len(epochs)
    meta = epochs.metadata

    def column(name, value, names, default=None):
        if value is None and meta is not None and name in meta.columns:
            value = meta[name].to_numpy()
        if value is None and name == "condition":
            return _conditions_from_events(epochs)
        if value is None and default is None:
            raise ValueError(f"{name}: not given and no epochs.metadata column {name!r}")
        value = default if value is None else value
        if isinstance(value, bytes) or np.asarray(value, dtype=object).ndim > 1:
            raise ValueError(f"{name}: expected one value or a 1-D sequence, got {value!r:.60}")
        arr = np.asarray(value, dtype=object).reshape(-1)
        if arr.size == 1:
            arr = np.repeat(arr, n)
        if arr.size != n:
            raise ValueError(f"{name}: expected one value or {n} values, got {arr.size}")
        if names is None:
            try:
                return np.asarray([int(v) for v in arr], np.int32)
            except (TypeError, ValueError) as e:
                raise ValueError(f"{name}: expected integer subject ids, got {arr[:3]}") from e
        return _label_indices(arr, names, name)

    subj = column("subject", subject, None, default=0)
    sess = column("session", session, SESSIONS, default=0)
    cond = column("condition", condition, CONDITIONS)
    grp = column("group", group, GROUPS)
    if ch_names is None:
        ch_names = _montage_channels(epochs.ch_names, "epochs")
    ch_names = tuple(ch_names)
    channel_positions(ch_names)
    x = (
        epochs.get_data(
            picks=[epochs.ch_names[i] for i in channel_indices(epochs.ch_names, ch_names)]
        )
        * 1e6
    )
    if not np.all(np.isfinite(x)):
        raise ValueError("epochs: contains NaN or infinite samples")
    return EpochTable(
        x=jnp.asarray(x, dtype),
        subject=jnp.asarray(subj),
        session=jnp.asarray(sess),
        condition=jnp.asarray(cond),
        group=jnp.asarray(grp),
        keep=jnp.ones(n, bool),
        sfreq=float(epochs.info["sfreq"]),
        ch_names=ch_names,
    )


def concat_tables(tables: Sequence[EpochTable]) -> EpochTable:
    """Stack `EpochTable`s with equal sampling rate, channels and epoch length."""
    tables = list(tables)
    if not tables:
        raise ValueError("tables: expected at least one EpochTable")
    first = tables[0]
    for i, t in enumerate(tables[1:], 1):
        if (t.sfreq, t.ch_names, t.x.shape[1:]) != (first.sfreq, first.ch_names, first.x.shape[1:]):
            raise ValueError(
                f"tables[{i}]: sampling rate, channels or epoch shape differ from tables[0]"
            )

    def cat(field):
        return jnp.concatenate([getattr(t, field) for t in tables])

    return EpochTable(
        x=cat("x"),
        subject=cat("subject"),
        session=cat("session"),
        condition=cat("condition"),
        group=cat("group"),
        keep=cat("keep"),
        sfreq=first.sfreq,
        ch_names=first.ch_names,
    )


def _participant_groups(root, group_column: str) -> dict[str, str]:
    path = root / "participants.tsv"
    if not path.is_file():
        return {}
    with open(path, newline="") as f:
        rows = list(csv.DictReader(f, delimiter="\t"))
    return {
        r["participant_id"].removeprefix("sub-"): r[group_column]
        for r in rows
        if group_column in r and r[group_column] not in (None, "", "n/a")
    }


def read_bids(
    root,
    *,
    tasks: Mapping[str, int] | None = None,
    sessions: Sequence[str] = SESSIONS,
    groups: Mapping | None = None,
    group_column: str = "group",
    subjects: Sequence[str] | None = None,
    ch_names=None,
    dtype=jnp.float32,
) -> EEGDataset:
    """Read an L-FAME-style BIDS folder into an `EEGDataset` (needs `mne-bids`).

    Each subject needs one EEG recording per (session, task); several runs of one
    (session, task) are concatenated in run order. Nothing is downloaded.

    **Arguments:**

    - `root`: the BIDS root folder (a `str` or `os.PathLike`).
    - `tasks`: BIDS task label -> condition index (default `{"rest": 0, "meditation": 1}`).
    - `sessions`: the BIDS session labels of the pre and post sessions, in that order (a
      sequence of two strings; a bare string is refused).
    - `groups`: subject label -> group (index or name from `GROUPS`); by default the
      `group_column` of `participants.tsv`.
    - `subjects`: subject labels to read (default: all, sorted; else a non-empty sequence
      of distinct strings, a bare string refused).
    - `ch_names`: channels to keep (default: 10-20 channels present, montage order).

    **Returns:** `EEGDataset` (microvolts) with `subject_names` set to the BIDS labels.

    **Raises:** `ValueError` naming the missing (subject, session, task) recording or a
    subject without a group, and for everything `dataset_from_raws` rejects.
    """
    import mne
    import mne_bids

    root = Path(check_instance("root", root, (str, os.PathLike)))
    if not root.is_dir():
        raise ValueError(f"root: BIDS folder {root} does not exist")
    tasks = {"rest": 0, "meditation": 1} if tasks is None else dict(tasks)
    if sorted(tasks.values()) != [0, 1]:
        raise ValueError(
            f"tasks: expected one task per condition 0 (rest) and 1 (meditation), got {tasks}"
        )
    sessions = tuple(str(s) for s in check_strings("sessions", sessions))
    if len(sessions) != 2:
        raise ValueError(f"sessions: expected the (pre, post) session labels, got {sessions}")
    if subjects is None:
        subjects = tuple(sorted(mne_bids.get_entity_vals(root, "subject")))
        if not subjects:
            raise ValueError(f"root: no sub-* folder in {root}")
    else:
        # plain str labels: NumPy's str_ (from an array) is an array leaf to equinox, which
        # warns when it is stored in the static subject_names
        subjects = tuple(str(s) for s in check_strings("subjects", subjects))
        if len(set(subjects)) != len(subjects):
            dup = sorted({s for s in subjects if subjects.count(s) > 1})
            raise ValueError(f"subjects: expected distinct labels, received {dup} twice or more")
    group_of = _participant_groups(root, group_column) if groups is None else dict(groups)
    missing = [s for s in subjects if s not in group_of]
    if missing:
        raise ValueError(
            f"groups: no group for subjects {missing[:5]} (give groups= or a "
            f"{group_column!r} column in participants.tsv)"
        )
    group = _label_indices([group_of[s] for s in subjects], GROUPS, "groups")
    raws = {}
    for i, sub in enumerate(subjects):
        for e, ses in enumerate(sessions):
            for task, c in tasks.items():
                paths = mne_bids.find_matching_paths(
                    root,
                    subjects=sub,
                    sessions=ses,
                    tasks=task,
                    datatypes="eeg",
                    suffixes="eeg",
                    extensions=[".edf", ".bdf", ".vhdr", ".set", ".fif"],
                )
                if not paths:
                    raise ValueError(
                        f"root: no EEG recording for sub-{sub} ses-{ses} task-{task} in {root}"
                    )
                runs = []
                for p in sorted(paths, key=lambda p: (p.run or "", str(p))):
                    also = _check_header(p.fpath)
                    with _mne_errors(p.fpath, also):
                        r = mne_bids.read_raw_bids(p, verbose="error")
                        r.load_data(verbose="error")
                    runs.append(r)
                raws[(i, e, c)] = (
                    runs[0] if len(runs) == 1 else mne.concatenate_raws(runs, verbose="error")
                )
    return dataset_from_raws(raws, group, ch_names=ch_names, subject_names=subjects, dtype=dtype)
