"""P14 claim: causal narratives from ambiguous events.

Templated event pairs with no causal link, framed as co-occurring, temporally ordered or
explicitly independent, and causally linked control pairs; the rate at which the model
asserts a causal link is P(Yes | "did the first cause the second?") by option likelihood.
Second item set: Corr2Cause (Jin et al. 2024; the OpenAI `evals` wheel's
`corr2cause.jsonl`, read as data), premises with 2-3 variables: the rate of answering
"entailment" to causal hypotheses that do not follow (over-assertion) vs those that do.
The items carry no human answers; humans' use of temporal order as a causal cue is cited
qualitatively (Einhorn & Hogarth 1986).
"""

from __future__ import annotations

import dataclasses

import jax
import matplotlib.pyplot as plt
import numpy as np

from experiments._harness import Claim, Result, RunContext
from experiments.illusions import _setup
from jaxlab import illusions as il
from jaxlab import lm
from jaxlab.data import wheel_file

NAME = "illusions_causal"
PAPER = "P14"
DESCRIPTION = (
    "Causal-link assertions on unrelated event pairs by framing; Corr2Cause over-assertion"
)


@dataclasses.dataclass(frozen=True)
class Config:
    """Settings of one run; the defaults are QUICK (2 CPU cores, minutes)."""

    models: tuple[str, ...] = ("smollm2-135m-instruct",)
    pairs: int = 10
    corr2cause_items: int = 24
    max_variables: int = 3


QUICK = Config()
TINY = Config(pairs=2, corr2cause_items=4)  # the smoke tier
FULL = Config(
    models=tuple(lm.MODELS),
    pairs=144,
    corr2cause_items=2246,
    max_variables=6,
)


def full_work(config: Config) -> float:
    """Model work: parameters x scored contexts (framed pairs, causal controls, Corr2Cause)."""
    contexts = len(il.FRAMINGS) * config.pairs + len(il.CAUSAL_PAIRS) + config.corr2cause_items
    return sum(lm.MODELS[m].n_params for m in config.models) * contexts


def run(config: Config, key: jax.Array, ctx: RunContext) -> Result:
    pool = lm.Pool(config.models)
    pairs = il.causal_pairs(config.pairs, key=key)
    items = il.read_corr2cause(
        wheel_file("evals", "corr2cause/corr2cause.jsonl"), max_variables=config.max_variables
    )[: config.corr2cause_items]
    labels = np.array([i.label for i in items])
    metrics: dict[str, float] = {"corr2cause/items": len(items)}
    claims = []
    for model in config.models:
        tag = _setup.short(model)
        rates = {}
        for framing in (*il.FRAMINGS, "causal_control"):
            src = il.CAUSAL_PAIRS if framing == "causal_control" else pairs
            fr = "temporal" if framing == "causal_control" else framing
            cq = [il.causal_query(a, b, fr) for a, b in src]
            answers = _setup.score_queries(
                pool,
                model,
                [c for c, _ in cq],
                [[q] for _, q in cq],
                tag=f"causal-{framing}",
                chunk=16,
                max_options=4,
                batch_size=4,
            )
            p_yes = np.array([float(il.option_probabilities(a[0])[0]) for a in answers])
            rates[framing] = p_yes
            m, lo, hi = il.mean_ci(p_yes)
            metrics[f"{tag}/{framing}/p_causal"] = m
            metrics[f"{tag}/{framing}/p_causal_ci_low"] = lo
            metrics[f"{tag}/{framing}/p_causal_ci_high"] = hi
            metrics[f"{tag}/{framing}/frac_yes"] = float(np.mean(p_yes > 0.5))
        cq = [i.query() for i in items]
        answers = _setup.score_queries(
            pool,
            model,
            [c for c, _ in cq],
            [[q] for _, q in cq],
            tag="causal-corr2cause",
            chunk=8,
            max_options=4,
            batch_size=4,
        )
        probs = np.stack([np.asarray(il.option_probabilities(a[0])) for a in answers])
        pred = np.array(["entailment", "contradiction", "neutral"])[probs.argmax(1)]
        metrics[f"{tag}/corr2cause/accuracy"] = float(np.mean(pred == labels))
        metrics[f"{tag}/corr2cause/p_entail_not_entailed"] = float(
            probs[labels != "entailment", 0].mean()
        )
        if np.any(labels == "entailment"):
            metrics[f"{tag}/corr2cause/p_entail_entailed"] = float(
                probs[labels == "entailment", 0].mean()
            )
        metrics[f"{tag}/corr2cause/majority_baseline"] = float(
            max(np.mean(labels == lab) for lab in np.unique(labels))
        )
        claims.append(
            Claim(
                f"{tag}: asserts a causal link between unrelated events more often than not "
                f"(mean P(Yes) > 0.5, CI above 0.5) when they are temporally ordered. "
                f"{_setup.CAVEAT}",
                "LLMs construct causal narratives from ambiguous events more than humans",
                "; ".join(
                    f"{f}: {metrics[f'{tag}/{f}/p_causal']:.2f} "
                    f"[{metrics[f'{tag}/{f}/p_causal_ci_low']:.2f}, "
                    f"{metrics[f'{tag}/{f}/p_causal_ci_high']:.2f}]"
                    for f in rates
                ),
                bool(metrics[f"{tag}/temporal/p_causal_ci_low"] > 0.5),
            )
        )
        claims.append(
            Claim(
                f"{tag}: framing matters as for humans: temporal order raises the causal "
                f"rate over explicit independence, and true causal pairs score highest. "
                f"{_setup.CAVEAT}",
                "temporal order is a cue to causation (Einhorn & Hogarth 1986, qualitative)",
                f"temporal {metrics[f'{tag}/temporal/p_causal']:.2f}, independent "
                f"{metrics[f'{tag}/independent/p_causal']:.2f}, causal controls "
                f"{metrics[f'{tag}/causal_control/p_causal']:.2f}",
                bool(
                    metrics[f"{tag}/temporal/p_causal"] > metrics[f"{tag}/independent/p_causal"]
                    and metrics[f"{tag}/causal_control/p_causal"]
                    > metrics[f"{tag}/temporal/p_causal"]
                ),
            )
        )
        claims.append(
            Claim(
                f"{tag}: Corr2Cause: over-asserts causation (P(entailment) on non-entailed "
                f"causal hypotheses > 1/3, the uniform rate). {_setup.CAVEAT}",
                "LLMs infer causation from correlation (Jin et al. 2024: near-chance F1)",
                f"P(entailment) {metrics[f'{tag}/corr2cause/p_entail_not_entailed']:.2f} on "
                f"{int(np.sum(labels != 'entailment'))} non-entailed items; accuracy "
                f"{metrics[f'{tag}/corr2cause/accuracy']:.2f} (majority class "
                f"{metrics[f'{tag}/corr2cause/majority_baseline']:.2f})",
                bool(metrics[f"{tag}/corr2cause/p_entail_not_entailed"] > 1 / 3),
            )
        )
    fig, ax = plt.subplots(figsize=(5.5, 3.2))
    fr = (*il.FRAMINGS, "causal_control")
    for model in config.models:
        tag = _setup.short(model)
        ax.bar(
            np.arange(len(fr)),
            [metrics[f"{tag}/{f}/p_causal"] for f in fr],
            yerr=[
                [
                    metrics[f"{tag}/{f}/p_causal"] - metrics[f"{tag}/{f}/p_causal_ci_low"]
                    for f in fr
                ],
                [
                    metrics[f"{tag}/{f}/p_causal_ci_high"] - metrics[f"{tag}/{f}/p_causal"]
                    for f in fr
                ],
            ],
            capsize=3,
            label=tag,
            alpha=0.7,
        )
    ax.set_xticks(np.arange(len(fr)))
    ax.set_xticklabels(fr, fontsize=8)
    ax.set_ylabel("P(Yes: the first caused the second)")
    ax.axhline(0.5, color="grey", lw=0.5)
    ax.legend(fontsize=7)
    fig.tight_layout()
    notes = (
        f"{_setup.CAVEAT} {config.pairs} unrelated event pairs drawn from templates per "
        f"framing, {len(il.CAUSAL_PAIRS)} causal control pairs; {len(items)} Corr2Cause items "
        f"(<= {config.max_variables} variables) from the evals 3.0.1 wheel, read as a file. "
        "No human answers ship with these items; human evidence is cited qualitatively."
    )
    return Result(metrics=metrics, claims=claims, figures={"causal_rates": fig}, notes=notes)
