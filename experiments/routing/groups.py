"""P6 task groups: are LatentRouter's gains where routing can gain?

Per task group of each P6 table (text: the evals source; vqa: the question type), on
held-out queries: the oracle's advantage over the best fixed candidate (chosen on the
training part) and LatentRouter's accuracy gain over that fixed candidate (lambda = 0).
Claim (the paper's: gains are strongest where model choice depends on the input's
requirements): across the groups of all tables, the gain rises with the oracle's
advantage (Spearman rho with its Fisher z interval at or above the config's `rho_bar`, 0: no
association), and the group with the largest advantage has a gain over the best fixed
candidate (`superior`, bootstrap 95% interval over held-out queries).

Only the groups of tables that pass the competence gate (`_gate.competence`: candidates
above chance, oracle above as many independent guessers') enter the claims; the association
needs at least `min_groups` of them (with n groups the smallest exact one-sided Spearman
p-value is 1/n!: 1/6 for 3 groups, 1/24 for 4, both above the one-sided 0.025, so fewer than
5 groups could never show an association), else it is `untestable`.
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
    at_least,
    gated,
    log,
    spearman,
    superior,
)
from experiments.routing import _compare, _gate, _tables

NAME = "routing_groups"
PAPER = "P6"
DESCRIPTION = "LatentRouter's gain over the best fixed candidate per task group vs the oracle's"


@dataclasses.dataclass(frozen=True)
class Config(_compare.TablesConfig):
    """Settings of one run; the defaults are QUICK (2 CPU cores, committed tables)."""

    #: the Spearman correlation the association claim must clear: 0, "no association" (the
    #: paper claims a positive association of any size)
    rho_bar: float = 0.0
    #: the fewest task groups (of tables passing the competence gate) the association claim
    #: is tested on: 5, the fewest whose exact one-sided Spearman p can be below 0.025
    #: (1/5! = 0.008; 4 groups: 1/24 = 0.042)
    min_groups: int = 5


QUICK = Config()
TINY = Config(**_compare.TINY_COMPARE)  # the smoke tier (the committed tables)
FULL = Config(n_splits=5, steps=600, n_boot=1000)


def full_work(config: Config) -> float:
    """Router fit steps (`_compare.compare_work`)."""
    return _compare.compare_work(config, len(config.tables))


def run(config: Config, key: jax.Array, ctx: RunContext) -> Result:
    del ctx
    metrics: dict[str, float | Estimate] = {}
    rows = []  # (table, group, advantage, gain Estimate)
    selected = []
    gates = {}  # table -> its competence gate's Precondition
    for t_i, tname in enumerate(config.tables):
        table, clusters, _ = _tables.named_table(tname, config.features)
        comp = _gate.competence(table, label=tname)
        gates[tname] = comp.precondition
        metrics.update({f"{tname}/{k}": v for k, v in comp.metrics.items()})
        splits = _compare.compare(
            table, ("latent",), config, jax.random.fold_in(key, t_i), clusters=clusters
        )
        metrics.update(_compare.selection_metrics(splits, ("latent",), f"{tname}/"))
        selected.append(f"{tname}: {_compare.selection_summary(splits, ('latent',))}")
        for g, gname in enumerate(table.group_names):
            gains, adv = [], []
            for s in splits:
                best = int(np.argmax(s.train.quality.mean(0)))
                sel = s.test.groups == g
                q = s.test.quality
                gains.append(s.quality["latent"][0] - q[:, best])
                adv.append(q[sel].max(1).mean() - q[sel, best].mean())
            # the gain over this group's queries only (resampling every held-out query)
            est = _compare.mean_estimate(
                splits,
                gains,
                where=[s.test.groups == g for s in splits],
                n_resamples=config.n_boot,
            )
            a = float(np.mean(adv))
            rows.append((tname, gname, a, est))
            metrics[f"{tname}/{gname}/oracle_advantage"] = a
            metrics[f"{tname}/{gname}/latent_gain"] = est
    log.info("groups: %s", [(r[0], r[1], round(r[2], 3), round(r[3].value, 3)) for r in rows])
    every = rows
    passed = [t for t, g in gates.items() if g.passed]
    failed = [g for g in gates.values() if not g.passed]
    excluded = "; ".join(f"excluded: {g.measured}" for g in failed)
    rows = [r for r in every if r[0] in passed]  # the groups of competent tables only
    adv = np.array([r[2] for r in rows])
    gain = np.array([r[3].value for r in rows])
    # Spearman's Fisher z interval needs >= 4 groups (the claim: `min_groups`) and a ranking
    # on both axes (a constant gain, e.g. LatentRouter routing like the best fixed candidate
    # everywhere, has none)
    enough = len(rows) >= max(4, config.min_groups)
    varies = enough and np.ptp(adv) > 0 and np.ptp(gain) > 0
    if varies:
        rho = spearman(adv, gain)
    else:
        rho = Estimate(np.nan, np.nan, np.nan, 0.95, "Fisher z (Fieller SE)", len(rows))
    metrics.update({"spearman_rho": rho, "n_groups": len(rows), "n_groups_all_tables": len(every)})
    # the top group among the competent tables' groups (all groups when none is competent:
    # its row is then untestable by its table's gate)
    pool = rows or every
    top = pool[int(np.argmax([r[2] for r in pool]))]
    claims = [
        gated(
            at_least(
                rho,
                config.rho_bar,
                null="no association (Spearman rho 0)",
                subject="Spearman rho",
                claim=f"Across the {len(rows)} task groups of the tables that pass the "
                f"competence gate ({', '.join(passed) or 'none'} of "
                f"{', '.join(config.tables)}), LatentRouter's gain over the best fixed "
                "candidate rises with the oracle's advantage (Spearman rho above 0; null: no "
                "association)",
                paper="routing gains are strongest where model choice depends on the input",
                detail=f"{_compare.protocol_tag(config)}; "
                + "; ".join(f"{r[0]}/{r[1]}: adv {r[2]:.3f}, gain {r[3].value:+.3f}" for r in rows),
            ),
            Precondition(
                f">= {config.min_groups} task groups of competent tables (competence gate), "
                "with varying advantage and gain",
                bool(varies),
                f"{len(rows)} groups of {len(every)}"
                + (
                    f", advantage range {np.ptp(adv):.3g}, gain range {np.ptp(gain):.3g}"
                    if rows
                    else ""
                )
                + (f"; {excluded}" if excluded else ""),
            ),
        ),
        gated(
            superior(
                top[3],
                "LatentRouter",
                "the best fixed candidate (chosen on the training part)",
                config.gain_margin,
                claim="In the group where the oracle's advantage is largest (of the tables "
                "passing the competence gate), LatentRouter beats the best fixed candidate "
                "(bootstrap over held-out queries)",
                paper="gains concentrate where routing matters",
                detail=f"{_compare.protocol_tag(config)}: {top[0]}/{top[1]}: "
                f"advantage {top[2]:.3f}",
            ),
            gates[top[0]],
        ),
    ]
    fig, ax = plt.subplots(figsize=(5.5, 4))
    for r in every:
        e = r[3]
        ax.errorbar(
            r[2],
            e.value,
            yerr=[[max(e.value - e.low, 0)], [max(e.high - e.value, 0)]],
            fmt="o",
            capsize=3,
            color="C0" if r[0] == "text" else "C1",
        )
        ax.annotate(
            f"{r[0]}/{r[1]}", (r[2], e.value), fontsize=7, xytext=(3, 3), textcoords="offset points"
        )
    ax.axhline(0, color="k", lw=0.8)
    ax.set_xlabel("oracle accuracy - best fixed candidate (held-out)")
    ax.set_ylabel("LatentRouter gain over best fixed (lambda = 0)")
    ax.set_title(f"per task group (Spearman rho {rho:+.2f})", fontsize=9)
    fig.tight_layout()
    return Result(
        metrics=metrics,
        claims=claims,
        figures={"groups": fig},
        notes="Blue: text table (evals sources); orange: vqa table (question types). Router "
        f"selection: {_compare.protocol(config)}. Selected: {'; '.join(selected)}.",
    )
