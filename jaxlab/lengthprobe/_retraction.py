"""Retraction events in a completion: where the model takes back and restarts its answer.

An event is a retraction phrase at a word boundary ("Wait", "Actually", "Let me re-",
"Hmm, no", ...) or a line that repeats an earlier non-empty line of the same completion (a
restarted step). Events are located as the index of the token in which they start, so the
per-position probe estimate can be read just before and after them.

Paper: the P17 abstract (claim 3: the remaining-length estimate shifts upward where the
model retracts and restarts a partial solution).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence

__all__ = ["RETRACTION_PHRASES", "find_retractions"]

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


def find_retractions(
    tokens: Sequence[int],
    decode: Callable[[Sequence[int]], str],
    *,
    phrases: Sequence[str] = RETRACTION_PHRASES,
    repeated_lines: bool = True,
) -> list[int]:
    """Token indices at which retraction events start.

    **Arguments:**

    - `tokens`: a completion's ids.
    - `decode`: ids -> text (the tokenizer's `decode`); the text of a prefix must be a
      prefix of the text of the whole (true of byte-level BPE away from split characters).
    - `phrases`: retraction phrases (non-empty strings).
    - `repeated_lines`: also count a line equal (stripped) to an earlier non-empty line.

    **Returns:** sorted distinct token indices in [0, len(tokens)).
    """
    toks = [int(t) for t in tokens]
    if any(not isinstance(p, str) or not p for p in phrases):
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
