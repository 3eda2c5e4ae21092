"""Optional ICA cleaning (MNE): injected blinks are removed from frontal channels while a
posterior sine survives. Oracle: the known injected blink times and sine frequency."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxlab import eeg

CH = ("Fp1", "Fp2", "F3", "F4", "C3", "C4", "P3", "Pz", "O1", "O2")
SFREQ = 128.0


def _blinky_dataset(seed=0, seconds=20.0):
    """Spatially mixed 1/f background + blinks (frontal topography, known peaks) +
    a 17 Hz posterior sine; shape (1 subject, 2 sessions, 2 conditions, 10, T)."""
    rng = np.random.default_rng(seed)
    n_t = int(seconds * SFREQ)
    t = np.arange(n_t) / SFREQ
    pos = eeg.channel_positions(CH)
    freqs = np.fft.rfftfreq(n_t, 1 / SFREQ)
    white = rng.standard_normal((2, 2, len(CH), n_t))
    pink = np.fft.irfft(np.fft.rfft(white) / np.maximum(freqs, 0.5) ** 0.75, n=n_t)
    pink *= 10 / pink.std()
    mix = np.exp(-np.sum((pos[:, None] - pos[None]) ** 2, -1) / (2 * 0.3**2))
    x = np.einsum("ij,ecjt->ecit", mix / mix.sum(1, keepdims=True), pink)
    peaks = np.zeros((2, 2, n_t), bool)
    blink = np.zeros((2, 2, n_t))
    for e in range(2):
        for c in range(2):
            pk = np.arange(100, n_t - 100, int(2.5 * SFREQ))
            pk = pk + rng.integers(-30, 30, pk.shape)
            peaks[e, c, pk] = True
            for p in pk:
                blink[e, c] += 100 * np.exp(-0.5 * ((t - p / SFREQ) / 0.08) ** 2)
    topo_blink = np.exp(-np.sum((pos - np.array([0.0, 1.05])) ** 2, -1) / (2 * 0.3**2))
    topo_sine = np.exp(-np.sum((pos - np.array([0.0, -0.8])) ** 2, -1) / (2 * 0.3**2))
    x = (
        x
        + topo_blink[:, None] * blink[:, :, None]
        + topo_sine[:, None] * (4 * np.sin(2 * np.pi * 17 * t))
    )
    data = eeg.EEGDataset(
        signals=jnp.asarray(x[None]), group=jnp.asarray([0]), sfreq=SFREQ, ch_names=CH
    )
    return data, peaks, t


def _blink_locked_frontal(signals, peaks):
    z = np.asarray(signals)[0][..., :2, :]  # Fp1, Fp2
    return float(np.mean(np.abs(z.transpose(2, 0, 1, 3)[:, peaks])))


def _sine_amplitude(signals, t):
    z = np.asarray(signals)[0][..., 7:, :]  # Pz, O1, O2
    basis = np.stack([np.sin(2 * np.pi * 17 * t), np.cos(2 * np.pi * 17 * t)])
    coef = z @ np.linalg.pinv(basis)
    return np.sqrt(np.sum(coef**2, -1))


def test_ica_removes_blinks_keeps_posterior_sine():
    data, peaks, t = _blinky_dataset()
    plain = eeg.preprocess_dataset(data)
    clean = eeg.preprocess_dataset(data, ica_components=8, ica_key=jax.random.key(0))
    assert clean.signals.shape == data.signals.shape
    assert clean.ch_names == CH
    before = _blink_locked_frontal(plain.signals, peaks)
    after = _blink_locked_frontal(clean.signals, peaks)
    assert before > 15.0, before  # the blinks dominate Fp1/Fp2 at their peaks
    assert after < 0.2 * before, (before, after)
    sine_before, sine_after = _sine_amplitude(plain.signals, t), _sine_amplitude(clean.signals, t)
    np.testing.assert_allclose(sine_after, sine_before, rtol=0.1)
    # outside blinks the frontal channels keep their EEG (not zeroed or rescaled away)
    far = ~np.convolve(peaks.reshape(-1), np.ones(129), "same").astype(bool).reshape(peaks.shape)
    fr_plain = np.asarray(plain.signals)[0][..., :2, :].transpose(2, 0, 1, 3)[:, far]
    fr_clean = np.asarray(clean.signals)[0][..., :2, :].transpose(2, 0, 1, 3)[:, far]
    assert 0.5 < fr_clean.std() / fr_plain.std() < 1.2


def test_ica_bad_inputs():
    data, _, _ = _blinky_dataset(seconds=4.0)
    with pytest.raises(ValueError, match="n_components"):
        eeg.ica_clean(data, 11, key=jax.random.key(0))
    with pytest.raises(ValueError, match="method"):
        eeg.ica_clean(data, 4, method="jade", key=jax.random.key(0))
    with pytest.raises(ValueError, match="threshold"):
        eeg.ica_clean(data, 4, threshold=1.5, key=jax.random.key(0))
    with pytest.raises(ValueError, match="'Fpz' not found"):
        eeg.ica_clean(data, 4, eog_channels=("Fpz",), key=jax.random.key(0))
