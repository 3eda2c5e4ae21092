"""P14 claim: illusory correlation (Hamilton & Gifford 1976) in small LMs vs humans.

Each presentation is the 18/8 vs 9/4 design (`counts`; phi = 0 by construction) in a random
order with behaviours drawn from templates; the group names follow a variant (neutral
Group A/B, majority/minority, large/small organisation, and the label-swap control where
the majority is called "Group B"). Read-outs by option likelihood (`jaxlab.lm.score`):
(a) the group each statement is attributed to -> phi between attributed group and
desirability (> 0: undesirable behaviour goes to the minority), (b) expected estimates of
each group's undesirable count vs the truth (8 and 4 in the original design), (c) 1-7 trait
ratings. Phi per presentation, mean and t interval over presentations; the letter-corrected
phi averages the neutral and label-swap variants (a preference for one letter cancels).
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
    best_of,
    gated,
    model_params,
    paired_t,
    t_mean,
)
from experiments.illusions import _setup
from jaxlab import illusions as il
from jaxlab import lm

NAME = "illusions_correlation"
PAPER = "P14"
DESCRIPTION = "Hamilton & Gifford 18/8 vs 9/4: attribution phi, frequency bias, traits vs humans"


@dataclasses.dataclass(frozen=True)
class Config:
    """Settings of one run; the defaults are QUICK (2 CPU cores, minutes)."""

    models: tuple[str, ...] = ("smollm2-135m-instruct", "qwen2.5-coder-0.5b-instruct")
    variants: tuple[str, ...] = ("neutral", "label_swap", "majority_minority", "organisation")
    # issue #25 asks for 20 orders; 3 is what fits ~60 min for the four illusions_*
    # experiments on the shared 2-core machine (see _setup.orders_note)
    orders: int = 3
    max_options: int = 64
    # ((majority desirable, undesirable), (minority desirable, undesirable)); phi = 0
    counts: tuple[tuple[int, int], tuple[int, int]] = ((18, 8), (9, 4))
    # the human attribution phi the model's must reach (Hamilton & Gifford 1976 Exp. 1,
    # approximate; jaxlab.illusions.HUMAN_BASELINES)
    human_phi: float = il.human_baseline("hg_phi_attribution").value


QUICK = Config()
# the smoke tier: SmolLM2, the neutral and label-swap framings (the letter-corrected phi),
# 2 orders of the smallest design with the same 2:1 group and 2:1 desirability ratios
TINY = Config(
    models=("smollm2-135m-instruct",),
    variants=("neutral", "label_swap"),
    orders=2,
    counts=((4, 2), (2, 1)),
)
FULL = Config(
    models=tuple(lm.MODELS),
    orders=200,
)


def full_work(config: Config) -> float:
    """Model work: parameters x tokens scored per presentation (~15 per statement, repeated
    for every item of `max_options` answers, ~24 per answer) x variants x orders."""
    s = sum(map(sum, config.counts))
    answers = 2 * s + (s + 3) + 28  # attributions, the two count estimates, trait ratings
    tokens = 15 * s * -(-answers // config.max_options) + 24 * answers
    params = sum(model_params(m) for m in config.models)
    return params * tokens * len(config.variants) * config.orders


def run(config: Config, key: jax.Array, ctx: RunContext) -> Result:
    pool = lm.Pool(config.models)
    human_phi = config.human_phi
    human_share = il.human_baseline("hg_minority_share_undesirable").value
    metrics: dict[str, float | Estimate] = {
        "human/phi": human_phi,
        "human/share_undesirable": human_share,
    }
    per: dict[tuple[str, str], list[dict]] = {}
    for model in config.models:
        tag = _setup.short(model)
        for variant in config.variants:
            # the same behaviours and orders in every variant (only the names change)
            stimuli = [
                il.make_stimuli(
                    key=jax.random.fold_in(key, o), variant=variant, counts=config.counts
                )
                for o in range(config.orders)
            ]
            queries = [il.correlation_queries(s) for s in stimuli]
            answers = _setup.score_queries(
                pool,
                model,
                [s.context for s in stimuli],
                queries,
                tag=f"correlation-{variant}",
                chunk=1,
                max_options=config.max_options,
                batch_size=1,
            )
            reads = [il.read_correlation(a, s) for a, s in zip(answers, stimuli, strict=True)]
            per[tag, variant] = reads
            for field in (
                "phi",
                "p_minority_desirable",
                "p_minority_undesirable",
                "estimate_majority",
                "estimate_minority",
                "minority_excess",
                "trait_gap",
            ):
                vals = np.array([r[field] for r in reads])
                # t intervals over orders for the claims' quantities
                metrics[f"{tag}/{variant}/{field}"] = (
                    t_mean(vals) if field in ("phi", "minority_excess") else float(vals.mean())
                )
            share = np.mean(
                [
                    r["p_minority"][~s.desirable].sum() / (~s.desirable).sum()
                    for r, s in zip(reads, stimuli, strict=True)
                ]
            )
            metrics[f"{tag}/{variant}/share_undesirable_to_minority"] = float(share)
        if {"neutral", "label_swap"} <= set(config.variants):
            both = np.array(
                [r["phi"] for r in per[tag, "neutral"]] + [r["phi"] for r in per[tag, "label_swap"]]
            ).reshape(2, -1)
            metrics[f"{tag}/letter_corrected/phi"] = t_mean(both.mean(0))

    claims = []
    (_, true_maj), (_, true_min) = config.counts  # the undesirable counts
    reduced = _setup.orders_note(config.orders)
    caveat = f"{_setup.CAVEAT} {reduced}".strip()
    for model in config.models:
        tag = _setup.short(model)
        phis = {v: metrics[f"{tag}/{v}/phi"] for v in config.variants}
        values = {v: np.array([r["phi"] for r in per[tag, v]]) for v in config.variants}

        def vs_humans(v, tag=tag, values=values):
            return lambda level: at_least(
                t_mean(values[v], level),
                human_phi,
                null=f"the human phi {human_phi:.2f} (Hamilton & Gifford 1976 Exp. 1, approx.)",
                claim=f"{tag}: an illusory correlation (attribution phi, t interval over orders "
                f"at or above the human phi, so above 0) at least as strong as the human one in "
                f">= 1 framing (Holm over the framings). {caveat}",
                paper=f"LLMs show stronger illusory correlation than humans (human phi ~ "
                f"{human_phi:.2f}, Hamilton & Gifford 1976 Exp. 1, approximate)",
                subject="phi",
            )

        # the human number must be sourced (paper, table, page) before a comparison with
        # it is evidence: the H&G means in jaxlab.illusions are quoted from memory, so the
        # row is untestable until they are re-checked (#55 item 9)
        source = il.human_baseline("hg_phi_attribution")
        claims.append(
            gated(
                best_of(
                    {v: vs_humans(v) for v in config.variants},
                    detail="; ".join(f"{v} phi {phis[v]:+.3f}" for v in config.variants)
                    + f" over {config.orders} orders",
                ),
                Precondition(
                    "the human phi is sourced and re-checked (paper, table, page)",
                    not source.approximate,
                    f"phi {source.value:.3f} from the H&G 1976 Table 1 means, which "
                    "jaxlab.illusions.HUMAN_BASELINES marks approximate (quoted from memory, "
                    "not re-checked against the paper)",
                ),
            )
        )
        if f"{tag}/letter_corrected/phi" in metrics:
            claims.append(
                at_least(
                    metrics[f"{tag}/letter_corrected/phi"],
                    0.0,
                    null="no illusory correlation (the design's phi 0)",
                    claim=f"{tag}: the attribution phi survives the label-swap control (mean of "
                    f"the neutral and letter-swapped framings, t interval over orders above 0). "
                    f"{caveat}",
                    paper="the illusion follows group size, not the label",
                    subject="letter-corrected phi",
                )
            )
        excess = {v: metrics[f"{tag}/{v}/minority_excess"] for v in config.variants}
        text = (
            f"{tag}: the minority's undesirable count is over-estimated relative to the "
            f"majority's (estimate/true ratio, minority minus majority > 0, t interval over "
            f"orders) in every framing. {caveat}"
        )
        part = {
            "claim": text,
            "paper": "humans over-estimate the minority's undesirable behaviours (Hamilton & "
            "Gifford 1976)",
        }
        under = all(
            metrics[f"{tag}/{v}/estimate_majority"] < true_maj
            and metrics[f"{tag}/{v}/estimate_minority"] < true_min
            for v in config.variants
        )
        # competence gate (#55 item 1, P14's "frequency read-out above chance"): the count
        # read-out must tell the majority's true undesirable count from the minority's
        # (twice as many) before its relative error says anything: a model that answers a
        # small number for both groups makes the ratio excess positive by arithmetic alone
        tells = {
            v: paired_t(
                np.array([r["estimate_majority"] for r in per[tag, v]]),
                np.array([r["estimate_minority"] for r in per[tag, v]]),
            )
            for v in config.variants
        }
        counts_gate = Precondition(
            f"the count read-out tells {true_maj} from {true_min} (majority estimate above "
            "the minority's, paired t interval over orders above 0, in every framing)",
            all(bool(np.isfinite(t.low) and t.low > 0) for t in tells.values()),
            "; ".join(
                f"{v}: {t.value:+.2f} [{t.low:+.2f}, {t.high:+.2f}]" for v, t in tells.items()
            ),
        )
        claims.append(
            gated(
                all_of(
                    {
                        v: at_least(
                            excess[v],
                            0.0,
                            null="no over-estimate (excess 0)",
                            subject="excess",
                            **part,
                        )
                        for v in config.variants
                    },
                    **part,
                    detail="; ".join(
                        f"{v}: estimates {metrics[f'{tag}/{v}/estimate_majority']:.1f}/{true_maj}, "
                        f"{metrics[f'{tag}/{v}/estimate_minority']:.1f}/{true_min}"
                        for v in config.variants
                    )
                    + (
                        "; both counts under-estimated, so the excess may come from a prior "
                        "for small numbers rather than from distinctiveness"
                        if under
                        else ""
                    ),
                ),
                counts_gate,
            )
        )

    fig, ax = plt.subplots(figsize=(6.5, 3.4))
    width = 0.8 / max(len(config.models), 1)
    for mi, model in enumerate(config.models):
        tag = _setup.short(model)
        x = np.arange(len(config.variants)) + mi * width
        est = [metrics[f"{tag}/{v}/phi"] for v in config.variants]
        y = [e.value for e in est]
        err = [[e.value - e.low for e in est], [e.high - e.value for e in est]]
        ax.bar(x, y, width, yerr=err, label=tag, capsize=3)
    ax.axhline(human_phi, color="k", ls="--", lw=1, label="humans (H&G 1976, approx.)")
    ax.axhline(0, color="grey", lw=0.5)
    ax.set_xticks(np.arange(len(config.variants)) + width * (len(config.models) - 1) / 2)
    ax.set_xticklabels(config.variants, fontsize=8)
    ax.set_ylabel("attribution phi (true 0)")
    ax.legend(fontsize=7)
    fig.tight_layout()
    notes = (
        f"{caveat} Design: {config.counts[0][0]}/{config.counts[0][1]} vs "
        f"{config.counts[1][0]}/{config.counts[1][1]} statements (true phi 0), behaviours drawn "
        f"from {len(il.DESIRABLE)} desirable / {len(il.UNDESIRABLE)} undesirable templates, "
        f"{config.orders} random orders per variant (the same orders across variants). "
        "Read-out: option log-likelihoods normalised over the options of each question "
        "(attribution: the two group names; estimates: 0..n; traits: 1..7). Human "
        "numbers: jaxlab.illusions.HUMAN_BASELINES (H&G 1976 Exp. 1 attribution means, "
        "approximate)."
    )
    return Result(metrics=metrics, claims=claims, figures={"phi_by_variant": fig}, notes=notes)
