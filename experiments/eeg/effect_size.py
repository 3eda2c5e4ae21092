"""P10 sanity check: accuracy falls to chance as the simulated effect sizes shrink to zero."""

from __future__ import annotations

import dataclasses

import jax
import matplotlib.pyplot as plt
import numpy as np

from experiments._harness import Claim, Result, RunContext
from experiments.eeg import _setup as common
from jaxlab import eeg

NAME = "eeg_effect_size"
PAPER = "P10"
DESCRIPTION = "State / technique accuracy vs simulated effect size; chance at zero (no leakage)"


@dataclasses.dataclass(frozen=True)
class Config(common.EegConfig):
    """Settings of one run; the defaults are QUICK (2 CPU cores, minutes)."""

    scales: tuple[float, ...] = (0.0, 0.5, 1.0, 2.0)
    models: tuple[str, ...] = ("lda", "logreg")
    zero_repeats: int = 4


QUICK = Config()
# the smoke tier
TINY = Config(n_subjects=6, block_seconds=8.0, n_folds=2, scales=(0.0, 1.0), zero_repeats=2)
FULL = Config(
    **common.FULL_OVERRIDES,
    scales=(0.0, 0.25, 0.5, 1.0, 2.0),
    models=("lda", "logreg", "svm", "rf", "tangent"),
)


def _evaluate_scale(config, key, scale, tag, metrics):
    """State and technique cross-validation on one simulated data set at `scale`."""
    k_sim, k_fold = jax.random.split(key)
    tab, _, _ = common.epochs_for(config, k_sim, scale)
    feats, covs = common.inputs_for(tab)
    folds = common.folds_for(tab.subject, config.n_folds, k_fold)
    k_rf = jax.random.fold_in(key, 11)  # the random forest's seed (FULL runs rf)
    s = common.evaluate(
        config.models,
        feats,
        covs,
        np.asarray(tab.condition),
        folds,
        f"bacc_state_scale{tag}",
        metrics,
        key=k_rf,
    )
    med = np.asarray(tab.condition) == 1
    mt = tab.select(med)
    tf = common.folds_for(mt.subject, config.n_folds, k_fold)
    t = common.evaluate(
        config.models,
        feats[med],
        covs[med],
        np.asarray(mt.group),
        tf,
        f"bacc_technique_scale{tag}",
        metrics,
        key=k_rf,
    )
    return s, t


def run(config, key: jax.Array, ctx: RunContext) -> Result:
    metrics, curves = {}, {"state": [], "technique": []}
    zero = None
    for i, scale in enumerate(config.scales):
        tag = f"{scale:g}".replace(".", "p")
        # at zero effect, average over independent simulated data sets: the epochs of one
        # block share its artefacts and noise, so one data set's fold CIs are too narrow
        reps = int(config.zero_repeats) if scale == 0.0 else 1
        rep_metrics, rep_state, rep_tech = [], [], []
        for r in range(reps):
            k = jax.random.fold_in(key, i)
            k = k if r == 0 else jax.random.fold_in(k, 1000 + r)
            rm = {}
            s, t = _evaluate_scale(config, k, scale, tag, rm)
            rep_metrics.append(rm)
            rep_state.append(float(np.mean([v[0] for v in s.values()])))
            rep_tech.append(float(np.mean([v[0] for v in t.values()])))
        for name in rep_metrics[0]:  # per-model metrics: mean over repeats
            metrics[name] = float(np.mean([rm[name] for rm in rep_metrics]))
        state, tech = float(np.mean(rep_state)), float(np.mean(rep_tech))
        curves["state"].append(state)
        curves["technique"].append(tech)
        metrics[f"bacc_state_mean_scale{tag}"] = state
        metrics[f"bacc_technique_mean_scale{tag}"] = tech
        if scale == 0.0:
            zero = (rep_state, rep_tech)
            metrics["bacc_state_at_zero_effect"] = state
            metrics["bacc_technique_at_zero_effect"] = tech
            metrics["zero_effect_repeats"] = reps
            if reps >= 2:
                for task, vals in (("state", rep_state), ("technique", rep_tech)):
                    _, lo, hi = eeg.fold_ci(vals)
                    metrics[f"bacc_{task}_at_zero_effect_ci_low"] = lo
                    metrics[f"bacc_{task}_at_zero_effect_ci_high"] = hi
    claims = []
    if zero is not None:
        for task, chance, vals in (("state", 0.5, zero[0]), ("technique", 1 / 3, zero[1])):
            m = metrics[f"bacc_{task}_at_zero_effect"]
            lo = metrics.get(f"bacc_{task}_at_zero_effect_ci_low", -np.inf)
            hi = metrics.get(f"bacc_{task}_at_zero_effect_ci_high", np.inf)
            claims.append(
                Claim(
                    claim=f"with all simulated effects at zero, {task} decoding is at chance"
                    + (" (no leakage)" if task == "state" else ""),
                    paper=f"chance {chance:.3g}",
                    measured=f"bacc {m:.3f}, 95% CI [{lo:.3f}, {hi:.3f}] over {len(vals)} "
                    "independent simulated data sets (per data set: "
                    + ", ".join(f"{v:.3f}" for v in vals)
                    + f"; mean of {list(config.models)})",
                    holds=bool(lo <= chance <= hi and abs(m - chance) < 0.05),
                )
            )
    claims.append(
        Claim(
            claim="accuracy grows with the simulated effect size",
            paper="(sanity check of the benchmark, not a paper number)",
            measured="state "
            + " -> ".join(f"{v:.2f}" for v in curves["state"])
            + "; technique "
            + " -> ".join(f"{v:.2f}" for v in curves["technique"]),
            holds=bool(
                curves["state"][-1] > curves["state"][0] + 0.05
                and curves["technique"][-1] > curves["technique"][0] + 0.05
            ),
        )
    )
    fig, ax = plt.subplots(figsize=(5, 3.5))
    ax.plot(config.scales, curves["state"], "o-", label="state (chance 0.5)")
    ax.plot(config.scales, curves["technique"], "s-", label="technique (chance 1/3)")
    ax.axhline(0.5, color="C0", ls=":")
    ax.axhline(1 / 3, color="C1", ls=":")
    ax.set_xlabel("effect-size multiplier (1 = default simulator)")
    ax.set_ylabel("balanced accuracy, mean of models")
    ax.legend()
    fig.tight_layout()
    cfg = common.sim_config(config)
    notes = (
        common.SIM_NOTE + f" Scales multiply theta/alpha/technique effects and the "
        f"training gain; at scale 1: {cfg.effect_sizes()}. QUICK: {cfg.n_subjects} "
        f"subjects, {cfg.block_seconds:.0f} s blocks, models {list(config.models)}. The "
        f"zero-effect check averages {config.zero_repeats} independent "
        "simulated data sets (CI over data sets): the epochs of one block share its "
        "artefacts (blink and EMG counts) and noise, so one data set's fold CIs are too "
        "narrow for a chance-level test."
    )
    return Result(metrics=metrics, claims=claims, figures={"effect_size": fig}, notes=notes)
