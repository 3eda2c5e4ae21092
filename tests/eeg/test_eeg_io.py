"""Loader round trip through EDF files written with MNE (requires mne + edfio)."""

import jax
import jax.numpy as jnp
import mne
import numpy as np
import pytest

from jaxlab import eeg


@pytest.fixture(scope="module")
def tiny():
    return eeg.simulate(eeg.SimulationConfig(n_subjects=3, block_seconds=4.0),
                        key=jax.random.key(0), dtype=jnp.float64)


def test_edf_round_trip(tiny, tmp_path):
    paths = {}
    for s in range(3):
        for e in (0, 1):
            for c in (0, 1):
                p = tmp_path / f"sub{s}_ses{e}_cond{c}.edf"
                mne.export.export_raw(str(p), eeg.raw_from_block(tiny, s, e, c), fmt="edf",
                                      verbose="error")
                paths[(s, e, c)] = p
    back = eeg.read_dataset(paths, np.asarray(tiny.group), dtype=jnp.float64)
    assert back.ch_names == tiny.ch_names and back.sfreq == tiny.sfreq
    assert back.signals.shape == tiny.signals.shape
    # EDF stores 16-bit integers: error below one quantisation step of each channel's range
    step = (np.ptp(np.asarray(tiny.signals), axis=-1, keepdims=True) / 65535) * 1.01
    assert np.all(np.abs(np.asarray(back.signals - tiny.signals)) <= step + 1e-3)


def test_loader_bad_inputs(tiny):
    raws = {(s, e, c): eeg.raw_from_block(tiny, s, e, c)
            for s in range(3) for e in (0, 1) for c in (0, 1)}
    group = np.asarray(tiny.group)
    odd = dict(raws)
    odd[(1, 1, 0)] = raws[(1, 1, 0)].copy().resample(64.0, verbose="error")
    with pytest.raises(ValueError, match="sampling rate"):
        eeg.dataset_from_raws(odd, group)
    with pytest.raises(ValueError, match="unknown channel"):
        eeg.dataset_from_raws(raws, group, ch_names=("Fz", "Cz", "Oz"))
    dropped = dict(raws)
    dropped[(2, 1, 1)] = raws[(2, 1, 1)].copy().drop_channels(["Pz"])
    with pytest.raises(ValueError, match="'Pz' not found"):
        eeg.dataset_from_raws(dropped, group)
    with pytest.raises(ValueError, match="missing"):
        eeg.dataset_from_raws({k: v for k, v in raws.items() if k != (2, 0, 1)}, group)
    nan = dict(raws)
    bad = raws[(0, 0, 0)].copy()
    bad._data[3, 10] = np.nan
    nan[(0, 0, 0)] = bad
    with pytest.raises(ValueError, match="NaN"):
        eeg.dataset_from_raws(nan, group)
