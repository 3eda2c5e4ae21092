"""Causal narratives from ambiguous events: templated event pairs with no causal link
(co-occurring, temporally ordered, independent), causally linked control pairs, and the
Corr2Cause items shipped in the OpenAI `evals` wheel (read as data).

Papers: Michotte (1946/1963) and Einhorn & Hogarth (1986) on cues to causality
(temporal order, contiguity); Jin et al. (2024), "Can large language models infer
causation from correlation?" (Corr2Cause, ICLR).
"""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import jax
import numpy as np
from jaxtyping import PRNGKeyArray

from .._core import check_positive_int, parse_json
from ._query import Query

__all__ = [
    "FRAMINGS",
    "CAUSAL_PAIRS",
    "causal_pairs",
    "causal_query",
    "Corr2CauseItem",
    "read_corr2cause",
]

# first events (what someone did) and second events (something that happened), drawn
# from pools with no plausible causal link between any two of them
_FIRST = (
    "Maria bought a blue umbrella",
    "Tom painted his kitchen yellow",
    "Aisha started learning the violin",
    "Ken planted tomatoes in his garden",
    "Lena changed her phone's ringtone",
    "Omar read a novel about sailors",
    "Priya wore her new green scarf",
    "Jonas ate cereal for breakfast",
    "Sofia rearranged her bookshelf",
    "Ravi wrote a letter to his aunt",
    "Mei adopted a goldfish",
    "Carlos cleaned his bicycle",
)
_SECOND = (
    "the city's water bill rose",
    "a train in the next region was delayed",
    "the local football team lost a match",
    "a bakery across town ran out of bread",
    "the price of copper went up",
    "a thunderstorm hit the coast",
    "the museum extended its opening hours",
    "a bridge in the capital closed for repairs",
    "the stock market fell slightly",
    "a famous actor announced a new film",
    "the school changed its lunch menu",
    "a power cut hit a neighbouring village",
)
FRAMINGS: dict[str, str] = {
    "co_occurring": "On the same day, {a}, and {b}.",
    "temporal": "{a}. The next day, {b}.",
    "independent": "{a}. Independently, in another part of the country, {b}.",
}
"""How two unrelated events are presented: framing name -> template with `{a}` and `{b}`."""
# positive controls: the second event plainly follows from the first
CAUSAL_PAIRS: tuple[tuple[str, str], ...] = (
    ("Tom dropped a glass on the stone floor", "the glass broke"),
    ("Maria forgot to water her plant for a month", "the plant died"),
    ("Ken left the ice cream in the hot sun", "the ice cream melted"),
    ("a storm knocked down the power line", "the street lights went out"),
    ("Lena ran the marathon without training", "her legs were sore the next day"),
    ("Omar put too much salt in the soup", "the soup tasted too salty"),
    ("the dam's gates were opened", "the river below the dam rose"),
    ("Priya left her car lights on all night", "the car battery was flat in the morning"),
)
"""Positive controls: pairs (cause, effect) whose second event plainly follows from the first."""


def causal_pairs(n: int, *, key: PRNGKeyArray) -> list[tuple[str, str]]:
    """n distinct (first event, second event) pairs with no causal link, drawn by `key`."""
    n = check_positive_int("n", n)
    if n > len(_FIRST) * len(_SECOND):
        raise ValueError(f"n: expected at most {len(_FIRST) * len(_SECOND)} pairs, received {n}")
    idx = np.asarray(jax.random.permutation(key, len(_FIRST) * len(_SECOND)))[:n]
    return [(_FIRST[i // len(_SECOND)], _SECOND[i % len(_SECOND)]) for i in idx]


def causal_query(first: str, second: str, framing: str) -> tuple[str, Query]:
    """(context, "did the first cause the second?" Query with answers Yes, No).

    `first`, `second` non-empty strings, `framing` a key of `FRAMINGS` (else a
    `ValueError` naming the argument)."""
    for name, v in (("first", first), ("second", second)):
        if not isinstance(v, str) or not v.strip():
            raise ValueError(f"{name}: expected a non-empty string, received {v!r:.60}")
    if not isinstance(framing, str) or framing not in FRAMINGS:
        raise ValueError(f"framing: expected one of {sorted(FRAMINGS)}, received {framing!r}")
    context = FRAMINGS[framing].format(a=first, b=second)
    context = context[0].upper() + context[1:]
    return context, Query(
        f"Did the fact that {first} cause the fact that {second}? Answer Yes or No.",
        ("Yes", "No"),
    )


@dataclasses.dataclass(frozen=True)
class Corr2CauseItem:
    """One Corr2Cause item: `premise` (str), `hypothesis` (str), `n_variables` (int),
    `label` ("entailment", "contradiction" or "neutral")."""

    premise: str
    hypothesis: str
    n_variables: int
    label: str

    def query(self) -> tuple[str, Query]:
        """(premise context, Query with answers entailment, contradiction, neutral)."""
        return self.premise, Query(
            f"Hypothesis: {self.hypothesis} Does the premise entail the hypothesis, "
            "contradict it, or neither? Answer entailment, contradiction or neutral.",
            ("entailment", "contradiction", "neutral"),
        )


_LABELS = ("entailment", "contradiction", "neutral")


def read_corr2cause(path: str | Path, *, max_variables: int = 3) -> list[Corr2CauseItem]:
    """Items of the `evals` wheel's `corr2cause.jsonl` with at most `max_variables` variables.

    **Arguments:** `path` of the JSONL file (`jaxlab.data.wheel_file("evals",
    "corr2cause/corr2cause.jsonl")`); `max_variables`.

    **Returns:** list of `Corr2CauseItem` in file order. A malformed line raises one
    `ValueError` naming the file and the line.
    """
    max_variables = check_positive_int("max_variables", max_variables)
    path = Path(path)
    out = []
    with open(path, encoding="utf-8") as f:
        for ln, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                row = parse_json(line, where=f"{path}: line {ln}")
                text = row["input"][-1]["content"]
                label = row["ideal"].removeprefix("Answer:").strip()
                premise, hypothesis = text.split("Hypothesis:")
                found = re.search(r"closed system of (\d+) variables", premise)
                if found is None:
                    raise ValueError("no 'closed system of N variables' in the premise")
                n_vars = int(found.group(1))
            except (ValueError, KeyError, IndexError, TypeError, AttributeError) as e:
                raise ValueError(f"{path}: line {ln} is not a Corr2Cause item ({e})") from None
            if label not in _LABELS:
                raise ValueError(f"{path}: line {ln} has label {label!r}, expected {_LABELS}")
            if n_vars <= max_variables:
                premise = premise.strip().removeprefix("Premise:").strip()
                out.append(Corr2CauseItem(premise, hypothesis.strip(), n_vars, label))
    return out
