"""The three read-outs of Hamilton & Gifford (1976) as questions about one presentation:
group attribution of every statement, frequency estimates, trait ratings.

Paper: Hamilton & Gifford (1976), J. Exp. Soc. Psychol. 12, 392-407 (attribution,
frequency-estimation and trait-rating measures of Experiment 1).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from .._core import as_array, check_size
from ._design import Stimuli
from ._query import Query
from ._stats import attribution_phi, expected_answer, frequency_bias, option_probabilities

__all__ = ["TRAITS", "MAX_SCALE", "correlation_queries", "read_correlation"]

MAX_SCALE = 100
"""The top of the largest rating scale `correlation_queries` asks about (1..`scale`): a
larger `scale` is a `ValueError` naming it, before any answer is built."""

# (trait, desirable?): rated 1-7 for each group
TRAITS: tuple[tuple[str, bool], ...] = (("honest", True), ("lazy", False))
"""The traits rated 1-7 for each group: (trait, desirable?)."""


def _check_design(stimuli, traits, scale) -> None:
    """`stimuli` a `Stimuli`, `traits` (name, desirable) pairs, `scale` an int in
    [2, MAX_SCALE]; else a `ValueError` naming the argument."""
    if not isinstance(stimuli, Stimuli):
        raise ValueError(f"stimuli: expected a Stimuli, received {type(stimuli).__name__}")
    if isinstance(traits, str | bytes) or not all(
        isinstance(t, tuple) and len(t) == 2 and isinstance(t[0], str) and isinstance(t[1], bool)
        for t in traits
    ):
        raise ValueError(
            f"traits: expected a sequence of (name, desirable) pairs, received {traits!r:.60}"
        )
    if isinstance(scale, bool) or not isinstance(scale, int) or scale < 2:
        raise ValueError(f"scale: expected an int >= 2, received {scale!r}")
    check_size("scale", scale, cap=MAX_SCALE, why="illusions.MAX_SCALE")


def correlation_queries(
    stimuli: Stimuli, *, traits: Sequence[tuple[str, bool]] = TRAITS, scale: int = 7
) -> list[Query]:
    """The attribution, frequency and trait questions about one presentation.

    Order: one attribution question per statement (answers: majority label, minority
    label), then "how many undesirable" for the majority (0..n_majority) and the minority
    (0..n_minority), then for every trait the majority's and the minority's 1..`scale`
    rating.

    **Arguments:** `stimuli` from `make_stimuli`; `traits` a sequence of (name:
    str, desirable: bool) pairs (may be empty: no trait questions); `scale` the top of
    the rating scale (an int in [2, `MAX_SCALE`]).
    Anything else raises a `ValueError` naming the argument.

    **Returns:** list of `Query` (read back with `read_correlation`).
    """
    _check_design(stimuli, traits, scale)
    v = stimuli.variant
    labels = (v.majority, v.minority)
    qs = [
        Query(
            f"Which group's member {b}?",
            (labels[0][0].upper() + labels[0][1:], labels[1][0].upper() + labels[1][1:]),
        )
        for b in stimuli.behaviours
    ]
    for minority in (False, True):
        n = int(np.sum(stimuli.minority == minority))
        qs.append(
            Query(
                f"How many of the {n} statements about {stimuli.label(minority)} were undesirable?",
                tuple(str(k) for k in range(n + 1)),
                tuple(float(k) for k in range(n + 1)),
            )
        )
    for trait, _ in traits:
        for minority in (False, True):
            qs.append(
                Query(
                    f"How {trait} are members of {stimuli.label(minority)}, from 1 to {scale}?",
                    tuple(str(k) for k in range(1, scale + 1)),
                    tuple(float(k) for k in range(1, scale + 1)),
                )
            )
    return qs


def read_correlation(
    logliks: Sequence[np.ndarray],
    stimuli: Stimuli,
    *,
    traits: Sequence[tuple[str, bool]] = TRAITS,
    scale: int = 7,
) -> dict[str, float | np.ndarray]:
    """Phi, frequency bias and trait gap from the answers to `correlation_queries`.

    **Arguments:** `logliks`: per query the answers' log-likelihoods
    (`query_logliks`), in `correlation_queries` order (finite, one per answer of that
    query); `stimuli`; `traits`, `scale` as given to `correlation_queries`. Anything else
    raises a `ValueError` naming the argument.

    **Returns:** {"p_minority": (n,) probability that each statement is attributed to
    the minority; "phi": () attribution phi (> 0: undesirable -> minority);
    "p_minority_desirable", "p_minority_undesirable": mean attribution to the minority
    per behaviour class; "estimate_majority", "estimate_minority": expected undesirable
    counts; "minority_excess": over-estimation ratio of the minority minus the
    majority's; "trait_gap": mean favourability (rating, or scale + 1 - rating for an
    undesirable trait) of the majority minus the minority's}.
    """
    _check_design(stimuli, traits, scale)
    n = len(stimuli.texts)
    expected = n + 2 + 2 * len(traits)
    if isinstance(logliks, str | bytes) or not hasattr(logliks, "__len__"):
        raise ValueError(f"logliks: expected a sequence of arrays, received {logliks!r:.60}")
    if len(logliks) != expected:
        raise ValueError(
            f"logliks: expected {expected} queries ({n} attributions, 2 estimates, "
            f"{2 * len(traits)} ratings), received {len(logliks)}"
        )
    # answers per query, in correlation_queries order
    widths = [2] * n + [int(np.sum(stimuli.minority == m)) + 1 for m in (False, True)]
    widths += [scale] * (2 * len(traits))
    logliks = [
        np.asarray(as_array(f"logliks[{i}]", x, shape=(w,), finite=True), np.float64)
        for i, (x, w) in enumerate(zip(logliks, widths, strict=True))
    ]
    attr = np.stack(logliks[:n])
    p_min = np.asarray(option_probabilities(attr))[:, 1]
    des = np.asarray(stimuli.desirable, bool)
    est = [
        float(expected_answer(logliks[n + i], np.arange(len(logliks[n + i]), dtype=np.float64)))
        for i in range(2)
    ]
    true = [int(np.sum(~des & (stimuli.minority == m))) for m in (False, True)]
    bias = frequency_bias(np.asarray(est), np.asarray(true, np.float64))
    ratings = np.array(
        [
            float(expected_answer(x, np.arange(1, scale + 1, dtype=np.float64)))
            for x in logliks[n + 2 :]
        ]
    ).reshape(len(traits), 2)
    good = np.array([d for _, d in traits])
    favour = np.where(good[:, None], ratings, scale + 1 - ratings)
    return {
        "p_minority": p_min,
        "phi": float(attribution_phi(p_min, des)),
        "p_minority_desirable": float(p_min[des].mean()),
        "p_minority_undesirable": float(p_min[~des].mean()),
        "estimate_majority": est[0],
        "estimate_minority": est[1],
        "minority_excess": float(bias["minority_excess"]),
        "trait_gap": float((favour[:, 0] - favour[:, 1]).mean()),
    }
