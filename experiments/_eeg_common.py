"""Shared pipeline of the eeg_* experiments (P10): simulate -> preprocess -> epoch ->
features / covariances -> leave-subjects-out evaluation with fold CIs."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import matplotlib.pyplot as plt
import numpy as np

from experiments._api import log
from jaxlab import eeg

SIM_NOTE = (
    "All numbers come from jaxlab.eeg's L-FAME-design SIMULATOR (the real L-FAME data set "
    "is not public yet), not from real EEG. Pipeline: notch 50 Hz, band-pass 1-40 Hz "
    "(Butterworth, zero-phase, scipy.signal), average reference, 2 s epochs, 150 uV "
    "peak-to-peak rejection; features = log and relative Welch band powers per channel "
    "(delta..gamma), frontal alpha asymmetry F4-F3, spectral entropy; covariances shrunk 5 %. "
    "tangent = jaxlab's own JAX tangent space at the log-Euclidean mean (checked against "
    "pyriemann in tests) + logistic regression. Deep baselines (EEGNet-v4, ShallowConvNet "
    "in flax, braindecode default layer sizes, Adam 1e-3, early stopping on held-out "
    "training subjects) are run "
    "in eeg_state only; DeepConvNet is not implemented."
)


def sim_config(config, scale: float = 1.0) -> eeg.SimulationConfig:
    return eeg.SimulationConfig(n_subjects=int(config["n_subjects"]),
                                block_seconds=float(config["block_seconds"])).scaled(scale)


def epochs_for(config, key, scale: float = 1.0):
    """Simulated, preprocessed, epoched, artefact-rejected table and its sim config."""
    cfg = sim_config(config, scale)
    data = eeg.preprocess_dataset(eeg.simulate(cfg, key=key))
    tab = eeg.make_epochs(data, seconds=float(config["epoch_seconds"]), reject_uv=150.0)
    kept = float(jnp.mean(tab.keep))
    log.info("simulated %d subjects, %d epochs, kept %.3f", cfg.n_subjects, tab.x.shape[0], kept)
    return tab.select(tab.keep), cfg, kept


def inputs_for(tab):
    feats = np.asarray(eeg.spectral_features(tab.x, tab.sfreq, tab.ch_names))
    covs = np.asarray(eeg.covariances(tab.x, shrinkage=0.05))
    return feats, covs


def evaluate(models, feats, covs, y, folds, prefix, metrics):
    """Cross-validate each model; write `<prefix>_<model>` (mean bacc), `f1...`, CI bounds."""
    summary = {}
    for m in models:
        r = eeg.cross_validate(m, covs if m == "tangent" else feats, y, folds)
        mean, lo, hi = eeg.fold_ci(r["bacc"])
        f1, f1_lo, f1_hi = eeg.fold_ci(r["f1"])
        metrics[f"{prefix}_{m}"] = mean
        metrics[f"{prefix}_{m}_ci_low"] = lo
        metrics[f"{prefix}_{m}_ci_high"] = hi
        metrics[f"{prefix.replace('bacc', 'f1')}_{m}"] = f1
        summary[m] = (mean, lo, hi)
        log.info("%s_%s = %.3f [%.3f, %.3f] (macro-F1 %.3f)", prefix, m, mean, lo, hi, f1)
    return summary


def bar_figure(summaries: dict, chance: float, title: str):
    fig, ax = plt.subplots(figsize=(7, 3.5))
    names = list(next(iter(summaries.values())))
    width = 0.8 / len(summaries)
    for i, (label, s) in enumerate(summaries.items()):
        x = np.arange(len(names)) + i * width
        means = np.asarray([s[n][0] for n in names])
        err = np.asarray([[s[n][0] - s[n][1], s[n][2] - s[n][0]] for n in names]).T
        ax.bar(x, means, width, yerr=err, label=label, capsize=3)
    ax.axhline(chance, color="k", ls="--", lw=1, label="chance")
    ax.set_xticks(np.arange(len(names)) + 0.4 - width / 2, names)
    ax.set_ylabel("balanced accuracy (95% CI over folds)")
    ax.set_title(title)
    ax.legend(fontsize=7)
    fig.tight_layout()
    return fig


def folds_for(subject, n_folds, key):
    return eeg.leave_subjects_out(np.asarray(subject), int(n_folds), key=key)


def split_key(key):
    return jax.random.split(key, 2)


DEEP = {"eegnet": eeg.EEGNet, "shallow": eeg.ShallowConvNet}


def evaluate_deep(models, tab, y, folds, prefix, metrics, key, *, epochs, batch_size=64):
    """Train EEGNet / ShallowConvNet per fold (validation = ~20 % of the training subjects,
    for early stopping); same metric names as `evaluate`."""
    x = np.asarray(tab.x, np.float32)
    x = x / x.std()
    subj = np.asarray(tab.subject)
    n_classes = int(y.max()) + 1
    summary = {}
    for m in models:
        baccs, f1s = [], []
        for i, (train, test) in enumerate(folds):
            ids = np.unique(subj[train])
            val_ids = ids[np.asarray(jax.random.permutation(jax.random.fold_in(key, i),
                                                            len(ids)))][: max(1, len(ids) // 5)]
            val = np.isin(subj[train], val_ids)
            tr, va = train[~val], train[val]
            predict = eeg.train_classifier(DEEP[m](n_classes=n_classes), x[tr], y[tr],
                                           key=jax.random.fold_in(key, 100 + i), x_val=x[va],
                                           y_val=y[va], epochs=epochs, batch_size=batch_size)
            pred = predict(x[test])
            baccs.append(eeg.balanced_accuracy(y[test], pred))
            f1s.append(eeg.macro_f1(y[test], pred))
        mean, lo, hi = eeg.fold_ci(baccs)
        metrics[f"{prefix}_{m}"] = mean
        metrics[f"{prefix}_{m}_ci_low"] = lo
        metrics[f"{prefix}_{m}_ci_high"] = hi
        metrics[f"{prefix.replace('bacc', 'f1')}_{m}"] = eeg.fold_ci(f1s)[0]
        summary[m] = (mean, lo, hi)
        log.info("%s_%s = %.3f [%.3f, %.3f]", prefix, m, mean, lo, hi)
    return summary
