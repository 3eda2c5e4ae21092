"""P13 claim (1): external inputs systematically modulate internal belief formation.

Templated two-hypothesis scenarios (which box / door / suspect) with k_A, k_B in 0..4
evidence sentences in a balanced design. Per model and stored layer, a belief direction is
fitted by difference of means on the last prompt token of items whose evidence favours A vs
B (5-fold cross-fitting: every item's belief is read by a direction not fitted on it), and
the belief state of each token of the model's generated answer is its projection; the
dominance of A over the generation (mean signed margin, `jaxlab.beliefs.dominance`) is
correlated with the evidence balance k_A - k_B (Spearman, percentile bootstrap interval over
items). Null: the same procedure on shuffled labels (layer chosen the same way, by
cross-fitted AUROC); the claim compares the interval with the null's 95th percentile.
Competence gate (#55): every per-model row is testable only on a model whose plain choices
follow the evidence (`_setup.follows_evidence`: accuracy against k_A - k_B on the decided
items, Wilson interval above 1/2); otherwise it is `untestable`, never "no".
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
    all_of,
    at_least,
    gated,
    spearman,
    superior,
    wilson,
)
from experiments.beliefs import _setup
from jaxlab import interp

NAME = "beliefs_modulation"
PAPER = "P13"
DESCRIPTION = "Belief dominance over generation vs the evidence balance k_A - k_B (Spearman)"


@dataclasses.dataclass(frozen=True)
class Config(_setup.BaseConfig):
    """Settings of one run; the defaults are QUICK. QUICK's item set is reduced from the
    issue's size (75 scenarios + 25 factual + 24 ToMi for SmolLM2, 50 scenarios for
    Qwen-0.5B) to fit the shared 2-core machine; see `_setup.BaseConfig`."""

    n_folds: int = 5
    n_shuffles: int = 30
    n_resamples: int = 1000
    # the shuffled-label null's quantile the interval must clear (a one-sided 5% level)
    null_quantile: float = 0.95
    # "most models": the share of models whose per-model claim holds must be at least this
    most: float = 0.5


QUICK = Config()
TINY = Config(**_setup.TINY_SETTINGS, n_shuffles=3, n_resamples=50)  # the smoke tier
FULL = Config(
    **_setup.FULL_SETTINGS,
    n_shuffles=200,
)


def _rho_at_best(b: _setup.Beliefs) -> tuple[int, float]:
    best = int(np.argmax(b.auroc))
    return best, float(interp.spearman(b.balance, b.dom_mean[best]))


full_work = _setup.full_work  # the dry run's work ratio: the model calls of the cache


def run(config: Config, key: jax.Array, ctx: RunContext) -> Result:
    metrics: dict[str, float | Estimate] = {}
    claims, curves = [], {}
    gates_passed: list[bool] = []
    fig, axes = plt.subplots(1, 2, figsize=(10, 3.4))
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
        metrics[f"cache_build_s_{tag}"] = run_.seconds
        metrics[f"items_{tag}"] = len(items)
        kf = jax.random.fold_in(key, 100 + mi)
        b = _setup.cross_fit(run_, items, key=kf, n_folds=config.n_folds)
        best, rho = _rho_at_best(b)
        rho_est = spearman(
            b.balance,
            b.dom_mean[best],
            method="bootstrap",
            seed=int(jax.random.randint(jax.random.fold_in(kf, 1), (), 0, 2**31 - 1)),
            n_resamples=config.n_resamples,
        )
        lo, hi = rho_est.low, rho_est.high
        rng = np.random.default_rng(np.asarray(jax.random.key_data(kf)))
        null = []
        decided = b.balance != 0
        for _ in range(config.n_shuffles):
            # labels shuffled within each fold: every fold keeps both classes
            lab = b.balance > 0
            for f in range(config.n_folds):
                at = np.flatnonzero(decided & (b.folds == f))
                lab[at] = rng.permutation(lab[at])
            nb = _setup.cross_fit(run_, items, key=kf, n_folds=config.n_folds, labels=lab)
            null.append(_rho_at_best(nb)[1])
        null95 = float(np.quantile(null, config.null_quantile))
        rows = b.rows
        act = run_.action[rows, 0] - run_.action[rows, 1]
        rho_act = float(interp.spearman(b.balance, act))
        metrics.update(
            {
                f"rho_modulation_{tag}": rho_est,
                f"rho_null95_{tag}": null95,
                f"rho_null_mean_{tag}": float(np.mean(null)),
                f"best_layer_{tag}": run_.layers[best],
                f"auroc_best_{tag}": float(b.auroc[best]),
                f"rho_final_{tag}": float(interp.spearman(b.balance, b.dom_final[best])),
                f"rho_fraction_{tag}": float(interp.spearman(b.balance, b.dom_fraction[best])),
                f"rho_action_{tag}": rho_act,
                f"accuracy_decided_{tag}": float(
                    np.mean((act[decided] > 0) == (b.balance[decided] > 0))
                ),
            }
        )
        for li, layer in enumerate(run_.layers):
            metrics[f"rho_layer{layer}_{tag}"] = float(interp.spearman(b.balance, b.dom_mean[li]))
            metrics[f"auroc_layer{layer}_{tag}"] = float(b.auroc[li])
        # factual items: does a misleading context override the prior? (behaviour)
        fact = np.array([i for i, it in enumerate(items) if it.family == "fact"])
        if fact.size:
            fb = np.array([items[i].balance for i in fact], np.float64)
            fm = run_.action[fact, 0] - run_.action[fact, 1]
            metrics[f"rho_factual_action_{tag}"] = float(interp.spearman(fb, fm))
            metrics[f"p_true_misled_{tag}"] = float(np.mean(fm[fb < 0] > 0))
            metrics[f"p_true_supported_{tag}"] = float(np.mean(fm[fb > 0] > 0))
        tomi = np.array([i for i, it in enumerate(items) if it.family == "tomi"])
        if tomi.size:
            correct = np.array([run_.choice[i] == items[i].answer for i in tomi])
            metrics[f"tomi_accuracy_{tag}"] = float(correct.mean())
            for t in ("memory", "reality", "first_order", "second_order"):
                sel = np.array([items[i].tag == t for i in tomi])
                if sel.any():
                    metrics[f"tomi_accuracy_{t}_{tag}"] = float(correct[sel].mean())
        text = (
            f"{tag}: the evidence balance k_A - k_B modulates the belief's dominance over "
            f"the generated answer (Spearman rho > 0 with its 95% CI above the "
            f"shuffled-label null's {100 * config.null_quantile:g}th percentile). "
            f"{_setup.CAVEAT}"
        )
        part = {
            "claim": text,
            "paper": "external inputs systematically modulate internal belief formation",
        }
        # the interval of rho shifted by the null's quantile (a fixed reference here: its
        # Monte Carlo error over the shuffles is not propagated)
        above_null = Estimate(
            rho_est.value - null95,
            lo - null95,
            hi - null95,
            rho_est.level,
            f"{rho_est.method}, minus the null quantile",
            rho_est.n,
        )
        competent = _setup.follows_evidence(run_, items, rows)
        gates_passed.append(competent.passed)
        claims.append(
            gated(
                all_of(
                    {
                        "rho above 0": at_least(
                            rho_est, 0.0, null="no modulation (rho 0)", subject="rho", **part
                        ),
                        "rho above the shuffled null": superior(
                            above_null,
                            "evidence balance",
                            f"shuffled-label null ({100 * config.null_quantile:g}th percentile of "
                            f"{config.n_shuffles} shuffles)",
                            **part,
                        ),
                    },
                    **part,
                    detail=f"rho {rho:.2f} [{lo:.2f}, {hi:.2f}] at layer {run_.layers[best]} "
                    f"(cross-fitted AUROC {b.auroc[best]:.2f}), shuffled-label null "
                    f"{100 * config.null_quantile:g}th pct {null95:.2f} ({config.n_shuffles} "
                    f"shuffles), n={b.balance.size}; behaviour: rho(balance, option margin) "
                    f"{rho_act:.2f}",
                ),
                competent,
            )
        )
        curves[tag] = b
        ax = axes[0]
        ax.plot(
            [run_.layers[i] for i in range(len(run_.layers))],
            [metrics[f"rho_layer{layer}_{tag}"] for layer in run_.layers],
            marker="o",
            label=f"{tag} (null95 {null95:.2f})",
        )
        if mi == 0:
            ax2 = axes[1]
            # five balance levels from one end to the other (-4, -2, 0, 2, 4 for k <= 4)
            levels = np.unique(b.balance)
            shown = np.unique(levels[np.round(np.linspace(0, levels.size - 1, 5)).astype(int)])
            for bal in shown:
                j = int(np.flatnonzero(b.balance == bal)[0])
                m = run_.mask[b.rows[j]]
                ax2.plot(
                    np.flatnonzero(m), b.margins[best, j][m], marker=".", label=f"{int(bal):+d}"
                )
            ax2.axhline(0, color="grey", lw=0.5)
            ax2.set_xlabel("position (0 = last prompt token, then generated tokens)")
            ax2.set_ylabel(f"dominance margin of A ({tag}, layer {run_.layers[best]})")
            ax2.legend(title="k_A - k_B", fontsize=7)
    # the share is over the models that pass the competence gate (a model that does not
    # follow the evidence says nothing either way)
    n_hold = sum(c.verdict == "holds" for c in claims)
    n_gated = int(sum(gates_passed))
    share = (
        wilson(n_hold, n_gated)
        if n_gated
        else Estimate.point(float("nan"), method="no model passed the competence gate")
    )
    metrics["share_models_modulated"] = share
    claims.append(
        gated(
            at_least(
                share,
                config.most,
                null=f"a share of {config.most:g} of the models (most)",
                claim="For most models, the evidence balance modulates belief dominance (the "
                "per-model claim above holds for more than half of the models). "
                f"{_setup.CAVEAT}",
                paper="external inputs systematically modulate internal belief formation",
                subject="share of models whose claim holds",
                detail=f"holds for {n_hold} of the {n_gated} models that follow the evidence "
                f"({len(config.models)} run)",
            ),
            Precondition(
                ">= 1 model follows the evidence (the per-model competence gate)",
                n_gated > 0,
                f"{n_gated} of {len(config.models)} models",
            ),
        )
    )
    axes[0].axhline(0, color="grey", lw=0.5)
    axes[0].set_xlabel("layer")
    axes[0].set_ylabel("Spearman(k_A - k_B, mean dominance)")
    axes[0].legend(fontsize=7)
    fig.tight_layout()
    notes = (
        f"{_setup.CAVEAT} Items: {config.n_per_cell} scenarios per (k_A, k_B) cell in "
        f"0..{config.max_evidence} (box / door / suspect), {config.factual_per_cell} factual "
        "item per cell and "
        f"{config.tomi_items} ToMi stories (evals wheel, read as a file); models "
        f"{list(config.reduced_models)} only {config.reduced_n_per_cell} scenarios per cell "
        "(CPU budget). Dominance over the "
        f"greedy answer (<= {config.max_new_tokens} tokens, stopping at a newline) of the "
        f"last prompt token plus the generated tokens; {config.n_folds}-fold cross-fitting."
    )
    return Result(metrics=metrics, claims=claims, figures={"modulation": fig}, notes=notes)
