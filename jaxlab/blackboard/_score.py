"""KramaBench scoring of answers and data-discovery precision / recall / F1.

KramaBench (Lai et al., 2025) scores a final answer by its `answer_type`: exact match for
numbers and strings, F1 over elements for lists, and a relative-absolute-error score for
approximate numbers. We take that score as `1 / (1 + |pred - truth| / |truth|)` (1 for an
exact answer, 1/2 at 100% relative error); KramaBench's code was not available offline to
check the exact formula.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

__all__ = [
    "ANSWER_TYPES",
    "score_answer",
    "relative_error_score",
    "list_f1",
    "discovery_prf",
    "normalise",
]

ANSWER_TYPES = (
    "numeric_exact",
    "numeric_approximate",
    "string_exact",
    "string_approximate",
    "list_exact",
    "list_approximate",
)


def normalise(x) -> str:
    """Canonical text of an answer element: numbers without trailing zeros, trimmed, lower."""
    if isinstance(x, bool):
        return str(x).lower()
    if isinstance(x, (int, float)):
        f = float(x)
        if math.isfinite(f) and f.is_integer():
            return str(int(f))
        return repr(f)
    s = str(x).strip().lower()
    try:
        return normalise(float(s)) if s and s not in ("nan", "inf", "-inf") else s
    except ValueError:
        return s


def _number(x) -> float | None:
    try:
        f = float(x)
    except (TypeError, ValueError):
        return None
    return f if math.isfinite(f) else None


def relative_error_score(pred, truth) -> float:
    """`1 / (1 + |pred - truth| / |truth|)`; 0 for a non-number; `|truth|` floored at 1e-12."""
    p, t = _number(pred), _number(truth)
    if t is None:
        raise ValueError(f"truth: expected a finite number, received {truth!r}")
    if p is None:
        return 0.0
    return 1.0 / (1.0 + abs(p - t) / max(abs(t), 1e-12))


def list_f1(pred, truth) -> float:
    """F1 between the element sets (normalised); 1 when both are empty."""
    if not isinstance(pred, (list, tuple)):
        pred = [pred] if pred not in (None, "") else []
    if not isinstance(truth, (list, tuple)):
        raise ValueError(f"truth: expected a list, received {type(truth).__name__}")
    p, t = {normalise(x) for x in pred}, {normalise(x) for x in truth}
    if not p and not t:
        return 1.0
    hit = len(p & t)
    if hit == 0:
        return 0.0
    prec, rec = hit / len(p), hit / len(t)
    return 2 * prec * rec / (prec + rec)


def score_answer(pred, truth, answer_type: str) -> float:
    """KramaBench score in [0, 1] of answer `pred` against `truth`.

    **Arguments:**

    - `pred`: the system's answer (a number, a string or a list).
    - `truth`: the task's answer.
    - `answer_type`: one of `ANSWER_TYPES` (`*_approximate` strings are scored exactly
      here: KramaBench uses an LLM judge for them, which we do not have).

    **Returns:** the score (exact: 0 or 1; lists: F1; approximate numbers: the
    relative-error score).
    """
    if answer_type not in ANSWER_TYPES:
        raise ValueError(f"answer_type: expected one of {ANSWER_TYPES}, received {answer_type!r}")
    if answer_type == "numeric_approximate":
        return relative_error_score(pred, truth)
    if answer_type == "numeric_exact":
        p, t = _number(pred), _number(truth)
        if t is None:
            raise ValueError(f"truth: expected a finite number, received {truth!r}")
        return float(p is not None and abs(p - t) <= 1e-9 * max(1.0, abs(t)))
    if answer_type.startswith("list"):
        return list_f1(pred, truth)
    return float(normalise(pred) == normalise(truth))


def discovery_prf(found: Sequence[str], truth: Sequence[str]) -> tuple[float, float, float]:
    """Precision, recall and F1 of the tables found against the task's `data_sources`.

    An empty truth (a "not in the lake" task) scores (1, 1, 1) exactly when nothing is
    found, (0, 0, 0) otherwise; an empty `found` for a non-empty truth scores precision 1
    (nothing wrong was claimed), recall 0 and F1 0.
    """
    f, t = set(found), set(truth)
    if not t:
        return (1.0, 1.0, 1.0) if not f else (0.0, 0.0, 0.0)
    hit = len(f & t)
    prec = hit / len(f) if f else 1.0
    rec = hit / len(t)
    return prec, rec, (2 * prec * rec / (prec + rec) if hit else 0.0)
