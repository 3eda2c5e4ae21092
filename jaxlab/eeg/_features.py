"""Spectral and spatial features (P10): Welch PSD, band powers, relative power,
frontal alpha asymmetry, spectral entropy, covariance matrices."""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np
from jax.core import Tracer

from jaxlab._core import as_array, check_array, check_positive_int, check_real

from ._montage import channel_indices

__all__ = [
    "BANDS",
    "welch",
    "band_powers",
    "relative_powers",
    "frontal_alpha_asymmetry",
    "spectral_entropy",
    "covariances",
    "spectral_features",
]

BANDS: dict[str, tuple[float, float]] = {
    "delta": (1.0, 4.0),
    "theta": (4.0, 8.0),
    "alpha": (8.0, 13.0),
    "beta": (13.0, 30.0),
    "gamma": (30.0, 45.0),
}
"""The frequency bands of the spectral features: name -> (low, high) in Hz."""


def welch(x, sfreq: float, *, nperseg: int = 256):
    """Welch power spectral density along the last axis (Hann window, 50 % overlap,
    mean detrending, one-sided density in units**2/Hz), as `scipy.signal.welch`.

    **Arguments:** `x` `(..., T)`; `sfreq` Hz; `nperseg` samples per segment (<= T).

    **Returns:** `(freqs (F,), psd (..., F))` with `F = nperseg // 2 + 1`.
    """
    x = as_array("x", x, dtype=jnp.floating, finite=True, nonempty=True)
    if not (np.isfinite(sfreq) and sfreq > 0):
        raise ValueError(f"sfreq: expected a positive sampling rate in Hz, got {sfreq}")
    n = x.shape[-1]
    if not 2 <= nperseg <= n:
        raise ValueError(f"nperseg: expected 2 <= nperseg <= {n} (signal length), got {nperseg}")
    step = nperseg // 2
    starts = jnp.arange((n - nperseg) // step + 1) * step
    segs = x[..., starts[:, None] + jnp.arange(nperseg)[None]]  # (..., K, nperseg)
    segs = segs - segs.mean(-1, keepdims=True)
    win = jnp.asarray(0.5 - 0.5 * np.cos(2 * np.pi * np.arange(nperseg) / nperseg), x.dtype)
    tapered = segs * jnp.broadcast_to(win, segs.shape)
    spec = jnp.abs(jnp.fft.rfft(tapered, axis=-1)) ** 2 / (sfreq * jnp.sum(win**2))
    spec = spec.at[..., 1:].multiply(2.0)
    if nperseg % 2 == 0:
        spec = spec.at[..., -1].multiply(0.5)
    freqs = jnp.fft.rfftfreq(nperseg, 1 / sfreq).astype(x.dtype)
    return freqs, spec.mean(-2)


def _spectrum(freqs, psd):
    """`freqs (F,)` (F >= 2, finite) and `psd (..., F)` (finite, >= 0) as JAX arrays."""
    freqs = as_array("freqs", freqs, ndim=1, dtype=jnp.floating, finite=True)
    if freqs.shape[0] < 2:
        raise ValueError(f"freqs: expected at least 2 frequencies, received {freqs.shape[0]}")
    psd = as_array("psd", psd, dtype=jnp.floating, finite=True, nonempty=True, low=0.0)
    if psd.ndim < 1 or psd.shape[-1] != freqs.shape[0]:
        raise ValueError(
            f"psd: expected shape (..., {freqs.shape[0]}) (one value per frequency in freqs), "
            f"received shape {tuple(psd.shape)}"
        )
    return freqs, psd


def _positive_total(name: str, total, what: str) -> None:
    """Refuse a concrete zero total (the normalisation would divide by it: NaN)."""
    if not isinstance(total, Tracer) and bool(np.any(np.asarray(total) <= 0)):
        raise ValueError(f"{name}: expected a positive total {what} in every row, received 0")


def band_powers(freqs, psd, bands=None):
    """Absolute band power (rectangle-rule integral of the PSD) per band:
    `psd (..., F)` -> `(..., n_bands)` in the order of `bands` (default `BANDS`).

    **Raises:** `ValueError` naming `freqs` (not 1-D with >= 2 finite values) or `psd`
    (not `(..., F)`, empty, NaN/inf or negative)."""
    freqs, psd = _spectrum(freqs, psd)
    bands = BANDS if bands is None else bands
    df = freqs[1] - freqs[0]
    cols = []
    for name, (lo, hi) in bands.items():
        if not lo < hi:
            raise ValueError(f"bands[{name!r}]: expected low < high, got ({lo}, {hi})")
        mask = ((freqs >= lo) & (freqs < hi)).astype(psd.dtype)
        cols.append(jnp.sum(psd * jnp.broadcast_to(mask, psd.shape), -1) * df)
    return jnp.stack(cols, -1)


def relative_powers(bp):
    """Band powers `(..., n_bands)` divided by their sum over bands.

    **Raises:** `ValueError` naming `bp` when it is empty, NaN/inf, negative, or a row
    sums to 0 (its relative powers are undefined)."""
    bp = as_array("bp", bp, dtype=jnp.floating, finite=True, nonempty=True, low=0.0)
    if bp.ndim < 1:
        raise ValueError(f"bp: expected band powers (..., n_bands), received shape {bp.shape}")
    total = jnp.sum(bp, -1, keepdims=True)
    _positive_total("bp", total, "band power")
    return bp / total


def frontal_alpha_asymmetry(alpha_power, ch_names, *, left="F3", right="F4"):
    """ln(alpha power right) - ln(alpha power left); `alpha_power (..., C)` -> `(...)`.

    **Raises:** `ValueError` when `left` or `right` is not in `ch_names`, or naming
    `alpha_power` when it is not `(..., len(ch_names))` with finite positive values.
    """
    il, ir = channel_indices(ch_names, [left, right])
    alpha_power = as_array(
        "alpha_power",
        alpha_power,
        dtype=jnp.floating,
        finite=True,
        nonempty=True,
        low=0.0,
        low_inclusive=False,
    )
    if alpha_power.ndim < 1 or alpha_power.shape[-1] != len(ch_names):
        raise ValueError(
            f"alpha_power: expected shape (..., {len(ch_names)}) (one value per channel "
            f"name), received shape {tuple(alpha_power.shape)}"
        )
    return jnp.log(alpha_power[..., ir]) - jnp.log(alpha_power[..., il])


def spectral_entropy(freqs, psd, *, fmin: float = 1.0, fmax: float = 45.0):
    """Shannon entropy (nats) of the PSD normalised over `[fmin, fmax]` Hz.

    `psd` `(..., F)` -> `(...)`.

    **Raises:** `ValueError` naming `freqs` or `psd` as `band_powers` does, `fmin`/`fmax`
    (not finite, or `fmin > fmax`), or `psd` when a row has no power in `[fmin, fmax]`."""
    freqs, psd = _spectrum(freqs, psd)
    fmin = check_real("fmin", fmin)
    fmax = check_real("fmax", fmax, low=fmin)
    mask = (freqs >= fmin) & (freqs <= fmax)
    p = jnp.where(mask, psd, 0.0)
    total = jnp.sum(p, -1, keepdims=True)
    _positive_total("psd", total, f"power in [{fmin}, {fmax}] Hz")
    p = p / total
    return -jnp.sum(jnp.where(p > 0, p * jnp.log(jnp.where(p > 0, p, 1.0)), 0.0), -1)


def covariances(epochs, *, shrinkage: float = 0.0):
    """Spatial covariance per epoch `(..., C, L)` -> `(..., C, C)`, optionally shrunk towards
    `trace/C * I` by `shrinkage` in [0, 1] (keeps them positive definite)."""
    epochs = as_array("epochs", epochs, dtype=jnp.floating, finite=True, nonempty=True)
    if epochs.ndim < 2 or epochs.shape[-1] < 2:
        raise ValueError(f"epochs: expected (..., C, L) with L >= 2, received {epochs.shape}")
    if not 0.0 <= shrinkage <= 1.0:
        raise ValueError(f"shrinkage: expected a value in [0, 1], got {shrinkage}")
    xc = epochs - epochs.mean(-1, keepdims=True)
    cov = xc @ jnp.swapaxes(xc, -1, -2) / (epochs.shape[-1] - 1)
    c = epochs.shape[-2]
    mu = jnp.trace(cov, axis1=-2, axis2=-1)[..., None, None] / c
    eye = jnp.broadcast_to(jnp.eye(c, dtype=epochs.dtype), cov.shape)
    return (1 - shrinkage) * cov + shrinkage * mu * eye


def spectral_features(epochs, sfreq: float, ch_names, *, nperseg: int | None = None):
    """The classical feature vector per epoch: log band powers and relative powers per
    channel and band, frontal alpha asymmetry, spectral entropy per channel.

    **Arguments:** `epochs` `(N, C, L)` finite, non-empty; `sfreq` > 0 Hz; `ch_names` with
    F3 and F4; `nperseg` a positive int (default min(sfreq, L)).
    **Returns:** `(N, 2*C*5 + 1 + C)`.
    """
    epochs = as_array("epochs", epochs, dtype=jnp.floating, finite=True, nonempty=True)
    check_array("epochs", epochs, shape=("N", "C", "L"), dtype=jnp.floating)
    sfreq = check_real("sfreq", sfreq, low=0.0, low_inclusive=False)
    if nperseg is None:
        nperseg = min(int(sfreq), epochs.shape[-1])
    else:
        nperseg = check_positive_int("nperseg", nperseg)
    freqs, psd = welch(epochs, sfreq, nperseg=nperseg)
    bp = band_powers(freqs, psd)  # (N, C, 5)
    rel = relative_powers(bp)
    faa = frontal_alpha_asymmetry(bp[..., 2], ch_names)
    ent = spectral_entropy(freqs, psd)
    n = epochs.shape[0]
    return jnp.concatenate(
        [jnp.log(bp).reshape(n, -1), rel.reshape(n, -1), faa[:, None], ent], axis=-1
    )
