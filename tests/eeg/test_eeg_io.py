"""Loader round trip through EDF files written with MNE (requires mne + edfio)."""

import jax
import jax.numpy as jnp
import mne
import numpy as np
import pytest

from jaxlab import eeg

from .edf_blocks import tiny_dataset, write_edf_blocks


@pytest.fixture(scope="module")
def tiny():
    return tiny_dataset()


def test_edf_round_trip(tiny, tmp_path):
    paths = write_edf_blocks(tiny, tmp_path)
    back = eeg.read_dataset(paths, np.asarray(tiny.group), dtype=jnp.float64)
    assert back.ch_names == tiny.ch_names
    assert back.sfreq == tiny.sfreq
    assert back.signals.shape == tiny.signals.shape
    # EDF stores 16-bit integers over one physical range per recording (MNE "auto"): error
    # below one quantisation step of the block-wide range
    step = (np.ptp(np.asarray(tiny.signals), axis=(-2, -1), keepdims=True) / 65535) * 1.01
    assert np.all(np.abs(np.asarray(back.signals - tiny.signals)) <= step + 1e-3)


def test_loader_bad_inputs(tiny):
    raws = {
        (s, e, c): eeg.raw_from_block(tiny, s, e, c)
        for s in range(3)
        for e in (0, 1)
        for c in (0, 1)
    }
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


def test_table_from_epochs_matches_epoching(tiny):
    # one Raw per (subject 1, post): rest block then meditation block, events every 2 s
    sfreq, length = tiny.sfreq, int(2 * tiny.sfreq)
    blocks = [eeg.raw_from_block(tiny, 1, 1, c) for c in (0, 1)]
    raw = mne.concatenate_raws([b.copy() for b in blocks], verbose="error")
    n_t = tiny.signals.shape[-1]
    onsets = np.arange(0, 2 * n_t - length + 1, length)
    codes = np.where(onsets < n_t, 1, 2)
    events = np.stack([onsets, np.zeros_like(onsets), codes], axis=1)
    import pandas as pd

    meta = pd.DataFrame(
        {"subject": 1, "session": "post", "group": int(tiny.group[1])}, index=range(len(onsets))
    )
    epochs = mne.Epochs(
        raw,
        events,
        {"rest": 1, "meditation/satanama": 2},
        tmin=0.0,
        tmax=(length - 1) / sfreq,
        baseline=None,
        preload=True,
        metadata=meta,
        verbose="error",
    )
    tab = eeg.table_from_epochs(epochs, dtype=jnp.float64)
    ref = eeg.make_epochs(tiny, seconds=2.0, reject_uv=None)
    rows = (np.asarray(ref.subject) == 1) & (np.asarray(ref.session) == 1)
    np.testing.assert_allclose(np.asarray(tab.x), np.asarray(ref.x)[rows], atol=1e-9)
    np.testing.assert_array_equal(np.asarray(tab.condition), np.asarray(ref.condition)[rows])
    assert set(np.asarray(tab.session)) == {1}
    assert set(np.asarray(tab.subject)) == {1}
    np.testing.assert_array_equal(np.asarray(tab.group), np.asarray(ref.group)[rows])
    both = eeg.concat_tables([tab, tab.select(np.asarray(tab.condition) == 1)])
    assert both.x.shape[0] == tab.x.shape[0] + int(np.sum(np.asarray(tab.condition) == 1))
    # explicit keywords override metadata; bad labels and missing groups are rejected
    other = eeg.table_from_epochs(epochs, subject=7, session=0, group="breath_focus")
    assert set(np.asarray(other.subject)) == {7}
    assert set(np.asarray(other.group)) == {2}
    with pytest.raises(ValueError, match="session: unknown label"):
        eeg.table_from_epochs(epochs, session="mid")
    epochs.metadata = None
    with pytest.raises(ValueError, match="group: not given"):
        eeg.table_from_epochs(epochs)
    with pytest.raises(ValueError, match="subject: expected one value"):
        eeg.table_from_epochs(epochs, subject=[1, 2], group=0)


def test_bids_round_trip(tmp_path):
    mne_bids = pytest.importorskip("mne_bids")
    data = eeg.simulate(
        eeg.SimulationConfig(n_subjects=3, block_seconds=2.0),
        key=jax.random.key(1),
        dtype=jnp.float64,
    )
    data = eeg.EEGDataset(
        signals=data.signals[:2], group=data.group[:2], sfreq=data.sfreq, ch_names=data.ch_names
    )
    for s in range(2):
        for e, ses in enumerate(("pre", "post")):
            for c, task in enumerate(("rest", "meditation")):
                raw = eeg.raw_from_block(data, s, e, c)
                raw.info["line_freq"] = 50.0
                path = mne_bids.BIDSPath(
                    subject=f"{s + 1:02d}", session=ses, task=task, datatype="eeg", root=tmp_path
                )
                mne_bids.write_raw_bids(
                    raw, path, format="EDF", allow_preload=True, overwrite=True, verbose="error"
                )
    tsv = tmp_path / "participants.tsv"
    lines = tsv.read_text().splitlines()
    lines = [lines[0] + "\tgroup"] + [
        line + "\t" + eeg.GROUPS[int(data.group[i])] for i, line in enumerate(lines[1:])
    ]
    tsv.write_text("\n".join(lines) + "\n")
    back = eeg.read_bids(tmp_path, dtype=jnp.float64)
    assert back.subject_names == ("01", "02")
    assert back.session_names == ("pre", "post")
    assert back.condition_names == ("rest", "meditation")
    np.testing.assert_array_equal(np.asarray(back.group), np.asarray(data.group))
    assert back.ch_names == data.ch_names
    assert back.sfreq == data.sfreq
    step = (np.ptp(np.asarray(data.signals), axis=(-2, -1), keepdims=True) / 65535) * 1.01
    assert np.all(np.abs(np.asarray(back.signals - data.signals)) <= step + 1e-3)
    # tasks mapped the other way round swap the condition axis
    swapped = eeg.read_bids(tmp_path, tasks={"meditation": 0, "rest": 1}, dtype=jnp.float64)
    np.testing.assert_allclose(np.asarray(swapped.signals[:, :, ::-1]), np.asarray(back.signals))
    with pytest.raises(ValueError, match="no EEG recording for sub-01 ses-pre task-breath"):
        eeg.read_bids(tmp_path, tasks={"rest": 0, "breath": 1})
    with pytest.raises(ValueError, match="groups: no group"):
        eeg.read_bids(tmp_path, groups={"01": 0})
    with pytest.raises(ValueError, match="groups: unknown label"):
        eeg.read_bids(tmp_path, groups={"01": 0, "02": "yoga"})
    # issue #59 (contract fuzz: subjects one longer): a repeated subject was read twice,
    # a copy that leaks across leave-subjects-out folds
    # an array of labels (NumPy str_) stored as subject_names warned "A JAX array is
    # being set as static!" (an error in the test suite); now plain strings
    some = eeg.read_bids(tmp_path, subjects=np.array(["02"]), sessions=np.array(["pre", "post"]))
    assert some.subject_names == ("02",)
    assert type(some.subject_names[0]) is str
    with pytest.raises(ValueError, match="subjects: expected distinct labels"):
        eeg.read_bids(tmp_path, subjects=["01", "02", "01"])
