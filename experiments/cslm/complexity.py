"""P7 claim: token complexity B*(n) grows with problem size, in the algorithm's class.

The paper's thesis (token complexity as the core measure of LM computation), made
falsifiable and measured on these models: for every family the smallest reasoning budget
B*(n, p) reaching accuracy p grows with n, and its fitted growth class (AIC over constant,
log n, n, n log n, n^2, 2^n) matches the textbook algorithm's step count: linear for chain
sums, counting, addition, tracking and word problems, at least linear for sorting, n^2 for
multiplication. accuracy(n, B) costs one greedy generation per item: the reasoning is cut
at each budget and the answer forced with "\\nAnswer:" (true answer vs three distractors
scored by likelihood; chance 0.25).
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
    gated,
    superior,
    wilson,
)
from experiments.cslm import _setup
from jaxlab import cslm

NAME = "cslm_complexity"
PAPER = "P7"
DESCRIPTION = "Token complexity B*(n): grows with n, growth class = the algorithm's step count"

EXPECTED = {
    "chain_sum": ("n",),
    "counting": ("n",),
    "addition": ("n",),
    "tracking": ("n",),
    "word_problem": ("n",),
    "multiplication": ("n^2",),
    "sorting": ("n", "n log n", "n^2", "2^n"),
}


@dataclasses.dataclass(frozen=True)
class Config(_setup.BudgetConfig):
    """Settings of one run; the defaults are QUICK (2 CPU cores, minutes)."""

    p: float = 0.5  # the accuracy B* reaches
    n_boot: int = 500
    # "most family-model pairs": the share of fitted pairs whose growth class matches must
    # be at least this (a majority; the claim's wording, fixed before the run)
    most: float = 0.5


QUICK = Config()
TINY = Config(**_setup.BUDGET_TINY, n_boot=20)  # the smoke tier
FULL = Config(**_setup.BUDGET_FULL_OVERRIDES, n_boot=2000)


def kendall_tau(x, y) -> float:
    """Kendall's tau-a of y against x (inf allowed in y: it counts as larger)."""
    x, y = np.asarray(x, float), np.asarray(y, float)
    s, pairs = 0.0, 0
    for i in range(len(x)):
        for j in range(i + 1, len(x)):
            if y[i] == y[j]:
                pairs += 1
                continue
            s += np.sign(x[j] - x[i]) * np.sign(y[j] - y[i])
            pairs += 1
    return s / pairs if pairs else float("nan")


def full_work(config: Config) -> float:
    """`_setup.chunk_work` with the largest budget as the generated tokens per item."""
    return _setup.chunk_work(config, max(config.budgets))


def run(config: Config, key: jax.Array, ctx: RunContext) -> Result:
    table = _setup.budget_table(config, key)
    budgets, p = list(config.budgets), float(config.p)
    metrics: dict[str, float | Estimate] = {}
    grows, matches, fitted_pairs = 0, 0, 0
    growth: dict[str, Estimate] = {}
    pairs = 0
    classes: dict[str, str] = {}
    fig_heat, axes_h = plt.subplots(
        len(config.models),
        len(config.families),
        figsize=(2.6 * len(config.families), 2.4 * len(config.models)),
        squeeze=False,
    )
    fig_b, axes_b = plt.subplots(
        1, len(config.families), figsize=(2.8 * len(config.families), 2.8), squeeze=False
    )
    for mi, model in enumerate(config.models):
        for fi, family in enumerate(config.families):
            sizes = list(config.sizes_of(family))
            acc = np.array([table[(model, family, n)]["correct"].mean(0) for n in sizes])
            est = [
                cslm.min_budget_ci(
                    table[(model, family, n)]["correct"],
                    budgets,
                    p,
                    key=jax.random.fold_in(key, 97 * mi + fi),
                    n_boot=config.n_boot,
                )
                for n in sizes
            ]
            tag = f"{_setup.short(model)}/{family}"
            for n, a, e in zip(sizes, acc, est, strict=True):
                metrics[f"{tag}/n{n}/acc_max_budget"] = float(a[-1])
                # jaxlab.cslm.min_budget_ci: percentile bootstrap over items, level 0.9
                metrics[f"{tag}/n{n}/bstar"] = Estimate(
                    e.value, e.low, e.high, 0.9, "percentile bootstrap", config.items
                )
            values = np.array([e.value for e in est])
            tau = kendall_tau(sizes, values)
            metrics[f"{tag}/kendall_tau"] = tau
            # tau of the sizes' point estimates of B*: one measurement, no interval
            growth[tag] = Estimate.single(
                tau, n=len(sizes), method="Kendall tau-a of the B* estimates (no interval)"
            )
            pairs += 1
            grows += bool(tau > 0)
            finite = np.isfinite(values)
            metrics[f"{tag}/finite_sizes"] = int(finite.sum())
            ax = axes_b[0, fi]
            lo = np.array([e.low for e in est])
            hi = np.array([e.high for e in est])
            ax.errorbar(
                np.array(sizes)[finite],
                values[finite],
                yerr=[
                    np.maximum(values[finite] - lo[finite], 0.0),
                    np.where(
                        np.isfinite(hi[finite]), np.maximum(hi[finite] - values[finite], 0.0), 0.0
                    ),
                ],
                fmt="o",
                capsize=2,
                label=_setup.short(model),
            )
            if finite.sum() >= 3:
                sd = np.array([e.sd for e in est])[finite]
                sd = np.where(np.isfinite(sd) & (sd > 0), sd, 0.25 * values[finite] + 1.0)
                fit = cslm.fit_growth(np.array(sizes)[finite], values[finite], sigma=sd)
                fitted_pairs += 1
                ok = fit.selected in EXPECTED[family]
                matches += ok
                metrics[f"{tag}/growth_class_index"] = list(cslm.GROWTH_CLASSES).index(fit.selected)
                classes[tag] = fit.selected
                metrics[f"{tag}/growth_confidence"] = fit.confidence
                metrics[f"{tag}/growth_matches"] = float(ok)
                grid = np.linspace(min(sizes), max(sizes), 50)
                ax.plot(
                    grid,
                    fit.predict(grid),
                    lw=1,
                    label=f"{_setup.short(model)} fit: {fit.selected} ({fit.confidence:.2f})",
                )
            ax.set_title(family, fontsize=9)
            ax.set_xlabel("n")
            ax.set_yscale("log")
            ax.legend(fontsize=5)
            axh = axes_h[mi, fi]
            im = axh.imshow(acc.T, origin="lower", vmin=0, vmax=1, aspect="auto", cmap="viridis")
            axh.set_xticks(range(len(sizes)), sizes, fontsize=6)
            axh.set_yticks(range(len(budgets)), budgets, fontsize=6)
            axh.set_title(f"{_setup.short(model)} {family}", fontsize=7)
            axh.set_xlabel("n", fontsize=7)
            axh.set_ylabel("budget B", fontsize=7)
    axes_b[0, 0].set_ylabel(f"B*(n, p={p})")
    fig_heat.colorbar(im, ax=axes_h, shrink=0.6, label="accuracy")
    metrics["pairs"] = pairs
    metrics["pairs_growing"] = grows
    metrics["pairs_fitted"] = fitted_pairs
    metrics["pairs_class_matches"] = matches
    frame = "The paper's thesis, made falsifiable, measured on these models: "
    grow_claim = frame + (
        "B*(n) grows with n for every family (Kendall tau > 0; B* = inf when "
        f"accuracy {p} is never reached, counted as largest)"
    )
    grow_paper = "token complexity grows with problem size"
    share = (
        wilson(matches, fitted_pairs)
        if fitted_pairs
        else Estimate.point(float("nan"), method="no fitted pair")
    )
    metrics["share_class_matches"] = share
    claims = [
        all_of(
            {
                tag: superior(
                    tau,
                    f"B*(n) of {tag}",
                    "no growth (Kendall tau 0)",
                    claim=grow_claim,
                    paper=grow_paper,
                )
                for tag, tau in growth.items()
            },
            claim=grow_claim,
            paper=grow_paper,
            detail=f"{grows}/{pairs} family-model pairs grow",
        ),
        gated(
            at_least(
                share,
                config.most,
                null=f"a share of {config.most:g} of the fitted pairs (most)",
                claim=frame + "the fitted growth class of B*(n) matches the algorithm's step "
                "count (linear for chain sums and counting, at least linear for sorting) for "
                "most family-model pairs",
                paper="token complexity reflects the problem's complexity",
                subject="share of fitted pairs whose class matches",
                detail=f"{matches}/{fitted_pairs} fitted pairs match ({pairs - fitted_pairs} "
                "pairs had fewer than 3 sizes reaching p)",
            ),
            Precondition(
                "a family-model pair with >= 3 sizes reaching p (a growth fit)",
                fitted_pairs > 0,
                f"{fitted_pairs} of {pairs} pairs fitted",
            ),
        ),
    ]
    notes = (
        f"{_setup.CAVEAT} Task generators are jaxlab's own (synthetic; reasoning-gym "
        "not used). "
        "Greedy reasoning generated once per item up to the largest budget; at each budget "
        "the reasoning is truncated, '\\nAnswer:' appended and the true answer scored "
        "against three perturbed distractors (chance accuracy 0.25; a sorted answer's "
        "distractors are sorted too, so order alone gives nothing away). Budget 0 is the "
        "answer with no reasoning, so B* has no floor. B* interpolates accuracy linearly "
        "in log(1 + budget); intervals: bootstrap over items (90%). Items, "
        f"sizes, budgets: {config.items} per size, "
        f"{ {f: list(s) for f, s in config.sizes} }, {budgets}. "
        f"growth_class_index indexes {list(cslm.GROWTH_CLASSES)}; selected classes: "
        f"{classes}."
    )
    return Result(
        metrics=metrics,
        claims=claims,
        figures={"accuracy_heatmaps": fig_heat, "bstar_fits": fig_b},
        notes=notes,
    )
