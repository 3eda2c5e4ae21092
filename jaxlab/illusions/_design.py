"""The illusory-correlation stimuli of Hamilton & Gifford (1976): 18/8 vs 9/4 statements.

Group A (the majority) performs 18 desirable and 8 undesirable behaviours, group B (the
minority) 9 and 4: the same 9:4 ratio, so group and desirability are independent
(phi = 0 exactly). Statement texts come from templates over behaviour pools, drawn
without replacement and shown in a random order (both from `key`).

Paper: Hamilton, D. L. & Gifford, R. K. (1976). Illusory correlation in interpersonal
perception: a cognitive basis of stereotypic judgments. J. Exp. Soc. Psychol. 12, 392-407.
"""

from __future__ import annotations

import dataclasses

import jax
import numpy as np
from jaxtyping import Array, Bool, Int, PRNGKeyArray

from jaxlab._core import short_repr

from .._core import check_array, check_positive_int

__all__ = [
    "DESIRABLE",
    "UNDESIRABLE",
    "VARIANTS",
    "Variant",
    "Stimuli",
    "make_stimuli",
    "contingency_table",
]

# past-tense behaviour phrases completing "A member of <group> ..."
DESIRABLE: tuple[str, ...] = (
    "visited a sick friend in the hospital",
    "did volunteer work for a church",
    "helped an elderly neighbour carry groceries",
    "returned a lost wallet to its owner",
    "gave blood at the local clinic",
    "tutored a classmate who was struggling",
    "donated old clothes to charity",
    "planted trees in a public park",
    "shared lunch with a hungry coworker",
    "drove a neighbour to the doctor",
    "read stories to children at the library",
    "finished a difficult project ahead of schedule",
    "cleaned up litter on the beach",
    "comforted a friend after bad news",
    "paid for a stranger's coffee",
    "fixed a neighbour's fence",
    "organised a school fundraiser",
    "helped a lost child find its parents",
    "thanked the bus driver every morning",
    "cooked dinner for a family in need",
    "trained a new colleague patiently",
    "rescued a stray cat from the road",
    "kept a promise to a friend",
    "apologised sincerely after a mistake",
    "shovelled snow for an old man",
    "taught a free evening class",
    "listened carefully to a colleague's idea",
    "held the door open for a stranger",
    "repaid a loan earlier than agreed",
    "helped a tourist find the station",
    "watered a neighbour's plants",
    "defended a mistreated coworker",
    "mentored a young student",
    "recycled carefully at home",
    "brought soup to a sick neighbour",
    "volunteered at an animal shelter",
)
"""Desirable behaviour phrases completing "A member of <group> ..." (past tense)."""
UNDESIRABLE: tuple[str, ...] = (
    "mocked a friend with sarcasm",
    "dented a car and drove off",
    "cheated on an exam",
    "yelled at a waiter",
    "never returned borrowed books",
    "ran a red light near a school",
    "spread a rumour about a colleague",
    "kicked a dog in the street",
    "lied to a friend about money",
    "stole a coworker's credit",
    "skipped work without telling anyone",
    "left rubbish in a public park",
    "was rude to a shop assistant",
    "broke a promise to a child",
    "shoved an old woman aside",
    "stole office supplies from work",
    "made prank phone calls at night",
    "ignored a neighbour who asked for help",
)
"""Undesirable behaviour phrases completing "A member of <group> ..." (past tense)."""


@dataclasses.dataclass(frozen=True)
class Variant:
    """How the two groups are named in one framing of the task.

    **Attributes:** `name`; `majority` / `minority`: the label of the 26-statement
    group and of the 13-statement group; `preamble`: the cover story shown first (as in
    the original, it says that statements about the smaller group are rarer).
    """

    name: str
    majority: str
    minority: str
    preamble: str


def _cover(a: str, b: str, what: str) -> str:
    return (
        f"You will read statements about {what}, {a} and {b}. {b[0].upper() + b[1:]} is "
        f"smaller than {a}, so statements about {b} are less frequent."
    )


VARIANTS: dict[str, Variant] = {
    v.name: v
    for v in (
        Variant(
            "neutral",
            "Group A",
            "Group B",
            _cover("Group A", "Group B", "members of two groups"),
        ),
        Variant(
            "majority_minority",
            "the majority group",
            "the minority group",
            _cover("the majority group", "the minority group", "members of two groups"),
        ),
        Variant(
            "organisation",
            "the large organisation",
            "the small organisation",
            _cover("the large organisation", "the small organisation", "two organisations"),
        ),
        # the letters swapped: the majority is called "Group B"; a letter preference
        # flips the sign of phi here, a group-size illusion does not
        Variant(
            "label_swap",
            "Group B",
            "Group A",
            _cover("Group B", "Group A", "members of two groups"),
        ),
    )
}
"""The framings of the illusory-correlation task: name -> `Variant` (how the two groups are
named and the cover story)."""


@dataclasses.dataclass(frozen=True)
class Stimuli:
    """One randomised presentation of the illusory-correlation design.

    **Attributes:**

    - `variant`: the `Variant` (group names).
    - `texts`: (n,) statement strings in presentation order.
    - `behaviours`: (n,) the behaviour phrase of each statement.
    - `minority`: (n,) bool, True where the statement is about the minority group.
    - `desirable`: (n,) bool, True for a desirable behaviour.
    """

    __repr__ = short_repr  # arrays as dtype[shape], long sequences cut

    variant: Variant
    texts: tuple[str, ...]
    behaviours: tuple[str, ...]
    minority: Bool[np.ndarray, " n"]
    desirable: Bool[np.ndarray, " n"]

    @property
    def context(self) -> str:
        """The cover story, every statement (one per line) and the answer instruction."""
        v = self.variant
        ask = (
            f"Answer each question about these statements with {v.majority} or "
            f"{v.minority}, or with a number."
        )
        return "\n".join((v.preamble, *self.texts, ask))

    def label(self, minority: bool) -> str:
        """The name of the minority (True) or majority (False) group."""
        return self.variant.minority if minority else self.variant.majority


def make_stimuli(
    *,
    key: PRNGKeyArray,
    variant: str | Variant = "neutral",
    counts: tuple[tuple[int, int], tuple[int, int]] = ((18, 8), (9, 4)),
) -> Stimuli:
    """Statements of the Hamilton & Gifford (1976) design in a random order.

    **Arguments:**

    - `key`: PRNG key: which behaviours are drawn and their order.
    - `variant`: a name in `VARIANTS` or a `Variant` (group labels and cover story).
    - `counts`: ((majority desirable, majority undesirable), (minority desirable,
      minority undesirable)); default the original 18/8 vs 9/4.

    **Returns:** `Stimuli` with `sum(counts)` statements; behaviours are distinct.
    """
    if isinstance(variant, str):
        if variant not in VARIANTS:
            raise ValueError(f"variant: expected one of {sorted(VARIANTS)}, received {variant!r}")
        variant = VARIANTS[variant]
    elif not isinstance(variant, Variant):
        raise ValueError(f"variant: expected a name or a Variant, received {variant!r}")
    c = np.asarray(counts) if not isinstance(counts, str | bytes) else np.asarray(0.5)
    flat = np.asarray(counts, dtype=object).reshape(-1) if c.shape == (2, 2) else ()
    if (
        c.shape != (2, 2)
        or not np.issubdtype(c.dtype, np.integer)
        or c.min() < 0
        or any(isinstance(v, bool | np.bool_) for v in flat)
    ):
        raise ValueError(
            f"counts: expected ((int, int), (int, int)) of non-negative counts, received {counts!r}"
        )
    n_des, n_und = int(c[:, 0].sum()), int(c[:, 1].sum())
    if n_des > len(DESIRABLE) or n_und > len(UNDESIRABLE):
        raise ValueError(
            f"counts: at most {len(DESIRABLE)} desirable and {len(UNDESIRABLE)} undesirable "
            f"statements in all, received {n_des} and {n_und}"
        )
    check_positive_int("counts total", n_des + n_und)
    k_des, k_und, k_order = jax.random.split(key, 3)
    des = np.asarray(jax.random.permutation(k_des, len(DESIRABLE)))[:n_des]
    und = np.asarray(jax.random.permutation(k_und, len(UNDESIRABLE)))[:n_und]
    behaviours = [DESIRABLE[i] for i in des] + [UNDESIRABLE[i] for i in und]
    desirable = np.r_[np.ones(n_des, bool), np.zeros(n_und, bool)]
    # desirable block: majority first; undesirable block likewise
    minority = np.r_[
        np.zeros(c[0, 0], bool),
        np.ones(c[1, 0], bool),
        np.zeros(c[0, 1], bool),
        np.ones(c[1, 1], bool),
    ]
    order = np.asarray(jax.random.permutation(k_order, n_des + n_und))
    behaviours = [behaviours[i] for i in order]
    desirable, minority = desirable[order], minority[order]
    texts = tuple(
        f"A member of {variant.minority if m else variant.majority} {b}."
        for b, m in zip(behaviours, minority, strict=True)
    )
    return Stimuli(variant, texts, tuple(behaviours), minority, desirable)


def contingency_table(
    minority: Bool[Array, " n"] | Int[Array, " n"], desirable: Bool[Array, " n"]
) -> np.ndarray:
    """2x2 counts: rows (majority, minority), columns (desirable, undesirable).

    **Arguments:** `minority` (n,) bool/0-1 group of each statement; `desirable` (n,) bool.

    **Returns:** (2, 2) int64 counts (the design's table is [[18, 8], [9, 4]]).
    """
    m, d = np.asarray(minority), np.asarray(desirable)
    sizes = check_array("minority", m, ndim=1)
    sizes = check_array("desirable", d, shape=(m.shape[0],), sizes=sizes)
    for name, v in (("minority", m), ("desirable", d)):
        if not np.isin(v, (0, 1)).all():
            raise ValueError(f"{name}: expected bool or 0/1 values, received {np.unique(v)[:5]}")
    m, d = m.astype(bool), d.astype(bool)
    return np.array([[np.sum(~m & d), np.sum(~m & ~d)], [np.sum(m & d), np.sum(m & ~d)]], np.int64)
