"""P6 ablation: which LatentRouter component carries its AIQ.

LatentRouter and three ablations are trained on the same splits of each P6 table (the
real text table and the easy-vqa table of our own VQA pool): without latent
communication (the mean capsule is added to every capability token instead of attention),
without the bounded capsule correction, and with a point-estimate head instead of the
distributional (Beta) one. Claim (the paper's): removing latent communication costs the
most. Each drop is AIQ(full) - AIQ(ablation) with a paired-bootstrap 95% interval over test
queries (`_compare.diff_estimate`); "costs the most" is a conjunction (`all_of`): the
no-communication drop is above 0 and above each other ablation's drop (AIQ(other ablation)
- AIQ(no communication), with the same paired bootstrap).
"""

from __future__ import annotations

import dataclasses

import jax
import matplotlib.pyplot as plt
import numpy as np

from experiments._harness import Estimate, Result, RunContext, all_of, log, superior
from experiments.routing import _compare, _tables

NAME = "routing_ablation"
PAPER = "P6"
DESCRIPTION = "LatentRouter without latent communication / capsule correction / Beta head (AIQ)"

ABLATIONS = ("latent_no_comm", "latent_no_correction", "latent_point_head")


@dataclasses.dataclass(frozen=True)
class Config(_compare.TablesConfig):
    """Settings of one run; the defaults are QUICK (2 CPU cores, committed tables)."""


QUICK = Config()
# the smoke tier: the committed text table only (the vqa table's path, clusters
# included, runs in routing_vqa and routing_groups' TINY)
TINY = Config(**_compare.TINY_COMPARE, tables=("text",))
FULL = Config(n_splits=5, steps=600, n_boot=1000)


def full_work(config: Config) -> float:
    """Router fit steps (`_compare.compare_work`)."""
    return _compare.compare_work(config, len(config.tables))


def run(config: Config, key: jax.Array, ctx: RunContext) -> Result:
    del ctx
    metrics: dict[str, float | Estimate] = {}
    claims = []
    selected = []
    fig, axes = plt.subplots(1, len(config.tables), figsize=(4.5 * len(config.tables), 3.6))
    axes = np.atleast_1d(axes)
    for t_i, name in enumerate(config.tables):
        table, clusters, caveat = _tables.named_table(name, config.features)
        names = ("latent", *ABLATIONS)
        splits = _compare.compare(
            table, names, config, jax.random.fold_in(key, t_i), clusters=clusters
        )
        for n in names:
            metrics[f"{name}/aiq/{n}"] = _compare.stat(splits, n)
        metrics.update(_compare.selection_metrics(splits, names, f"{name}/"))
        selected.append(f"{name}: {_compare.selection_summary(splits, names)}")
        drops = {}
        for n in ABLATIONS:
            drops[n] = _compare.diff_estimate(splits, "latent", n, n_resamples=config.n_boot)
            metrics[f"{name}/aiq_drop/{n}"] = drops[n]
        log.info("%s: AIQ drops %s", name, {n: round(d.value, 4) for n, d in drops.items()})
        size = f"{table.n_queries} queries x {table.n_candidates} candidates"
        parts = {
            "no_comm drop > 0": superior(
                drops["latent_no_comm"],
                "LatentRouter",
                "LatentRouter without latent communication",
                config.gain_margin,
                claim="removing latent communication lowers AIQ",
                paper="latent communication contributes",
            )
        }
        for n in ABLATIONS[1:]:
            # drop(no_comm) - drop(n) = AIQ(n) - AIQ(no_comm), paired over the same queries
            d = _compare.diff_estimate(splits, n, "latent_no_comm", n_resamples=config.n_boot)
            metrics[f"{name}/aiq_drop_no_comm_minus/{n}"] = d
            parts[f"no_comm drop > {n.removeprefix('latent_')} drop"] = superior(
                d,
                f"LatentRouter without {n.removeprefix('latent_').replace('_', ' ')}",
                "LatentRouter without latent communication",
                config.gain_margin,
                claim=f"removing latent communication lowers AIQ more than {n}",
                paper="latent communication is the main contributor",
            )
        row = all_of(
            parts,
            claim=f"{name} table ({size}): removing latent communication lowers "
            "LatentRouter's AIQ more than removing the capsule correction or the "
            "distributional head, and its drop is above 0 (paired bootstrap over held-out "
            f"queries; null: no drop, no difference of drops; {config.n_splits} splits; "
            f"{caveat})",
            paper="latent communication is the main contributor",
            detail=f"{_compare.protocol_tag(config)}: "
            f"AIQ full {metrics[f'{name}/aiq/latent']:.4f}; drops: "
            + ", ".join(f"{n.removeprefix('latent_')} {d:+.4f}" for n, d in drops.items()),
        )
        gated_rows, gate_metrics = _compare.gate_claims(table, [row], name)
        claims += gated_rows
        metrics.update(gate_metrics)
        ax = axes[t_i]
        vals = [drops[n].value for n in ABLATIONS]
        err = np.array([[d.value - d.low, d.high - d.value] for d in drops.values()]).T
        err = np.maximum(err, 0)  # a percentile interval may exclude the value
        ax.bar(range(3), vals, yerr=err, color=["C3", "C0", "C2"], capsize=4)
        ax.axhline(0, color="k", lw=0.8)
        ax.set_xticks(range(3), ["no comm.", "no correction", "point head"])
        ax.set_ylabel("AIQ drop (full - ablation)")
        ax.set_title(f"{name}: {size}", fontsize=9)
    fig.tight_layout()
    notes = (
        f"Router selection: {_compare.protocol(config)}. Selected: {'; '.join(selected)}. "
        "Same splits, seeds and selection budget for every variant; the drops' intervals are "
        "paired percentile bootstraps over the held-out queries of every split. Text: small open "
        "LMs of the jaxlab.lm pool; vqa: our own pool of small JAX VQA models that see "
        "different views of easy-vqa images (not the paper's MLLMs)."
    )
    return Result(metrics=metrics, claims=claims, figures={"ablation": fig}, notes=notes)
