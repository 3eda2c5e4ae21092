"""Preprocessing (P10): notch, band-pass, optional ICA, re-reference, epoching, amplitude
rejection.

Filters are designed and applied with `scipy.signal` (zero-phase second-order
sections) on host arrays; re-referencing, epoching and rejection are JAX.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import scipy.signal

from jaxlab._core import (
    as_array,
    check_instance,
    check_memory,
    check_positive_int,
    check_real,
)

from ._data import EEGDataset, EpochTable
from ._ica import ica_clean

__all__ = [
    "bandpass",
    "notch",
    "rereference",
    "epoch_indices",
    "epoch",
    "reject_amplitude",
    "preprocess_dataset",
    "make_epochs",
]


def _check_signal(name, x):
    x = as_array(name, x, dtype=jnp.floating, finite=True, nonempty=True)
    if x.ndim < 1 or x.shape[-1] < 2:
        raise ValueError(f"{name}: expected (..., time) with at least 2 samples, got {x.shape}")
    return x


def _check_sfreq(sfreq, **freqs):
    """`sfreq` a finite rate > 0 and each named frequency a finite number in (0, sfreq/2):
    returns the frequencies as floats (the message names the argument and `sfreq`)."""
    if isinstance(sfreq, bool | str | bytes) or sfreq is None:
        raise ValueError(f"sfreq: expected a positive sampling rate in Hz, got {sfreq!r:.60}")
    if not (np.isfinite(sfreq) and sfreq > 0):
        raise ValueError(f"sfreq: expected a positive sampling rate in Hz, got {sfreq}")
    out = []
    for name, f in freqs.items():
        f = check_real(name, f)
        if not 0 < f < sfreq / 2:
            raise ValueError(
                f"{name}: frequency {f} Hz must lie strictly between 0 and the Nyquist "
                f"frequency {sfreq / 2} Hz of sampling rate sfreq={sfreq} Hz"
            )
        out.append(f)
    return out


def bandpass(x, sfreq: float, low: float, high: float, *, order: int = 4):
    """Zero-phase Butterworth band-pass along the last axis.

    **Arguments:** `x` `(..., T)`; `sfreq` Hz; `low < high` cut-offs in Hz; `order`.

    **Returns:** filtered array, same shape and dtype as `x`.
    """
    x = _check_signal("x", x)
    low, high = _check_sfreq(sfreq, low=low, high=high)
    if not low < high:
        raise ValueError(f"low/high: expected low < high, got {low} >= {high}")
    sos = scipy.signal.butter(order, [low, high], btype="bandpass", fs=sfreq, output="sos")
    y = scipy.signal.sosfiltfilt(sos, np.asarray(x, np.float64), axis=-1)
    return jnp.asarray(y, dtype=x.dtype)


def notch(x, sfreq: float, freq: float = 50.0, *, quality: float = 30.0):
    """Zero-phase IIR notch at `freq` Hz (line noise) along the last axis; same shape."""
    x = _check_signal("x", x)
    (freq,) = _check_sfreq(sfreq, freq=freq)
    b, a = scipy.signal.iirnotch(freq, quality, fs=sfreq)
    y = scipy.signal.filtfilt(b, a, np.asarray(x, np.float64), axis=-1)
    return jnp.asarray(y, dtype=x.dtype)


def rereference(x, ref: str | list[int] = "average"):
    """Re-reference channels (axis -2): `"average"` or the mean of channel indices `ref`.

    **Raises:** `ValueError` naming `x` (not `(..., C, T)` floats, empty, NaN/inf) or `ref`."""
    x = as_array("x", x, dtype=jnp.floating, finite=True, nonempty=True)
    if x.ndim < 2:
        raise ValueError(f"x: expected (..., channel, time), got {x.shape}")
    if isinstance(ref, str):
        if ref != "average":
            raise ValueError(f"ref: expected 'average' or a list of channel indices, got {ref!r}")
        return x - x.mean(axis=-2, keepdims=True)
    idx = list(ref)
    if not idx or any(not 0 <= i < x.shape[-2] for i in idx):
        raise ValueError(f"ref: channel indices {idx} out of range for {x.shape[-2]} channels")
    return x - x[..., jnp.asarray(idx), :].mean(axis=-2, keepdims=True)


def epoch_indices(n_times: int, length: int, step: int):
    """Sample indices of sliding epochs, `(n_epochs, length)`; row i starts at `i*step`.

    `n_times`, `length` and `step` are positive ints, `length <= n_times`; an index table
    that would not fit in memory is refused naming `n_times` before it is allocated."""
    n_times = check_positive_int("n_times", n_times)
    length = check_positive_int("length", length)
    step = check_positive_int("step", step)
    if length > n_times:
        raise ValueError(f"length: epoch of {length} samples exceeds the {n_times} available")
    n = (n_times - length) // step + 1
    check_memory("n_times", 8.0 * n * length)
    return jnp.arange(n)[:, None] * step + jnp.arange(length)[None, :]


def epoch(x, length: int, step: int):
    """Cut `x` `(..., C, T)` into epochs `(..., n_epochs, C, length)`."""
    x = _check_signal("x", x)
    idx = epoch_indices(x.shape[-1], length, step)
    return jnp.moveaxis(x[..., idx], -2, -3)


def reject_amplitude(epochs, threshold: float):
    """Keep-mask for epochs `(..., C, L)` whose peak-to-peak amplitude on every channel
    is below `threshold` (same units, e.g. 150 microvolts). Returns bool `(...)`.

    **Raises:** `ValueError` naming `epochs` (not `(..., C, L)` floats, empty, NaN/inf: a
    NaN sample would compare as "below" and keep its epoch) or `threshold`."""
    epochs = as_array("epochs", epochs, dtype=jnp.floating, finite=True, nonempty=True)
    if epochs.ndim < 2:
        raise ValueError(f"epochs: expected (..., C, L), received shape {tuple(epochs.shape)}")
    threshold = check_real("threshold", threshold, low=0.0, low_inclusive=False)
    ptp = epochs.max(-1) - epochs.min(-1)
    return jnp.all(ptp < threshold, axis=-1)


def preprocess_dataset(
    data: EEGDataset,
    *,
    line_freq: float = 50.0,
    low: float = 1.0,
    high: float = 40.0,
    ref="average",
    ica_components: int | None = None,
    ica_method: str = "infomax",
    ica_threshold: float = 0.6,
    ica_key: jax.Array | None = None,
) -> EEGDataset:
    """The P10 pipeline: notch at `line_freq`, band-pass `[low, high]` Hz, optional ICA,
    re-reference.

    With `ica_components=n`, `ica_clean` fits an `n`-component MNE ICA (`ica_method`:
    infomax, fastica or picard) per (subject, session) after filtering and removes the
    components correlated (|r| > `ica_threshold`) with the Fp1/Fp2 EOG proxies;
    `ica_key` (required with `ica_components`) is the ICA's randomness.

    `line_freq`, `low` and `high` are finite frequencies in (0, sfreq/2), `low < high`;
    anything else is refused naming the argument.

    **Returns:** `EEGDataset` with the same shape and metadata.
    """
    check_instance("data", data, EEGDataset)
    line_freq, low, high = _check_sfreq(data.sfreq, line_freq=line_freq, low=low, high=high)
    x = notch(data.signals, data.sfreq, line_freq)
    x = bandpass(x, data.sfreq, low, high)
    if ica_components is not None:
        if ica_key is None:
            raise ValueError("ica_key: ICA is random; pass ica_key=jax.random.key(...)")
        x = ica_clean(
            data.with_signals(x),
            ica_components,
            method=ica_method,
            threshold=ica_threshold,
            key=ica_key,
        ).signals
    x = rereference(x, ref)
    return data.with_signals(x)


def make_epochs(
    data: EEGDataset,
    *,
    seconds: float = 2.0,
    step_seconds: float | None = None,
    reject_uv: float | None = 150.0,
) -> EpochTable:
    """Epoch every block of `data` into an `EpochTable` with per-epoch metadata.

    **Arguments:** `data` an `EEGDataset`; `seconds` the epoch length and `step_seconds`
    the hop (finite, > 0, at least one sample; default: `seconds`); `reject_uv` the
    peak-to-peak rejection threshold (> 0, or None: keep every epoch).

    **Returns:** table with `x` `(S*2*2*E, C, L)`; `keep` from amplitude rejection
    (all True when `reject_uv` is None).
    """
    check_instance("data", data, EEGDataset)

    def samples(name, value):
        n = int(round(check_real(name, value, low=0.0, low_inclusive=False) * data.sfreq))
        if n < 1:
            raise ValueError(f"{name}: {value} s is less than one sample at {data.sfreq} Hz")
        return n

    length = samples("seconds", seconds)
    if length > data.signals.shape[-1]:
        raise ValueError(
            f"seconds: an epoch of {length} samples exceeds the {data.signals.shape[-1]} "
            "of each block"
        )
    step = length if step_seconds is None else samples("step_seconds", step_seconds)
    if reject_uv is not None:
        reject_uv = check_real("reject_uv", reject_uv, low=0.0, low_inclusive=False)
    ep = epoch(data.signals, length, step)  # (S, 2, 2, E, C, L)
    s, ns, nc, e = ep.shape[:4]
    grid = np.meshgrid(np.arange(s), np.arange(ns), np.arange(nc), np.arange(e), indexing="ij")
    subj, sess, cond = (jnp.asarray(g.reshape(-1)) for g in grid[:3])
    keep = jnp.ones(ep.shape[:4], bool) if reject_uv is None else reject_amplitude(ep, reject_uv)
    return EpochTable(
        x=ep.reshape(-1, *ep.shape[-2:]),
        subject=subj,
        session=sess,
        condition=cond,
        group=data.group[subj],
        keep=keep.reshape(-1),
        sfreq=data.sfreq,
        ch_names=data.ch_names,
    )
