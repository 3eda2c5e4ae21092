"""Graded-evidence tasks with competing hypotheses: templated scenarios and factual items.

P13 (HOT-3 belief dominance): beliefs are read from activations while the amount of
evidence for each of two hypotheses is varied. A scenario (which box holds the coin, which
door hides the treasure, which suspect took the cake) states `k_A` sentences supporting
hypothesis A and `k_B` supporting B (each in 0..`max_evidence`) in a random order; a factual
item pits the true answer (the model's prior) against a misleading alternative with `k_A`
supporting and `k_B` misleading sentences. Every item records its options (the action
tokens, read by option likelihood), the evidence balance and the correct answer.
"""

from __future__ import annotations

import dataclasses

import jax
import numpy as np

from .._core import check_memory, check_nonnegative_int, check_positive_int, numpy_rng

__all__ = ["BeliefItem", "SCENARIOS", "make_scenarios", "make_factual", "evidence_counts"]


@dataclasses.dataclass(frozen=True)
class BeliefItem:
    """One question with competing hypotheses and the evidence given for each.

    **Attributes:**

    - `context`: the story or the evidence sentences.
    - `question`: the question asked about it.
    - `answer_prefix`: the start of the answer, after which the options are scored.
    - `options`: the hypotheses' answer strings (with their leading space), option 0 = A.
    - `answer`: index of the correct option, -1 when the evidence is tied.
    - `evidence`: (k_A, k_B) supporting sentences per hypothesis, or None (ToMi, Hi-ToM).
    - `family`: "box", "door", "suspect", "fact", "tomi" or "hitom".
    - `tag`: a sub-type (ToMi question kind, Hi-ToM order, the scenario's kind).
    """

    context: str
    question: str
    answer_prefix: str
    options: tuple[str, ...]
    answer: int
    evidence: tuple[int, int] | None
    family: str
    tag: str = ""

    def __post_init__(self):
        if len(self.options) < 2 or len(set(self.options)) != len(self.options):
            raise ValueError(f"options: expected >= 2 distinct strings, received {self.options!r}")
        if not -1 <= self.answer < len(self.options):
            raise ValueError(
                f"answer: expected -1 or an index in [0, {len(self.options)}), "
                f"received {self.answer}"
            )

    @property
    def prompt(self) -> str:
        """The text the options continue: context, question and answer prefix."""
        return f"{self.context}\nQuestion: {self.question}\nAnswer: {self.answer_prefix}"

    @property
    def balance(self) -> int:
        """Evidence balance k_A - k_B (0 for items without graded evidence)."""
        return 0 if self.evidence is None else self.evidence[0] - self.evidence[1]


@dataclasses.dataclass(frozen=True)
class _Scenario:
    hypotheses: tuple[str, str]
    setup: str
    question: str
    prefix: str
    evidence: tuple[str, ...]


#: the scenario kinds: hypotheses (A, B), set-up, question, answer prefix, evidence templates
SCENARIOS: dict[str, _Scenario] = {
    "box": _Scenario(
        ("red", "blue"),
        "{name} hid a coin in one of two boxes, a {x} box and a {y} box.",
        "Which box holds the coin, the {x} box or the {y} box?",
        "The coin is in the",
        (
            "The {h} box rattles when it is shaken.",
            "There is a fresh scratch on the lid of the {h} box.",
            "{witness} saw {name} close the {h} box.",
            "The {h} box is heavier than an empty box.",
        ),
    ),
    "door": _Scenario(
        ("left", "right"),
        "The treasure is behind one of two doors, the {x} door or the {y} door.",
        "Which door hides the treasure, the {x} door or the {y} door?",
        "The treasure is behind the",
        (
            "Footprints lead to the {h} door.",
            "A cold draft comes from under the {h} door.",
            "The guard keeps looking at the {h} door.",
            "The lock of the {h} door was oiled today.",
        ),
    ),
    "suspect": _Scenario(
        ("Tom", "Ann"),
        "Someone ate the cake. The only suspects are {x} and {y}.",
        "Who ate the cake, {x} or {y}?",
        "The cake was eaten by",
        (
            "Crumbs were found on {h}'s sleeve.",
            "{h} was seen in the kitchen at night.",
            "{h} has no alibi for that evening.",
            "{h} was the last one near the cake.",
        ),
    ),
}
"""The scenario kinds: name -> hypotheses (A, B), set-up, question, answer prefix and evidence
templates."""

_NAMES = ("Emma", "John", "Anna", "Mia", "Leo", "Nora")

_FACTS = (
    ("What is the capital of France?", "The capital of France is", "Paris", "Lyon"),
    ("What is the largest planet?", "The largest planet is", "Jupiter", "Mars"),
    ("What colour is the sky on a clear day?", "On a clear day the sky is", "blue", "green"),
    ("Which animal says moo?", "The animal that says moo is the", "cow", "dog"),
    ("What is frozen water called?", "Frozen water is called", "ice", "sand"),
    ("How many legs does a spider have?", "A spider has", "eight", "six"),
    ("Which metal is liquid at room temperature?", "The metal is", "mercury", "iron"),
    ("What do bees make?", "Bees make", "honey", "milk"),
)

_FACT_EVIDENCE = (
    "A quiz book gives the answer as {h}.",
    "My teacher said the answer is {h}.",
    "An online forum agreed that it is {h}.",
    "A friend insisted the answer is {h}.",
)


def _cells(max_evidence: int) -> list[tuple[int, int]]:
    return [(a, b) for a in range(max_evidence + 1) for b in range(max_evidence + 1)]


def _check(n_per_cell, max_evidence, templates):
    n_per_cell = check_positive_int("n_per_cell", n_per_cell)
    if isinstance(max_evidence, bool) or not isinstance(max_evidence, int | np.integer):
        raise ValueError(f"max_evidence: expected an int, received {max_evidence!r}")
    if not 0 <= max_evidence <= templates:
        raise ValueError(
            f"max_evidence: expected an int in [0, {templates}] (one template per sentence), "
            f"received {max_evidence}"
        )
    # each item is a few Python strings (about 2 KiB): a huge n_per_cell is refused
    # before the list is built instead of filling memory
    check_memory("n_per_cell", 2048.0 * (max_evidence + 1) ** 2 * n_per_cell)
    return n_per_cell, int(max_evidence)


def _answer(ka: int, kb: int) -> int:
    return 0 if ka > kb else 1 if kb > ka else -1


def make_scenarios(
    n_per_cell: int,
    *,
    key: jax.Array,
    kinds: tuple[str, ...] = tuple(SCENARIOS),
    max_evidence: int = 4,
) -> list[BeliefItem]:
    """A balanced design of two-hypothesis scenarios with graded evidence (P13).

    Every cell (k_A, k_B) of {0..`max_evidence`}^2 gets `n_per_cell` items; the kinds go
    round-robin over a cell's items (from a random start). Hypothesis A of a kind is always
    the same (the red box, the left door, Tom), so that "A" means one thing a linear
    belief direction can find across items; the order in which the two are mentioned in
    the set-up and the question is drawn at random, and the k_A + k_B evidence sentences
    (distinct templates per side) are shuffled.

    **Arguments:**

    - `n_per_cell`: items per (k_A, k_B) cell.
    - `key`: PRNG key (the only randomness).
    - `kinds`: scenario kinds among `SCENARIOS`.
    - `max_evidence`: the largest k, in 0..4 (the 4 templates per kind); 0 is one cell
      with no evidence sentences.

    A `n_per_cell` whose items would not fit in memory is refused naming it.

    **Returns:** list of `(max_evidence + 1)^2 * n_per_cell` `BeliefItem`s, cell by cell.
    """
    n_per_cell, max_evidence = _check(n_per_cell, max_evidence, 4)
    kinds = tuple(kinds)
    bad = [k for k in kinds if k not in SCENARIOS]
    if not kinds or bad:
        raise ValueError(f"kinds: expected names among {tuple(SCENARIOS)}, received {kinds!r}")
    rng = numpy_rng(key)
    items = []
    for ka, kb in _cells(max_evidence):
        start = int(rng.integers(len(kinds)))
        for i in range(n_per_cell):
            kind = kinds[(start + i) % len(kinds)]
            sc = SCENARIOS[kind]
            ha, hb = sc.hypotheses
            name, witness = rng.choice(_NAMES, 2, replace=False)
            x, y = (ha, hb) if rng.random() < 0.5 else (hb, ha)
            ta = rng.permutation(len(sc.evidence))[:ka]
            tb = rng.permutation(len(sc.evidence))[:kb]
            sents = [sc.evidence[t].replace("{h}", ha) for t in ta]
            sents += [sc.evidence[t].replace("{h}", hb) for t in tb]
            sents = [sents[j] for j in rng.permutation(len(sents))]
            fill = {"name": str(name), "witness": str(witness), "x": x, "y": y}
            context = " ".join([sc.setup.format(**fill)] + [s.format(**fill) for s in sents])
            items.append(
                BeliefItem(
                    context,
                    sc.question.format(**fill),
                    sc.prefix,
                    (" " + ha, " " + hb),
                    _answer(ka, kb),
                    (ka, kb),
                    kind,
                    kind,
                )
            )
    return items


def make_factual(n_per_cell: int, *, key: jax.Array, max_evidence: int = 4) -> list[BeliefItem]:
    """Factual questions where a misleading context competes with the model's prior (P13).

    Hypothesis A is the true answer, B a misleading alternative; each cell (k_A, k_B) of
    {0..`max_evidence`}^2 gets `n_per_cell` items with k_A sentences asserting the truth and
    k_B asserting the alternative, shuffled. `answer` is 0 (the truth) whatever the balance.

    **Arguments:** `n_per_cell` (refused when the items would not fit in memory); `key`;
    `max_evidence` in 0..4 (0: one cell without evidence sentences).

    **Returns:** list of `(max_evidence + 1)^2 * n_per_cell` `BeliefItem`s (family "fact").
    """
    n_per_cell, max_evidence = _check(n_per_cell, max_evidence, len(_FACT_EVIDENCE))
    rng = numpy_rng(key)
    items = []
    for ka, kb in _cells(max_evidence):
        for _ in range(n_per_cell):
            q, prefix, true, false = _FACTS[int(rng.integers(len(_FACTS)))]
            ta = rng.permutation(len(_FACT_EVIDENCE))[:ka]
            tb = rng.permutation(len(_FACT_EVIDENCE))[:kb]
            sents = [_FACT_EVIDENCE[t].format(h=true) for t in ta]
            sents += [_FACT_EVIDENCE[t].format(h=false) for t in tb]
            sents = [sents[j] for j in rng.permutation(len(sents))]
            context = " ".join(sents) if sents else "Answer the question."
            items.append(
                BeliefItem(context, q, prefix, (" " + true, " " + false), 0, (ka, kb), "fact")
            )
    return items


def evidence_counts(items: list[BeliefItem], *, max_evidence: int = 4) -> np.ndarray:
    """Number of items in each evidence cell (checks a design is balanced).

    **Arguments:**

    - `items`: `BeliefItem`s (items without graded evidence are not counted).
    - `max_evidence`: the largest number of evidence sentences per side (>= 0; one whose
      table would not fit in memory is refused naming it).

    **Returns:** a `(max_evidence + 1, max_evidence + 1)` int array, entry `[k_A, k_B]` the
    number of items with that evidence.

    **Raises:** `ValueError` when an item's evidence lies outside 0..`max_evidence`.
    """
    max_evidence = check_nonnegative_int("max_evidence", max_evidence)
    if isinstance(items, str | bytes) or not all(isinstance(it, BeliefItem) for it in items):
        raise ValueError(f"items: expected a sequence of BeliefItem, received {items!r:.60}")
    check_memory("max_evidence", 8.0 * (max_evidence + 1) ** 2)  # the int64 table
    out = np.zeros((max_evidence + 1, max_evidence + 1), np.int64)
    for i, it in enumerate(items):
        if it.evidence is None:
            continue
        ka, kb = it.evidence
        if not (0 <= ka <= max_evidence and 0 <= kb <= max_evidence):
            raise ValueError(
                f"items[{i}].evidence: expected counts in [0, {max_evidence}], received "
                f"{it.evidence}"
            )
        out[ka, kb] += 1
    return out
