"""P19 HAPS ablations: no parameter sharing, no reward term, fewer adapted blocks, rank sweep.

The same data, split and training budget as `routing_haps_main` (see there); each variant
changes one thing: `shared=False` (the router gets a trunk of its own, so the LoRA
objective no longer shapes its representation), `reward_weight=0` (the router learns from
the adapted models' likelihood only, without the correctness reward), adapters on the top
`fewer_top` blocks instead of `top`, and ranks `ranks`. Claims (the paper's): sharing and
the reward term each help, with paired bootstrap CIs over held-out queries.
"""

from __future__ import annotations

import dataclasses

import jax
import matplotlib.pyplot as plt
import numpy as np

from experiments._harness import Claim, Result, RunContext, log
from experiments.routing import _haps

NAME = "routing_haps_ablation"
PAPER = "P19"
DESCRIPTION = "HAPS ablations: parameter sharing, reward term, adapted depth, LoRA rank"
# wall-clock seconds of each arm's fit (a resumed fit counts only its remaining steps)
TIMING_METRICS = ("train_seconds/*",)


@dataclasses.dataclass(frozen=True)
class Config(_haps.HAPSConfig):
    """Settings of one run; the defaults are QUICK.

    QUICK is reduced to the two claimed arms (no sharing, no reward) beside HAPS: the rank
    sweep and the fewer-blocks arm (which rebuilds the adapted-block inputs) did not fit the
    shared 2-core machine's time (see `_haps.HAPS_SOURCES`); `fewer_top=None` and
    `ranks=()` skip them. FULL runs them (ranks 2, 8, 16; top 4 blocks)."""

    fewer_top: int | None = None
    ranks: tuple[int, ...] = ()


QUICK = Config()
# the smoke tier: every arm, the rank arm and the fewer-blocks arm included (2 cached and
# adapted blocks; the fewer-blocks arm adapts 1, running the middle block over the cache)
TINY = Config(**{**_haps.HAPS_TINY, "cached_top": 2, "top": 2}, fewer_top=1, ranks=(1,))
FULL = Config(**_haps.HAPS_FULL, fewer_top=4, ranks=(2, 8, 16))


def _accuracy(haps, data, test):
    correct, choice = _haps.haps_outcomes(haps, data, data.features, test)
    return correct[np.arange(len(test)), choice[0]].astype(float)


def full_work(config: Config) -> float:
    """`_haps.haps_work`: parameters x (prefix items + fit steps x batch x blocks)."""
    return _haps.haps_work(config)


def run(config: Config, key: jax.Array, ctx: RunContext) -> Result:
    # the split and fit keys of routing_haps_main: the `haps` arm is main's HAPS fit
    k_split, k_fit, *_, k_boot = jax.random.split(key, 6)
    data = _haps.haps_data(config)
    train, test = _haps.haps_split(data, config, k_split)
    # every variant starts from the same initialisation key and minibatch keys
    variants = {
        "haps": dict(),
        "no_sharing": dict(shared=False),
        "no_reward": dict(reward_weight=0.0),
    }
    per_query, seconds = {}, {}
    for n, kw in variants.items():
        haps, _, secs = _haps.train_haps(
            data, config, data.features, train, k_fit, ctx=ctx, tag=n, **kw
        )
        per_query[n], seconds[n] = _accuracy(haps, data, test), secs
        log.info("%s: accuracy %.3f (%.0f s)", n, per_query[n].mean(), secs)
    for r in config.ranks:
        cfg = dataclasses.replace(config, rank=r)
        haps, _, secs = _haps.train_haps(
            data, cfg, data.features, train, k_fit, ctx=ctx, tag=f"rank_{r}"
        )
        per_query[f"rank_{r}"], seconds[f"rank_{r}"] = _accuracy(haps, data, test), secs
    del data
    if config.fewer_top is not None:
        few = dataclasses.replace(config, top=config.fewer_top)
        data_few = _haps.haps_data(few)
        haps, _, secs = _haps.train_haps(
            data_few, few, data_few.features, train, k_fit, ctx=ctx, tag=f"top_{config.fewer_top}"
        )
        per_query[f"top_{config.fewer_top}"] = _accuracy(haps, data_few, test)
        seconds[f"top_{config.fewer_top}"] = secs
    metrics: dict[str, float] = {"n_test": len(test)}
    for n, v in per_query.items():
        metrics[f"accuracy/{n}"] = float(v.mean())
        metrics[f"train_seconds/{n}"] = seconds[n]
    kb = jax.random.split(k_boot, 2 + len(config.ranks) + 1)
    diffs = {}
    for i, n in enumerate([n for n in per_query if n != "haps"]):
        d = _haps.paired_ci(per_query["haps"], per_query[n], config.n_boot, kb[i])
        diffs[n] = d
        metrics[f"gain_over/{n}"], metrics[f"gain_over/{n}_ci_low"] = d[0], d[1]
        metrics[f"gain_over/{n}_ci_high"] = d[2]

    def fmt(n):
        d = diffs[n]
        return (
            f"accuracy {metrics['accuracy/haps']:.3f} vs {metrics[f'accuracy/{n}']:.3f}; "
            f"gain {d[0]:+.3f} (95% CI {d[1]:+.3f}, {d[2]:+.3f})"
        )

    size = (
        f"{len(test)} held-out items, 3 models, {config.steps} steps of batch "
        f"{config.batch_size}"
        + ("" if ctx.full else f"; {_haps.HAPS_QUICK_NOTE}, rank/depth arms skipped")
        + f"; {_haps.HAPS_CAVEAT}"
    )
    arms = [n for n in per_query if n.startswith(("rank", "top"))]
    claims = [
        Claim(
            f"Sharing the trunk between the router and the LoRA generators raises HAPS's "
            f"held-out accuracy over the un-shared variant; {_haps.HAPS_NULL} ({size})",
            "parameter sharing transfers knowledge between the two levels",
            fmt("no_sharing"),
            diffs["no_sharing"][1] > 0,
        ),
        Claim(
            f"The reward term (correctness minus cost) raises HAPS's held-out accuracy over "
            f"the likelihood-only router; {_haps.HAPS_NULL} ({size})",
            "the reward-augmented objective helps",
            fmt("no_reward"),
            diffs["no_reward"][1] > 0,
        ),
    ]
    if arms:  # FULL (QUICK skips the rank and depth arms)
        claims.append(
            Claim(
                f"Adapting the top {config.top} blocks at rank {config.rank} is at least as "
                f"accurate as fewer blocks ({config.fewer_top}) or other ranks ({size}; no CI: "
                "a point comparison)",
                "ablations over architectural choices and scalability",
                f"haps {metrics['accuracy/haps']:.3f}; "
                + ", ".join(f"{n} {metrics[f'accuracy/{n}']:.3f}" for n in arms),
                metrics["accuracy/haps"] >= max(metrics[f"accuracy/{n}"] for n in arms),
            )
        )
    fig, ax = plt.subplots(figsize=(6, 3.5))
    ns = list(per_query)
    ax.bar(range(len(ns)), [metrics[f"accuracy/{n}"] for n in ns])
    ax.set_xticks(range(len(ns)), ns, rotation=30, fontsize=7)
    ax.set_ylabel("held-out accuracy")
    ax.set_title("HAPS ablations")
    fig.tight_layout()
    notes = (
        f"{_haps.HAPS_CAVEAT}. Same items, split, steps ({config.steps}) and keys as "
        "routing_haps_main (its `haps` arm is main's HAPS fit); one split, paired bootstrap "
        "over held-out queries. Shared machine."
    )
    return Result(metrics=metrics, claims=claims, figures={"ablation": fig}, notes=notes)
