"""P10 task 3: cross-session adaptation (train pre, test post) with and without
Euclidean alignment per (subject, session)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from experiments import _eeg_common as common
from experiments._api import Claim, Result
from jaxlab import eeg

NAME = "eeg_cross_session"
PAPER = "P10"
DESCRIPTION = "Rest vs meditation trained on pre, tested on post, with/without Euclidean alignment"
QUICK = {"n_subjects": 24, "block_seconds": 30.0, "epoch_seconds": 2.0, "n_folds": 4,
         "models": list(eeg.CLASSICAL_MODELS)}
FULL = {"n_subjects": 74, "block_seconds": 300.0, "epoch_seconds": 2.0, "n_folds": 5,
        "models": list(eeg.CLASSICAL_MODELS)}


def _aligned(tab):
    """Euclidean alignment of each (subject, session) recording with its own unlabeled
    epochs (both conditions pooled: labels are never used). The reference is shrunk 5 %
    towards the identity because average re-referencing makes it singular."""
    x = np.array(tab.x)
    subj, sess = np.asarray(tab.subject), np.asarray(tab.session)
    for s in np.unique(subj):
        for e in (0, 1):
            m = (subj == s) & (sess == e)
            if m.any():
                x[m] = np.asarray(eeg.euclidean_alignment(jnp.asarray(x[m]),
                                                               shrinkage=0.05))
    return eqx_replace(tab, x)


def eqx_replace(tab, x):
    return eeg.EpochTable(x=jnp.asarray(x), subject=tab.subject, session=tab.session,
                          condition=tab.condition, group=tab.group, keep=tab.keep,
                          sfreq=tab.sfreq, ch_names=tab.ch_names)


def _split(folds, sess, train_session, test_session):
    return [(tr[sess[tr] == train_session], te[sess[te] == test_session]) for tr, te in folds]


def run(config, key):
    k_sim, k_fold = jax.random.split(key)
    tab, cfg, kept = common.epochs_for(config, k_sim)
    y, sess = np.asarray(tab.condition), np.asarray(tab.session)
    folds = common.folds_for(tab.subject, config["n_folds"], k_fold)
    metrics = {"n_subjects": cfg.n_subjects, "n_epochs": int(len(y)), "kept_fraction": kept,
               **{f"effect_{k}": v for k, v in cfg.effect_sizes().items()}}
    models = config["models"]
    feats, covs = common.inputs_for(tab)
    within = common.evaluate(models, feats, covs, y, _split(folds, sess, 0, 0), "bacc_within",
                             metrics)
    cross = common.evaluate(models, feats, covs, y, _split(folds, sess, 0, 1), "bacc_cross",
                            metrics)
    feats_a, covs_a = common.inputs_for(_aligned(tab))
    aligned = common.evaluate(models, feats_a, covs_a, y, _split(folds, sess, 0, 1),
                              "bacc_cross_aligned", metrics)
    mc = float(np.mean([cross[m][0] for m in models]))
    ma = float(np.mean([aligned[m][0] for m in models]))
    mw = float(np.mean([within[m][0] for m in models]))
    metrics.update(bacc_within_mean=mw, bacc_cross_mean=mc, bacc_cross_aligned_mean=ma)
    claims = [Claim(
        claim="Euclidean alignment improves cross-session (pre -> post) decoding",
        paper="cross-session adaptation benchmarked as task 3 (no numbers in the abstract)",
        measured=f"mean over {len(models)} models: within-session {mw:.3f}, cross {mc:.3f}, "
                 f"cross + EA {ma:.3f} (simulator)",
        holds=bool(ma > mc),
    )]
    fig = common.bar_figure({"within (pre->pre)": within, "cross (pre->post)": cross,
                             "cross + EA": aligned}, 0.5,
                            "eeg_cross_session: held-out subjects (simulated L-FAME)")
    notes = (common.SIM_NOTE + " Folds are leave-subjects-out: train on the pre session of "
             "training subjects, test on the post (cross) or pre (within) session of held-out "
             "subjects. EA = Euclidean alignment (He & Wu 2019; reference shrunk 5 %) of each "
             "subject-session with its "
             "own unlabeled epochs; after EA the spectral features are computed on the whitened "
             "(channel-mixed) signals. The simulated six-week shift is per-channel log-gain noise "
             f"and a 1/f exponent change, plus larger post-training effects. QUICK: "
             f"{cfg.n_subjects} subjects, {cfg.block_seconds:.0f} s blocks. Effect sizes: "
             f"{cfg.effect_sizes()}.")
    return Result(metrics=metrics, claims=claims, figures={"cross_session": fig}, notes=notes)
