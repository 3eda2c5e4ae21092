"""Answer extraction from free model text: a parser with fixed rules, never eval.

Rules (case-insensitive):

1. The answer segment is the text after the last "answer:" / "answer =" / "answer is"
   cue; without a cue it is the whole text.
2. An integer answer is the first integer of the segment when there was a cue, the last
   integer of the text otherwise. An integer is `-?digits`; the minus sign counts only
   when it does not follow a digit, letter or closing bracket ("5-3" is 5 and 3).
3. A list answer is the integers inside the first [...] group of the segment (cue) or the
   last [...] group of the text (no cue); with a cue but no brackets, the integers of the
   segment's first line.
4. Nothing found: None (never correct).
"""

from __future__ import annotations

import re

import numpy as np

__all__ = ["Answer", "extract_answer", "format_answer"]

Answer = int | tuple[int, ...]
"""An extracted answer: an int, or a tuple of ints for list-valued tasks."""

_CUE = re.compile(r"answer\s*(?::|=|is\b)", re.IGNORECASE)
_INT = re.compile(r"(?:(?<![\w\])])-)?\d+")
_GROUP = re.compile(r"\[([^\[\]]*)\]")


def _ints(text: str) -> list[int]:
    return [int(m.group()) for m in _INT.finditer(text)]


def _is_int(x) -> bool:
    return isinstance(x, int | np.integer) and not isinstance(x, bool | np.bool_)


def _is_answer(x) -> bool:
    return _is_int(x) or (isinstance(x, tuple) and all(_is_int(a) for a in x))


def _check_answer(name: str, x) -> None:
    """Raise a `ValueError` naming `name` unless `x` is an answer (an int or a tuple of
    ints; an array, a float, a bool or a string is not)."""
    if not _is_answer(x):
        raise ValueError(f"{name}: expected an int or a tuple of ints, received {x!r:.60}")


def extract_answer(text: str, kind: str) -> Answer | None:
    """The answer stated by free text `text`, by fixed rules (case-insensitive; never eval).

    1. The answer segment is the text after the last "answer:" / "answer =" / "answer is"
       cue; without a cue it is the whole text.
    2. An integer answer is the first integer of the segment when there was a cue, the
       last integer of the text otherwise; a minus sign counts only when it does not
       follow a digit, letter or closing bracket ("5-3" is 5 and 3).
    3. A list answer is the integers inside the first [...] group of the segment (cue) or
       the last [...] group of the text (no cue); with a cue but no brackets, the
       integers of the segment's first line.
    4. Nothing found: None (never correct).

    **Arguments:**

    - `text`: model output.
    - `kind`: "int" or "list" (a Python string; anything else raises a `ValueError`).

    **Returns:** an int, a tuple of ints, or None when the text states no answer.
    """
    if not isinstance(text, str):
        raise ValueError(f"text: expected a str, received {type(text).__name__}")
    if not isinstance(kind, str) or kind not in ("int", "list"):
        raise ValueError(f"kind: expected 'int' or 'list', received {kind!r:.60}")
    cues = list(_CUE.finditer(text))
    segment = text[cues[-1].end() :] if cues else text
    if kind == "int":
        found = _ints(segment)
        if not found:
            return None
        return found[0] if cues else found[-1]
    groups = list(_GROUP.finditer(segment))
    if groups:
        return tuple(_ints((groups[0] if cues else groups[-1]).group(1)))
    if cues:
        line = segment.strip().split("\n", 1)[0] if segment.strip() else ""
        found = _ints(line)
        return tuple(found) if found else None
    return None


def format_answer(answer: Answer) -> str:
    """The canonical text of an answer: "42" or "[1, 2, 3]" (what prompts ask for).

    `answer` is an integer or a tuple of integers (a float, a bool, a string or NaN
    raises a `ValueError` naming it: `int()` would truncate or fail deep inside).
    """
    _check_answer("answer", answer)
    if isinstance(answer, tuple):
        return "[" + ", ".join(str(int(a)) for a in answer) + "]"
    return str(int(answer))
