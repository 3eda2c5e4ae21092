"""P6 availability masking: routing when candidates disappear at test time.

Each router is trained on the full pool; at test time the k best candidates on the
training part (k = 1 .. max_removed, so always including the best one) are unavailable.
Every router then routes inside the remaining pool (unavailable utilities -inf; the
LatentRouter was also trained on random availability masks, and its latent communication
reads which candidates are there). Reported per k: accuracy at lambda = 0, its drop from
the full pool, and the oracle of the remaining pool. Claim (the paper's: availability
masking handles changing candidate pools): LatentRouter's mean drop over k is smaller than
the smallest baseline drop, and its masked accuracy is above the best baseline's (`superior`
on the paired differences, 95% paired-bootstrap intervals over held-out queries).
"""

from __future__ import annotations

import dataclasses

import jax
import matplotlib.pyplot as plt
import numpy as np

from experiments._harness import Estimate, Result, RunContext, log, superior
from experiments.routing import _compare, _tables

NAME = "routing_masking"
PAPER = "P6"
DESCRIPTION = "Accuracy of every router when the best candidates are removed at test time"


@dataclasses.dataclass(frozen=True)
class Config(_compare.TablesConfig):
    """Settings of one run; the defaults are QUICK (2 CPU cores, committed tables)."""

    max_removed: int = 3


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
    names = (*_compare.BASELINES, "latent")
    fig, axes = plt.subplots(1, len(config.tables), figsize=(4.8 * len(config.tables), 3.8))
    axes = np.atleast_1d(axes)
    for t_i, tname in enumerate(config.tables):
        table, clusters, caveat = _tables.named_table(tname, config.features)
        splits = _compare.compare(
            table, names, config, jax.random.fold_in(key, t_i), clusters=clusters
        )
        metrics.update(_compare.selection_metrics(splits, names, f"{tname}/"))
        selected.append(f"{tname}: {_compare.selection_summary(splits, names)}")
        ks = range(1, min(config.max_removed, table.n_candidates - 1) + 1)
        full = {n: [s.quality[n][0] for s in splits] for n in names}  # lambda = 0
        drop = {n: [np.zeros(s.test.n_queries) for s in splits] for n in names}
        masked = {n: [np.zeros(s.test.n_queries) for s in splits] for n in names}
        for k in ks:
            avs = [_compare.best_candidates(s, k) for s in splits]
            orc = [s.test.quality[:, av].max(1).mean() for s, av in zip(splits, avs, strict=True)]
            metrics[f"{tname}/oracle_accuracy/removed_{k}"] = float(np.mean(orc))
            for n in names:
                q = [_compare.masked_quality(s, n, av) for s, av in zip(splits, avs, strict=True)]
                metrics[f"{tname}/accuracy/{n}/removed_{k}"] = float(np.mean([x.mean() for x in q]))
                for i in range(len(splits)):
                    masked[n][i] += q[i] / len(ks)
                    drop[n][i] += (full[n][i] - q[i]) / len(ks)
        for n in names:
            metrics[f"{tname}/accuracy/{n}/removed_0"] = float(np.mean([x.mean() for x in full[n]]))
            metrics[f"{tname}/mean_drop/{n}"] = float(np.mean([x.mean() for x in drop[n]]))
            metrics[f"{tname}/mean_masked_accuracy/{n}"] = float(
                np.mean([x.mean() for x in masked[n]])
            )
        least = min(_compare.BASELINES, key=lambda n: metrics[f"{tname}/mean_drop/{n}"])
        best = max(_compare.BASELINES, key=lambda n: metrics[f"{tname}/mean_masked_accuracy/{n}"])
        dd = _compare.mean_estimate(
            splits,
            [a - b for a, b in zip(drop["latent"], drop[least], strict=True)],
            n_resamples=config.n_boot,
        )
        da = _compare.mean_estimate(
            splits,
            [a - b for a, b in zip(masked["latent"], masked[best], strict=True)],
            n_resamples=config.n_boot,
        )
        metrics[f"{tname}/drop_vs_least_baseline"] = dd
        metrics[f"{tname}/masked_gain_vs_best_baseline"] = da
        log.info(
            "%s: drops %s", tname, {n: round(metrics[f"{tname}/mean_drop/{n}"], 3) for n in names}
        )
        size = (
            f"{table.n_queries} queries x {table.n_candidates} candidates, top 1-{max(ks)} removed"
        )
        rows = [
            superior(
                dd,
                "LatentRouter",
                f"the baseline with the smallest drop ({least})",
                config.gain_margin,
                higher_is_better=False,
                claim=f"{tname} table ({size}): LatentRouter's accuracy drop under masking is "
                f"smaller than the smallest baseline drop ({least}) (paired bootstrap over "
                f"held-out queries; null: no difference; {caveat})",
                paper="availability masking keeps routing robust when candidates disappear",
                detail=f"{_compare.protocol_tag(config)}: "
                f"mean drop {metrics[f'{tname}/mean_drop/latent']:+.3f} vs "
                f"{metrics[f'{tname}/mean_drop/{least}']:+.3f}; "
                + ", ".join(
                    f"{n} {metrics[f'{tname}/mean_drop/{n}']:+.3f}" for n in _compare.BASELINES
                ),
            ),
            superior(
                da,
                "LatentRouter",
                f"the best baseline under masking ({best})",
                config.gain_margin,
                claim=f"{tname} table ({size}): under masking LatentRouter's accuracy is above "
                f"the best baseline's ({best}) (paired bootstrap over held-out queries)",
                paper="routes well inside a changing candidate pool",
                detail=f"{_compare.protocol_tag(config)}: "
                f"masked accuracy {metrics[f'{tname}/mean_masked_accuracy/latent']:.3f} vs "
                f"{metrics[f'{tname}/mean_masked_accuracy/{best}']:.3f}",
            ),
        ]
        rows, gate_metrics = _compare.gate_claims(table, rows, tname)
        claims += rows
        metrics.update(gate_metrics)
        ax = axes[t_i]
        xs = [0, *ks]
        for n in (*names, "oracle"):
            if n == "oracle":
                ys = [float(np.mean([s.test.quality.max(1).mean() for s in splits]))]
                ys += [metrics[f"{tname}/oracle_accuracy/removed_{k}"] for k in ks]
                ax.plot(xs, ys, "k--", label="oracle")
                continue
            ys = [metrics[f"{tname}/accuracy/{n}/removed_{k}"] for k in xs]
            ax.plot(xs, ys, "o-", lw=2.5 if n == "latent" else 1, label=n)
        ax.set_xlabel("best candidates removed at test time")
        ax.set_ylabel("accuracy (lambda = 0)")
        ax.set_title(tname, fontsize=9)
        ax.legend(fontsize=7)
    fig.tight_layout()
    notes = (
        f"Router selection: {_compare.protocol(config)}. Selected: {'; '.join(selected)}. "
        "The removed candidates are the k best on each split's training part; every router "
        "was trained on the full pool (LatentRouter with random availability masks). "
        "Intervals: paired percentile bootstrap over the held-out queries of every split."
    )
    return Result(metrics=metrics, claims=claims, figures={"masking": fig}, notes=notes)
