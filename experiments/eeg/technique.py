"""P10 task 2: 3-way meditation technique classification from meditation epochs."""

from __future__ import annotations

import jax
import numpy as np

from experiments._harness import Claim, Result, RunContext
from experiments.eeg import _setup as common
from jaxlab import eeg

NAME = "eeg_technique"
PAPER = "P10"
DESCRIPTION = "SA-TA-NA-MA vs Hare Krishna vs Breath Focus from meditation EEG (simulator)"
QUICK = {"n_subjects": 24, "block_seconds": 30.0, "epoch_seconds": 2.0, "n_folds": 4,
         "models": list(eeg.CLASSICAL_MODELS), "deep_models": ["eegnet", "shallow"],
         "deep_epochs": 6}
FULL = {"n_subjects": 74, "block_seconds": 300.0, "epoch_seconds": 2.0, "n_folds": 5,
        "models": list(eeg.CLASSICAL_MODELS), "deep_models": ["eegnet", "shallow", "deep"],
        "deep_epochs": 100}


def run(config, key: jax.Array, ctx: RunContext) -> Result:
    k_sim, k_fold = jax.random.split(key)
    tab, cfg, kept = common.epochs_for(config, k_sim)
    tab = tab.select(np.asarray(tab.condition) == 1)
    feats, covs = common.inputs_for(tab)
    y = np.asarray(tab.group)
    folds = common.folds_for(tab.subject, config["n_folds"], k_fold)
    metrics = {"n_subjects": cfg.n_subjects, "n_epochs": int(len(y)), "kept_fraction": kept,
               **{f"effect_{k}": v for k, v in cfg.effect_sizes().items()}}
    summary = common.evaluate(config["models"], feats, covs, y, folds, "bacc_technique",
                              metrics)
    (deep,) = common.evaluate_deep(config.get("deep_models", []), common.deep_inputs(tab), y,
                                   tab.subject, folds, ("bacc_technique",), metrics,
                                   jax.random.fold_in(key, 7),
                                   ctx=ctx, epochs=int(config.get("deep_epochs", 0)),
                                   tag="technique_")
    summary.update(deep)
    best = max(summary, key=lambda m: summary[m][0])
    mean, lo, hi = summary[best]
    above = [m for m, (_, lo_m, _) in summary.items() if lo_m > 1 / 3]
    claims = [Claim(
        claim="the meditation technique (3 groups) is decodable from meditation EEG of unseen "
              "subjects (best classical or deep baseline)",
        paper="baselines reported for task 2 (no numbers in the abstract)",
        measured=f"best {best}: bacc {mean:.3f} [95% CI {lo:.3f}, {hi:.3f}], chance 0.333; CI "
                 f"above chance for {len(above)}/{len(summary)} models ({', '.join(above)}) "
                 "(simulator)",
        holds=bool(lo > 1 / 3),
    )]
    fig = common.bar_figure({"technique": summary}, 1 / 3,
                            "eeg_technique: leave-subjects-out (simulated L-FAME)")
    notes = (common.SIM_NOTE + f" Meditation epochs of both sessions; this run: "
             f"{cfg.n_subjects} subjects, {cfg.block_seconds:.0f} s blocks, deep models "
             f"{config.get('deep_models')} for at most {config.get('deep_epochs')} epochs "
             "(QUICK: short deep training and no DeepConvNet, to fit a few CPU minutes). "
             f"Effect sizes: {cfg.effect_sizes()}.")
    return Result(metrics=metrics, claims=claims, figures={"technique": fig}, notes=notes)
