"""P10 sanity check: accuracy falls to chance as the simulated effect sizes shrink to zero.

`repeats` independent simulated data sets are drawn per effect scale; data set `r` comes
from the named key stream `ctx.key("dataset", r)` at every scale (same subjects, blocks,
artefacts and noise draws; only the effect scale differs), so the scales are compared
pair by pair. Per data set the accuracy of a task is the mean over the models of their
fold-mean balanced accuracies. Claims: at zero effect, a t interval over the data sets
of `accuracy - chance` (TOST within `chance_margin`); growth, a paired t interval over
the data sets of `accuracy(largest scale) - accuracy(first scale)` (superior by more
than `growth_margin`).
"""

from __future__ import annotations

import dataclasses

import jax
import matplotlib.pyplot as plt
import numpy as np

from experiments._harness import (
    Claim,
    Estimate,
    Precondition,
    Result,
    RunContext,
    all_of,
    equivalent,
    gated,
    paired_t,
    superior,
    t_mean,
)
from experiments.eeg import _setup as common

NAME = "eeg_effect_size"
PAPER = "P10"
DESCRIPTION = "State / technique accuracy vs simulated effect size; chance at zero (no leakage)"


@dataclasses.dataclass(frozen=True)
class Config(common.EegConfig):
    """Settings of one run; the defaults are QUICK (2 CPU cores, minutes)."""

    scales: tuple[float, ...] = (0.0, 0.5, 1.0, 2.0)
    models: tuple[str, ...] = ("lda", "logreg")
    # independent simulated data sets per scale (>= 2: the claims' t intervals)
    repeats: int = 4
    # "at chance": the zero-effect accuracy lies within chance +- `chance_margin`;
    # "grows": the largest scale's accuracy exceeds the zero-effect one by more than
    # `growth_margin` (both the 5 points the claims have always used)
    chance_margin: float = 0.05
    growth_margin: float = 0.05


QUICK = Config()
# the smoke tier
TINY = Config(n_subjects=6, block_seconds=8.0, n_folds=2, scales=(0.0, 1.0), repeats=2)
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


def _mean_over_repeats(values):
    """One metric's mean over the repeated data sets; an `Estimate` (a model's t interval
    over folds) averages its value and both ends (the interval of a typical data set)."""
    if not isinstance(values[0], Estimate):
        return float(np.mean(values))
    if len(values) == 1:
        return values[0]
    e = values[0]
    return Estimate(
        float(np.mean([v.value for v in values])),
        float(np.mean([v.low for v in values])),
        float(np.mean([v.high for v in values])),
        e.level,
        f"{e.method}, ends averaged over {len(values)} data sets",
        e.n,
    )


def growth_claims(
    acc: dict[str, np.ndarray], scales: tuple[float, ...], margin: float
) -> dict[str, Claim]:
    """Per task, "accuracy grows with the effect size": `acc[task]` is the `(scales,
    repeats)` accuracy of data set r at each scale (data set r paired across scales); the
    paired t interval over the data sets of `acc[-1] - acc[0]` must exceed `margin`."""
    out = {}
    for task, a in acc.items():
        a = np.asarray(a, np.float64)
        if a.ndim != 2 or a.shape[0] != len(scales) or a.shape[1] < 2:
            raise ValueError(
                f"acc: expected ({len(scales)} scales, >= 2 data sets) per task, received "
                f"{task!r} with shape {a.shape}"
            )
        out[task] = superior(
            paired_t(a[-1], a[0]),
            f"effect scale {scales[-1]:g}",
            f"effect scale {scales[0]:g}",
            margin,
            claim=f"{task} accuracy grows with the effect size",
            paper="-",
            detail=f"paired over {a.shape[1]} simulated data sets (per data set: "
            + ", ".join(f"{hi:.2f} vs {lo:.2f}" for hi, lo in zip(a[-1], a[0], strict=True))
            + ")",
        )
    return out


def run(config, key: jax.Array, ctx: RunContext) -> Result:
    del key  # every data set comes from a named stream of ctx
    metrics, curves = {}, {"state": [], "technique": []}
    reps = int(config.repeats)
    if reps < 2:
        raise ValueError(f"repeats: expected >= 2 data sets per scale, received {reps}")
    acc = {"state": [], "technique": []}  # (scales, repeats)
    zero = None
    for scale in config.scales:
        tag = f"{scale:g}".replace(".", "p")
        # independent simulated data sets per scale: the epochs of one block share its
        # artefacts and noise, so one data set's fold CIs are too narrow
        rep_metrics, rep_state, rep_tech = [], [], []
        for r in range(reps):
            rm = {}
            s, t = _evaluate_scale(config, ctx.key("dataset", r), scale, tag, rm)
            rep_metrics.append(rm)
            rep_state.append(float(np.mean([np.mean(v) for v in s.values()])))
            rep_tech.append(float(np.mean([np.mean(v) for v in t.values()])))
        for name in rep_metrics[0]:  # per-model metrics: mean over repeats
            metrics[name] = _mean_over_repeats([rm[name] for rm in rep_metrics])
        acc["state"].append(rep_state)
        acc["technique"].append(rep_tech)
        state, tech = float(np.mean(rep_state)), float(np.mean(rep_tech))
        curves["state"].append(state)
        curves["technique"].append(tech)
        metrics[f"bacc_state_mean_scale{tag}"] = t_mean(rep_state)
        metrics[f"bacc_technique_mean_scale{tag}"] = t_mean(rep_tech)
        if scale == 0.0:
            zero = (rep_state, rep_tech)
            metrics["zero_effect_repeats"] = reps
            for task, vals in (("state", rep_state), ("technique", rep_tech)):
                metrics[f"bacc_{task}_at_zero_effect"] = t_mean(vals)
    metrics["repeats"] = reps
    claims = []
    if zero is not None:
        for task, chance, vals in (("state", 0.5, zero[0]), ("technique", 1 / 3, zero[1])):
            m = float(np.mean(vals))
            if len(vals) >= 2:
                diff = t_mean(np.asarray(vals) - chance)
            else:  # one data set: no interval (untestable, the gate below)
                diff = Estimate(m - chance, float("nan"), float("nan"), 0.95, "t", 1)
            claims.append(
                gated(
                    equivalent(
                        diff,
                        f"{task} decoding at zero effect",
                        f"chance {chance:.3g}",
                        config.chance_margin,
                        claim="[simulator check, no planted effect] with all simulated "
                        f"effects at zero, {task} decoding is at chance"
                        + (" (no leakage)" if task == "state" else ""),
                        paper=f"chance {chance:.3g}",
                        detail=f"bacc {m:.3f} over {len(vals)} independent simulated data sets "
                        "(per data set: "
                        + ", ".join(f"{v:.3f}" for v in vals)
                        + f"; mean of {list(config.models)}); TOST within "
                        f"+-{config.chance_margin:g} (preset), simulator data",
                    ),
                    Precondition(
                        "at least two zero-effect data sets (a t interval)",
                        len(vals) >= 2,
                        f"{len(vals)} data set(s)",
                    ),
                )
            )
    # the largest scale vs the first (zero) one, data set by data set
    grows = growth_claims(
        {k: np.asarray(v) for k, v in acc.items()}, tuple(config.scales), config.growth_margin
    )
    for task, c in grows.items():
        if c.estimate is not None:
            metrics[f"bacc_{task}_growth"] = c.estimate
    claims.append(
        all_of(
            grows,
            claim="[simulator check, planted effects] accuracy grows with the simulated "
            "effect size",
            paper="(sanity check of the benchmark, not a paper number)",
            detail=f"mean over {reps} data sets per scale {list(config.scales)}: state "
            + " -> ".join(f"{v:.2f}" for v in curves["state"])
            + "; technique "
            + " -> ".join(f"{v:.2f}" for v in curves["technique"]),
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
        f"subjects, {cfg.block_seconds:.0f} s blocks, models {list(config.models)}. "
        f"{reps} independent simulated data sets per scale (data set r from the key "
        "stream ('dataset', r) at every scale, so scales are paired); CIs over data sets: "
        "the epochs of one block share its artefacts (blink and EMG counts) and noise, so "
        "one data set's fold CIs are too narrow for these tests."
    )
    return Result(metrics=metrics, claims=claims, figures={"effect_size": fig}, notes=notes)
