"""P10 task 2: 3-way meditation technique classification from meditation epochs."""

from __future__ import annotations

import dataclasses

import jax
import numpy as np

from experiments._harness import Result, RunContext, best_of, superior, t_mean
from experiments.eeg import _setup as common

NAME = "eeg_technique"
PAPER = "P10"
DESCRIPTION = "SA-TA-NA-MA vs Hare Krishna vs Breath Focus from meditation EEG (simulator)"


@dataclasses.dataclass(frozen=True)
class Config(common.EegConfig):
    """Settings of one run; the defaults are QUICK (2 CPU cores, minutes)."""

    deep_models: tuple[str, ...] = ("eegnet", "shallow")
    deep_epochs: int = 6


QUICK = Config()
# the smoke tier
TINY = Config(n_subjects=6, block_seconds=8.0, n_folds=2, deep_epochs=1)
FULL = Config(**common.FULL_OVERRIDES, deep_models=("eegnet", "shallow", "deep"), deep_epochs=100)


def run(config, key: jax.Array, ctx: RunContext) -> Result:
    k_sim, k_fold = jax.random.split(key)
    tab, cfg, kept = common.epochs_for(config, k_sim)
    tab = tab.select(np.asarray(tab.condition) == 1)
    feats, covs = common.inputs_for(tab)
    y = np.asarray(tab.group)
    folds = common.folds_for(tab.subject, config.n_folds, k_fold)
    metrics = {
        "n_subjects": cfg.n_subjects,
        "n_epochs": int(len(y)),
        "kept_fraction": kept,
        **{f"effect_{k}": v for k, v in cfg.effect_sizes().items()},
    }
    summary = common.evaluate(
        config.models,
        feats,
        covs,
        y,
        folds,
        "bacc_technique",
        metrics,
        key=jax.random.fold_in(key, 11),
    )
    (deep,) = common.evaluate_deep(
        config.deep_models,
        common.deep_inputs(tab),
        y,
        tab.subject,
        folds,
        ("bacc_technique",),
        metrics,
        jax.random.fold_in(key, 7),
        ctx=ctx,
        epochs=int(config.deep_epochs),
        tag="technique_",
    )
    summary.update(deep)
    chance = 1 / 3  # the task's chance balanced accuracy (the claim's null)
    above = [m for m, b in summary.items() if t_mean(b).low > chance]

    def vs_chance(m):  # balanced accuracy - chance, t interval over the folds
        return lambda level: superior(
            t_mean(summary[m] - chance, level),
            m,
            "chance 1/3",
            claim=f"{m} decodes above chance",
            paper="-",
        )

    claims = [
        # the best of the models: Holm over them
        best_of(
            {m: vs_chance(m) for m in summary},
            claim="[simulator check, planted effects] the meditation technique (3 groups) is "
            "decodable from meditation EEG of unseen subjects (best classical or deep baseline)",
            paper="baselines reported for task 2 (no numbers in the abstract)",
            detail=f"95% CI above chance for {len(above)}/{len(summary)} models "
            f"({', '.join(above)}), unadjusted; the claim is Holm-corrected over the "
            f"{len(summary)} models; planted effects of the simulator, not real EEG",
        )
    ]
    fig = common.bar_figure(
        {"technique": summary}, 1 / 3, "eeg_technique: leave-subjects-out (simulated L-FAME)"
    )
    notes = (
        common.SIM_NOTE + f" Meditation epochs of both sessions; this run: "
        f"{cfg.n_subjects} subjects, {cfg.block_seconds:.0f} s blocks, deep models "
        f"{list(config.deep_models)} for at most {config.deep_epochs} epochs "
        "(QUICK: short deep training and no DeepConvNet, to fit a few CPU minutes). "
        f"Effect sizes: {cfg.effect_sizes()}."
    )
    return Result(metrics=metrics, claims=claims, figures={"technique": fig}, notes=notes)
