"""P17 claim 1: total response length is linearly decodable from the prompt's last hidden
state, before any output is emitted, better than prompt-only baselines.

Per model, every family's prompts are completed greedily (cached), truncated completions
are left out, and ridge probes on the residual stream at the prompt's last token regress
log1p(total length) at every stored layer. Every prompt gets an out-of-fold prediction
(5 folds; each fold's layer chosen by GCV on its training prompts only). Baselines, fitted
on the same folds: the family's mean length, a line in the prompt's token count, and ridge
on the prompt's token counts (bag of words, the statistical baseline). Within-family
Spearman, log R^2 and normalised MAE are reported with bootstrap CIs over prompts; the
gain of the probe over the best baseline has its own paired bootstrap CI. The same probes
on every generated token regress the remaining length, against the position-only
predictor (Piotrowski et al. 2025's setting).
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
    superior,
)
from experiments.lengthprobe import _setup
from jaxlab import interp
from jaxlab import lengthprobe as lp

NAME = "lengthprobe_decodable"
PAPER = "P17"
DESCRIPTION = "Total length decodable from the prompt-last state vs family-mean, prompt-length, BoW"

BASELINES = ("family_mean", "prompt_length", "bow")


@dataclasses.dataclass(frozen=True)
class Config(_setup.CacheConfig):
    """Settings of one run; the defaults are QUICK (2 CPU cores, minutes after the cache)."""

    n_folds: int = 5
    n_boot: int = 500
    margin: float = 0.1  # Spearman gain over the best baseline the claim asks for
    # "most natural families": the fraction of natural family-model pairs whose gain clears
    # the margin must be at least this (more than half)
    most: float = 0.51


QUICK = Config()
TINY = Config(**_setup.TINY_CACHE, n_boot=50)  # the smoke tier
FULL = Config(**_setup.FULL_CACHE, n_boot=2000)

full_work = _setup.full_work  # the dry run's work ratio: the model calls of the cache


def _mean_finite(values) -> float:
    v = np.asarray(values, float)
    return float(v[np.isfinite(v)].mean()) if np.isfinite(v).any() else float("nan")


def run(config: Config, key: jax.Array, ctx: RunContext) -> Result:
    metrics: dict[str, float] = {}
    fig_l, axes_l = plt.subplots(
        1, len(config.models), figsize=(4.2 * len(config.models), 3.2), squeeze=False
    )
    fig_c, axes_c = plt.subplots(
        len(config.models), 3, figsize=(10, 2.8 * len(config.models)), squeeze=False
    )
    wins, losses, natural_pairs, notes, pair_verdicts = 0, 0, 0, [], []
    for mi, model in enumerate(config.models):
        tag = _setup.short(model)
        d = _setup.model_data(config, model, key)
        budget = config.budget(model)[1]
        cs = d.completions
        idx = np.flatnonzero(~cs.truncated)
        metrics[f"completions_{tag}"] = len(cs)
        metrics[f"truncated_{tag}"] = int(cs.truncated.sum())
        y_tok = cs.lengths[idx].astype(np.float32)
        y = np.log1p(y_tok).astype(np.float32)
        fam = cs.family_ids[idx]
        names = cs.family_names
        x = _setup.layer_stack(d.last, d.layers)[:, idx]
        out = lp.cross_fit(x, y, groups=idx, key=jax.random.fold_in(key, 1), n_folds=config.n_folds)
        folds = out["fold"]
        plen = cs.prompt_lengths[idx].astype(np.float64)
        prompts = [cs.prompts[i] for i in idx]
        preds = {
            "probe": out["prediction"],
            "family_mean": _setup.oof(lambda tr, y=y, fam=fam: lp.family_mean(y, fam, tr), folds),
            "prompt_length": _setup.oof(
                lambda tr, y=y, plen=plen: lp.prompt_length_fit(y, plen, tr), folds
            ),
            "bow": _setup.oof(
                lambda tr, y=y, prompts=prompts: lp.bag_of_words(y, prompts, tr), folds
            ),
        }
        metrics[f"layer_{tag}_median"] = float(np.median(np.asarray(d.layers)[out["layer"]]))
        bkey = jax.random.fold_in(key, 2)
        # every family alone, then all pooled ("all": across-family differences count too)
        subsets = [(fname, fam == fi) for fi, fname in enumerate(names)]
        for fname, mask in [*subsets, ("all", np.ones_like(fam, bool))]:
            metrics[f"n_{tag}_{fname}"] = int(mask.sum())
            if mask.sum() < 4:
                notes.append(f"{tag}/{fname}: {int(mask.sum())} complete completions, skipped")
                continue
            sp = {}
            for kind, p in preds.items():
                m = lp.length_metrics(
                    y_tok,
                    _setup.to_tokens(p, budget),
                    key=bkey,
                    mask=mask,
                    groups=idx,
                    n_resamples=config.n_boot,
                )
                suffix = "" if kind == "probe" else f"_{kind}"
                for k in ("spearman", "r2", "nmae"):
                    metrics[f"{k}_{tag}_{fname}{suffix}"] = m[k]
                if kind == "probe":
                    metrics[f"spearman_{tag}_{fname}"] = _setup.boot_estimate(
                        m["spearman"], m["spearman_low"], m["spearman_high"], n=int(mask.sum())
                    )
                sp[kind] = m["spearman"]
            best = max(BASELINES, key=lambda b: sp[b])
            gain, lo, hi = interp.bootstrap_ci(
                _setup.spearman_gap,
                y,
                preds["probe"].astype(np.float32),
                preds[best].astype(np.float32),
                key=jax.random.fold_in(bkey, 7),
                n_resamples=config.n_boot,
                weights=mask.astype(np.float32),
            )
            gain = _setup.boot_estimate(gain, lo, hi, n=int(mask.sum()))
            metrics[f"gain_{tag}_{fname}"] = gain
            if fname in lp.FAMILIES and lp.FAMILIES[fname].kind == "natural":
                natural_pairs += 1
                pair = superior(
                    gain,
                    "probe",
                    f"the best prompt-only baseline ({best})",
                    config.margin,
                    claim=f"{tag}/{fname}: the probe beats the best baseline",
                    paper="-",
                )
                wins += pair.verdict == "holds"
                losses += pair.verdict in ("fails", "untestable")
                pair_verdicts.append(f"{tag}/{fname} {gain:+.3f} vs {best}: {pair.verdict}")
        # Spearman by layer (within-family mean), per-layer out-of-fold predictions
        by_layer = [
            _mean_finite(
                [
                    float(interp.spearman(y[fam == f], out["by_layer"][li][fam == f]))
                    for f in range(len(names))
                    if (fam == f).sum() >= 4
                ]
            )
            for li in range(len(d.layers))
        ]
        for layer, v in zip(d.layers, by_layer, strict=True):
            metrics[f"spearman_by_layer_{tag}_L{layer}"] = float(v)
        axes_l[0, mi].plot(d.layers, by_layer, "o-")
        axes_l[0, mi].set_title(f"{tag}: prompt-last probe", fontsize=9)
        axes_l[0, mi].set_xlabel("layer")
        axes_l[0, mi].set_ylabel("mean within-family Spearman")
        # remaining length at every generated token: probe vs position-only
        g = _setup.generated_rows(d)
        xg = _setup.layer_stack(d.generated, d.layers)[:, g["rows"]]
        rg = lp.cross_fit(
            xg,
            g["y"],
            groups=g["text_index"],
            key=jax.random.fold_in(key, 3),
            n_folds=config.n_folds,
        )
        pos_only = _setup.oof(
            lambda tr, g=g: lp.position_only(g["y"], g["position"], tr, families=g["family"]),
            rg["fold"],
        )
        for kind, p in (("probe", rg["prediction"]), ("position", pos_only)):
            m = lp.length_metrics(
                g["remaining"].astype(np.float32),
                _setup.to_tokens(p, budget),
                key=jax.random.fold_in(key, 4),
                groups=g["text_index"],
                n_resamples=config.n_boot,
            )
            for k in ("spearman", "r2", "nmae"):
                metrics[f"remaining_{k}_{tag}_{kind}"] = m[k]
        # three example curves: the longest complete completions of three families
        shown = 0
        for fi in range(len(names)):
            if shown == 3:
                break
            cand = [i for i in idx if cs.family_ids[i] == fi and cs.lengths[i] >= 20]
            if not cand:
                continue
            i = max(cand, key=lambda j: cs.lengths[j])
            sel = g["text_index"] == i
            ax = axes_c[mi, shown]
            ax.plot(g["position"][sel], g["remaining"][sel], "k-", label="truth")
            x_pos = g["position"][sel]
            ax.plot(x_pos, _setup.to_tokens(rg["prediction"][sel], budget), "C0-", label="probe")
            ax.plot(x_pos, _setup.to_tokens(pos_only[sel], budget), "C1--", label="position-only")
            ax.set_title(f"{tag} {names[fi]}", fontsize=8)
            ax.set_xlabel("position")
            ax.set_ylabel("remaining tokens")
            ax.legend(fontsize=6)
            shown += 1
    metrics["natural_pairs"] = natural_pairs
    metrics["natural_pairs_probe_wins"] = wins
    # the fraction of pairs won: at least the pairs whose gain clears the margin (low), at
    # most those plus the inconclusive ones (high); each pair's verdict from its 0.95 interval
    n_pairs = max(natural_pairs, 1)
    won = Estimate(
        wins / n_pairs if natural_pairs else float("nan"),
        wins / n_pairs if natural_pairs else float("nan"),
        (natural_pairs - losses) / n_pairs if natural_pairs else float("nan"),
        0.95,
        "fraction of natural family-model pairs won (low: holds; high: holds or "
        "inconclusive; per-pair paired bootstrap intervals)",
        n_pairs,
    )
    claims = [
        gated(
            at_least(
                won,
                config.most,
                null=f"at most half the pairs (bar {config.most:g})",
                subject="pairs won",
                claim="Total length is linearly decodable from the prompt-last state: the probe "
                f"beats the best prompt-only baseline by more than {config.margin} within-family "
                "Spearman (the paired bootstrap interval of the gain above the margin) on most "
                "natural families. " + _setup.CAVEAT,
                paper="decodable before any output is emitted (three 7-8B models, seven datasets)",
                detail=f"{wins}/{natural_pairs} natural family-model pairs: "
                + "; ".join(pair_verdicts),
            ),
            Precondition(
                "a natural family with >= 4 complete completions",
                natural_pairs > 0,
                f"{natural_pairs} natural family-model pairs",
            ),
        )
    ]
    txt = (
        f"{_setup.CAVEAT} Families: {list(config.families)}; per model (prompts per family, "
        f"max new tokens): { {m: config.budget(m)[:2] for m in config.models} }, greedy "
        "(truncated completions left out). "
        "Natural prompts are files of the evals 3.0.1.post1 wheel; synthetic ones are "
        "jaxlab's generators. nMAE = MAE / mean true length. " + " ".join(notes)
    )
    return Result(
        metrics=metrics,
        claims=claims,
        figures={"spearman_by_layer": fig_l, "remaining_curves": fig_c},
        notes=txt,
    )
