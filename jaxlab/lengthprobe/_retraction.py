"""Retraction events in a completion: where the model takes back and restarts its answer.

An event is a retraction phrase at a word boundary ("Wait", "Actually", "Let me re-",
"Hmm, no", ...) or a line that repeats an earlier non-empty line of the same completion (a
restarted step). Events are located as the index of the token in which they start, so the
per-position probe estimate can be read just before and after them.

Forced events. `cut_point` picks a break (end of a line or sentence) near the middle of one
of the model's own completions, `insert_phrase` appends a phrase (a retraction, or a
neutral filler of the same token length from `same_length_filler`) to the prompt and the
partial solution there, giving the ids to continue from and the two positions to read the
estimate at: the last token of the partial solution ("before") and the last token of the
phrase ("after"); `estimate_jump` is the change of the remaining-length estimate between
them, in tokens.

Paper: the P17 abstract (claim 3: the remaining-length estimate shifts upward where the
model retracts and restarts a partial solution).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence

import numpy as np

from .._core import as_array, check_ids, check_positive_int, check_real, check_strings

__all__ = [
    "RETRACTION_PHRASES",
    "find_retractions",
    "cut_point",
    "insert_phrase",
    "same_length_filler",
    "estimate_jump",
]

#: phrases that open a retraction (matched case-sensitively at a word boundary).
RETRACTION_PHRASES = (
    "Wait",
    "Actually",
    "Let me re",
    "Hmm, no",
    "No, wait",
    "I made a mistake",
    "Correction:",
    "On second thought",
)
"""Phrases that open a retraction (matched case-sensitively at a word boundary)."""


def _ids(name: str, tokens) -> list[int]:
    """A 1-D sequence of integer token ids >= 0 (not a string, no floats or booleans)."""
    arr = check_ids(name, tokens, None, what="token ids")
    if arr.ndim != 1:
        raise ValueError(f"{name}: expected a 1-D id sequence, received shape {arr.shape}")
    return arr.tolist()


def _callable(name: str, fn) -> None:
    if not callable(fn):
        raise ValueError(f"{name}: expected a callable, received {type(fn).__name__}")


def find_retractions(
    tokens: Sequence[int],
    decode: Callable[[Sequence[int]], str],
    *,
    phrases: Sequence[str] = RETRACTION_PHRASES,
    repeated_lines: bool = True,
) -> list[int]:
    """Token indices at which retraction events start.

    **Arguments:**

    - `tokens`: a completion's ids (integers >= 0; a string or floats raise).
    - `decode`: ids -> text (the tokenizer's `decode`); the text of a prefix must be a
      prefix of the text of the whole (true of byte-level BPE away from split characters).
    - `phrases`: retraction phrases (a sequence of non-empty strings, not a bare string;
      empty: repeated lines only).
    - `repeated_lines`: also count a line equal (stripped) to an earlier non-empty line.

    **Returns:** sorted distinct token indices in [0, len(tokens)).
    """
    toks = _ids("tokens", tokens)
    _callable("decode", decode)
    phrases = check_strings("phrases", phrases, nonempty=False)
    if not all(phrases):
        raise ValueError(f"phrases: expected non-empty strings, received {list(phrases)!r}")
    if not toks:
        return []
    text = decode(toks)
    starts = []
    for p in phrases:
        starts += [m.start() for m in re.finditer(r"(?<!\w)" + re.escape(p), text)]
    if repeated_lines:
        seen, offset = set(), 0
        for line in text.split("\n"):
            key = line.strip()
            if key and key in seen:
                starts.append(offset + len(line) - len(line.lstrip()))
            seen.add(key)
            offset += len(line) + 1
    # the token containing character c: the first k with len(decode(tokens[:k + 1])) > c
    ends = [len(decode(toks[: k + 1])) for k in range(len(toks))]
    out = set()
    for c in starts:
        out.add(next(k for k, e in enumerate(ends) if e > c))
    return sorted(out)


def cut_point(
    tokens: Sequence[int],
    decode: Callable[[Sequence[int]], str],
    *,
    fraction: float = 0.5,
    breaks: Sequence[str] = ("\n", ". ", ".", ":", ";"),
) -> int:
    """Where to cut a completion into a partial solution: the prefix length k (1 <= k <
    len(tokens)) closest to `fraction * len(tokens)` whose decoded text ends with one of
    `breaks` (the end of a line or sentence); the rounded fraction itself if none does.

    **Arguments:** `tokens` (at least 2 ids); `decode` ids -> text; `fraction` in (0, 1);
    `breaks` a sequence of non-empty strings (not a bare string); other inputs raise a
    `ValueError` naming the argument.

    **Returns:** the prefix length k (ties go to the shorter prefix).
    """
    toks = _ids("tokens", tokens)
    _callable("decode", decode)
    fraction = check_real(
        "fraction", fraction, low=0.0, high=1.0, low_inclusive=False, high_inclusive=False
    )
    breaks = check_strings("breaks", breaks)
    if len(toks) < 2:
        raise ValueError(f"tokens: expected at least 2 ids to cut, received {len(toks)}")
    if not 0.0 < float(fraction) < 1.0:
        raise ValueError(f"fraction: expected a value in (0, 1), received {fraction!r}")
    if not breaks or any(not isinstance(b, str) or not b for b in breaks):
        raise ValueError(f"breaks: expected non-empty strings, received {list(breaks)!r}")
    target = fraction * len(toks)
    ok = [k for k in range(1, len(toks)) if decode(toks[:k]).endswith(tuple(breaks))]
    if not ok:
        return min(max(1, int(round(target))), len(toks) - 1)
    return min(ok, key=lambda k: (abs(k - target), k))


def insert_phrase(
    prompt: Sequence[int], completion: Sequence[int], cut: int, phrase: Sequence[int]
) -> tuple[list[int], int, int]:
    """Prompt + the first `cut` completion tokens + `phrase`: the ids to continue from.

    **Arguments:** `prompt` (non-empty ids); `completion` non-empty ids; `cut` an integer in
    [1, len(completion)]; `phrase` non-empty ids (ids are integers >= 0; anything else
    raises a `ValueError` naming the argument).

    **Returns:** (ids, before, after) with `before` the position of the last partial-solution
    token and `after` the position of the last phrase token (`after - before ==
    len(phrase)`), both positions in `ids`.
    """
    p, c, ph = _ids("prompt", prompt), _ids("completion", completion), _ids("phrase", phrase)
    for name, ids in (("prompt", p), ("completion", c), ("phrase", ph)):
        if not ids:
            raise ValueError(f"{name}: expected a non-empty id list, received none")
    cut = check_positive_int("cut", cut)
    if not 1 <= int(cut) <= len(c):
        raise ValueError(f"cut: expected a value in [1, {len(c)}], received {cut!r}")
    ids = p + c[: int(cut)] + ph
    return ids, len(p) + int(cut) - 1, len(ids) - 1


def same_length_filler(
    encode: Callable[[str], Sequence[int]], length: int, candidates: Sequence[str]
) -> list[int]:
    """Ids of a neutral filler with exactly `length` tokens: the first candidate whose
    encoding has that length, else the first `length` ids of the first candidate long
    enough (the filler control of a retraction phrase of the same token length).

    **Arguments:** `encode` text -> ids (without BOS); `length` a positive integer;
    `candidates` a sequence of texts (not a bare string).

    **Returns:** `length` ids (`ValueError` when no candidate is long enough).
    """
    length = check_positive_int("length", length)
    _callable("encode", encode)
    candidates = check_strings("candidates", candidates)
    encoded = [[int(t) for t in encode(c)] for c in candidates]
    for ids in encoded:
        if len(ids) == length:
            return ids
    for ids in encoded:
        if len(ids) > length:
            return ids[:length]
    raise ValueError(f"candidates: none encodes to at least length={length} tokens")


def estimate_jump(estimates, before, after, *, log1p: bool = True) -> np.ndarray:
    """Change of a remaining-length estimate across events, in tokens.

    **Arguments:** `estimates` (n,) per-position estimates (of log1p remaining tokens when
    `log1p`, else of remaining tokens; finite); `before`, `after` (m,) int indices into
    them, in [0, n) (never wrapped: a `ValueError` names the argument).

    **Returns:** (m,) `r[after] - r[before]` with `r = expm1(estimates)` (or the estimates).
    """
    e = np.asarray(as_array("estimates", estimates, ndim=1, finite=True), np.float64)
    b = check_ids("before", before, e.size, what="indices")
    a = check_ids("after", after, e.size, what="indices")
    if b.shape != a.shape or b.ndim != 1:
        raise ValueError(f"before, after: expected equal 1-D shapes, received {b.shape}, {a.shape}")
    r = np.expm1(e) if log1p else e
    return r[a] - r[b]
