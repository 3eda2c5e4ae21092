"""Generate-solve-verify: best-of-k selection, majority vote, equal-token comparison.

P7's first difference from classical computing is a triad: a language model generates
candidate solutions, and a verifier (a program, or the model itself) selects among them.
Given k sampled solutions per item with their parsed answers, correctness and verifier
scores, these functions give the accuracy of each selection rule, the tokens each spends
(generation + verification), accuracy at equal total tokens, and the verifier's own
precision and recall. The LM verifier asks the model whether a proposed answer is correct
and scores the options " Yes" / " No" by likelihood (`verification_prompt`).
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence

import jax.numpy as jnp
import numpy as np
from jax.core import Tracer

from .._core import as_array, check_positive_int
from ._answers import Answer, _check_answer, _is_answer, format_answer
from ._tasks import Task

__all__ = [
    "VERIFIER_OPTIONS",
    "answer_ids",
    "best_of_k",
    "majority_vote",
    "accuracy_at_tokens",
    "verification_prompt",
    "verifier_precision_recall",
]

VERIFIER_OPTIONS = (" Yes", " No")
"""The two answers whose likelihoods give the LM verifier's judgement (correct, incorrect)."""


def _check_samples(name, x, ndim=2):
    x = as_array(name, x, ndim=ndim, finite=True)
    if jnp.issubdtype(x.dtype, jnp.complexfloating):  # scores and outcomes are real
        raise ValueError(f"{name}: expected real values, received dtype {x.dtype}")
    if x.shape[-1] < 1 or x.shape[0] < 1:
        raise ValueError(f"{name}: expected (items >= 1, samples >= 1), received {x.shape}")
    return x


def _check_pair(name, x, correct, k):
    """Validate (items, S) `x` and `correct` of one shape and 1 <= k <= S."""
    x = _check_samples(name, x)
    correct = _check_samples("correct", correct)
    if x.shape != correct.shape:
        raise ValueError(
            f"{name}: expected the shape of correct {correct.shape}, received {x.shape}"
        )
    k = check_positive_int("k", k)
    if k > x.shape[1]:
        raise ValueError(f"k: expected at most {x.shape[1]} (the samples per item), received {k}")
    return x, correct, k


def best_of_k(correct, scores, k: int) -> jnp.ndarray:
    """Best-of-k: among each item's first k samples, the one the verifier scores highest.

    **Arguments:**

    - `correct`: (items, S) bool, sample s of item i is correct.
    - `scores`: (items, S) verifier scores (higher = more trusted; a programmatic verifier
      gives 1/0; ties go to the earliest sample).
    - `k`: 1 <= k <= S (k = 1 is the single sample).

    **Returns:** (items,) bool, whether the selected sample is correct.
    """
    scores, correct, k = _check_pair("scores", scores, correct, k)
    pick = jnp.argmax(scores[:, :k], axis=1)
    return jnp.take_along_axis(correct[:, :k], pick[:, None], axis=1)[:, 0].astype(bool)


def answer_ids(answers: Sequence[Sequence[Answer | None]]) -> np.ndarray:
    """Integer ids of parsed answers, equal answers equal ids within an item; None -> -1.

    **Arguments:** `answers`: items lists of S answers (ints, tuples of ints or None), or
    an (items, S) integer array (one integer answer per sample).

    **Returns:** (items, S) int64 array.
    """
    if hasattr(answers, "shape") and hasattr(answers, "dtype"):  # NumPy / JAX array
        arr = np.asarray(as_array("answers", answers, ndim=2, dtype=np.integer))
        answers = [[int(a) for a in row] for row in arr]
    if (
        isinstance(answers, str | bytes)
        or not answers
        or any(isinstance(a, str | bytes) for a in answers)
        or any(len(a) != len(answers[0]) or not a for a in answers)
    ):
        raise ValueError("answers: expected a non-empty list of equal-length non-empty lists")
    bad = [a for row in answers for a in row if a is not None and not _is_answer(a)]
    if bad:
        raise ValueError(f"answers: expected ints, tuples of ints or None, received {bad[0]!r:.60}")
    out = np.full((len(answers), len(answers[0])), -1, np.int64)
    for i, row in enumerate(answers):
        seen: dict[Hashable, int] = {}
        for s, a in enumerate(row):
            if a is not None:
                out[i, s] = seen.setdefault(format_answer(a), len(seen))
    return out


def majority_vote(ids, correct, k: int) -> jnp.ndarray:
    """Majority vote over each item's first k samples (unparsed answers, id -1, never vote).

    Ties go to the answer that appeared first; an item whose k answers are all unparsed
    counts as wrong.

    **Arguments:**

    - `ids`: (items, S) int answer ids >= -1 (`answer_ids`; floats or ids below -1 raise).
    - `correct`: (items, S) bool.
    - `k`: 1 <= k <= S.

    **Returns:** (items,) bool, whether the voted answer is correct.
    """
    ids, correct, k = _check_pair("ids", ids, correct, k)
    if not jnp.issubdtype(ids.dtype, jnp.integer):
        raise ValueError(f"ids: expected integer answer ids, received dtype {ids.dtype}")
    if not isinstance(ids, Tracer) and int(ids.min()) < -1:
        raise ValueError(f"ids: expected ids >= -1 (-1: unparsed), received {int(ids.min())}")
    a = ids[:, :k]
    valid = a >= 0
    votes = jnp.sum((a[:, :, None] == a[:, None, :]) & valid[:, None, :], axis=2)
    votes = jnp.where(valid, votes, -1)
    pick = jnp.argmax(votes, axis=1)  # first maximum: the earliest answer with most votes
    ok = jnp.take_along_axis(correct[:, :k], pick[:, None], axis=1)[:, 0]
    return ok.astype(bool) & jnp.any(valid, axis=1)


def accuracy_at_tokens(costs, accuracy, grid) -> np.ndarray:
    """Accuracy a strategy reaches within a token budget (its best k whose cost fits).

    **Arguments:**

    - `costs`: (K,) mean total tokens per item of the strategy with k = 1..K samples
      (finite, >= 0).
    - `accuracy`: (K,) its accuracy at each k (in [0, 1]).
    - `grid`: (G,) or scalar token budgets to read off (finite, >= 0).

    Anything else raises a `ValueError` naming the argument.

    **Returns:** (G,) the best accuracy among settings with cost <= budget (nan if none fits).
    """
    costs = np.asarray(as_array("costs", costs, ndim=1, finite=True, low=0.0), np.float64)
    acc = np.asarray(as_array("accuracy", accuracy, finite=True, low=0.0, high=1.0), np.float64)
    if costs.shape != acc.shape or costs.size == 0:
        raise ValueError(
            f"costs, accuracy: expected equal non-empty 1-D shapes, received "
            f"{costs.shape} and {acc.shape}"
        )
    grid = np.asarray(as_array("grid", grid, finite=True, low=0.0), np.float64)
    if grid.ndim > 1:
        raise ValueError(f"grid: expected a scalar or a 1-D array, received shape {grid.shape}")
    grid = np.atleast_1d(grid)
    fits = costs[None, :] <= grid[:, None]
    best = np.where(fits, acc[None, :], -np.inf).max(axis=1)
    return np.where(np.isfinite(best), best, np.nan)


def _binary(name: str, x) -> np.ndarray:
    """A bool array, or 0/1 integers read as one (floats and other values raise)."""
    arr = np.asarray(as_array(name, x))
    if arr.dtype != np.bool_:
        if not np.issubdtype(arr.dtype, np.integer):
            raise ValueError(f"{name}: expected bool or 0/1 values, received dtype {arr.dtype}")
        if arr.size and not np.isin(arr, (0, 1)).all():
            raise ValueError(f"{name}: expected bool or 0/1 values, received {np.unique(arr)[:5]}")
    return arr.astype(bool)


def verifier_precision_recall(accept, correct) -> tuple[float, float]:
    """Precision P(correct | accepted) and recall P(accepted | correct) of a verifier.

    **Arguments:** `accept`, `correct`: equal-shape bool or 0/1 integer arrays (non-empty;
    floats or other integers raise a `ValueError` naming the argument).

    **Returns:** (precision, recall); nan where the denominator is zero.
    """
    accept, correct = (
        _binary(name, v).ravel() for name, v in (("accept", accept), ("correct", correct))
    )
    if accept.size == 0 or accept.shape != correct.shape:
        raise ValueError(
            f"accept, correct: expected equal non-empty shapes, received "
            f"{accept.shape} and {correct.shape}"
        )
    tp = float(np.sum(accept & correct))
    precision = tp / accept.sum() if accept.any() else float("nan")
    recall = tp / correct.sum() if correct.any() else float("nan")
    return precision, recall


def verification_prompt(task: Task, candidate: Answer | None) -> str:
    """The LM verifier's question: the task, a proposed answer, "Is it correct?".

    The model's judgement is read off the likelihoods of `VERIFIER_OPTIONS` after the
    chat turn (plus "Answer:"), never from free text.

    **Arguments:** `task` a `Task`; `candidate` the proposed answer (an int or a tuple of
    ints), or None when there is none (shown as "none"). Anything else raises a
    `ValueError` naming the argument.
    """
    if not isinstance(task, Task):
        raise ValueError(f"task: expected a Task, received {type(task).__name__}")
    if candidate is not None:
        _check_answer("candidate", candidate)
    shown = "none" if candidate is None else format_answer(candidate)
    question = task.prompt.split(" Think step by step")[0]
    return (
        f"Question: {question}\nProposed answer: {shown}\n"
        "Is the proposed answer correct? Reply Yes or No."
    )
