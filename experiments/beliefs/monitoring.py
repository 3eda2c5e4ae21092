"""P13 claim (3): models monitor and report their own belief states, and adjust under
internal conflict.

After the model's own answer to each templated scenario, three follow-up questions are
scored with `jaxlab.lm.score` (options share the prompt's KV cache): its confidence on a
verbal scale (low / medium / high, read as the expected value 0 / 0.5 / 1 of the option
probabilities), whether the clues conflicted (yes / no), and its answer when asked again.
The belief's |dominance| over the generated answer comes from cross-fitted directions as
in `beliefs_modulation`. Claim (3) holds if self-reported confidence tracks |dominance|
beyond what the evidence balance explains: the partial correlation of confidence and
|dominance| given the balance (one indicator per balance level) has a 95% percentile
bootstrap interval over items above 0. Also checked: hedging (lower confidence), answer
changes and conflict reports under balanced (conflicting) vs clear evidence, each a
difference of group means with a Welch interval against a preset margin.
Competence gate (#55): every per-model row is testable only on a model whose plain choices
follow the evidence (`_setup.follows_evidence`: accuracy against k_A - k_B on the decided
items, Wilson interval above 1/2); otherwise it is `untestable`, never "no".
"""

from __future__ import annotations

import dataclasses
import warnings

import jax
import matplotlib.pyplot as plt
import numpy as np
from scipy import stats

from experiments._harness import (
    Estimate,
    Precondition,
    Result,
    RunContext,
    all_of,
    at_least,
    bootstrap,
    gated,
    spearman,
    superior,
    welch_t,
)
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
    # the differences tie vs clear evidence must exceed (fixed before the run: a stated size
    # of a visible effect on the 0..1 scales): confidence, P(yes, conflict), answer changes
    hedge_margin: float = 0.05
    conflict_margin: float = 0.05
    change_margin: float = 0.10


QUICK = Config()
TINY = Config(**_setup.TINY_SETTINGS, n_resamples=50)  # the smoke tier
FULL = Config(
    **_setup.FULL_SETTINGS,
)

full_work = _setup.full_work  # the dry run's work ratio: the model calls of the cache


def _of_rows(fn, *arrays):
    """`fn(*arrays)` as a statistic of resampled row indices, for the harness `bootstrap`
    (its data: `np.arange(n)`; `fn` takes (n, ...) arrays, such as a partial correlation
    with a design matrix, and need not be vectorised)."""

    def stat(idx, axis=-1):
        idx = np.moveaxis(np.asarray(idx), axis, -1).astype(np.int64)
        flat = idx.reshape(-1, idx.shape[-1])
        out = [float(fn(*(a[i] for a in arrays))) for i in flat]
        return np.asarray(out).reshape(idx.shape[:-1])

    return stat


def run(config: Config, key: jax.Array, ctx: RunContext) -> Result:
    metrics: dict[str, float | Estimate] = {}
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
        seeds = [int(jax.random.randint(k, (), 0, 2**31 - 1)) for k in kk[:2]]
        with warnings.catch_warnings():
            # a resample whose residuals are constant (tiny item sets) has no partial
            # correlation: the interval is then NaN and the claim untestable, as stated
            warnings.simplefilter("ignore", stats.DegenerateDataWarning)
            partial = bootstrap(
                np.arange(rows.size),
                _of_rows(bl.partial_correlation, conf, absdom, Z),
                seed=seeds[0],
                n_resamples=config.n_resamples,
            )
        pr, lo, hi = partial.value, partial.low, partial.high
        rho_bal = spearman(
            conf, absbal, method="bootstrap", seed=seeds[1], n_resamples=config.n_resamples
        )
        pr_bal, lo_b, hi_b = rho_bal.value, rho_bal.low, rho_bal.high
        tie, clear = b.balance == 0, absbal >= 3
        metrics.update(
            {
                f"partial_r_monitoring_{tag}": partial,
                f"rho_confidence_dominance_{tag}": float(interp.spearman(conf, absdom)),
                f"rho_confidence_balance_{tag}": rho_bal,
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
        competent = _setup.follows_evidence(run_, items, rows)
        claims.append(
            gated(
                at_least(
                    partial,
                    0.0,
                    null="no association beyond the balance (partial r 0)",
                    claim=f"{tag}: self-reported confidence tracks the belief's |dominance| beyond "
                    f"the evidence balance (partial correlation given the balance level, 95% CI "
                    f"above 0). {_setup.CAVEAT}",
                    paper="models monitor and report their own belief states",
                    subject="partial r(confidence, |dominance| | balance)",
                    detail=f"n={rows.size}, layer {run_.layers[best]}; Spearman(confidence, "
                    f"|dominance|) {metrics[f'rho_confidence_dominance_{tag}']:.2f}, (confidence, "
                    f"|balance|) {pr_bal:.2f} [{lo_b:.2f}, {hi_b:.2f}]; mean confidence "
                    f"{conf.mean():.2f}",
                ),
                competent,
            )
        )
        n_tie, n_clear = int(tie.sum()), int(clear.sum())
        enough = n_tie >= 2 and n_clear >= 2
        nan = Estimate.point(float("nan"), method="too few items in a group")
        hedge = welch_t(conf[clear], conf[tie]) if enough else nan
        change = welch_t(changed[tie], changed[clear]) if enough else nan
        conflict = welch_t(p_conflict[tie], p_conflict[clear]) if enough else nan
        metrics[f"confidence_clear_minus_tie_{tag}"] = hedge
        metrics[f"change_rate_tie_minus_clear_{tag}"] = change
        metrics[f"p_conflict_tie_minus_clear_{tag}"] = conflict
        text = (
            f"{tag}: under balanced (conflicting) evidence the model hedges (lower "
            f"confidence) and changes its answer more often than under clear evidence "
            f"(|k_A - k_B| >= 3), and reports conflict more often (differences beyond "
            f"{config.hedge_margin:g} in confidence, {config.conflict_margin:g} in P(yes), "
            f"{config.change_margin:g} in change rate; Welch intervals over items). "
            f"{_setup.CAVEAT}"
        )
        part = {"claim": text, "paper": "models adjust behaviour under internal conflict"}
        claims.append(
            gated(
                gated(
                    all_of(
                        {
                            "hedging": superior(
                                hedge,
                                "confidence, clear evidence",
                                "confidence, tie",
                                config.hedge_margin,
                                **part,
                            ),
                            "answer changes": superior(
                                change,
                                "change rate, tie",
                                "change rate, clear evidence",
                                config.change_margin,
                                **part,
                            ),
                            "conflict reports": superior(
                                conflict,
                                "P(yes, conflict), tie",
                                "P(yes, conflict), clear",
                                config.conflict_margin,
                                **part,
                            ),
                        },
                        **part,
                        detail=f"confidence tie {metrics[f'confidence_tie_{tag}']:.2f} vs clear "
                        f"{metrics[f'confidence_clear_{tag}']:.2f}; answer changes tie "
                        f"{metrics[f'change_rate_tie_{tag}']:.2f} vs clear "
                        f"{metrics[f'change_rate_clear_{tag}']:.2f}; P(yes, conflict) tie "
                        f"{metrics[f'p_conflict_tie_{tag}']:.2f} vs clear "
                        f"{metrics[f'p_conflict_clear_{tag}']:.2f} (n tie {n_tie}, clear "
                        f"{n_clear})",
                    ),
                    Precondition(
                        ">= 2 tie and >= 2 clear items", enough, f"{n_tie} tie, {n_clear} clear"
                    ),
                ),
                competent,
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
