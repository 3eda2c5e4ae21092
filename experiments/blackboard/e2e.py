"""P8 claim: end-to-end success (KramaBench scoring) of the blackboard is higher than the
master-slave's and the single agent's (the 95% paired-bootstrap CI of each difference
above zero); BM25, dense retrieval and the oracle (true tables) for reference.
Discovery feeds the same planner (slot filling by option likelihood, strict parser,
deterministic executor).
"""

from __future__ import annotations

import dataclasses

import jax
import numpy as np

import jaxlab.blackboard as bb
from experiments._harness import Claim, Result, RunContext, log
from experiments.blackboard import _setup as su
from jaxlab import progress_bar

NAME = "blackboard_e2e"
PAPER = "P8"
DESCRIPTION = "End-to-end KramaBench-scored success: blackboard vs master-slave, single, BM25"


@dataclasses.dataclass(frozen=True)
class Config(su.SubLakeConfig):
    """Settings of one run; the defaults are QUICK (2 CPU cores, minutes)."""


QUICK = Config()
TINY = Config(**su.TINY_OVERRIDES, tables=30)  # the smoke tier
FULL = Config(**su.SUBLAKE_FULL_OVERRIDES)


def full_work(config: Config) -> float:
    """`su.lake_work`: tasks x tables x the agent model's parameters."""
    return su.lake_work(config, config.tables)


def run(config: Config, key: jax.Array, ctx: RunContext) -> Result:
    k_data, k_boot = jax.random.split(key)
    _, lake, tasks = su.lake_and_tasks(config, k_data, int(config.tables))
    model = su.agent_model(config)
    found = bb.run_methods(lake, tasks, model, su.discovery_config(config))
    m: dict[str, float] = {}
    per_task: dict[str, np.ndarray] = {}
    rows = []
    for meth, ds in found.items():
        scores, toks = [], []
        for d, t in progress_bar(list(zip(ds, tasks, strict=True)), desc=f"e2e {meth}"):
            qa = bb.answer_query(t.query, d.tables, lake, model)
            ans = qa.answer
            s = 0.0 if ans is None else bb.score_answer(ans, t.answer, t.answer_type)
            scores.append(s)
            toks.append(d.tokens + qa.tokens)
            rows.append(
                {
                    "method": meth,
                    "id": t.id,
                    "found": list(d.tables),
                    "answer": ans,
                    "truth": t.answer,
                    "score": s,
                    "plan": qa.plan,
                    "reason": qa.reason,  # why no answer (the PlanError), "" otherwise
                }
            )
        per_task[meth] = np.asarray(scores)
        m[f"{meth}/success"] = float(np.mean(scores))
        m[f"{meth}/tokens_per_task"] = float(np.mean(toks))
        log.info("%s: success %.3f", meth, m[f"{meth}/success"])
    from jaxlab import write_json

    write_json(ctx.out_dir / "answers.json", rows)
    m.update(su.paired_bootstrap(per_task, "success", k_boot))
    m.update({"lake_tables": len(lake), "tasks": len(tasks), "model_calls": model.calls})
    vs = ("master_slave", "single_agent")
    holds = all(m[f"success_diff_vs_{b}/ci_low"] > 0 for b in vs)
    cis = ", ".join(
        f"{b} {m[f'{b}/success']:.3f} (diff 95% CI [{m[f'success_diff_vs_{b}/ci_low']:+.3f}, "
        f"{m[f'success_diff_vs_{b}/ci_high']:+.3f}])"
        for b in vs
    )
    claims = [
        Claim(
            "blackboard end-to-end success > master-slave and > single agent, 95% CI of each "
            "difference above 0 (small open models)",
            "13%-57% relative improvement over the best baseline",
            f"blackboard {m['blackboard/success']:.3f} vs {cis}; BM25 "
            f"{m['retrieval/success']:.3f}, dense {m['dense_retrieval/success']:.3f}, oracle "
            f"tables {m['oracle/success']:.3f}",
            bool(holds),
        )
    ]
    notes = su.NOTES.format(model=config.model, ctx=config.context_tokens)
    fig = su.method_figure(m, list(found), "success", "end-to-end success (KramaBench score)")
    fig.axes[0].set_title(f"{len(tasks)} tasks, {len(lake)} tables", fontsize=9)
    return Result(metrics=m, claims=claims, figures={"success": fig}, notes=notes)
