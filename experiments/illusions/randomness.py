"""P14 claim: pattern claims on random sequences, gambler's fallacy vs hot hand.

Sequences come from `jax.random` (coin flips, die rolls, a +-1 price walk) and are shown
as data; periodic sequences are the positive control (a real pattern). Read-outs by option
likelihood: the pattern-claim rate P(Yes | "is there a pattern?") on random vs periodic
sequences, and P(next outcome == last) against chance (1/2 for coins and moves, 1/6 for
dice) and as a function of the final streak length (slope < 0: gambler's fallacy, > 0:
hot hand / trend following), with a percentile-bootstrap interval over sequences.

Competence gates (#55): the pattern-claim row is testable only where the read-out tells
periodic from random sequences (the sanity row holds: a model that says "pattern" as
often for a real pattern as for noise is not perceiving anything either way); the streak
rows only where the next-outcome read-out continues the periodic controls above chance
(t interval over the controls): a model that cannot predict an obvious continuation says
nothing about its expectations after streaks.
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
    bootstrap,
    gated,
    model_params,
    superior,
    t_mean,
    welch_t,
)
from experiments.illusions import _setup
from jaxlab import illusions as il
from jaxlab import lm

NAME = "illusions_randomness"
PAPER = "P14"
DESCRIPTION = "Pattern claims on seeded random sequences; gambler's fallacy / hot hand by streak"

_PERIODS = {
    "coin": ((0, 1), (0, 0, 1, 1)),
    "dice": ((1, 2, 3), (6, 5, 4, 3, 2, 1)),
    "walk": ((0, 1), (0, 0, 1)),
}


@dataclasses.dataclass(frozen=True)
class Config:
    """Settings of one run; the defaults are QUICK (2 CPU cores, minutes)."""

    models: tuple[str, ...] = ("smollm2-135m-instruct", "qwen2.5-coder-0.5b-instruct")
    kinds: tuple[str, ...] = ("coin", "dice", "walk")
    length: int = 10
    sequences: int = 32
    controls: int = 8
    # "more often than not": mean P(Yes: a pattern) above indifference (the claim's wording)
    pattern_bar: float = 0.5
    n_boot: int = 2000  # bootstrap resamples of the streak slopes


QUICK = Config()
TINY = Config(  # the smoke tier
    models=("smollm2-135m-instruct",), length=8, sequences=4, controls=2, n_boot=200
)
FULL = Config(
    models=tuple(lm.MODELS),
    length=20,
    sequences=400,
    controls=50,
)


def full_work(config: Config) -> float:
    """Model work: parameters x sequences (random and periodic) x their length (+ questions)."""
    seqs = len(config.kinds) * (config.sequences + config.controls)
    return sum(model_params(m) for m in config.models) * seqs * (config.length + 40)


def _ls_slope(r, p, axis=-1):
    """Least-squares slope of p on r along `axis` (vectorised for the bootstrap; a
    resample whose runs are all equal has no slope and counts as 0)."""
    x = r - r.mean(axis=axis, keepdims=True)
    y = p - p.mean(axis=axis, keepdims=True)
    sxx = (x * x).sum(axis=axis)
    return np.where(sxx > 0, (x * y).sum(axis=axis) / np.where(sxx > 0, sxx, 1.0), 0.0)


def run(config: Config, key: jax.Array, ctx: RunContext) -> Result:
    pool = lm.Pool(config.models)
    boot_seed = int(jax.random.randint(ctx.key("bootstrap"), (), 0, 2**31 - 1))
    metrics: dict[str, float | Estimate] = {
        f"human/{k}": il.human_baseline(k).value
        for k in ("gvt_hot_hand_fans", "gvt_hot_hand_free_throws", "falk_konold_alternation")
    }
    slopes: dict[tuple[str, str], Estimate] = {}
    continuation: dict[tuple[str, str], Estimate] = {}
    claim_rates: dict[tuple[str, str], tuple[np.ndarray, np.ndarray]] = {}
    for model in config.models:
        tag = _setup.short(model)
        for ki, kind in enumerate(config.kinds):
            kk = jax.random.fold_in(key, ki)
            seqs = [
                np.asarray(il.random_sequence(kind, config.length, key=jax.random.fold_in(kk, i)))
                for i in range(config.sequences)
            ]
            periods = _PERIODS[kind]
            ctrl = [
                np.asarray(
                    il.periodic_sequence(kind, config.length, np.array(periods[i % len(periods)]))
                )
                for i in range(config.controls)
            ]
            allseq = seqs + ctrl
            answers = _setup.score_queries(
                pool,
                model,
                [il.render_sequence(kind, s) for s in allseq],
                [il.randomness_queries(kind)] * len(allseq),
                tag=f"randomness-{kind}",
                chunk=8,
                max_options=16,
                batch_size=4,
            )
            p_yes = np.array([float(il.option_probabilities(a[0])[0]) for a in answers])
            nxt = [np.asarray(il.option_probabilities(a[1])) for a in answers]
            # the next-outcome answers are in outcome order (dice 1..6 at index 0..5)
            last = [int(s[-1]) - (1 if kind == "dice" else 0) for s in allseq]
            p_rep = np.array([p[j] for p, j in zip(nxt, last, strict=True)])
            runs = np.array([il.final_run_length(s) for s in allseq])
            n = config.sequences
            chance = 1 / 6 if kind == "dice" else 0.5
            # the periodic controls' true next outcome (the period continued), as an index
            nexts = [
                int(periods[i % len(periods)][config.length % len(periods[i % len(periods)])])
                - (1 if kind == "dice" else 0)
                for i in range(config.controls)
            ]
            p_cont = np.array([nxt[n + i][j] for i, j in enumerate(nexts)])
            continuation[tag, kind] = (
                t_mean(p_cont)
                if p_cont.size >= 2
                else Estimate.single(float(p_cont.mean()), method="one control sequence")
            )
            metrics[f"{tag}/{kind}/p_continue_periodic"] = continuation[tag, kind]
            claim_rates[tag, kind] = (p_yes[:n], p_yes[n:])
            metrics[f"{tag}/{kind}/pattern_claim_random"] = t_mean(p_yes[:n])
            metrics[f"{tag}/{kind}/pattern_claim_periodic"] = float(p_yes[n:].mean())
            metrics[f"{tag}/{kind}/p_repeat"] = float(p_rep[:n].mean())
            metrics[f"{tag}/{kind}/p_repeat_chance"] = chance
            metrics[f"{tag}/{kind}/mean_final_run"] = float(runs[:n].mean())
            if np.unique(runs[:n]).size >= 2:
                slope = bootstrap(
                    (runs[:n].astype(np.float64), p_rep[:n]),
                    _ls_slope,
                    seed=boot_seed,
                    n_resamples=config.n_boot,
                )
                # the library's slope is the point estimate (the same least-squares formula)
                point = il.streak_slope(runs[:n], p_rep[:n])
                slopes[tag, kind] = Estimate(
                    point, slope.low, slope.high, slope.level, slope.method, slope.n
                )
                metrics[f"{tag}/{kind}/streak_slope"] = slopes[tag, kind]
    claims = []
    for model in config.models:
        tag = _setup.short(model)
        rnd = {k: metrics[f"{tag}/{k}/pattern_claim_random"] for k in config.kinds}
        per = {k: metrics[f"{tag}/{k}/pattern_claim_periodic"] for k in config.kinds}

        def sees_pattern(k, tag=tag):
            return lambda level: at_least(
                t_mean(claim_rates[tag, k][0], level),
                config.pattern_bar,
                null=f"indifference (P(Yes) {config.pattern_bar:g})",
                claim=f"{tag}: claims a pattern in random sequences more often than not (P(Yes) "
                f"> {config.pattern_bar:g}, t interval over sequences above it) in >= 1 "
                f"sequence type (Holm over the types). {_setup.CAVEAT}",
                paper="LLMs perceive patterns in random data more than humans",
                subject="mean P(Yes), random sequences",
            )

        text = (
            f"{tag}: pattern claims discriminate: P(Yes) higher on periodic than on random "
            f"sequences for every type (Welch interval). {_setup.CAVEAT}"
        )
        part = {"claim": text, "paper": "(sanity check of the read-out)"}
        sanity = all_of(
            {
                k: superior(
                    welch_t(claim_rates[tag, k][1], claim_rates[tag, k][0]),
                    "periodic sequences",
                    "random sequences",
                    **part,
                )
                for k in config.kinds
            },
            **part,
        )
        pattern = best_of(
            {k: sees_pattern(k) for k in config.kinds},
            detail="; ".join(
                f"{k}: random {rnd[k]:.2f} vs periodic {per[k]:.2f}" for k in config.kinds
            ),
        )
        claims.append(
            gated(
                pattern,
                Precondition(
                    "the pattern read-out tells periodic from random sequences (the "
                    "sanity row holds)",
                    sanity.verdict == "holds",
                    f"sanity row {sanity.verdict}",
                ),
            )
        )
        claims.append(sanity)

        def continues(kind, tag=tag):
            c = continuation[tag, kind]
            chance = 1 / 6 if kind == "dice" else 0.5
            return Precondition(
                f"the next-outcome read-out continues the periodic {kind} controls above "
                f"chance ({chance:.2g}; t interval over {c.n} controls above it)",
                bool(np.isfinite(c.low) and c.low > chance),
                f"P(true continuation) {c.value:.2f} [{c.low:.2f}, {c.high:.2f}]",
            )

        if (tag, "coin") in slopes:
            claims.append(
                gated(
                    superior(
                        slopes[tag, "coin"],
                        "P(repeat) per flip of the final streak",
                        "no streak dependence (slope 0)",
                        higher_is_better=False,
                        claim=f"{tag}: coin flips: the longer the final streak, the less a "
                        "repeat is expected (gambler's fallacy: slope of P(repeat) on streak "
                        f"length < 0, bootstrap interval over sequences). {_setup.CAVEAT}",
                        paper="humans expect alternations after streaks (Tversky & Kahneman "
                        "1971; most-random-looking alternation rate ~0.6, Falk & Konold 1997, "
                        "approx.)",
                        detail=f"mean P(repeat) {metrics[f'{tag}/coin/p_repeat']:.2f} (chance 0.5)",
                    ),
                    continues("coin"),
                )
            )
        if (tag, "walk") in slopes:
            claims.append(
                gated(
                    superior(
                        slopes[tag, "walk"],
                        "P(same move) per move of the final run",
                        "no streak dependence (slope 0)",
                        claim=f"{tag}: price walk: a longer run of moves makes the model expect "
                        "it to continue (hot hand / trend following: slope > 0, bootstrap "
                        f"interval over sequences). {_setup.CAVEAT}",
                        paper="91% of fans believe in the hot hand (basketball; Gilovich, "
                        "Vallone & Tversky 1985)",
                        detail=f"mean P(same move) {metrics[f'{tag}/walk/p_repeat']:.2f} "
                        "(chance 0.5)",
                    ),
                    continues("walk"),
                )
            )
    fig, ax = plt.subplots(figsize=(5.5, 3.2))
    for model in config.models:
        tag = _setup.short(model)
        x = np.arange(len(config.kinds))
        ax.plot(
            x,
            [metrics[f"{tag}/{k}/pattern_claim_random"].value for k in config.kinds],
            "o-",
            label=f"{tag} random",
        )
        ax.plot(
            x,
            [metrics[f"{tag}/{k}/pattern_claim_periodic"] for k in config.kinds],
            "s--",
            label=f"{tag} periodic",
        )
    ax.set_xticks(np.arange(len(config.kinds)))
    ax.set_xticklabels(config.kinds)
    ax.set_ylabel("P(Yes: there is a pattern)")
    ax.axhline(0.5, color="grey", lw=0.5)
    ax.legend(fontsize=7)
    fig.tight_layout()
    notes = (
        f"{_setup.CAVEAT} {config.sequences} random sequences of length {config.length} "
        f"per type from jax.random (seeded by the run key) and {config.controls} periodic "
        "controls. Human numbers (jaxlab.illusions.HUMAN_BASELINES) come from different "
        "tasks (basketball-shot beliefs, randomness judgments); the comparison is "
        "qualitative."
    )
    return Result(metrics=metrics, claims=claims, figures={"pattern_claims": fig}, notes=notes)
