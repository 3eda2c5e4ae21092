"""P7 claim: probabilistic reliability — accuracy decays like (1 - epsilon)^steps.

The paper's thesis (LM computation is probabilistically reliable, with hallucinations,
rather than deterministically correct), made falsifiable and measured on these models: if
each elementary step of a family's algorithm fails independently with rate epsilon,
accuracy across sizes follows (1 - epsilon)^steps; the law holds when the fit reaches
R^2 >= 0.8 on most families. Accuracy is the forced answer after the full reasoning budget,
chance-corrected ((acc - 1/K) / (1 - 1/K), clipped at 0; K = 4 options); the free text's
own final answer is fitted as well. Calibration: ECE of the option-likelihood confidence
(softmax over the K options) against correctness, pooled over families and sizes, with a
percentile-bootstrap interval over items. A competing one-parameter law, the linear decline
accuracy = max(0, 1 - b * steps) (b by least squares weighted by items, on a grid), is fitted
to the same points: the compounding law is supported only where it fits better (higher R^2,
the same number of parameters) on most families (#55 item 6).
Reads the same cached generations as cslm_complexity (built when absent).
"""

from __future__ import annotations

import dataclasses

import jax
import matplotlib.pyplot as plt
import numpy as np

from experiments._harness import (
    Estimate,
    Precondition,
    Result,
    RunContext,
    all_of,
    at_least,
    at_most,
    bootstrap,
    gated,
    wilson,
)
from experiments.cslm import _setup
from jaxlab import cslm

NAME = "cslm_reliability"
PAPER = "P7"
DESCRIPTION = "Accuracy ~ (1 - epsilon)^steps across sizes (R^2 >= 0.8?), confidence ECE"


@dataclasses.dataclass(frozen=True)
class Config(_setup.BudgetConfig):
    """Settings of one run; the defaults are QUICK (2 CPU cores, minutes)."""

    r2_threshold: float = 0.8  # the R^2 a fit must reach (the claim's wording)
    ece_bins: int = 10
    # "most families": the share of fits reaching r2_threshold must be at least this
    most: float = 0.5
    # calibrated: ECE at most this (a common tolerance for "calibrated", fixed before the run)
    ece_bar: float = 0.1
    n_boot: int = 1000  # bootstrap resamples of the ECE (items)


QUICK = Config()
TINY = Config(**_setup.BUDGET_TINY, n_boot=50)  # the smoke tier
FULL = Config(**_setup.BUDGET_FULL_OVERRIDES, ece_bins=15)


def full_work(config: Config) -> float:
    """`_setup.chunk_work` with the largest budget as the generated tokens per item."""
    return _setup.chunk_work(config, max(config.budgets))


def _linear_r2(steps, acc, items) -> float:
    """R^2 (accuracy scale) of the competing law acc = max(0, 1 - b * steps), b >= 0 from
    a grid of 4001 log-spaced values (1e-5..10) by least squares weighted by items."""
    b = np.concatenate([[0.0], np.logspace(-5, 1, 4000)])
    pred = np.clip(1.0 - b[:, None] * steps[None, :], 0.0, 1.0)
    best = pred[int(np.argmin(((acc[None, :] - pred) ** 2 * items[None, :]).sum(1)))]
    ss_tot = float(np.sum((acc - acc.mean()) ** 2))
    return 1.0 - float(np.sum((acc - best) ** 2)) / ss_tot if ss_tot > 0 else float("nan")


def _ece_rows(bins: int):
    """ECE as a vectorised statistic (rows of resampled items) for the harness bootstrap:
    the library's `cslm.expected_calibration_error` on each row."""

    def stat(conf, corr, axis=-1):
        c, k = np.moveaxis(conf, axis, -1), np.moveaxis(corr, axis, -1)
        flat_c, flat_k = c.reshape(-1, c.shape[-1]), k.reshape(-1, k.shape[-1])
        out = [
            float(cslm.expected_calibration_error(a, b, bins=bins))
            for a, b in zip(flat_c, flat_k, strict=True)
        ]
        return np.asarray(out).reshape(c.shape[:-1])

    return stat


def run(config: Config, key: jax.Array, ctx: RunContext) -> Result:
    boot_seed = int(jax.random.randint(ctx.key("bootstrap"), (), 0, 2**31 - 1))
    linear_worse = 0
    table = _setup.budget_table(config, key)
    k = 1 + _setup.N_DISTRACTORS
    metrics: dict[str, float | Estimate] = {}
    fits_ok, fits, free_ok = 0, 0, 0
    fams = config.families
    fig, axes = plt.subplots(1, len(fams), figsize=(2.8 * len(fams), 2.8), squeeze=False)
    for model in config.models:
        conf_all, corr_all = [], []
        for fi, family in enumerate(fams):
            sizes = list(config.sizes_of(family))
            chunks = [table[(model, family, n)] for n in sizes]
            steps = np.array([c["steps"].mean() for c in chunks])
            forced = np.array([c["correct"][:, -1].mean() for c in chunks])
            acc = np.clip((forced - 1.0 / k) / (1.0 - 1.0 / k), 0.0, 1.0)
            free = np.array([c["free_correct"].mean() for c in chunks])
            items = np.array([c["correct"].shape[0] for c in chunks])
            tag = f"{_setup.short(model)}/{family}"
            for c in chunks:
                choice, conf = cslm.option_confidence(c["scores"][:, -1])
                conf_all.append(np.asarray(conf))
                corr_all.append(np.asarray(choice) == 0)
            if not np.any(steps > 0):
                continue
            fit = cslm.fit_step_error(steps, acc, items=items)
            free_fit = cslm.fit_step_error(steps, free, items=items)
            metrics[f"{tag}/epsilon"] = fit.epsilon
            metrics[f"{tag}/r2"] = fit.r2
            metrics[f"{tag}/free_epsilon"] = free_fit.epsilon
            metrics[f"{tag}/free_r2"] = free_fit.r2
            r2_linear = _linear_r2(steps, acc, items.astype(np.float64))
            metrics[f"{tag}/r2_linear"] = r2_linear
            linear_worse += bool(
                np.isfinite(fit.r2) and np.isfinite(r2_linear) and fit.r2 > r2_linear
            )
            for n, a, f in zip(sizes, acc, free, strict=True):
                metrics[f"{tag}/n{n}/acc_corrected"] = float(a)
                metrics[f"{tag}/n{n}/acc_free"] = float(f)
            fits += 1
            fits_ok += bool(np.isfinite(fit.r2) and fit.r2 >= config.r2_threshold)
            free_ok += bool(np.isfinite(free_fit.r2) and free_fit.r2 >= config.r2_threshold)
            ax = axes[0, fi]
            line = ax.plot(steps, acc, "o", label=f"{_setup.short(model)}")[0]
            grid = np.linspace(0, steps.max(), 50)
            ax.plot(
                grid,
                (1 - fit.epsilon) ** grid,
                color=line.get_color(),
                lw=1,
                label=f"eps={fit.epsilon:.3f}, R2={fit.r2:.2f}",
            )
            ax.set_title(family, fontsize=9)
            ax.set_xlabel("steps")
            ax.set_ylim(-0.05, 1.05)
            ax.legend(fontsize=5)
        conf, corr = np.concatenate(conf_all), np.concatenate(corr_all)
        metrics[f"{_setup.short(model)}/ece"] = bootstrap(
            (conf.astype(np.float64), corr.astype(np.float64)),
            _ece_rows(config.ece_bins),
            seed=boot_seed,
            n_resamples=config.n_boot,
        )
        metrics[f"{_setup.short(model)}/mean_confidence"] = float(conf.mean())
        metrics[f"{_setup.short(model)}/option_accuracy"] = float(corr.mean())
    axes[0, 0].set_ylabel("chance-corrected accuracy")
    metrics["fits"] = fits
    metrics["fits_r2_ok"] = fits_ok
    metrics["free_fits_r2_ok"] = free_ok
    frame = "The paper's thesis, made falsifiable, measured on these models: "
    eces = {m: round(metrics[f"{_setup.short(m)}/ece"].value, 3) for m in config.models}
    metrics["fits_exponential_beats_linear"] = linear_worse
    beats = wilson(linear_worse, fits) if fits else Estimate.point(float("nan"), method="no fit")
    metrics["share_exponential_beats_linear"] = beats
    share = wilson(fits_ok, fits) if fits else Estimate.point(float("nan"), method="no fit")
    metrics["share_fits_r2_ok"] = share
    ece_claim = frame + (
        f"the model's option-likelihood confidence is calibrated (ECE <= {config.ece_bar:g})"
    )
    ece_paper = "reliability bounds need calibrated confidence (open question)"
    claims = [
        gated(
            at_least(
                share,
                config.most,
                null=f"a share of {config.most:g} of the fits (most families)",
                claim=frame + f"accuracy ~ (1 - epsilon)^steps fits with R^2 >= "
                f"{config.r2_threshold} on most families",
                paper="probabilistic reliability: errors compound per step",
                subject=f"share of family-model fits reaching R^2 {config.r2_threshold:g}",
                detail=f"{fits_ok}/{fits} family-model fits of the forced answer reach it "
                f"(R^2 nan where accuracy does not vary); free-text answers: {free_ok}/{fits}",
            ),
            Precondition("a family with steps > 0 (a fit)", fits > 0, f"{fits} fits"),
        ),
        all_of(
            {
                m: at_most(
                    metrics[f"{_setup.short(m)}/ece"],
                    config.ece_bar,
                    null=f"calibration tolerance ECE {config.ece_bar:g}",
                    claim=ece_claim,
                    paper=ece_paper,
                    subject=f"{_setup.short(m)} ECE",
                )
                for m in config.models
            },
            claim=ece_claim,
            paper=ece_paper,
            detail=f"ECE {eces} (percentile bootstrap over items)",
        ),
        gated(
            at_least(
                beats,
                config.most,
                null="the one-parameter linear decline acc = 1 - b * steps (a competing law)",
                claim=frame + "the compounding law (1 - epsilon)^steps fits better than a "
                "linear decline with as many parameters (higher R^2) on most families",
                paper="probabilistic reliability: errors compound per step",
                subject="share of family-model fits where the exponential beats the linear law",
                detail=f"{linear_worse}/{fits} fits",
            ),
            Precondition("a family with steps > 0 (a fit)", fits > 0, f"{fits} fits"),
        ),
    ]
    notes = (
        f"{_setup.CAVEAT} Steps per size: the family's textbook step count (additions, digit "
        "operations, comparisons n log2 n, swaps, story steps). epsilon is fitted by "
        "weighted least squares of log accuracy on steps through the origin (accuracies "
        "floored at 1/(2 items)); R^2 on the accuracy scale. Same cached generations as "
        "cslm_complexity."
    )
    return Result(metrics=metrics, claims=claims, figures={"accuracy_vs_steps": fig}, notes=notes)
