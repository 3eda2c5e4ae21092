"""KramaBench scoring of answers and data-discovery precision / recall / F1.

KramaBench (Lai et al., 2025; github.com/mitdbg/Kramabench, `benchmark/metrics.py` at
commit 3d26983) scores a final answer by its `answer_type`; `score_answer` follows those
rules (docs/components/blackboard.md lists each rule and every deviation):

- `numeric_exact`, `string_exact`: KramaBench's `Success`. Both sides are read as numbers
  where they parse (`"50%"` reads as 50 there); two numbers match when equal or, if either
  is a float, when the relative error is below 1e-6, the absolute difference below 1e-6,
  or the difference below 1e-4 of the larger magnitude (7.5201 matches 7.52; a truth of 0
  needs |pred| < 1e-6); two integers must be equal; strings match trimmed and
  case-folded; a number against a string truth scores 0; anything else by `==`.
- `numeric_approximate`: KramaBench's `RAEScore`, `1 / (1 + |pred - truth| / |truth|)`
  (`"50%"` reads as 0.5 here, KramaBench's `str_to_float`), 0 when a side is not a number.
- `list_exact`: KramaBench's `F1`: a list given as a string is parsed (JSON, then a Python
  literal, then comma-separated items); every truth element counts once towards recall
  (duplicates included) when some predicted element matches it (strings trimmed and
  case-folded; a numeric truth within relative error 1e-6, its magnitude floored at 1e-12,
  predicted strings read by `str_to_float`); precision is the fraction of predicted
  elements that matched some truth element.
- `list_approximate`: KramaBench's `F1Approximate` with the string rule of `F1` in place
  of its LLM paraphrase judge; numbers match within 1% relative error.
- `string_approximate`: scored as `string_exact` (KramaBench uses BLEU, ROUGE and an LLM
  judge, which are not available here).

No answer is refused: a value that does not fit its declared type scores what KramaBench's
metric gives it (usually 0), never an exception. Deviations kept: a Python literal is
parsed by `ast.literal_eval` where KramaBench calls `eval` (never executed here); a truth
of 0 with a prediction of exactly 0 scores 1 in `numeric_approximate` (KramaBench divides
by zero and scores 0); a non-finite score is 0 (KramaBench would return nan).
"""

from __future__ import annotations

import ast
import json
import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from .._core import check_strings

__all__ = [
    "ANSWER_TYPES",
    "score_answer",
    "relative_error_score",
    "list_f1",
    "discovery_prf",
]

ANSWER_TYPES = (
    "numeric_exact",
    "numeric_approximate",
    "string_exact",
    "string_approximate",
    "list_exact",
    "list_approximate",
)
"""The answer types `score_answer` accepts: KramaBench's six answer kinds (exact or
approximate match of a number, a string or a list)."""

# what KramaBench's metrics catch (`except Exception`), narrowed to what plain values raise
_FAILS = (
    TypeError,
    ValueError,
    ZeroDivisionError,
    OverflowError,
    AttributeError,
    IndexError,
    KeyError,
    RecursionError,
    MemoryError,
    SyntaxError,
)


def _plain(x):
    """An answer as its JSON value (what KramaBench's evaluator reads): NumPy scalars and
    arrays become Python numbers and lists, tuples become lists."""
    if isinstance(x, np.generic):
        return x.item()
    if isinstance(x, np.ndarray):
        return x.tolist()
    if isinstance(x, (list, tuple)):
        return [_plain(v) for v in x]
    return x


def _str_to_float(s: str) -> float:
    """KramaBench's `str_to_float`: "50%" -> 0.5, otherwise `float(s)`."""
    if s.endswith("%"):
        return float(s.strip("%")) / 100
    return float(s)


def _try_number(v):
    """KramaBench's `try_convert_to_number`: numbers as they are; a string without its
    trailing "%" through `str_to_float` ("50%" -> 50.0), unchanged if that fails."""
    if isinstance(v, (int, float)):
        return v
    if isinstance(v, str):
        try:
            s = v.strip()
            if s.endswith("%"):
                s = s[:-1].strip()
            return _str_to_float(s)
        except (ValueError, TypeError):
            return v
    return v


def _success(pred, truth) -> float:
    """KramaBench's `Success` metric (exact numbers and strings)."""
    if pred is None:
        return 0.0
    try:
        p, t = _try_number(pred), _try_number(truth)
        if isinstance(p, (int, float)) and isinstance(t, (int, float)):
            if p == t:
                return 1.0
            if isinstance(t, float) or isinstance(p, float):
                if t == 0:
                    return float(abs(p) < 1e-6)
                rea = abs(p - t) / abs(t)
                diff = abs(p - t)
                larger = max(abs(p), abs(t))
                return float(rea < 1e-6 or diff < 1e-6 or diff < larger * 1e-4)
            return 0.0
        if isinstance(truth, str) and isinstance(pred, str):
            return float(pred.strip().lower() == truth.strip().lower())
        if isinstance(truth, str) and isinstance(pred, (int, float)):
            return 0.0  # KramaBench raises here and scores 0
        return float(bool(pred == truth))
    except _FAILS:
        return 0.0


def relative_error_score(pred, truth) -> float:
    """KramaBench's `RAEScore`: `1 / (1 + |pred - truth| / |truth|)`.

    Strings are read by KramaBench's `str_to_float` ("50%" -> 0.5). A side that is not a
    number, or a truth of 0 with any other prediction, scores 0 (KramaBench: its metric
    fails and defaults to 0); a prediction of exactly 0 for a truth of 0 scores 1 (a
    deviation: KramaBench divides by zero there and scores 0); a non-finite result is 0.
    """
    pred, truth = _plain(pred), _plain(truth)
    try:
        p: Any = _str_to_float(pred) if isinstance(pred, str) else pred
        t: Any = _str_to_float(truth) if isinstance(truth, str) else truth
        if t == 0 and p == 0:
            return 1.0
        s = 1.0 / (1.0 + abs(p - t) / abs(t))
    except _FAILS:
        return 0.0
    s = float(s)
    return s if math.isfinite(s) else 0.0


def _parse_list_exact(pred: str):
    """KramaBench's `F1` parse of a list given as a string: JSON, then a Python literal
    (`ast.literal_eval`; KramaBench uses `eval`), then comma-separated items."""
    try:
        return json.loads(pred)
    except _FAILS:  # invalid JSON, or nested too deeply for the parser
        pass
    try:
        return ast.literal_eval(pred)
    except _FAILS:
        return [item.strip() for item in pred.split(",") if item.strip()]


def _matches(pred, truth, *, rel: float, strict: bool) -> float:
    """Recall over the truth elements (duplicates counted), precision over the predicted
    elements that matched a string truth element: KramaBench's F1 loops."""
    if len(truth) == 0:
        return float(len(pred) == 0)
    matched: set[int] = set()
    recall_cnt = 0
    for t in truth:
        found = False
        for j, p in enumerate(pred):
            if isinstance(t, str):
                if t.strip().lower() == str(p).strip().lower():
                    found = True
                    matched.add(j)
                    break
            elif isinstance(t, (float, int)) or not strict:
                if isinstance(p, (float, int)):
                    pp = p
                elif isinstance(p, str):
                    try:
                        pp = _str_to_float(p)
                    except _FAILS:
                        continue
                else:
                    continue
                err = abs(pp - t) / max(abs(t), 1e-12)
                if (err < rel) if strict else (err <= rel):
                    found = True
                    matched.add(j)
                    break
            elif p == t:
                found = True
                matched.add(j)
                break
        if found:
            recall_cnt += 1
    recall = recall_cnt / len(truth)
    precision = len(matched) / len(pred) if pred else 0.0
    if precision + recall == 0:
        return 0.0
    return 2 * precision * recall / (precision + recall)


def list_f1(pred, truth) -> float:
    """KramaBench's `F1` of a predicted list against the true list (`list_exact`).

    A truth given as a string is parsed as JSON when the prediction is a list; a
    prediction given as a string is parsed (JSON, a Python literal, comma-separated
    items) when the truth is a list; two strings match trimmed and case-folded. Recall
    counts every truth element (duplicates included) that some predicted element matches
    (strings trimmed and case-folded against `str(pred)`; numeric truths within relative
    error 1e-6); precision is the fraction of predicted elements that matched. An empty
    truth scores 1 exactly for an empty prediction. Anything unreadable scores 0.
    """
    pred, truth = _plain(pred), _plain(truth)
    try:
        if isinstance(pred, list) and isinstance(truth, str):
            truth = json.loads(truth)
        if isinstance(pred, str) and isinstance(truth, list):
            pred = _parse_list_exact(pred)
        if isinstance(pred, str) and isinstance(truth, str):
            return float(pred.strip().lower() == truth.strip().lower())
        return _matches(pred, truth, rel=1e-6, strict=True)
    except (*_FAILS, json.JSONDecodeError):
        return 0.0


def _list_f1_approximate(pred, truth) -> float:
    """KramaBench's `F1Approximate` with `F1`'s string rule in place of its LLM judge:
    numeric truths match within 1% relative error."""
    pred, truth = _plain(pred), _plain(truth)
    try:
        if isinstance(truth, str):
            truth = json.loads(truth)
        if isinstance(pred, str):
            try:
                pred = json.loads(pred)
            except json.JSONDecodeError:
                pred = ast.literal_eval(pred)
        pred = list(pred)
        return _matches(pred, truth, rel=0.01, strict=False)
    except (*_FAILS, json.JSONDecodeError):
        return 0.0


def score_answer(pred, truth, answer_type: str) -> float:
    """KramaBench score in [0, 1] of answer `pred` against `truth`, by KramaBench's rules.

    **Arguments:**

    - `pred`: the system's answer (a number, a string, a list; NumPy values are read as
      their Python/JSON values).
    - `truth`: the task's answer, as the workload file gives it.
    - `answer_type`: one of `ANSWER_TYPES` (a string).

    **Returns:** `numeric_exact` / `string_exact` / `string_approximate`: 0 or 1
    (KramaBench's `Success`: numbers within its rounding tolerance, strings trimmed and
    case-folded; `string_approximate` is scored exactly here, KramaBench uses an LLM
    judge); `numeric_approximate`: `relative_error_score`; `list_exact`: `list_f1`;
    `list_approximate`: F1 with numbers matched within 1% (strings as in `list_f1`).
    A value that does not fit the declared type is scored, never refused (usually 0).

    **Raises:** `ValueError` for an unknown `answer_type` only.
    """
    if not isinstance(answer_type, str) or answer_type not in ANSWER_TYPES:
        raise ValueError(f"answer_type: expected one of {ANSWER_TYPES}, received {answer_type!r}")
    if answer_type == "numeric_approximate":
        return relative_error_score(pred, truth)
    if answer_type == "list_exact":
        return list_f1(pred, truth)
    if answer_type == "list_approximate":
        return _list_f1_approximate(pred, truth)
    return _success(_plain(pred), _plain(truth))


def discovery_prf(found: Sequence[str], truth: Sequence[str]) -> tuple[float, float, float]:
    """Precision, recall and F1 of the tables found against the task's `data_sources`.

    An empty truth (a "not in the lake" task) scores (1, 1, 1) exactly when nothing is
    found, (0, 0, 0) otherwise; an empty `found` for a non-empty truth scores precision 1
    (nothing wrong was claimed), recall 0 and F1 0. Both are sequences of table names
    (a bare string, None or non-string entries raise a `ValueError` naming the argument).
    """
    f = set(check_strings("found", found, nonempty=False))
    t = set(check_strings("truth", truth, nonempty=False))
    if not t:
        return (1.0, 1.0, 1.0) if not f else (0.0, 0.0, 0.0)
    hit = len(f & t)
    prec = hit / len(f) if f else 1.0
    rec = hit / len(t)
    return prec, rec, (2 * prec * rec / (prec + rec) if hit else 0.0)
