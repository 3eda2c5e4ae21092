"""P13 claim (3): models monitor and report their own belief states, and adjust under
internal conflict.

After the model's own answer to each templated scenario, three follow-up questions are
scored with `jaxlab.lm.score` (options share the prompt's KV cache): its confidence on a
verbal scale (low / medium / high, read as the expected value 0 / 0.5 / 1 of the option
probabilities), whether the clues conflicted (yes / no), and its answer when asked again.
The belief's |dominance| over the generated answer comes from cross-fitted directions as
in `beliefs_modulation`. Claim (3) holds if self-reported confidence tracks |dominance|
beyond what the evidence balance explains: the partial correlation of confidence and
|dominance| given the balance (one indicator per balance level) has a 95% bootstrap CI
above 0. Also reported: hedging (lower confidence) and answer changes under balanced
(conflicting) evidence vs clear evidence.
"""

from __future__ import annotations

import dataclasses

import jax
import matplotlib.pyplot as plt
import numpy as np

from experiments._harness import Claim, Result, RunContext
from experiments.beliefs import _setup
from jaxlab import beliefs as bl
from jaxlab import interp

NAME = "beliefs_monitoring"
PAPER = "P13"
DESCRIPTION = "Self-reported confidence vs belief dominance beyond the evidence balance"


@dataclasses.dataclass(frozen=True)
class Config(_setup.BaseConfig):
    """Settings of one run; the defaults are QUICK (items as in `beliefs_modulation`'s
    QUICK, reduced from the issue's size for the shared 2-core machine)."""

    n_folds: int = 5
    n_resamples: int = 1000


QUICK = Config()
TINY = Config(**_setup.TINY_SETTINGS, n_resamples=50)  # the smoke tier
FULL = Config(
    **_setup.FULL_SETTINGS,
)

full_work = _setup.full_work  # the dry run's work ratio: the model calls of the cache


def run(config: Config, key: jax.Array, ctx: RunContext) -> Result:
    metrics: dict[str, float] = {}
    claims = []
    fig, axes = plt.subplots(1, len(config.models), figsize=(5 * len(config.models), 3.4))
    axes = np.atleast_1d(axes)
    for mi, model in enumerate(config.models):
        tag = _setup.short(model)
        items = _setup.make_items(_setup.item_config(config, model), key)
        run_ = _setup.model_run(
            model,
            items,
            n_layers=config.n_layers,
            max_new_tokens=config.max_new_tokens,
            chunk=config.chunk,
        )
        # the same folds as beliefs_modulation (same key), so the dominance is the same
        b = _setup.cross_fit(
            run_, items, key=jax.random.fold_in(key, 100 + mi), n_folds=config.n_folds
        )
        best = int(np.argmax(b.auroc))
        rows = b.rows
        choice = run_.choice[rows]
        ll, secs = _setup.monitor_scores(
            model, [items[i] for i in rows], choice, chunk=config.chunk
        )
        metrics[f"monitor_build_s_{tag}"] = secs
        conf = np.asarray(bl.expected_rating(ll[:, :3], _setup.CONFIDENCE_VALUES))
        p_conflict = np.exp(ll[:, 3]) / (np.exp(ll[:, 3]) + np.exp(ll[:, 4]))
        changed = np.argmax(ll[:, 5:7], axis=1) != choice
        absdom = np.abs(b.dom_mean[best])
        absbal = np.abs(b.balance)
        levels = np.unique(b.balance)
        Z = (b.balance[:, None] == levels[None, 1:]).astype(np.float64)
        kk = jax.random.split(jax.random.fold_in(key, 300 + mi), 4)
        pr, lo, hi = interp.bootstrap_ci(
            bl.partial_correlation, conf, absdom, Z, key=kk[0], n_resamples=config.n_resamples
        )
        pr_bal, lo_b, hi_b = interp.bootstrap_ci(
            interp.spearman, conf, absbal, key=kk[1], n_resamples=config.n_resamples
        )
        tie, clear = b.balance == 0, absbal >= 3
        metrics.update(
            {
                f"partial_r_monitoring_{tag}": float(pr),
                f"partial_r_monitoring_ci_low_{tag}": float(lo),
                f"partial_r_monitoring_ci_high_{tag}": float(hi),
                f"rho_confidence_dominance_{tag}": float(interp.spearman(conf, absdom)),
                f"rho_confidence_balance_{tag}": float(pr_bal),
                f"rho_confidence_balance_ci_low_{tag}": float(lo_b),
                f"rho_confidence_balance_ci_high_{tag}": float(hi_b),
                f"rho_dominance_balance_{tag}": float(interp.spearman(absdom, absbal)),
                f"rho_conflict_report_balance_{tag}": float(interp.spearman(p_conflict, absbal)),
                f"confidence_mean_{tag}": float(conf.mean()),
                f"confidence_tie_{tag}": float(conf[tie].mean()),
                f"confidence_clear_{tag}": float(conf[clear].mean()),
                f"p_conflict_tie_{tag}": float(p_conflict[tie].mean()),
                f"p_conflict_clear_{tag}": float(p_conflict[clear].mean()),
                f"change_rate_tie_{tag}": float(changed[tie].mean()),
                f"change_rate_clear_{tag}": float(changed[clear].mean()),
                f"monitor_layer_{tag}": run_.layers[best],
                f"monitor_items_{tag}": float(rows.size),
            }
        )
        claims.append(
            Claim(
                f"{tag}: self-reported confidence tracks the belief's |dominance| beyond the "
                f"evidence balance (partial correlation given the balance level, 95% CI above "
                f"0). {_setup.CAVEAT}",
                "models monitor and report their own belief states",
                f"partial r {pr:.2f} [{lo:.2f}, {hi:.2f}] (n={rows.size}, layer "
                f"{run_.layers[best]}); Spearman(confidence, |dominance|) "
                f"{metrics[f'rho_confidence_dominance_{tag}']:.2f}, (confidence, |balance|) "
                f"{pr_bal:.2f} [{lo_b:.2f}, {hi_b:.2f}]; mean confidence {conf.mean():.2f}",
                bool(lo > 0),
            )
        )
        # descriptive (few tie items): the differences must reach a stated size
        hedge = metrics[f"confidence_clear_{tag}"] - metrics[f"confidence_tie_{tag}"] >= 0.05
        change = metrics[f"change_rate_tie_{tag}"] - metrics[f"change_rate_clear_{tag}"] >= 0.1
        claims.append(
            Claim(
                f"{tag}: under balanced (conflicting) evidence the model hedges (lower "
                f"confidence) and changes its answer more often than under clear evidence "
                f"(|k_A - k_B| >= 3), and reports conflict more often (differences of at "
                f"least 0.05 in confidence and P(yes), 0.10 in change rate). {_setup.CAVEAT}",
                "models adjust behaviour under internal conflict",
                f"confidence tie {metrics[f'confidence_tie_{tag}']:.2f} vs clear "
                f"{metrics[f'confidence_clear_{tag}']:.2f}; answer changes tie "
                f"{metrics[f'change_rate_tie_{tag}']:.2f} vs clear "
                f"{metrics[f'change_rate_clear_{tag}']:.2f}; P(yes, conflict) tie "
                f"{metrics[f'p_conflict_tie_{tag}']:.2f} vs clear "
                f"{metrics[f'p_conflict_clear_{tag}']:.2f} (n tie {int(tie.sum())}, clear "
                f"{int(clear.sum())}; no CI: descriptive)",
                bool(
                    hedge
                    and change
                    and metrics[f"p_conflict_tie_{tag}"] - metrics[f"p_conflict_clear_{tag}"]
                    >= 0.05
                ),
            )
        )
        ax = axes[mi]
        sc = ax.scatter(absdom, conf, c=absbal, cmap="viridis", s=14)
        fig.colorbar(sc, ax=ax, label="|k_A - k_B|")
        ax.set_xlabel(f"|mean dominance| over the answer (layer {run_.layers[best]})")
        ax.set_ylabel("self-reported confidence (0 low .. 1 high)")
        ax.set_title(f"{tag}: partial r {pr:.2f} [{lo:.2f}, {hi:.2f}]")
    fig.tight_layout()
    notes = (
        f"{_setup.CAVEAT} Follow-up questions after the model's own (option-likelihood) "
        "answer; confidence = expected value of low/medium/high (0/0.5/1) under the "
        "renormalised option probabilities; the partial correlation controls one indicator "
        "per balance level k_A - k_B."
    )
    return Result(metrics=metrics, claims=claims, figures={"self_report": fig}, notes=notes)
