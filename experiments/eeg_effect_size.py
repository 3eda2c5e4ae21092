"""P10 sanity check: accuracy falls to chance as the simulated effect sizes shrink to zero."""

from __future__ import annotations

import jax
import matplotlib.pyplot as plt
import numpy as np

from experiments import _eeg_common as common
from experiments._api import Claim, Result

NAME = "eeg_effect_size"
PAPER = "P10"
DESCRIPTION = "State / technique accuracy vs simulated effect size; chance at zero (no leakage)"
QUICK = {"n_subjects": 18, "block_seconds": 20.0, "epoch_seconds": 2.0, "n_folds": 3,
         "scales": [0.0, 0.5, 1.0, 2.0], "models": ["lda", "logreg"]}
FULL = {"n_subjects": 74, "block_seconds": 300.0, "epoch_seconds": 2.0, "n_folds": 5,
        "scales": [0.0, 0.25, 0.5, 1.0, 2.0], "models": ["lda", "logreg", "svm", "rf", "tangent"]}


def run(config, key):
    metrics, curves = {}, {"state": [], "technique": []}
    cis = {}
    for i, scale in enumerate(config["scales"]):
        k_sim, k_fold = jax.random.split(jax.random.fold_in(key, i))
        tab, cfg, _ = common.epochs_for(config, k_sim, scale)
        feats, covs = common.inputs_for(tab)
        folds = common.folds_for(tab.subject, config["n_folds"], k_fold)
        tag = f"{scale:g}".replace(".", "p")
        s = common.evaluate(config["models"], feats, covs, np.asarray(tab.condition), folds,
                            f"bacc_state_scale{tag}", metrics)
        med = np.asarray(tab.condition) == 1
        mt = tab.select(med)
        tf = common.folds_for(mt.subject, config["n_folds"], k_fold)
        t = common.evaluate(config["models"], feats[med], covs[med], np.asarray(mt.group), tf,
                            f"bacc_technique_scale{tag}", metrics)
        state = float(np.mean([v[0] for v in s.values()]))
        tech = float(np.mean([v[0] for v in t.values()]))
        curves["state"].append(state)
        curves["technique"].append(tech)
        metrics[f"bacc_state_mean_scale{tag}"] = state
        metrics[f"bacc_technique_mean_scale{tag}"] = tech
        if scale == 0.0:
            cis = {"state": s, "technique": t}
            metrics["bacc_state_at_zero_effect"] = state
            metrics["bacc_technique_at_zero_effect"] = tech
    claims = []
    if cis:
        s0, t0 = cis["state"], cis["technique"]
        claims.append(Claim(
            claim="with all simulated effects at zero, state decoding is at chance (no leakage)",
            paper="chance 0.5",
            measured=f"bacc {metrics['bacc_state_at_zero_effect']:.3f}; fold CIs "
                     + ", ".join(f"{m} [{v[1]:.2f}, {v[2]:.2f}]" for m, v in s0.items()),
            holds=bool(all(v[1] <= 0.5 <= v[2] for v in s0.values())
                       and abs(metrics["bacc_state_at_zero_effect"] - 0.5) < 0.05)))
        claims.append(Claim(
            claim="with all simulated effects at zero, technique decoding is at chance",
            paper="chance 1/3",
            measured=f"bacc {metrics['bacc_technique_at_zero_effect']:.3f}; fold CIs "
                     + ", ".join(f"{m} [{v[1]:.2f}, {v[2]:.2f}]" for m, v in t0.items()),
            holds=bool(all(v[1] <= 1 / 3 <= v[2] for v in t0.values()))))
    claims.append(Claim(
        claim="accuracy grows with the simulated effect size",
        paper="(sanity check of the benchmark, not a paper number)",
        measured="state " + " -> ".join(f"{v:.2f}" for v in curves["state"])
                 + "; technique " + " -> ".join(f"{v:.2f}" for v in curves["technique"]),
        holds=bool(curves["state"][-1] > curves["state"][0] + 0.05
                   and curves["technique"][-1] > curves["technique"][0] + 0.05)))
    fig, ax = plt.subplots(figsize=(5, 3.5))
    ax.plot(config["scales"], curves["state"], "o-", label="state (chance 0.5)")
    ax.plot(config["scales"], curves["technique"], "s-", label="technique (chance 1/3)")
    ax.axhline(0.5, color="C0", ls=":")
    ax.axhline(1 / 3, color="C1", ls=":")
    ax.set_xlabel("effect-size multiplier (1 = default simulator)")
    ax.set_ylabel("balanced accuracy, mean of models")
    ax.legend()
    fig.tight_layout()
    cfg = common.sim_config(config)
    notes = (common.SIM_NOTE + f" Scales multiply theta/alpha/technique effects and the "
             f"training gain; at scale 1: {cfg.effect_sizes()}. QUICK: {cfg.n_subjects} "
             f"subjects, {cfg.block_seconds:.0f} s blocks, models {config['models']}.")
    return Result(metrics=metrics, claims=claims, figures={"effect_size": fig}, notes=notes)
