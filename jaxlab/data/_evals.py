"""Readers of evaluation sets that ship as data files inside pip packages (never imported)."""

from __future__ import annotations

import re

from jaxlab._core import parse_json
from jaxlab._core._wheels import wheel_file

__all__ = ["logiqa_items", "LOGIQA_PIN"]

LOGIQA_PIN = "evals==3.0.1.post1"
_LOGIQA = "evals/registry/data/logiqa/logiqa.jsonl"
_OPTION = re.compile(r"^([ABCD])\. (.*)$")
# the file's rows; `n` above it is refused before anything is read
_LOGIQA_MAX = 100_000


def logiqa_items(n: int) -> list[dict]:
    """The first `n` LogiQA items of the OpenAI `evals` wheel (a data file, never imported).

    Each item: `prompt` (passage, question and the four lettered options, ending in
    "Answer:"), `options` (the four option texts, without their letter prefixes) and
    `answer` (0-3). Raises `ValueError` for a malformed row or when the file has fewer
    than `n` items.
    """
    if isinstance(n, bool) or not isinstance(n, int) or not 1 <= n <= _LOGIQA_MAX:
        raise ValueError(f"n: expected an int in [1, {_LOGIQA_MAX}], received {n!r}")
    path = wheel_file("evals", _LOGIQA, pin=LOGIQA_PIN)
    items = []
    # split on "\n" only: the texts contain other Unicode line separators
    for line in path.read_text(encoding="utf-8").split("\n"):
        if not line.strip():
            continue
        row = parse_json(line, where=str(path))
        user = next(m["content"] for m in row["input"] if m["role"] == "user")
        options = {}
        for ln in user.split("\n"):
            m = _OPTION.match(ln.strip())
            if m:
                # the file repeats the letter ("A. A.Zhao chose ..."): drop the copy
                options[m.group(1)] = re.sub(rf"^{m.group(1)}\.\s*", "", m.group(2)).strip()
        if sorted(options) != list("ABCD") or row["ideal"] not in options:
            raise ValueError(f"{path}: malformed LogiQA row {len(items)}: {user[-200:]!r}")
        items.append(
            {
                "prompt": user.strip(),
                "options": [options[c] for c in "ABCD"],
                "answer": "ABCD".index(row["ideal"]),
            }
        )
        if len(items) == n:
            return items
    raise ValueError(f"n: the LogiQA file has {len(items)} items, {n} requested")
