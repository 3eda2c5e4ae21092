"""P8 claim: the blackboard's discovery-F1 margin over the best baseline grows, or holds, as
the lake grows (partitions fixed in size; the same tasks at every size: the lakes are
nested, so a larger lake only adds distractor partitions). The margin at each size is a
paired bootstrap over tasks (`n<tables>/margin`), the best baseline chosen by mean F1
among the paper's baselines and the token-matched ones; the trend is the slope of the
margin against log(tables), its interval a bootstrap over tasks (`margin_slope`). The
claim compares the largest lake's margin with the smallest's (non-inferiority, margin
preset), gated on the agents' competence at the largest lake (`su.relevance_gate`).
Figure: F1 (95% intervals) and tokens vs size.
"""

from __future__ import annotations

import dataclasses

import jax
import matplotlib.pyplot as plt
import numpy as np

import jaxlab.blackboard as bb
from experiments._harness import (
    Result,
    RunContext,
    bootstrap,
    gated,
    log,
    noninferior,
    paired_bootstrap,
)
from experiments.blackboard import _setup as su

NAME = "blackboard_scaling"
PAPER = "P8"
DESCRIPTION = "Discovery F1 and tokens per task vs lake size (nested lakes, same tasks)"


@dataclasses.dataclass(frozen=True)
class Config(su.LakeConfig):
    """Settings of one run; the defaults are QUICK (2 CPU cores, minutes)."""

    sizes: tuple[int, ...] = (50, 100, 200)  # tables in the nested lakes
    tasks: int = 20
    # non-inferiority margin of "grows or holds", F1 units: the margin over the best
    # baseline at the largest lake may fall short of the smallest lake's by less than this
    # (a tolerance fixed before the run, not from the paper)
    scaling_margin: float = 0.05


QUICK = Config()
TINY = Config(**su.TINY_OVERRIDES, sizes=(20, 40))  # the smoke tier
FULL = Config(**su.FULL_OVERRIDES, sizes=(50, 200, 500, 10_000))

BASELINES = (*su.BASELINES, *su.MATCHED)


def full_work(config: Config) -> float:
    """`su.lake_work` summed over the nested lakes' sizes."""
    return su.lake_work(config, sum(config.sizes))


def run(config: Config, key: jax.Array, ctx: RunContext) -> Result:
    k_data, k_boot, k_gate = jax.random.split(key, 3)
    k_lake, _ = jax.random.split(k_data)
    sizes = [int(s) for s in config.sizes]
    full, small, tasks = su.lake_and_tasks(config, k_data, sizes[0])
    keep = tuple(s for t in tasks for s in t.data_sources)
    model = su.agent_model(config)
    cfg = su.discovery_config(config)
    m: dict = {}
    curves: dict[str, list] = {b: [] for b in ("blackboard", *BASELINES)}
    lows: dict[str, list] = {b: [] for b in curves}
    highs: dict[str, list] = {b: [] for b in curves}
    tokens: dict[str, list] = {b: [] for b in curves}
    actual = []
    margins, per_task = [], []
    for n in sizes:
        lake = small if n == sizes[0] else full.subset(n, key=k_lake, keep=keep)
        assert set(small.tables) <= set(lake.tables)
        actual.append(len(lake))
        found = bb.run_methods(lake, tasks, model, cfg, methods=("blackboard", *BASELINES))
        mm, f1 = su.discovery_metrics(tasks, found, k_boot)
        for b in curves:
            e = mm[f"{b}/f1"]
            curves[b].append(e.value)
            lows[b].append(e.low)
            highs[b].append(e.high)
            tokens[b].append(mm[f"{b}/tokens_per_task"])
            m[f"n{len(lake)}/{b}/f1"] = mm[f"{b}/f1"]
            m[f"n{len(lake)}/{b}/tokens_per_task"] = mm[f"{b}/tokens_per_task"]
        best = su.best_baseline(mm, "f1", BASELINES)
        margin = mm[f"f1_diff_vs_{best}"]  # paired bootstrap over tasks
        margins.append(margin.value)
        per_task.append(f1["blackboard"] - f1[best])  # the margin of each task
        m[f"n{len(lake)}/margin"] = margin
        m[f"n{len(lake)}/best_baseline_tokens_per_task"] = mm[f"{best}/tokens_per_task"]
        log.info("lake %d tables: margin %.3f", len(lake), margin)
    m["model_calls"] = model.calls
    fig, ax = plt.subplots(1, 2, figsize=(9, 3.5))
    for b in curves:
        ax[0].errorbar(
            actual,
            curves[b],
            yerr=[
                np.maximum(np.subtract(curves[b], lows[b]), 0),
                np.maximum(np.subtract(highs[b], curves[b]), 0),
            ],
            marker="o",
            capsize=2,
            label=b,
        )
        ax[1].plot(actual, tokens[b], marker="o", label=b)
    ax[0].set(xlabel="tables in the lake", ylabel="discovery F1")
    ax[1].set(xlabel="tables in the lake", ylabel="tokens per task", yscale="log")
    ax[0].legend(fontsize=7)
    fig.tight_layout()
    growth = paired_bootstrap(
        per_task[-1], per_task[0], seed=su.boot_seed(k_boot), n_resamples=1000
    )
    m["margin_growth"] = growth
    logx = np.log(np.asarray(actual, np.float64))
    logx = logx - logx.mean()

    def slope(*cols, axis=-1):  # per-size mean margins regressed on log(tables)
        means = np.stack([np.mean(c, axis=axis) for c in cols], axis=-1)
        return (means * logx).sum(-1) / (logx**2).sum()

    if len(set(actual)) > 1:
        m["margin_slope"] = bootstrap(
            tuple(per_task), slope, seed=su.boot_seed(k_boot), n_resamples=1000
        )
    gate_est, gate = su.relevance_gate(lake, tasks, model, config, k_gate)
    m["agent_relevance_auroc"] = gate_est
    claims = [
        gated(
            noninferior(
                growth,
                f"margin at {actual[-1]} tables",
                f"margin at {actual[0]} tables",
                config.scaling_margin,
                claim="blackboard's F1 margin over the best baseline grows or holds with lake size",
                paper="blackboard scales to large lakes where baselines degrade",
                detail=(
                    "margin = blackboard F1 - the best baseline's (by mean) at each size, paired "
                    f"over the {len(tasks)} tasks: "
                    + ", ".join(
                        f"{a} tables: {x:+.3f}" for a, x in zip(actual, margins, strict=True)
                    )
                    + (
                        f"; slope per log(tables) {m['margin_slope']:+.3f}"
                        if "margin_slope" in m
                        else ""
                    )
                ),
            ),
            gate,
        )
    ]
    notes = su.NOTES.format(model=config.model, ctx=config.context_tokens)
    return Result(metrics=m, claims=claims, figures={"scaling": fig}, notes=notes)
