"""eeg.epoch refuses a bool length or step (the contract fuzz of issue #59: `True` was a
TypeError from inside jnp.arange as length and a step of 1 as step)."""

from __future__ import annotations

import tempfile

import numpy as np
import pytest

import jaxlab.eeg as eeg


def test_epoch_refuses_bool_sizes():
    x = np.arange(20.0).reshape(2, 10)
    ep = eeg.epoch(x, 4, 3)
    assert ep.shape == (3, 2, 4)  # starts 0, 3, 6: (10 - 4) // 3 + 1 epochs
    np.testing.assert_array_equal(ep[1], x[:, 3:7])
    for kw in ({"length": True, "step": 3}, {"length": 4, "step": True}):
        with pytest.raises(ValueError, match=f"{next(k for k, v in kw.items() if v is True)}: "):
            eeg.epoch(x, **kw)


def test_fold_ci_refuses_complex_scores():
    mean, low, high = eeg.fold_ci([0.6, 0.8, 0.7])
    assert mean == pytest.approx(0.7)
    assert low < mean < high
    with pytest.raises(ValueError, match="scores: expected real"):
        eeg.fold_ci(np.array([0.6, 0.8, 0.7]) + 1j)


# Issue #59: these public functions were not in the fuzz tables; declared there, the
# public-API fuzz found NaN/inf accepted, AttributeError/TypeError/IndexError from inside,
# and a NaN row from a zero total.


def _spectrum():
    freqs = np.linspace(0.0, 64.0, 33)
    psd = np.random.default_rng(0).uniform(0.1, 1.0, (3, 33))
    return freqs, psd


def test_band_powers_and_entropy_check_freqs_and_psd():
    freqs, psd = _spectrum()
    assert eeg.band_powers(freqs, psd).shape == (3, 5)
    assert eeg.band_powers(freqs.tolist(), psd.tolist()).shape == (3, 5)  # lists convert
    bad_psd = psd.copy()
    bad_psd[1, 7] = np.nan
    for fn in (eeg.band_powers, eeg.spectral_entropy):
        with pytest.raises(ValueError, match="psd: expected finite"):
            fn(freqs, bad_psd)  # was a silent NaN band power / entropy
        with pytest.raises(ValueError, match="psd: expected values in"):
            fn(freqs, -psd)
        with pytest.raises(ValueError, match="freqs: expected an array"):
            fn(None, psd)  # was TypeError: 'NoneType' object is not subscriptable
        with pytest.raises(ValueError, match=r"psd: expected shape \(\.\.\., 32\)"):
            fn(freqs[:-1], psd)
        with pytest.raises(ValueError, match="freqs: expected 1-D"):
            fn(freqs[None, None], psd)  # was IndexError
    with pytest.raises(ValueError, match="psd: expected a positive total"):
        eeg.spectral_entropy(freqs, np.where(freqs > 40, psd, 0.0), fmin=1.0, fmax=30.0)
    with pytest.raises(ValueError, match="fmax: expected values in"):
        eeg.spectral_entropy(freqs, psd, fmin=30.0, fmax=10.0)


def test_relative_powers_and_asymmetry_refuse_what_gave_nan():
    bp = np.array([[1.0, 3.0], [2.0, 2.0]])
    np.testing.assert_allclose(eeg.relative_powers(bp), [[0.25, 0.75], [0.5, 0.5]])
    with pytest.raises(ValueError, match="bp: expected a positive total"):
        eeg.relative_powers(np.array([[1.0, 3.0], [0.0, 0.0]]))  # was 0/0 = NaN
    with pytest.raises(ValueError, match="bp: expected an array"):
        eeg.relative_powers(None)  # was TypeError from jnp.sum
    with pytest.raises(ValueError, match="alpha_power: expected values in"):
        eeg.frontal_alpha_asymmetry(np.array([0.0, 1.0]), ["F3", "F4"])  # was -inf
    with pytest.raises(ValueError, match=r"alpha_power: expected shape \(\.\.\., 3\)"):
        eeg.frontal_alpha_asymmetry(np.array([1.0, 1.0]), ["F3", "F4", "Cz"])


def test_rereference_reject_and_alignment_refuse_nan_and_empty():
    x = np.random.default_rng(1).standard_normal((4, 3, 32))
    bad = x.copy()
    bad[2, 1, 5] = np.nan
    assert eeg.reject_amplitude(x, 5.0).shape == (4,)
    with pytest.raises(ValueError, match="epochs: expected finite"):
        eeg.reject_amplitude(bad, 5.0)  # a NaN epoch was kept
    with pytest.raises(ValueError, match="x: expected finite"):
        eeg.rereference(bad)  # was a silent NaN
    with pytest.raises(ValueError, match="x: expected a non-empty"):
        eeg.rereference(x[:, :0])
    with pytest.raises(ValueError, match="epochs: expected finite"):
        eeg.euclidean_alignment(bad)  # was "c: expected finite values", naming no argument
    with pytest.raises(ValueError, match=r"reference: expected shape \(3, 3\)"):
        eeg.euclidean_alignment(x, reference=np.eye(2))
    covs = np.einsum("nct,ndt->ncd", x, x) / 32
    assert eeg.recenter(covs.tolist()).shape == (4, 3, 3)  # a list was a TypeError from @
    with pytest.raises(ValueError, match=r"reference: expected shape \(3, 3\)"):
        eeg.recenter(covs, reference=np.eye(4))


# Issue #59, the 18 public functions added to the fuzz table: each case below was, before
# its fix, a TypeError/OverflowError/IndexError from inside NumPy, JAX, MNE or sklearn, a
# ValueError naming another argument (or none), a silently wrapped index, or an accepted
# bad value; now a ValueError naming the argument.

_SIG = np.random.default_rng(2).standard_normal((2, 3, 128))
_CH3 = ("Fp1", "F3", "F4")
_FOLDS = [(np.arange(4), np.arange(4, 8))]
_FEAT = np.random.default_rng(3).standard_normal((8, 3))
_Y = np.array([0, 1] * 4)


def _tiny():
    import jax

    return eeg.simulate(
        eeg.SimulationConfig(n_subjects=3, block_seconds=1.0), key=jax.random.key(0), ch_names=_CH3
    )


def _tiny_net():
    return eeg.EEGNet(n_classes=2, f1=2, d=1, f2=2, kernel_length=4)


BAD = {
    # a bare string iterated as its letters: "channel 'F' not found"
    "channel_indices wanted=str": ("wanted", lambda: eeg.channel_indices(["Fz", "Cz"], "Fz")),
    "channel_indices ch_names=None": ("ch_names", lambda: eeg.channel_indices(None, ["Fz"])),
    "channel_positions ch_names=None": ("ch_names", lambda: eeg.channel_positions(None)),
    # 10**9 samples x length 10**3 indices: the process was killed
    "epoch_indices n_times=1e9": ("n_times", lambda: eeg.epoch_indices(10**12, 1000, 1)),
    "cross_validate inputs=None": ("inputs", lambda: eeg.cross_validate("lda", None, _Y, _FOLDS)),
    "cross_validate inputs=nan": (
        "inputs",
        lambda: eeg.cross_validate("lda", np.where(_FEAT > 1.5, np.nan, _FEAT), _Y, _FOLDS),
    ),
    "cross_validate folds=-1": (
        r"folds\[0\]",
        lambda: eeg.cross_validate("lda", _FEAT, _Y, [(np.array([-1, 0, 1]), np.arange(4, 8))]),
    ),
    "spectral_features epochs=nan": (
        "epochs",
        lambda: eeg.spectral_features(np.where(_SIG > 2, np.nan, _SIG), 128.0, _CH3),
    ),
    "spectral_features nperseg=2.5": (
        "nperseg",
        lambda: eeg.spectral_features(_SIG, 128.0, _CH3, nperseg=2.5),
    ),
    "simulate block_seconds=inf": (
        "block_seconds",
        lambda: eeg.simulate(
            eeg.SimulationConfig(n_subjects=3, block_seconds=np.inf), key=None, ch_names=_CH3
        ),
    ),
    "simulate block_seconds=None": (
        "block_seconds",
        lambda: eeg.simulate(
            eeg.SimulationConfig(n_subjects=3, block_seconds=None), key=None, ch_names=_CH3
        ),
    ),
    "simulate n_subjects=1e9": (
        "n_subjects",
        lambda: eeg.simulate(eeg.SimulationConfig(n_subjects=10**9), key=None, ch_names=_CH3),
    ),
    # a negative index wrapped to the last subject; a float one was a JAX indexing error
    "raw_from_block subject=-1": ("subject", lambda: eeg.raw_from_block(_tiny(), -1, 0, 0)),
    "raw_from_block session=1.5": ("session", lambda: eeg.raw_from_block(_tiny(), 0, 1.5, 0)),
    "raw_from_block condition=None": (
        "condition",
        lambda: eeg.raw_from_block(_tiny(), 0, 0, None),
    ),
    "dataset_from_raws group=None": ("group", lambda: eeg.dataset_from_raws({}, None)),
    "dataset_from_raws group=7": ("group", lambda: eeg.dataset_from_raws({}, [0, 7, 1])),
    "read_dataset group=None": ("group", lambda: eeg.read_dataset({}, None)),
    # a NaN line frequency was reported as "sfreq", None a TypeError from a comparison
    "preprocess_dataset line_freq=nan": (
        "line_freq",
        lambda: eeg.preprocess_dataset(_tiny(), line_freq=np.nan),
    ),
    "preprocess_dataset low=None": ("low", lambda: eeg.preprocess_dataset(_tiny(), low=None)),
    "ica_clean threshold=None": (
        "threshold",
        lambda: eeg.ica_clean(_tiny(), 2, threshold=None, key=None),
    ),
    "make_epochs seconds=nan": ("seconds", lambda: eeg.make_epochs(_tiny(), seconds=np.nan)),
    "make_epochs step_seconds=str": (
        "step_seconds",
        lambda: eeg.make_epochs(_tiny(), seconds=0.5, step_seconds="abc"),
    ),
    # labels outside [0, n_classes) were clamped by the one-hot lookup; 10**9 epochs
    # allocated a (10**9, N) epoch order
    "train_classifier y=2": (
        "y",
        lambda: eeg.train_classifier(
            _tiny_net(), _SIG[:, :, :32], np.array([0, 2]), key=None, epochs=1
        ),
    ),
    "train_classifier x=nan": (
        "x",
        lambda: eeg.train_classifier(
            _tiny_net(), np.full((2, 3, 32), np.nan), np.array([0, 1]), key=None, epochs=1
        ),
    ),
    # read_bids (issue #59, declared in the fuzz): root None or an array was a TypeError
    # from Path(), sessions None a TypeError from tuple(), subjects "01" split into the
    # labels "0" and "1" (then blamed on groups), subjects [["01"]] an unhashable TypeError
    "read_bids root=None": ("root", lambda: eeg.read_bids(None)),
    "read_bids root=array": ("root", lambda: eeg.read_bids(np.array([["/tmp"]]))),
    "read_bids sessions=None": (
        "sessions",
        lambda: eeg.read_bids(tempfile.gettempdir(), sessions=None),
    ),
    "read_bids subjects=str": (
        "subjects",
        lambda: eeg.read_bids(tempfile.gettempdir(), subjects="01"),
    ),
    "read_bids subjects=2-D": (
        "subjects",
        lambda: eeg.read_bids(tempfile.gettempdir(), subjects=np.array([["01"]])),
    ),
    "train_classifier epochs=1e9": (
        "epochs",
        lambda: eeg.train_classifier(
            _tiny_net(), _SIG[:, :, :32], np.array([0, 1]), key=None, epochs=10**9
        ),
    ),
}


@pytest.mark.parametrize("case", sorted(BAD))
def test_bad_input_is_refused_naming_the_argument(case):
    arg, call = BAD[case]
    with pytest.raises(ValueError, match=rf"(^|\W){arg}\W"):
        call()


def test_table_from_epochs_refuses_a_two_dimensional_subject():
    """A (1, 1, 2) subject array was flattened and accepted."""
    import mne

    info = mne.create_info(list(_CH3), 128.0, ch_types="eeg")
    epochs = mne.EpochsArray(
        _SIG[:, :, :64] * 1e-5,
        info,
        events=np.array([[0, 0, 1], [64, 0, 2]]),
        event_id={"rest": 1, "meditation": 2},
        verbose="error",
    )
    assert eeg.table_from_epochs(epochs, subject=[3, 3], group=1).x.shape == (2, 3, 64)
    with pytest.raises(ValueError, match="subject: expected one value or a 1-D"):
        eeg.table_from_epochs(epochs, subject=np.array([[[3, 3]]]), group=1)
