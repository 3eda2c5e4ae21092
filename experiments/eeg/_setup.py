"""Shared pipeline of the eeg_* experiments (P10): simulate -> preprocess -> epoch ->
features / covariances -> leave-subjects-out evaluation; fold scores summarised by the
harness's t interval over folds (`t_mean`)."""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
import matplotlib.pyplot as plt
import numpy as np
import optax

from experiments._harness import RunContext, log, t_mean
from jaxlab import Driver, TqdmProgress, eeg

SIM_NOTE = (
    "All numbers come from jaxlab.eeg's L-FAME-design SIMULATOR (the real L-FAME data set "
    "is not public yet), not from real EEG. Pipeline: notch 50 Hz, band-pass 1-40 Hz "
    "(Butterworth, zero-phase, scipy.signal), average reference, 2 s epochs, 150 uV "
    "peak-to-peak rejection (ICA is available but off here); features = log and relative "
    "Welch band powers per channel (delta..gamma), frontal alpha asymmetry F4-F3, spectral "
    "entropy; covariances shrunk 5 %. tangent = jaxlab's own JAX tangent space at the "
    "log-Euclidean mean (checked against pyriemann in tests) + logistic regression. Deep "
    "baselines in flax: EEGNet-v4 (eegnet), ShallowConvNet (shallow) and DeepConvNet "
    "(deep; braindecode's Deep4 defaults except max-pool stride 2, because 2 s epochs at "
    "128 Hz are shorter than the 441 samples the default stride 3 needs); Adam 1e-3, "
    "batch 64, early stopping (patience 3) on ~20 % held-out training subjects."
)


@dataclasses.dataclass(frozen=True)
class EegConfig:
    """QUICK settings shared by the P10 experiments; `FULL_OVERRIDES` are the paper-scale
    values of FULL."""

    n_subjects: int = 24
    block_seconds: float = 30.0
    epoch_seconds: float = 2.0
    n_folds: int = 4
    models: tuple[str, ...] = ("lda", "logreg", "svm", "rf", "tangent")


FULL_OVERRIDES = {"n_subjects": 74, "block_seconds": 300.0, "n_folds": 5}


def sim_config(config, scale: float = 1.0) -> eeg.SimulationConfig:
    """Simulator settings of an experiment config, with every effect times `scale`."""
    return eeg.SimulationConfig(
        n_subjects=int(config.n_subjects), block_seconds=float(config.block_seconds)
    ).scaled(scale)


def epochs_for(config, key, scale: float = 1.0):
    """Simulated, preprocessed, epoched, artefact-rejected table and its sim config."""
    cfg = sim_config(config, scale)
    data = eeg.preprocess_dataset(eeg.simulate(cfg, key=key))
    tab = eeg.make_epochs(data, seconds=float(config.epoch_seconds), reject_uv=150.0)
    kept = float(jnp.mean(tab.keep))
    log.info("simulated %d subjects, %d epochs, kept %.3f", cfg.n_subjects, tab.x.shape[0], kept)
    return tab.select(tab.keep), cfg, kept


def inputs_for(tab):
    feats = np.asarray(eeg.spectral_features(tab.x, tab.sfreq, tab.ch_names))
    covs = np.asarray(eeg.covariances(tab.x, shrinkage=0.05))
    return feats, covs


def evaluate(models, feats, covs, y, folds, prefix, metrics, *, key):
    """Cross-validate each model; write `<prefix>_<model>` (mean bacc over folds and its
    95% t interval, an `Estimate`: `_lo`, `_hi`, `_n`) and `f1...` (mean macro-F1).

    `key` seeds the random classifiers (the random forest).
    **Returns:** model -> the per-fold balanced accuracies `(folds,)`."""
    summary = {}
    for m in models:
        r = eeg.cross_validate(m, covs if m == "tangent" else feats, y, folds, key=key)
        bacc = t_mean(r["bacc"])
        metrics[f"{prefix}_{m}"] = bacc
        metrics[f"{prefix.replace('bacc', 'f1')}_{m}"] = float(np.mean(r["f1"]))
        summary[m] = np.asarray(r["bacc"], np.float64)
        log.info("%s_%s = %s (macro-F1 %.3f)", prefix, m, format(bacc, ".3f"), np.mean(r["f1"]))
    return summary


def bar_figure(summaries: dict, chance: float, title: str):
    """Bars: mean balanced accuracy per model over folds, whiskers its 95% t interval;
    `summaries`: label -> (model -> per-fold scores)."""
    fig, ax = plt.subplots(figsize=(7, 3.5))
    names = list(next(iter(summaries.values())))
    width = 0.8 / len(summaries)
    for i, (label, s) in enumerate(summaries.items()):
        x = np.arange(len(names)) + i * width
        est = [t_mean(s[n]) for n in names]
        means = np.asarray([e.value for e in est])
        err = np.asarray([[e.value - e.low, e.high - e.value] for e in est]).T
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


def deep_model(name: str, n_classes: int):
    """EEGNet-v4 / ShallowConvNet / DeepConvNet with braindecode's defaults; DeepConvNet's
    max-pool stride is 2 instead of 3 so that 2 s epochs at 128 Hz (256 samples) fit (the
    default needs >= 441 samples)."""
    if name == "eegnet":
        return eeg.EEGNet(n_classes=n_classes)
    if name == "shallow":
        return eeg.ShallowConvNet(n_classes=n_classes)
    if name == "deep":
        return eeg.DeepConvNet(n_classes=n_classes, pool_stride=2)
    raise ValueError(f"deep model {name!r}: expected eegnet, shallow or deep")


# train_classifier's default (Adam, 1e-3), built once: every training of one model on
# same-shaped data (folds, cross_session's raw and aligned epochs, the experiments run in
# one process) shares one compiled step (the driver caches it per step object, the
# optimiser included)
DEEP_OPTIMIZER = optax.adam(1e-3)


def deep_inputs(tab):
    """Epochs `(N, C, L)` as float32, scaled by one global (label-free) standard deviation."""
    x = np.asarray(tab.x, np.float32)
    return x / x.std()


def evaluate_deep(
    models,
    x,
    y,
    subject,
    folds,
    prefixes,
    metrics,
    key,
    *,
    ctx: RunContext,
    epochs,
    batch_size=64,
    tag="",
    patience=3,
):
    """Train each deep model once per fold and score it on one or more test sets.

    `folds`: tuples `(train_idx, test_idx_1, ..., test_idx_k)`; the k test sets write
    `<prefixes[j]>_<model>` (mean bacc over folds with its t interval) and macro-F1 like
    `evaluate`, and return model -> per-fold balanced accuracies, one dict per test set.
    Early stopping uses ~20 % of the training subjects as validation set. When a run is in
    progress, training checkpoints go to `ctx`'s checkpoint dir and resume with `--resume`.
    """
    subject = np.asarray(subject)
    n_classes = int(y.max()) + 1
    summaries = [{} for _ in prefixes]
    optimizer = DEEP_OPTIMIZER
    for m in models:
        scores = [([], []) for _ in prefixes]
        for i, (train, *tests) in enumerate(folds):
            ids = np.unique(subject[train])
            order = np.asarray(jax.random.permutation(jax.random.fold_in(key, i), len(ids)))
            val = np.isin(subject[train], ids[order][: max(1, len(ids) // 5)])
            tr, va = train[~val], train[val]
            ckpt = ctx.checkpointer(f"eeg_{tag}{prefixes[0]}_{m}_fold{i}", every=50)
            clf = eeg.train_classifier(
                deep_model(m, n_classes),
                x[tr],
                y[tr],
                key=jax.random.fold_in(key, 100 + i),
                x_val=x[va],
                y_val=y[va],
                epochs=epochs,
                batch_size=batch_size,
                patience=patience,
                optimizer=optimizer,
                driver=Driver(checkpointer=ckpt, progress=TqdmProgress(desc=f"eeg {m} fold {i}")),
            )
            for j, test in enumerate(tests):
                pred = clf(x[test])
                scores[j][0].append(eeg.balanced_accuracy(y[test], pred))
                scores[j][1].append(eeg.macro_f1(y[test], pred))
        for j, prefix in enumerate(prefixes):
            baccs, f1s = scores[j]
            bacc = t_mean(baccs)
            metrics[f"{prefix}_{m}"] = bacc
            metrics[f"{prefix.replace('bacc', 'f1')}_{m}"] = float(np.mean(f1s))
            summaries[j][m] = np.asarray(baccs, np.float64)
            log.info("%s_%s = %s", prefix, m, format(bacc, ".3f"))
    return summaries
