"""The real multiple-choice items of the routing experiments: MedMCQA, LogiQA, ReClor,
SocialIQA and QuaRTz from the OpenAI `evals` wheel (read as data files, never imported),
each source one task group, in the house prompt format (question, lettered options,
"Answer:"), with N_SHOTS items per source kept apart as few-shot examples.

LogiQA comes from `jaxlab.data.logiqa_items`, the reader lm_pool uses too (the committed
routing tables and HAPS caches are keyed by its items)."""

from __future__ import annotations

import json
import re
from pathlib import Path

from jaxlab.data import logiqa_items, wheel_file

_PIN = "evals==3.0.1.post1"
_MEDMCQA = "evals/registry/data/medmcqa/samples.jsonl"
_RECLOR = "evals/registry/data/logiqa-logical-reasoning-plus/reclor-logical-reasoning-plus.jsonl"
_SOCIALIQA = "evals/registry/data/theory_of_mind/socialiqa/test.jsonl"
_QUARTZ = "evals/registry/data/quartz/samples.jsonl"
N_SHOTS = 1


def _jsonl(path: Path) -> list[dict]:
    # split on "\n" only: the texts contain other Unicode line separators
    return [json.loads(x) for x in path.read_text(encoding="utf-8").split("\n") if x.strip()]


def medmcqa_items(n: int) -> list[dict]:
    """The first `n` MedMCQA items of the `evals` wheel: prompt, 4 options, answer index."""
    path = wheel_file("evals", _MEDMCQA, pin=_PIN)
    items = []
    for k, row in enumerate(_jsonl(path)):
        user = row["input"][-1]["content"]
        head, _, opts = user.rpartition("\n\n")
        options = {}
        for ln in opts.split("\n"):
            m = re.match(r"^([a-d])\) (.*)$", ln.strip())
            if m:
                options[m.group(1)] = m.group(2).strip()
        letter = row["ideal"][:1]
        if sorted(options) != list("abcd") or letter not in options:
            raise ValueError(f"{path}: malformed MedMCQA row {k}: {user[-200:]!r}")
        lettered = "\n".join(f"{c.upper()}. {options[c]}" for c in "abcd")
        items.append(
            {
                "question": head.strip(),
                "prompt": f"{head.strip()}\n{lettered}\nAnswer:",
                "options": [options[c] for c in "abcd"],
                "answer": "abcd".index(letter),
            }
        )
        if len(items) == n:
            return items
    raise ValueError(f"n: the MedMCQA file has {len(items)} items, {n} requested")


def reclor_items(n: int) -> list[dict]:
    """The first `n` ReClor items (evals' logiqa-logical-reasoning-plus set)."""
    path = wheel_file("evals", _RECLOR, pin=_PIN)
    items = []
    for k, row in enumerate(_jsonl(path)):
        user = row["input"][-1]["content"].strip()
        options = {}
        for ln in user.split("\n"):
            m = re.match(r"^([ABCD])\. (.*)$", ln.strip())
            if m:
                options[m.group(1)] = m.group(2).strip()
        if sorted(options) != list("ABCD") or row["ideal"] not in options:
            raise ValueError(f"{path}: malformed ReClor row {k}: {user[-200:]!r}")
        question = user.rsplit("\nA.", 1)[0]
        items.append(
            {
                "question": question,
                "prompt": user,
                "options": [options[c] for c in "ABCD"],
                "answer": "ABCD".index(row["ideal"]),
            }
        )
        if len(items) == n:
            return items
    raise ValueError(f"n: the ReClor file has {len(items)} items, {n} requested")


def _lettered_items(path: Path, n: int, pattern: str, letters: str, what: str) -> list[dict]:
    """The first `n` rows of an evals file whose last user message is a question followed
    by its lettered options, matched by `pattern` (groups: question, then one option per
    letter), in the house prompt format (question, "A. ..." lines, "Answer:")."""
    items = []
    for k, row in enumerate(_jsonl(path)):
        m = re.match(pattern, row["input"][-1]["content"].strip(), re.S)
        if m is None or row["ideal"] not in letters:
            raise ValueError(f"{path}: malformed {what} row {k}: {row['input'][-1]!r:.200}")
        question, options = m.group(1).strip(), [o.strip() for o in m.groups()[1:]]
        lettered = "\n".join(f"{c}. {o}" for c, o in zip(letters, options, strict=True))
        items.append(
            {
                "question": question,
                "prompt": f"{question}\n{lettered}\nAnswer:",
                "options": options,
                "answer": letters.index(row["ideal"]),
            }
        )
        if len(items) == n:
            return items
    raise ValueError(f"n: the {what} file has {len(items)} items, {n} requested")


def socialiqa_items(n: int) -> list[dict]:
    """The first `n` SocialIQA items (evals' theory-of-mind set; 3 options each)."""
    path = wheel_file("evals", _SOCIALIQA, pin=_PIN)
    return _lettered_items(path, n, r"^(.*) A: (.*); B: (.*); C: (.*)\.$", "ABC", "SocialIQA")


def quartz_items(n: int) -> list[dict]:
    """The first `n` QuaRTz items (qualitative relations; 2 options each)."""
    path = wheel_file("evals", _QUARTZ, pin=_PIN)
    return _lettered_items(path, n, r"^(.*)\n\n A: (.*)\n B: (.*)$", "AB", "QuaRTz")


def _logiqa(n: int) -> list[dict]:
    return [{**it, "question": it["prompt"].rsplit("\nA.", 1)[0]} for it in logiqa_items(n)]


_SOURCES = {
    "medmcqa": medmcqa_items,
    "logiqa": _logiqa,
    "reclor": reclor_items,
    "socialiqa": socialiqa_items,
    "quartz": quartz_items,
}


def source_items(per_source) -> tuple[list[dict], list[dict]]:
    """(queries, shots): the queries of every source (with their `group`) and, per source,
    the N_SHOTS items after them (the few-shot examples, never queries)."""
    queries, shots = [], {}
    for name, n in per_source:
        items = _SOURCES[name](n + N_SHOTS)
        queries += [{**it, "group": name} for it in items[:n]]
        shots[name] = items[n:]
    return queries, shots
