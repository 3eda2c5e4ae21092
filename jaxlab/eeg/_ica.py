"""Optional ICA artefact removal via MNE (P10 preprocessing): fit `mne.preprocessing.ICA`
per recording session and drop the components that correlate with frontal-polar EOG
proxies (Fp1/Fp2 stand in for EOG electrodes, which L-FAME-style montages lack)."""

from __future__ import annotations

from collections.abc import Sequence

import jax
import jax.numpy as jnp
import numpy as np

from jaxlab._core import check_instance, check_positive_int, check_real, sklearn_seed

from ._data import EEGDataset
from ._montage import channel_indices

__all__ = ["ica_clean"]


def ica_clean(
    data: EEGDataset,
    n_components: int,
    *,
    eog_channels: Sequence[str] = ("Fp1", "Fp2"),
    method: str = "infomax",
    threshold: float = 0.6,
    key: jax.Array,
) -> EEGDataset:
    """Remove ocular components with ICA, one fit per (subject, session).

    Each fit pools the session's rest and meditation blocks (so both conditions are
    cleaned by the same unmixing and no label is used); components whose time course
    correlates with a 1-10 Hz band-passed EOG proxy channel above `threshold` (absolute
    Pearson r, MNE's `find_bads_eog(measure="correlation")`) are zeroed.

    **Arguments:**

    - `data`: `EEGDataset`, high-pass filtered (>= 1 Hz, as after `preprocess_dataset`'s
      band-pass), in microvolts.
    - `n_components`: number of ICA components (PCA-reduced), in [2, channels].
    - `eog_channels`: frontal channels used as EOG proxies.
    - `method`: `"infomax"` (MNE's own, the default), `"fastica"` (scikit-learn) or
      `"picard"` (needs `python-picard`). Infomax is the default because FastICA and
      Picard hit their iteration limits on the largely Gaussian background EEG of the
      simulator (FastICA then warns) and were 2x slower in our check.
    - `threshold`: absolute correlation above which a component is removed, a finite
      number in (0, 1).
    - `key` (keyword-only): the randomness of the ICA fits (their random state).

    **Returns:** cleaned `EEGDataset` (same shape and metadata).

    Reference: Jung et al. 2000, "Removing electroencephalographic artifacts by blind
    source separation"; the P10 pipeline lists ICA as an optional step.
    """
    import mne

    check_instance("data", data, EEGDataset)
    c = len(data.ch_names)
    n_components = check_positive_int("n_components", n_components)
    if not 2 <= n_components <= c:
        raise ValueError(f"n_components: expected an int in [2, {c}], got {n_components!r}")
    if method not in ("fastica", "infomax", "picard"):
        raise ValueError(f"method: expected 'fastica', 'infomax' or 'picard', got {method!r}")
    threshold = check_real(
        "threshold", threshold, low=0.0, high=1.0, low_inclusive=False, high_inclusive=False
    )
    eog = [data.ch_names[i] for i in channel_indices(data.ch_names, eog_channels)]
    x = np.array(data.signals, np.float64)  # (S, 2, 2, C, T)
    info = mne.create_info(list(data.ch_names), data.sfreq, ch_types="eeg")
    for s in range(x.shape[0]):
        for e in range(x.shape[1]):
            raw = mne.io.RawArray(
                np.concatenate(list(x[s, e]), axis=-1) * 1e-6, info, verbose="error"
            )
            ica = mne.preprocessing.ICA(
                n_components=int(n_components),
                method=method,
                random_state=sklearn_seed(key),
                max_iter="auto",
                verbose="error",
            )
            ica.fit(raw, verbose="error")
            bads, _ = ica.find_bads_eog(
                raw, ch_name=eog, threshold=threshold, measure="correlation", verbose="error"
            )
            if bads:
                ica.apply(raw, exclude=bads, verbose="error")
                cleaned = np.asarray(raw.get_data()) * 1e6
                x[s, e] = np.stack(np.split(cleaned, x.shape[2], axis=-1))
    return data.with_signals(jnp.asarray(x, data.signals.dtype))
