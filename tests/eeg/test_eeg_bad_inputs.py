"""eeg.epoch refuses a bool length or step (the contract fuzz of issue #59: `True` was a
TypeError from inside jnp.arange as length and a step of 1 as step)."""

from __future__ import annotations

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
