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

from experiments._harness import (
    Estimate,
    Precondition,
    Result,
    RunContext,
    all_of,
    at_least,
    gated,
    model_params,
    paired_t,
    superior,
    t_mean,
    welch_t,
)
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

    models: tuple[str, ...] = ("smollm2-135m-instruct", "qwen2.5-coder-0.5b-instruct")
    pairs: int = 10
    corr2cause_items: int = 24
    max_variables: int = 3
    # "more often than not": mean P(Yes) above indifference (the claim's wording)
    assert_bar: float = 0.5
    # over-assertion: P(entailment) above the uniform rate over the three labels
    uniform_bar: float = 1 / 3


QUICK = Config()
TINY = Config(models=("smollm2-135m-instruct",), pairs=2, corr2cause_items=4)  # smoke tier
FULL = Config(
    models=tuple(lm.MODELS),
    pairs=144,
    corr2cause_items=2246,
    max_variables=6,
)


def full_work(config: Config) -> float:
    """Model work: parameters x scored contexts (framed pairs, causal controls, Corr2Cause)."""
    contexts = len(il.FRAMINGS) * config.pairs + len(il.CAUSAL_PAIRS) + config.corr2cause_items
    return sum(model_params(m) for m in config.models) * contexts


def run(config: Config, key: jax.Array, ctx: RunContext) -> Result:
    pool = lm.Pool(config.models)
    pairs = il.causal_pairs(config.pairs, key=key)
    items = il.read_corr2cause(
        wheel_file("evals", "corr2cause/corr2cause.jsonl"), max_variables=config.max_variables
    )[: config.corr2cause_items]
    labels = np.array([i.label for i in items])
    metrics: dict[str, float | Estimate] = {"corr2cause/items": len(items)}
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
            metrics[f"{tag}/{framing}/p_causal"] = t_mean(p_yes)
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
        not_entailed = probs[labels != "entailment", 0]
        over = (
            t_mean(not_entailed)
            if not_entailed.size >= 2
            else Estimate.single(
                float(not_entailed.mean()) if not_entailed.size else float("nan"),
                method="one non-entailed item",
            )
        )
        metrics[f"{tag}/corr2cause/p_entail_not_entailed"] = over
        if np.any(labels == "entailment"):
            metrics[f"{tag}/corr2cause/p_entail_entailed"] = float(
                probs[labels == "entailment", 0].mean()
            )
        metrics[f"{tag}/corr2cause/majority_baseline"] = float(
            max(np.mean(labels == lab) for lab in np.unique(labels))
        )
        est = {f: metrics[f"{tag}/{f}/p_causal"] for f in rates}
        # competence gate (#55): over-assertion means something only where the read-out
        # tells true causal pairs from unrelated ones (else P(Yes) > 1/2 is a yes-bias)
        tells = welch_t(rates["causal_control"], rates["temporal"])
        knows_causes = Precondition(
            "the read-out tells true causal pairs from unrelated ones (Welch interval of "
            "causal controls minus unrelated temporal pairs above 0)",
            bool(np.isfinite(tells.low) and tells.low > 0),
            f"difference {tells.value:+.2f} [{tells.low:+.2f}, {tells.high:+.2f}]",
        )
        claims.append(
            gated(
                at_least(
                    est["temporal"],
                    config.assert_bar,
                    null=f"indifference (P(Yes) {config.assert_bar:g})",
                    claim=f"{tag}: asserts a causal link between unrelated events more often than "
                    f"not (mean P(Yes) > {config.assert_bar:g}, t interval over event pairs above "
                    f"it) when they are temporally ordered. {_setup.CAVEAT}",
                    paper="LLMs construct causal narratives from ambiguous events more than humans",
                    subject="mean P(Yes), temporal framing",
                    detail="; ".join(f"{f}: {e:.2f}" for f, e in est.items()),
                ),
                knows_causes,
            )
        )
        text = (
            f"{tag}: framing matters as for humans: temporal order raises the causal rate over "
            f"explicit independence (paired over event pairs), and true causal pairs score "
            f"highest (Welch, different pairs). {_setup.CAVEAT}"
        )
        part = {
            "claim": text,
            "paper": "temporal order is a cue to causation (Einhorn & Hogarth 1986, qualitative)",
        }
        claims.append(
            all_of(
                {
                    "temporal vs independent": superior(
                        paired_t(rates["temporal"], rates["independent"]),
                        "temporal framing",
                        "independent framing",
                        **part,
                    ),
                    "causal controls vs temporal": superior(
                        welch_t(rates["causal_control"], rates["temporal"]),
                        "causal control pairs",
                        "unrelated pairs, temporal framing",
                        **part,
                    ),
                },
                **part,
                detail=f"temporal {est['temporal'].value:.2f}, independent "
                f"{est['independent'].value:.2f}, causal controls "
                f"{est['causal_control'].value:.2f}",
            )
        )
        n_not = int(np.sum(labels != "entailment"))
        claims.append(
            gated(
                at_least(
                    over,
                    config.uniform_bar,
                    null=f"the uniform rate {config.uniform_bar:.3g} over three labels",
                    claim=f"{tag}: Corr2Cause: over-asserts causation (P(entailment) on "
                    f"non-entailed causal hypotheses > {config.uniform_bar:.3g}, the uniform "
                    f"rate; t interval over items). {_setup.CAVEAT}",
                    paper="LLMs infer causation from correlation (Jin et al. 2024: near-chance F1)",
                    subject="mean P(entailment), non-entailed items",
                    detail=f"{n_not} non-entailed items; accuracy "
                    f"{metrics[f'{tag}/corr2cause/accuracy']:.2f} (majority class "
                    f"{metrics[f'{tag}/corr2cause/majority_baseline']:.2f})",
                ),
                Precondition(">= 2 non-entailed items", n_not >= 2, f"{n_not} items"),
            )
        )
    fig, ax = plt.subplots(figsize=(5.5, 3.2))
    fr = (*il.FRAMINGS, "causal_control")
    for model in config.models:
        tag = _setup.short(model)
        ax.bar(
            np.arange(len(fr)),
            [metrics[f"{tag}/{f}/p_causal"].value for f in fr],
            yerr=[
                [
                    metrics[f"{tag}/{f}/p_causal"].value - metrics[f"{tag}/{f}/p_causal"].low
                    for f in fr
                ],
                [
                    metrics[f"{tag}/{f}/p_causal"].high - metrics[f"{tag}/{f}/p_causal"].value
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
