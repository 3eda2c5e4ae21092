"""Loaders for real recordings (P10): MNE Raw objects and EDF/BDF/BrainVision files.

MNE is an optional dependency (extra `eeg`); it is imported only when a loader is
called. Nothing is downloaded.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import jax.numpy as jnp
import numpy as np

from ._data import EEGDataset
from ._montage import STANDARD_1020, channel_indices, channel_positions

__all__ = ["dataset_from_raws", "read_dataset", "raw_from_block"]


def dataset_from_raws(raws: Mapping, group: Sequence[int], *, ch_names=None,
                      dtype=jnp.float32) -> EEGDataset:
    """Assemble an `EEGDataset` from MNE `Raw` recordings.

    **Arguments:**

    - `raws`: mapping `(subject, session, condition) -> mne.io.BaseRaw` covering every
      subject in `range(len(group))`, sessions (0 pre, 1 post), conditions (0 rest,
      1 meditation).
    - `group`: group index per subject (0 SA-TA-NA-MA, 1 Hare Krishna, 2 Breath Focus).
    - `ch_names`: channels to keep (default: the 10-20 channels present in the first
      recording, in montage order).

    **Returns:** `EEGDataset` in microvolts, every block cropped to the shortest one.

    **Raises:** `ValueError` for missing blocks, sampling rates that differ between
    recordings, channels absent from a recording or outside the 10-20 montage, NaN samples.
    """
    n_subj = len(group)
    missing = [(s, e, c) for s in range(n_subj) for e in (0, 1) for c in (0, 1)
               if (s, e, c) not in raws]
    if missing:
        raise ValueError(f"raws: missing (subject, session, condition) blocks {missing[:5]}")
    first = raws[(0, 0, 0)]
    if ch_names is None:
        present = {c.lower() for c in first.ch_names}
        ch_names = tuple(c for c in STANDARD_1020 if c.lower() in present)
        if not ch_names:
            raise ValueError(f"raws: no 10-20 channel found among {first.ch_names}")
    ch_names = tuple(ch_names)
    channel_positions(ch_names)
    sfreq = float(first.info["sfreq"])
    blocks = {}
    for k, raw in raws.items():
        if float(raw.info["sfreq"]) != sfreq:
            raise ValueError(f"raws[{k}]: sampling rate {raw.info['sfreq']} Hz differs from "
                             f"{sfreq} Hz of the first recording; resample first")
        idx = channel_indices(raw.ch_names, ch_names)
        x = raw.get_data()[idx] * 1e6  # volts -> microvolts
        if not np.all(np.isfinite(x)):
            raise ValueError(f"raws[{k}]: contains NaN or infinite samples")
        blocks[k] = x
    n_t = min(b.shape[-1] for b in blocks.values())
    signals = np.stack([np.stack([np.stack([blocks[(s, e, c)][:, :n_t] for c in (0, 1)])
                                  for e in (0, 1)]) for s in range(n_subj)])
    return EEGDataset(signals=jnp.asarray(signals, dtype), group=jnp.asarray(group),
                      sfreq=sfreq, ch_names=ch_names)


def read_dataset(paths: Mapping, group: Sequence[int], *, ch_names=None,
                 dtype=jnp.float32) -> EEGDataset:
    """Read EDF/BDF/BrainVision files (`(subject, session, condition) -> path`) with
    `mne.io.read_raw` and assemble them like `dataset_from_raws`."""
    import mne

    raws = {k: mne.io.read_raw(str(p), preload=True, verbose="error") for k, p in paths.items()}
    return dataset_from_raws(raws, group, ch_names=ch_names, dtype=dtype)


def raw_from_block(data: EEGDataset, subject: int, session: int, condition: int):
    """One block of `data` as an `mne.io.RawArray` (volts), e.g. to export it as EDF."""
    import mne

    info = mne.create_info(list(data.ch_names), data.sfreq, ch_types="eeg")
    x = np.asarray(data.signals[subject, session, condition], np.float64) * 1e-6
    return mne.io.RawArray(x, info, verbose="error")
