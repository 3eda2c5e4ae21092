"""Test helper: a tiny simulated data set and its blocks written as EDF files with MNE."""

from __future__ import annotations

from pathlib import Path

import jax
import jax.numpy as jnp
import mne

from jaxlab import eeg


def tiny_dataset():
    """3 subjects x 2 sessions x 2 conditions of 4 s, float64 (key 0)."""
    return eeg.simulate(
        eeg.SimulationConfig(n_subjects=3, block_seconds=4.0),
        key=jax.random.key(0),
        dtype=jnp.float64,
    )


def write_edf_blocks(data, root: Path) -> dict[tuple[int, int, int], Path]:
    """Every (subject, session, condition) block of `data` as `root/sub{s}_ses{e}_cond{c}.edf`."""
    paths = {}
    for s in range(data.signals.shape[0]):
        for e in (0, 1):
            for c in (0, 1):
                p = root / f"sub{s}_ses{e}_cond{c}.edf"
                mne.export.export_raw(
                    str(p), eeg.raw_from_block(data, s, e, c), fmt="edf", verbose="error"
                )
                paths[(s, e, c)] = p
    return paths
