"""Shared set-up of the lm experiments: the public-domain text and the LogiQA items."""

from __future__ import annotations

import json
import re

from jaxlab.data import wheel_file

__all__ = ["TEXT", "logiqa_items"]

# Charles Dickens, "A Tale of Two Cities" (1859), opening paragraph: public domain.
TEXT = (
    "It was the best of times, it was the worst of times, it was the age of wisdom, it was "
    "the age of foolishness, it was the epoch of belief, it was the epoch of incredulity, it "
    "was the season of Light, it was the season of Darkness, it was the spring of hope, it was "
    "the winter of despair, we had everything before us, we had nothing before us, we were all "
    "going direct to Heaven, we were all going direct the other way - in short, the period was "
    "so far like the present period, that some of its noisiest authorities insisted on its "
    "being received, for good or for evil, in the superlative degree of comparison only."
)

_LOGIQA = "evals/registry/data/logiqa/logiqa.jsonl"
_OPTION = re.compile(r"^([ABCD])\. (.*)$")


def logiqa_items(n: int) -> list[dict]:
    """The first `n` LogiQA items of the OpenAI `evals` wheel (a data file, never imported).

    Each item: `prompt` (passage, question and the four lettered options, ending in
    "Answer:"), `options` (the four option texts, without their letter prefixes) and
    `answer` (0-3).
    """
    path = wheel_file("evals", _LOGIQA, pin="evals==3.0.1.post1")
    items = []
    # split on "\n" only: the texts contain other Unicode line separators
    for line in path.read_text(encoding="utf-8").split("\n"):
        if not line.strip():
            continue
        row = json.loads(line)
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
            break
    if len(items) < n:
        raise ValueError(f"n: the LogiQA file has {len(items)} items, {n} requested")
    return items
