"""P8 claim: blackboard data discovery F1 >= every baseline's (master-slave, single agent
with all profiles in a truncated context, BM25 and dense retrieval): the claim holds when
the 95% paired-bootstrap CI over tasks of every difference lies at or above zero.
"""

from __future__ import annotations

import dataclasses

import jax

import jaxlab.blackboard as bb
from experiments._harness import Claim, Result, RunContext, log
from experiments.blackboard import _setup as su

NAME = "blackboard_discovery"
PAPER = "P8"
DESCRIPTION = "Data-discovery P/R/F1 of blackboard vs master-slave, single agent, BM25"


@dataclasses.dataclass(frozen=True)
class Config(su.SubLakeConfig):
    """Settings of one run; the defaults are QUICK (2 CPU cores, minutes)."""


QUICK = Config()
TINY = Config(**su.TINY_OVERRIDES, tables=30)  # the smoke tier
FULL = Config(**su.SUBLAKE_FULL_OVERRIDES)

BASELINES = ("master_slave", "single_agent", "retrieval", "dense_retrieval")


def full_work(config: Config) -> float:
    """`su.lake_work`: tasks x tables x the agent model's parameters."""
    return su.lake_work(config, config.tables)


def run(config: Config, key: jax.Array, ctx: RunContext) -> Result:
    k_data, k_boot = jax.random.split(key)
    _, lake, tasks = su.lake_and_tasks(config, k_data, int(config.tables))
    log.info(
        "sub-lake: %d tables, %d partitions; %d tasks", len(lake), len(lake.partitions), len(tasks)
    )
    bb.save_tasks(tasks, ctx.out_dir / "tasks.json")
    model = su.agent_model(config)
    found = bb.run_methods(lake, tasks, model, su.discovery_config(config))
    m = su.discovery_metrics(tasks, found, k_boot)
    m.update(
        {
            "lake_tables": len(lake),
            "lake_partitions": len(lake.partitions),
            "tasks": len(tasks),
            "model_calls": model.calls,
        }
    )
    parts = ", ".join(
        f"{b} {m[f'{b}/f1']:.3f} (diff {m[f'f1_diff_vs_{b}']:+.3f}, 95% CI "
        f"[{m[f'f1_diff_vs_{b}/ci_low']:+.3f}, {m[f'f1_diff_vs_{b}/ci_high']:+.3f}])"
        for b in BASELINES
    )
    claims = [
        Claim(
            "blackboard discovery F1 >= every baseline's, every 95% CI low end >= 0 (small "
            "open model agents)",
            "up to 9% relative F1 gain over the best baseline",
            f"blackboard {m['blackboard/f1']:.3f} vs {parts}; single agent saw "
            f"{m['single_agent/visible_fraction']:.0%} of the lake",
            bool(all(m[f"f1_diff_vs_{b}/ci_low"] >= 0 for b in BASELINES)),
        )
    ]
    notes = su.NOTES.format(model=config.model, ctx=config.context_tokens)
    fig = su.method_figure(m, list(found), "f1", "discovery F1 (mean over tasks)")
    fig.axes[0].set_title(f"{len(tasks)} tasks, {len(lake)} tables", fontsize=9)
    return Result(metrics=m, claims=claims, figures={"discovery": fig}, notes=notes)
