"""Random sequences as data (coin flips, dice, a price walk) and the questions that
measure pattern claims, the gambler's fallacy and the hot hand.

Sequences come from `jax.random` (so they are random by construction); a periodic
sequence is the positive control (a real pattern). From the model's probability of each
next outcome, `p(next == last)` as a function of the final streak length is the
gambler's-fallacy (falls below chance as the streak grows) vs hot-hand (rises) read-out.

Papers: Tversky & Kahneman (1971), belief in the law of small numbers; Gilovich, Vallone &
Tversky (1985), the hot hand in basketball; Falk & Konold (1997), subjective randomness.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float, Int, PRNGKeyArray

from .._core import as_array, check_array, check_finite, check_range, check_size
from ._query import Query

__all__ = [
    "MAX_SEQUENCE_LENGTH",
    "KINDS",
    "random_sequence",
    "periodic_sequence",
    "final_run_length",
    "render_sequence",
    "randomness_queries",
    "streak_slope",
]

KINDS = ("coin", "dice", "walk")
"""The random sequences the randomness task generates: coin flips, dice rolls, a random walk."""

MAX_SEQUENCE_LENGTH = 100_000
"""The most outcomes `random_sequence` / `periodic_sequence` make (far beyond any context
a model reads): a larger `n` is a `ValueError` naming it, before anything is allocated."""

_OUTCOMES = {"coin": ("Heads", "Tails"), "dice": tuple(str(k) for k in range(1, 7))}


def random_sequence(kind: str, n: int, *, key: PRNGKeyArray) -> Int[Array, " n"]:
    """n i.i.d. outcomes: coin 0/1 (heads/tails), dice 1..6, walk 0/1 (up/down moves).

    **Arguments:** `kind` in `KINDS`; `n` length (a positive integer up to
    `MAX_SEQUENCE_LENGTH`, far beyond any context a model reads); `key` PRNG key.

    **Returns:** (n,) int32 outcomes.
    """
    if kind not in KINDS:
        raise ValueError(f"kind: expected one of {KINDS}, received {kind!r}")
    n = check_size("n", n, cap=MAX_SEQUENCE_LENGTH, why="illusions MAX_SEQUENCE_LENGTH")
    if kind == "dice":
        return jax.random.randint(key, (n,), 1, 7, dtype=jnp.int32)
    return jax.random.bernoulli(key, 0.5, (n,)).astype(jnp.int32)


def periodic_sequence(kind: str, n: int, period: Int[Array, " p"]) -> Int[Array, " n"]:
    """The positive control: `period` repeated to length n (a real, simple pattern).

    **Arguments:** `kind` in `KINDS`; `n` (a positive integer up to
    `MAX_SEQUENCE_LENGTH`); `period` (p,) outcomes of one period.

    **Returns:** (n,) int32.
    """
    if kind not in KINDS:
        raise ValueError(f"kind: expected one of {KINDS}, received {kind!r}")
    n = check_size("n", n, cap=MAX_SEQUENCE_LENGTH, why="illusions MAX_SEQUENCE_LENGTH")
    p = np.asarray(period)
    check_array("period", p, ndim=1, dtype=np.integer)
    lo, hi = (1, 6) if kind == "dice" else (0, 1)
    if p.size == 0 or p.min() < lo or p.max() > hi:
        raise ValueError(f"period: expected outcomes in [{lo}, {hi}], received {p.tolist()}")
    return jnp.asarray(np.resize(p, n), jnp.int32)


def final_run_length(sequence: Int[Array, " n"]) -> int:
    """Length of the run of identical outcomes that ends the sequence (>= 1)."""
    s = np.asarray(sequence)
    check_array("sequence", s, ndim=1, dtype=np.integer)
    if s.size == 0:
        raise ValueError("sequence: expected at least one outcome, received none")
    differs = np.flatnonzero(s[::-1] != s[-1])
    return int(differs[0]) if differs.size else int(s.size)


def render_sequence(kind: str, sequence: Int[Array, " n"], *, start: int = 100) -> str:
    """The sequence as the text the model reads (walk: prices from `start`).

    `kind` in `KINDS`; `sequence` (n,) integer outcomes of that kind (coin, walk: 0/1;
    dice: 1..6); `start` an integer. Anything else raises a `ValueError` naming it.
    """
    if not isinstance(kind, str) or kind not in KINDS:
        raise ValueError(f"kind: expected one of {KINDS}, received {kind!r}")
    if isinstance(start, bool) or not isinstance(start, int | np.integer):
        raise ValueError(f"start: expected an integer, received {start!r:.60}")
    s = np.asarray(sequence)
    check_array("sequence", s, ndim=1, dtype=np.integer)
    lo, hi = (1, 6) if kind == "dice" else (0, 1)
    check_range("sequence", s, low=lo, high=hi)
    if kind == "coin":
        return "Here are the results of {} coin flips: {}.".format(
            s.size, ", ".join(_OUTCOMES["coin"][int(x)] for x in s)
        )
    if kind == "dice":
        return "Here are the results of {} rolls of a die: {}.".format(
            s.size, ", ".join(str(int(x)) for x in s)
        )
    if kind == "walk":
        prices = start + np.r_[0, np.cumsum(np.where(s == 0, 1, -1))]
        return "Here are the closing prices of a stock on {} consecutive days: {}.".format(
            prices.size, ", ".join(str(int(x)) for x in prices)
        )
    raise ValueError(f"kind: expected one of {KINDS}, received {kind!r}")


def randomness_queries(kind: str) -> list[Query]:
    """[pattern question (Yes, No), next-outcome question] for a sequence of `kind`.

    The next-outcome answers are in outcome order: coin (Heads, Tails), dice (1..6),
    walk (Up, Down) matching the 0/1 moves of `random_sequence`.
    """
    if kind not in KINDS:
        raise ValueError(f"kind: expected one of {KINDS}, received {kind!r}")
    what = {"coin": "next flip", "dice": "next roll", "walk": "the price move tomorrow"}[kind]
    answers = _OUTCOMES.get(kind, ("Up", "Down"))
    return [
        Query("Is there a pattern in this sequence? Answer Yes or No.", ("Yes", "No")),
        Query(f"What will {what} be? Answer with one of: {', '.join(answers)}.", answers),
    ]


def streak_slope(run_lengths: Int[Array, " n"], p_repeat: Float[Array, " n"]) -> float:
    """Least-squares slope of p(next == last) on the final streak length.

    < 0: the longer the streak, the more an alternation is expected (gambler's fallacy);
    > 0: streaks are expected to continue (hot hand); 0 for an unbiased answerer.

    **Arguments:** `run_lengths` (n,) ints >= 1 (>= 2 distinct values); `p_repeat` (n,)
    probabilities in [0, 1] (else a `ValueError` naming the argument).

    **Returns:** the slope (probability per extra outcome of streak).
    """
    r = np.asarray(run_lengths)
    p = np.asarray(as_array("p_repeat", p_repeat), np.float64)
    sizes = check_array("run_lengths", r, ndim=1, dtype=np.integer)
    check_array("p_repeat", p, shape=(r.shape[0],), sizes=sizes)
    check_finite("p_repeat", p)
    check_range("run_lengths", r, low=1)
    check_range("p_repeat", p, low=0.0, high=1.0)
    if np.unique(r).size < 2:
        raise ValueError(
            f"run_lengths: expected at least 2 distinct values, received {np.unique(r)}"
        )
    x = r.astype(np.float64) - r.mean()
    return float(x @ (p - p.mean()) / (x @ x))
