"""The competence gate of the routing experiments (P6 tables, the P19 HAPS base models):
a router comparison is testable only on a pool of candidates that are better than guessing.

A table of M candidates on N queries, query q with K_q answer options (chance rate
c_q = 1 / K_q, from the task group, `OPTIONS`), binary quality y_qi. Two conditions:

(a) every candidate is above chance: for each candidate i, the Wilson interval (harness
    `wilson`, two-sided `level`) of its accuracy acc_i = mean_q y_qi has its lower end
    above the table's chance rate c = mean_q c_q. Under the null "candidate i guesses",
    sum_q y_qi is a sum of independent Bernoulli(c_q), whose variance is at most that of
    a Binomial(N, c): the Wilson bound on one rate is conservative for mixed option counts.

(b) the pool's oracle is above what guessers reach: the oracle accuracy
    O = mean_q max_i y_qi must exceed the expected oracle accuracy of M independent
    guessers on the same queries, G = mean_q [1 - (1 - c_q)^M] (query q is solved by at
    least one of M independent uniform guesses). Statistic D = O - G = mean_q d_q with
    d_q = max_i y_qi - (1 - (1 - c_q)^M); passes when the lower end of its percentile
    bootstrap interval over queries (harness `bootstrap`, `level`) is above 0.

Why (b) compares with chance-level guessers, not with independent candidates at the
observed accuracies (E[O] = 1 - prod_i (1 - acc_i)): competent candidates are positively
correlated (they share the easy queries), so their union is below the independence value
(the VQA pool: O 0.991 < 0.9997), while guessers are independent and reach it; that
comparison measures anti-correlation, not competence. The union of M guessers is what the
oracle "headroom" of a pool of chance-level candidates amounts to (the text QUICK table's
six candidates: G = 1 - 0.75^6 = 0.822 > its oracle 0.783): a pool whose oracle does not
beat it has no headroom that a router could learn.

A failed gate makes every router-comparison claim on the table `untestable` (harness
`gated`), never "fails": at this scale the pool cannot show a routing effect.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from experiments._harness import Estimate, Precondition, bootstrap, wilson
from jaxlab import routing

__all__ = ["OPTIONS", "Competence", "chance_rates", "competence"]

#: answer options per query of each task group of the routing tables (chance = 1/options):
#: MedMCQA, LogiQA and ReClor items have 4 lettered options, SocialIQA 3, QuaRTz 2
#: (`_sources.py`); easy-vqa's shape questions 3 shapes, colour questions its 8 colours,
#: yes/no questions 2
OPTIONS = {
    "medmcqa": 4,
    "logiqa": 4,
    "reclor": 4,
    "socialiqa": 3,
    "quartz": 2,
    "shape": 3,
    "colour": 8,
    "yes_no": 2,
    "yes_no/shape": 2,
    "yes_no/colour": 2,
}

GATE_NAME = "competent candidate pool at this scale"


@dataclasses.dataclass(frozen=True)
class Competence:
    """The gate's outcome: `precondition` (for `gated`), the `metrics` it measured
    (prefixed `gate/`), and its parts: `below_chance` (candidates failing (a)) and the
    oracle excess `excess` (the Estimate of D in (b))."""

    precondition: Precondition
    metrics: dict[str, float | Estimate]
    below_chance: tuple[str, ...]
    excess: Estimate


def chance_rates(table: routing.RoutingTable, options: dict[str, int] | None = None) -> np.ndarray:
    """(N,) chance rate 1 / K_q of each query, from its task group's option count."""
    options = OPTIONS if options is None else options
    missing = [g for g in table.group_names if g not in options]
    if missing:
        raise ValueError(
            f"table.group_names: no option count for {missing} (known: {sorted(options)})"
        )
    k = np.array([options[g] for g in table.group_names], float)
    return 1.0 / k[np.asarray(table.groups)]


def competence(
    table: routing.RoutingTable,
    *,
    label: str = "",
    level: float = 0.95,
    n_resamples: int = 1000,
    seed: int = 0,
    options: dict[str, int] | None = None,
) -> Competence:
    """The competence gate (a) and (b) of the module docstring on `table` (binary quality).

    **Arguments:** `table`; `label` names the table in the measured text (e.g. "text");
    `level` of the Wilson and bootstrap intervals; `n_resamples`, `seed` of the bootstrap;
    `options` group -> option count (default `OPTIONS`).

    **Returns:** a `Competence`: its `precondition` passes when every candidate's Wilson
    lower bound is above the chance rate and the oracle's excess over M independent
    guessers has a lower bound above 0.
    """
    y = np.asarray(table.quality, float)
    if not np.isin(y, (0.0, 1.0)).all():
        raise ValueError("table.quality: the competence gate needs binary (0/1) correctness")
    n, m = y.shape
    c_q = chance_rates(table, options)
    chance = float(c_q.mean())
    metrics: dict[str, float | Estimate] = {"gate/chance_rate": chance}
    below = []
    accs = []
    for j, name in enumerate(table.candidates):
        est = wilson(int(y[:, j].sum()), n, level)
        accs.append(est)
        metrics[f"gate/accuracy/{name}"] = est
        if not est.low > chance:
            below.append(name)
    guess = 1.0 - (1.0 - c_q) ** m
    d_q = y.max(1) - guess
    excess = bootstrap(d_q, seed=seed, level=level, n_resamples=n_resamples)
    acc = np.array([e.value for e in accs])
    metrics.update(
        {
            "gate/oracle_accuracy": float(y.max(1).mean()),
            "gate/oracle_of_guessers": float(guess.mean()),
            # for reference only (see the module docstring): independent candidates at the
            # observed accuracies
            "gate/oracle_if_independent": float(1.0 - np.prod(1.0 - acc)),
            "gate/oracle_excess_over_guessers": excess,
            "gate/n_below_chance": float(len(below)),
        }
    )
    passed = not below and excess.low > 0
    tag = f"{label}: " if label else ""
    worst = ", ".join(
        f"{nm} {e.value:.3f} [{e.low:.3f}, {e.high:.3f}]"
        for nm, e in zip(table.candidates, accs, strict=True)
        if nm in below
    )
    measured = (
        f"{tag}chance {chance:.3f} (1/options per query, mean over {n} queries); "
        f"{len(below)} of {m} candidates not above chance (Wilson {level:.0%} lower bound)"
        + (f": {worst}" if below else "")
        + f"; oracle {y.max(1).mean():.3f} vs {m} independent guessers' "
        f"{guess.mean():.3f}, excess {excess.value:+.3f} [{excess.low:+.3f}, {excess.high:+.3f}]"
    )
    pre = Precondition(
        f"{GATE_NAME} (every candidate above chance, oracle above {m} independent guessers')",
        passed,
        measured,
    )
    return Competence(pre, metrics, tuple(below), excess)
