"""`hashed_bow`: deterministic hashed bag-of-words query features (no model, no vocabulary)."""

from __future__ import annotations

import re
import zlib
from collections.abc import Sequence

import numpy as np

from jaxlab._core import check_memory, check_positive_int

__all__ = ["hashed_bow"]

_WORD = re.compile(r"[a-z0-9]+")


def hashed_bow(texts: Sequence[str], *, dim: int = 256, bigrams: bool = True) -> np.ndarray:
    """Signed feature hashing of lower-cased words (and word bigrams) of each text.

    Each token t adds `sign(t)` to bucket `crc32(t) mod dim` (Weinberger et al. 2009,
    "Feature hashing for large scale multitask learning"); the counts are passed through
    `sign(x) log(1 + |x|)` and each row is scaled to unit L2 norm. crc32 is fixed across
    processes (unlike Python's `hash`), so features are reproducible.

    **Arguments:**

    - `texts`: N strings.
    - `dim`: number of hash buckets F (a positive integer; refused before allocation when
      the (N, F) result would not fit in memory).
    - `bigrams`: also hash adjacent word pairs.

    **Returns:** (N, F) float64 array.
    """
    if isinstance(texts, str) or not all(isinstance(t, str) for t in texts):
        raise ValueError("texts: expected a sequence of strings")
    dim = check_positive_int("dim", dim)
    check_memory("dim", 8.0 * len(texts) * dim)  # the (N, F) float64 result
    out = np.zeros((len(texts), dim))
    for i, text in enumerate(texts):
        words = _WORD.findall(text.lower())
        tokens = words + (
            [f"{a} {b}" for a, b in zip(words, words[1:], strict=False)] if bigrams else []
        )
        for t in tokens:
            h = zlib.crc32(t.encode())
            out[i, h % dim] += 1.0 if (h >> 31) & 1 else -1.0
    out = np.sign(out) * np.log1p(np.abs(out))
    norm = np.linalg.norm(out, axis=1, keepdims=True)
    return out / np.where(norm > 0, norm, 1.0)
