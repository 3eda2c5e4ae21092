"""False-belief stories from the OpenAI `evals` wheel (ToMi, Hi-ToM) as belief items.

P13 uses theory-of-mind stories as a second item set: the competing hypotheses are the
containers an object has been in, and the question (where it really is, where a
character will look, what one character thinks another thinks) decides which one is
right. The JSONL files are read as data (never executed); paths come from
`jaxlab.data.wheel_file("evals", "evals/registry/data/theory_of_mind/tomi/test.jsonl")`
and `.../hitom/hitom-multiple-choice.jsonl`. ToMi: Le et al. 2019; Hi-ToM: Wu et al. 2023.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from .._core import check_positive_int, parse_json
from ._tasks import BeliefItem

__all__ = ["read_tomi", "read_hitom"]

_IS_IN = re.compile(r"The (\w+) is in the (\w+)\.")
_MOVED = re.compile(r"moved the (\w+) to the (\w+)\.")
_OPTION = re.compile(r"([A-Z])\. ([\w]+)")


def _lines(path, n):
    if not isinstance(path, str | os.PathLike):
        raise ValueError(f"path: expected a file path, received {type(path).__name__}")
    path = Path(os.fspath(path))
    if not path.is_file():
        raise ValueError(f"path: expected an existing JSONL file, received {str(path)!r}")
    n = None if n is None else check_positive_int("n", n)
    with open(path, encoding="utf-8") as f:
        for i, line in enumerate(f):
            if not line.strip():
                continue
            try:
                row = parse_json(line, where=f"{path}: line {i + 1}")
                text = row["input"][-1]["content"]
                ideal = row["ideal"]
            except (ValueError, KeyError, IndexError, TypeError) as e:
                raise ValueError(f"{path}: line {i + 1} is not an evals sample ({e})") from None
            if not isinstance(text, str) or not isinstance(ideal, str):
                raise ValueError(f"{path}: line {i + 1}: input content and ideal must be strings")
            yield row, text, ideal


def _tomi_tag(question: str) -> str:
    if "beginning" in question:
        return "memory"
    if "really" in question:
        return "reality"
    if "think" in question:
        return "second_order"
    return "first_order"


def _word(loc: str) -> str:
    return " " + loc.replace("_", " ")


def read_tomi(path: str | os.PathLike, *, n: int | None = None) -> list[BeliefItem]:
    """ToMi stories with two containers as two-hypothesis items (first n usable rows).

    Hypothesis A is the object's first container ("The X is in the Y."), B the one it was
    last moved to; stories with a single container, or whose answer is neither, are
    skipped. `tag` is the question kind: "memory", "reality", "first_order",
    "second_order".

    **Arguments:** `path` of ToMi's `test.jsonl`; `n` the number of items (default all).

    **Returns:** list of `BeliefItem` (family "tomi", evidence None).
    """
    items: list[BeliefItem] = []
    for _, text, ideal in _lines(path, n):
        story, _, question = text.rpartition(". ")
        story += "."
        first, moves = _IS_IN.search(story), _MOVED.findall(story)
        if first is None or not moves:
            continue
        a, b = first.group(2), moves[-1][1]
        if a == b or ideal not in (a, b):
            continue
        items.append(
            BeliefItem(
                story.replace("_", " "),
                question.strip().replace("_", " "),
                "The answer is the",
                (_word(a), _word(b)),
                0 if ideal == a else 1,
                None,
                "tomi",
                _tomi_tag(question),
            )
        )
        if n is not None and len(items) == n:
            break
    return items


def read_hitom(path: str | os.PathLike, *, n: int | None = None) -> list[BeliefItem]:
    """Hi-ToM stories as items whose hypotheses are the containers the story mentions.

    The 15 listed options are cut to those the object was in or moved to (in story
    order); rows whose answer is not among them are skipped. `tag` is "order<k>" with k
    the nesting depth of the question ("thinks" count) and "-deception" when the story
    has deceptive communication.

    **Arguments:** `path` of `hitom-multiple-choice.jsonl`; `n` items (default all).

    **Returns:** list of `BeliefItem` (family "hitom", evidence None, >= 2 options).
    """
    items: list[BeliefItem] = []
    for row, text, ideal in _lines(path, n):
        story, _, rest = text.partition("\n\n")
        question, _, listing = rest.partition("\n")
        options = dict(_OPTION.findall(listing))
        if ideal not in options:
            continue
        seen: list[str] = []
        for m in re.finditer(r"(?:is in|to) the (\w+)\.", story):
            if m.group(1) in options.values() and m.group(1) not in seen:
                seen.append(m.group(1))
        if len(seen) < 2 or options[ideal] not in seen:
            continue
        depth = question.count("think")
        tag = f"order{depth}" + ("-deception" if row.get("deception") else "")
        story = re.sub(r"^\d+ ", "", story, flags=re.MULTILINE).replace("_", " ")
        items.append(
            BeliefItem(
                story,
                question.strip().replace("_", " "),
                "The answer is the",
                tuple(_word(s) for s in seen),
                seen.index(options[ideal]),
                None,
                "hitom",
                tag,
            )
        )
        if n is not None and len(items) == n:
            break
    return items
