"""Completion families as data: synthetic ones with lengths known by construction and
natural ones read from files that installed wheels ship (the OpenAI `evals` wheel).

Every family is one `Family` entry of `FAMILIES` (name, kind, source, instruction and a
maker); `make_prompts(name, count, key=...)` draws `count` `CompletionPrompt`s from it. A
synthetic prompt carries its `reference` completion (the answer a perfect follower writes)
and its `units` (numbers counted, items listed, words repeated, terms summed), so its
length is known by construction; a natural prompt carries neither.

Paper: the P17 abstract (seven completion-style datasets, natural and synthetic); the
natural sources are files of the `evals` 3.0.1.post1 wheel: LogiQA, math word problems,
evidence claims to summarise, LogiQA passages to summarise or list the facts of.
"""

from __future__ import annotations

import dataclasses
import functools
import re
from collections.abc import Callable

import jax
import numpy as np

from .._core import check_memory, check_positive_int, numpy_rng, parse_json, wheel_file

__all__ = [
    "CompletionPrompt",
    "Family",
    "FAMILIES",
    "make_prompts",
    "reference_length",
    "SYNTHETIC",
    "NATURAL",
]

_EVALS_PIN = "evals==3.0.1.post1 (or `python -m jaxlab.data install`)"

# the math word problems of the evals wheel (71 rows in all)
_MATH_FILES = (
    "algebra_word_problems/samples.jsonl",
    "math_for_5th-grader/samples.jsonl",
    "multistep-word-problems/samples.jsonl",
    "arithmetical_puzzles/arithmetical_puzzles.jsonl",
    "simple_math/simple_math.jsonl",
)

_WORDS = ("cat", "tree", "blue", "stone", "river", "apple", "house", "light", "green", "bird")
_CATEGORIES = {
    "fruits": ("apple", "banana", "cherry", "grape", "lemon", "mango", "orange", "pear", "plum"),
    "animals": ("cat", "dog", "horse", "lion", "mouse", "owl", "rabbit", "sheep", "tiger"),
    "colours": ("red", "blue", "green", "yellow", "purple", "orange", "black", "white", "pink"),
    "countries": ("France", "Spain", "Italy", "Japan", "Brazil", "Canada", "Egypt", "India"),
}


@dataclasses.dataclass(frozen=True)
class CompletionPrompt:
    """One prompt of a completion family.

    **Attributes:** `family` (name), `text` (the user message), `reference` (the ideal
    completion of a synthetic prompt, else None), `units` (its count of units: numbers,
    items, repetitions or terms; else None), `source` (where a natural prompt came from).
    """

    family: str
    text: str
    reference: str | None = None
    units: int | None = None
    source: str = ""


@dataclasses.dataclass(frozen=True)
class Family:
    """A completion family: `name`, `kind` ("synthetic" or "natural"), `description`,
    `source` (generator or wheel file) and `make(count, rng) -> list[CompletionPrompt]`."""

    name: str
    kind: str
    description: str
    source: str
    make: Callable[[int, np.random.Generator], list[CompletionPrompt]]


# ------------------------------------------------------------------ synthetic families


def _count(count, rng):
    out = []
    for _ in range(count):
        a = int(rng.integers(1, 30))
        n = int(rng.integers(3, 25))
        b = a + n - 1
        ref = ", ".join(str(i) for i in range(a, b + 1))
        text = f"Count from {a} to {b}. Write the numbers separated by commas and nothing else."
        out.append(CompletionPrompt("count", text, ref, n, "synthetic"))
    return out


def _list_items(count, rng):
    out = []
    names = sorted(_CATEGORIES)
    for _ in range(count):
        cat = names[int(rng.integers(len(names)))]
        pool = _CATEGORIES[cat]
        n = int(rng.integers(2, len(pool) + 1))
        ref = "\n".join(f"{i + 1}. {w}" for i, w in enumerate(pool[:n]))
        text = f"List {n} {cat}, one per line, numbered. Write nothing else."
        out.append(CompletionPrompt("list_items", text, ref, n, "synthetic"))
    return out


def _repeat_word(count, rng):
    out = []
    for _ in range(count):
        w = _WORDS[int(rng.integers(len(_WORDS)))]
        k = int(rng.integers(2, 30))
        ref = " ".join([w] * k)
        text = f"Repeat the word '{w}' exactly {k} times, separated by spaces. Write nothing else."
        out.append(CompletionPrompt("repeat_word", text, ref, k, "synthetic"))
    return out


def _chain_sum(count, rng):
    out = []
    for _ in range(count):
        n = int(rng.integers(2, 9))
        terms = [int(t) for t in rng.integers(1, 20, n)]
        steps, total = [], terms[0]
        for t in terms[1:]:
            steps.append(f"{total} + {t} = {total + t}")
            total += t
        ref = "\n".join(steps) + f"\nAnswer: {total}"
        expr = " + ".join(str(t) for t in terms)
        text = (
            f"Compute {expr} one step at a time: write each partial sum on its own line, "
            "then 'Answer:' and the total."
        )
        out.append(CompletionPrompt("chain_sum", text, ref, n, "synthetic"))
    return out


# -------------------------------------------------------------------- natural families


@functools.cache
def _evals_rows(rel: str) -> tuple[dict, ...]:
    path = wheel_file("evals", f"evals/registry/data/{rel}", pin=_EVALS_PIN)
    rows = []
    for i, line in enumerate(path.read_text(encoding="utf-8").splitlines()):
        if not line.strip():
            continue
        try:
            rows.append(parse_json(line, where=f"{path}: line {i + 1}"))
        except ValueError as e:
            raise ValueError(f"{path}: line {i + 1} is not JSON ({e})") from None
    return tuple(rows)


def _user_text(row: dict) -> str:
    msgs = row.get("input")
    if not isinstance(msgs, list):
        raise ValueError(f"an evals row has no message list: {str(row)[:80]}")
    return "\n".join(str(m.get("content", "")) for m in msgs if m.get("role") == "user").strip()


def _from_evals(name, rels, instruction, max_chars, transform=lambda s: s):
    def make(count, rng):
        rows = [
            (f"{rel}:{i}", t)
            for rel in rels
            for i, r in enumerate(_evals_rows(rel))
            if len(t := _user_text(r)) <= max_chars
        ]
        if count > len(rows):
            raise ValueError(
                f"count: family {name!r} has {len(rows)} prompts of <= {max_chars} characters, "
                f"received {count}"
            )
        pick = rng.choice(len(rows), count, replace=False)
        return [
            CompletionPrompt(name, f"{transform(rows[i][1])}\n\n{instruction}", source=rows[i][0])
            for i in pick.tolist()
        ]

    return make


def _passage(s: str) -> str:
    """The passage of a LogiQA prompt (between 'Passage:' and 'Question:')."""
    body = s.split("Passage:", 1)[-1]
    return body.split("Question:", 1)[0].strip()


def _strip_answer_cue(s: str) -> str:
    return s[: -len("Answer:")].rstrip() if s.endswith("Answer:") else s


FAMILIES: dict[str, Family] = {
    f.name: f
    for f in (
        Family("count", "synthetic", "count from a to b (3-24 numbers)", "generator", _count),
        Family("list_items", "synthetic", "list N items of a category", "generator", _list_items),
        Family("repeat_word", "synthetic", "repeat a word k times", "generator", _repeat_word),
        Family("chain_sum", "synthetic", "running sums of n terms", "generator", _chain_sum),
        Family(
            "logiqa_explain",
            "natural",
            "LogiQA passage + question; explain, then answer",
            "evals logiqa/logiqa.jsonl",
            _from_evals(
                "logiqa_explain",
                ("logiqa/logiqa.jsonl",),
                "Explain your reasoning briefly, then give the letter of the answer.",
                900,
                _strip_answer_cue,
            ),
        ),
        Family(
            "math_steps",
            "natural",
            "math word problems; solve step by step",
            "evals " + ", ".join(_MATH_FILES),
            _from_evals(
                "math_steps",
                _MATH_FILES,
                "Solve this step by step, then state the final number.",
                600,
            ),
        ),
        Family(
            "summarise_claims",
            "natural",
            "evidence claims; summarise them",
            "evals consensus_summary/samples.jsonl",
            _from_evals(
                "summarise_claims",
                ("consensus_summary/samples.jsonl",),
                "Summarise what these claims say in a few sentences.",
                900,
            ),
        ),
        Family(
            "paragraph_summary",
            "natural",
            "a real paragraph (LogiQA passage); summarise it",
            "evals logiqa/logiqa.jsonl",
            _from_evals(
                "paragraph_summary",
                ("logiqa/logiqa.jsonl",),
                "Summarise this paragraph in one or two sentences.",
                900,
                _passage,
            ),
        ),
        Family(
            "paragraph_facts",
            "natural",
            "a real paragraph (LogiQA passage); list its key facts",
            "evals logiqa/logiqa.jsonl",
            _from_evals(
                "paragraph_facts",
                ("logiqa/logiqa.jsonl",),
                "List the key facts of this paragraph as short bullet points.",
                900,
                _passage,
            ),
        ),
    )
}
"""The prompt families: name -> `Family` (synthetic with a known length, or natural prompts
from the evals wheel)."""

SYNTHETIC: tuple[str, ...] = tuple(n for n, f in FAMILIES.items() if f.kind == "synthetic")
"""The names of the synthetic families of `FAMILIES`."""
NATURAL: tuple[str, ...] = tuple(n for n, f in FAMILIES.items() if f.kind == "natural")
"""The names of the natural families of `FAMILIES`."""


def make_prompts(family: str, count: int, *, key: jax.Array) -> list[CompletionPrompt]:
    """Draw `count` prompts of one completion family, determined by `key`.

    **Arguments:**

    - `family`: a key of `FAMILIES` (synthetic: "count", "list_items", "repeat_word",
      "chain_sum"; natural: "logiqa_explain", "math_steps", "summarise_claims",
      "paragraph_summary", "paragraph_facts").
    - `count`: number of prompts (natural families: at most the file's eligible rows,
      drawn without replacement).
    - `key`: PRNG key (keyword-only).

    **Returns:** a list of `count` `CompletionPrompt`s.
    """
    if not isinstance(family, str) or family not in FAMILIES:
        raise ValueError(f"family: expected one of {sorted(FAMILIES)}, received {family!r}")
    count = check_positive_int("count", count)
    check_memory("count", 4096.0 * count)  # a prompt's text, reference and metadata
    return FAMILIES[family].make(count, numpy_rng(key))


# a synthetic reference is units joined by these separators; each piece is one pre-token
# run of the byte-level BPE tokenizers of the pool (digits, words, punctuation, newline)
_PIECES = re.compile(r"\d| ?[A-Za-z]+| ?[^\w\s]| |\n")


def reference_length(tokenizer, prompt: CompletionPrompt) -> int:
    """Token length of a synthetic prompt's reference, counted by construction.

    The reference is split into the pieces the generator joined (single digits, words with
    their leading space, punctuation, spaces, newlines) and each piece is tokenized on its
    own; the sum equals the tokenizer's count of the whole reference exactly when the
    tokenizer never merges across those pieces (the tests check it for the pool's
    tokenizers).

    **Arguments:** `tokenizer` (`jaxlab.lm.Tokenizer`); `prompt` a synthetic
    `CompletionPrompt`.

    **Returns:** the reference's length in tokens (no BOS, no stop token).
    """
    if not isinstance(prompt, CompletionPrompt) or prompt.reference is None:
        raise ValueError(
            f"prompt: expected a synthetic CompletionPrompt with a reference, received {prompt!r}"
        )
    pieces = _PIECES.findall(prompt.reference)
    if "".join(pieces) != prompt.reference:
        raise ValueError(f"prompt: the reference holds characters outside {_PIECES.pattern!r}")
    return sum(len(tokenizer.encode(p, add_bos=False)) for p in pieces)
