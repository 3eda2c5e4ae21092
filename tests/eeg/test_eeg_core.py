"""Tests for jaxlab.eeg: oracles are scipy.signal, sklearn.metrics, pyriemann and
analytic facts (sinusoid power, filter gain, covariance identities)."""

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pyriemann.tangentspace
import pytest
import scipy.signal
import sklearn.metrics

from jaxlab import eeg

try:  # pyriemann >= 0.12
    from pyriemann.geometry.mean import gmean as _gmean
except ImportError:  # 0.11 (our lower bound)
    from pyriemann.utils.mean import gmean as _gmean


def _sine(freq, sfreq=128.0, seconds=8.0, amp=1.0):
    t = np.arange(int(sfreq * seconds)) / sfreq
    return jnp.asarray(amp * np.sin(2 * np.pi * freq * t))


@pytest.mark.parametrize(("freq", "band"), [(6.0, 1), (10.0, 2), (20.0, 3), (2.5, 0)])
def test_band_power_of_sinusoid(freq, band):
    x = _sine(freq, amp=2.0)
    freqs, psd = eeg.welch(x, 128.0, nperseg=128)
    bp = eeg.band_powers(freqs, psd)
    assert int(jnp.argmax(bp)) == band
    # a sinusoid of amplitude A has power A^2/2, concentrated in its band
    np.testing.assert_allclose(float(bp[band]), 2.0, rtol=0.05)
    assert float(eeg.relative_powers(bp)[band]) > 0.95


def test_welch_matches_scipy(getkey):
    x = jax.random.normal(getkey(), (3, 1000))
    f, p = eeg.welch(x, 250.0, nperseg=128)
    f_ref, p_ref = scipy.signal.welch(np.asarray(x), fs=250.0, nperseg=128)
    np.testing.assert_allclose(np.asarray(f), f_ref)
    np.testing.assert_allclose(np.asarray(p), p_ref, rtol=1e-8)


def test_welch_jit_equals_eager_and_vmap_equals_loop(getkey):
    x = jax.random.normal(getkey(), (4, 512))
    f = jax.jit(lambda v: eeg.welch(v, 128.0, nperseg=128)[1])
    np.testing.assert_allclose(f(x), eeg.welch(x, 128.0, nperseg=128)[1], rtol=1e-12)
    loop = jnp.stack([eeg.welch(r, 128.0, nperseg=128)[1] for r in x])
    np.testing.assert_allclose(jax.vmap(f)(x), loop, rtol=1e-12)


def test_band_power_grad_matches_finite_differences():
    def power(a):
        return eeg.band_powers(*eeg.welch(a * _sine(10.0), 128.0, nperseg=128))[2]

    g = jax.grad(power)(1.5)
    fd = (power(1.5 + 1e-5) - power(1.5 - 1e-5)) / 2e-5
    np.testing.assert_allclose(g, fd, rtol=1e-6)
    np.testing.assert_allclose(g, 2 * 1.5 / 2, rtol=0.05)  # d(A^2/2)/dA


def test_bandpass_attenuates_stopband_and_passes_passband():
    sfreq = 128.0
    for f, lo_gain, hi_gain in [(10.0, 0.95, 1.05), (0.2, 0.0, 0.05), (55.0, 0.0, 0.02)]:
        x = _sine(f, sfreq, seconds=30.0)
        y = eeg.bandpass(x, sfreq, 1.0, 40.0)
        mid = slice(len(x) // 4, 3 * len(x) // 4)
        gain = float(jnp.std(y[mid]) / jnp.std(x[mid]))
        assert lo_gain <= gain <= hi_gain, (f, gain)


def test_notch_removes_line_noise_keeps_alpha():
    x = _sine(50.0, seconds=30.0) + _sine(10.0, seconds=30.0)
    y = eeg.notch(x, 128.0, 50.0)
    freqs, psd = eeg.welch(y[640:-640], 128.0, nperseg=128)
    assert float(psd[50]) < 1e-3 * float(psd[10])


def test_epoch_indices_and_epoching():
    idx = eeg.epoch_indices(10, 4, 3)
    np.testing.assert_array_equal(idx, [[0, 1, 2, 3], [3, 4, 5, 6], [6, 7, 8, 9]])
    x = jnp.arange(2 * 10, dtype=jnp.float64).reshape(2, 10)
    ep = eeg.epoch(x, 4, 3)
    assert ep.shape == (3, 2, 4)
    np.testing.assert_array_equal(ep[1, 1], x[1, 3:7])


def test_rereference_and_amplitude_rejection():
    x = jnp.asarray(np.random.default_rng(0).normal(size=(4, 5, 64)))
    np.testing.assert_allclose(eeg.rereference(x).mean(-2), 0.0, atol=1e-12)
    y = eeg.rereference(x, [0])
    np.testing.assert_allclose(y[..., 0, :], 0.0, atol=1e-12)
    bad = x.at[2, 3, 10].set(500.0)
    np.testing.assert_array_equal(eeg.reject_amplitude(bad, 100.0), [True, True, False, True])


def test_euclidean_alignment_whitens_mean_covariance(getkey):
    a = jax.random.normal(getkey(), (6, 6))
    x = jnp.einsum("ij,njt->nit", a, jax.random.normal(getkey(), (20, 6, 200)))
    aligned = eeg.euclidean_alignment(x)
    np.testing.assert_allclose(eeg.covariances(aligned).mean(0), jnp.eye(6), atol=1e-10)
    assert float(jnp.abs(eeg.covariances(x).mean(0) - jnp.eye(6)).max()) > 0.5
    # rank-deficient data (average reference): shrinkage keeps the alignment finite
    ref = eeg.rereference(x)
    assert bool(jnp.all(jnp.isfinite(eeg.euclidean_alignment(ref, shrinkage=0.05))))
    with pytest.raises(ValueError, match="shrinkage"):
        eeg.euclidean_alignment(x, shrinkage=1.0)


def test_tangent_space_and_mean_match_pyriemann(getkey):
    x = jax.random.normal(getkey(), (15, 4, 100))
    covs = eeg.covariances(x)
    m = eeg.log_euclidean_mean(covs)
    m_ref = _gmean(np.asarray(covs), metric="logeuclid")
    np.testing.assert_allclose(m, m_ref, rtol=1e-8)
    ts = pyriemann.tangentspace.TangentSpace(metric="riemann")
    ts.fit(np.asarray(covs))
    ours = eeg.tangent_space(covs, jnp.asarray(ts.reference_))
    np.testing.assert_allclose(ours, ts.transform(np.asarray(covs)), atol=1e-8)
    # congruence by the affine-invariant mean re-centres that mean exactly at the identity
    m_riem = _gmean(np.asarray(covs), metric="riemann")
    rc = eeg.recenter(covs, reference=jnp.asarray(m_riem))
    np.testing.assert_allclose(_gmean(np.asarray(rc), metric="riemann"), np.eye(4), atol=1e-6)
    # the default (log-Euclidean) reference re-centres approximately
    np.testing.assert_allclose(eeg.log_euclidean_mean(eeg.recenter(covs)), jnp.eye(4), atol=1e-2)


def test_leave_subjects_out_never_mixes_subjects(getkey):
    subject = np.repeat(np.arange(11), 7)
    folds = eeg.leave_subjects_out(subject, 4, key=getkey())
    seen = []
    for train, test in folds:
        assert not set(subject[train]) & set(subject[test])
        assert len(train) + len(test) == len(subject)
        seen.extend(np.unique(subject[test]))
    assert sorted(seen) == list(range(11))


def test_metrics_match_sklearn():
    rng = np.random.default_rng(1)
    y, p = rng.integers(0, 3, 200), rng.integers(0, 3, 200)
    np.testing.assert_allclose(
        eeg.balanced_accuracy(y, p), sklearn.metrics.balanced_accuracy_score(y, p)
    )
    np.testing.assert_allclose(eeg.macro_f1(y, p), sklearn.metrics.f1_score(y, p, average="macro"))
    m, lo, hi = eeg.fold_ci([0.6, 0.7, 0.8])
    assert m == pytest.approx(0.7)
    # t(0.975, df=2) = 4.3027; sd = 0.1; half-width = 4.3027 * 0.1 / sqrt(3)
    np.testing.assert_allclose([lo, hi], [0.7 - 0.248417, 0.7 + 0.248417], atol=1e-5)


def test_frontal_alpha_asymmetry_and_entropy():
    names = ("F3", "F4", "Cz")
    alpha = jnp.asarray([1.0, np.e, 5.0])
    np.testing.assert_allclose(eeg.frontal_alpha_asymmetry(alpha, names), 1.0)
    freqs = jnp.arange(0.0, 65.0)
    flat = jnp.where((freqs >= 1) & (freqs <= 45), 1.0, 0.0)
    np.testing.assert_allclose(eeg.spectral_entropy(freqs, flat), np.log(45.0), rtol=1e-12)
    peaked = flat.at[10].set(1e6)
    assert float(eeg.spectral_entropy(freqs, peaked)) < 0.01


def test_bad_inputs_raise():
    x = _sine(10.0)
    with pytest.raises(ValueError, match="sfreq"):
        eeg.bandpass(x, 60.0, 1.0, 40.0)  # 40 Hz above Nyquist of 60 Hz
    with pytest.raises(ValueError, match="sfreq"):
        eeg.notch(x, -5.0)
    with pytest.raises(ValueError, match="NaN"):
        eeg.bandpass(x.at[3].set(jnp.nan), 128.0, 1.0, 40.0)
    with pytest.raises(ValueError, match="not found"):
        eeg.frontal_alpha_asymmetry(jnp.ones(3), ("F3", "Cz", "Pz"))
    with pytest.raises(ValueError, match="unknown channel"):
        eeg.channel_positions(["Fz", "XYZ"])
    with pytest.raises(ValueError, match="n_folds"):
        eeg.leave_subjects_out(np.arange(3), 5, key=jax.random.key(0))
    with pytest.raises(ValueError, match="length"):
        eeg.epoch_indices(10, 20, 1)
    with pytest.raises(ValueError, match="sfreq"):
        eeg.simulate(eeg.SimulationConfig(n_subjects=3, sfreq=64.0), key=jax.random.key(0))
    with pytest.raises(ValueError, match="name"):
        eeg.make_classifier("xgboost")


def test_random_classifiers_take_a_key():
    with pytest.raises(ValueError, match="key: the 'rf' classifier is random"):
        eeg.make_classifier("rf")
    k0, k1 = jax.random.key(0), jax.random.key(1)
    r0 = eeg.make_classifier("rf", key=k0).random_state
    assert r0 == eeg.make_classifier("rf", key=k0).random_state
    assert r0 != eeg.make_classifier("rf", key=k1).random_state
    eeg.make_classifier("lda")  # deterministic models need no key


def _theta_log_ratio_t(d):
    """t-statistic of log(meditation / rest) frontal-midline theta power over blocks."""
    fz = d.ch_names.index("Fz")
    f, p = eeg.welch(d.signals[..., fz, :], d.sfreq, nperseg=128)
    theta = eeg.band_powers(f, p)[..., 1]  # (S, session, condition)
    r = np.log(np.asarray(theta[..., 1] / theta[..., 0])).ravel()
    return r.mean() / (r.std(ddof=1) / np.sqrt(r.size))


def test_simulator_design_and_zero_effect_symmetry():
    cfg = eeg.SimulationConfig(n_subjects=9, block_seconds=16.0)
    d = eeg.simulate(cfg, key=jax.random.key(3))
    assert d.signals.shape == (9, 2, 2, 19, 2048)
    assert sorted(np.bincount(np.asarray(d.group)).tolist()) == [3, 3, 3]
    assert bool(jnp.all(jnp.isfinite(d.signals)))
    # meditation raises frontal-midline theta power (the planted effect) ...
    assert _theta_log_ratio_t(d) > 4.0
    # ... and with every effect at zero the same statistic is at noise level
    d0 = eeg.simulate(cfg.scaled(0.0), key=jax.random.key(3))
    assert abs(_theta_log_ratio_t(d0)) < 2.5


def _log_band_power(d, ch, band):
    f, p = eeg.welch(d.signals[..., d.ch_names.index(ch), :], d.sfreq, nperseg=128)
    return np.log(np.asarray(eeg.band_powers(f, p)[..., band]))  # (S, session, condition)


def _t(r):
    r = np.asarray(r).ravel()
    return r.mean() / (r.std(ddof=1) / np.sqrt(r.size))


def test_simulator_session_shift():
    # recording shift reduced to the common post-session gain; state/trait effects on
    no_noise = dict(
        session_shift=0.0,
        session_scale=0.0,
        montage_shift=0.0,
        exponent_shift=0.0,
        alpha_peak_shift=0.0,
    )
    cfg = eeg.SimulationConfig(
        n_subjects=12, block_seconds=8.0, post_gain=0.3, trait_effect=1.0, **no_noise
    )
    d = eeg.simulate(cfg, key=jax.random.key(5))
    # delta power at Cz (1/f background only) rises by exp(2 * post_gain) after six weeks
    delta = _log_band_power(d, "Cz", 0)
    np.testing.assert_allclose((delta[:, 1] - delta[:, 0]).mean(), 0.6, atol=0.12)
    # the trait effect: post-session rest has more frontal-midline theta than pre-session
    # rest (beyond the common gain), and the post rest/meditation contrast is smaller
    theta = _log_band_power(d, "Fz", 1) - delta
    assert _t(theta[:, 1, 0] - theta[:, 0, 0]) > 3.0
    contrast = theta[..., 1] - theta[..., 0]
    assert contrast[:, 1].mean() < contrast[:, 0].mean()
    # without the trait effect and gain, post rest matches pre rest
    d0 = eeg.simulate(
        dataclasses.replace(cfg, trait_effect=0.0, post_gain=0.0), key=jax.random.key(5)
    )
    delta0 = _log_band_power(d0, "Cz", 0)
    theta0 = _log_band_power(d0, "Fz", 1) - delta0
    assert abs(_t(theta0[:, 1, 0] - theta0[:, 0, 0])) < 2.5
    assert abs((delta0[:, 1] - delta0[:, 0]).mean()) < 0.12
