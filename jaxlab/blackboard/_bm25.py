"""Okapi BM25 over table profiles (Robertson & Zaragoza, 2009), the retrieval baseline."""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Sequence

import numpy as np

__all__ = ["BM25", "tokenize"]

_WORD = re.compile(r"[a-z0-9]+")


def tokenize(text: str) -> list[str]:
    """Lower-cased alphanumeric words."""
    return _WORD.findall(text.lower())


class BM25:
    """BM25 index: `idf(t) = ln(1 + (N - n_t + 0.5) / (n_t + 0.5))` (the non-negative form),
    term weight `idf * tf (k1 + 1) / (tf + k1 (1 - b + b |d| / avgdl))`.

    **Arguments:**

    - `documents`: the texts to index (one per table profile).
    - `k1`, `b`: the usual saturation and length-normalisation parameters.
    """

    def __init__(self, documents: Sequence[str], *, k1: float = 1.5, b: float = 0.75):
        if isinstance(documents, str) or not len(documents):
            raise ValueError("documents: expected a non-empty list of texts")
        if k1 < 0 or not 0 <= b <= 1:
            raise ValueError(f"k1, b: expected k1 >= 0 and b in [0, 1], received {k1}, {b}")
        self.k1, self.b = float(k1), float(b)
        self.docs = [Counter(tokenize(d)) for d in documents]
        self.lengths = np.array([sum(d.values()) for d in self.docs], dtype=np.float64)
        self.avgdl = max(float(self.lengths.mean()), 1e-12)
        df: Counter = Counter()
        for d in self.docs:
            df.update(d.keys())
        n = len(self.docs)
        self.idf = {t: math.log(1 + (n - c + 0.5) / (c + 0.5)) for t, c in df.items()}

    def scores(self, query: str) -> np.ndarray:
        """BM25 score of every document for `query`, shape (n_documents,)."""
        q = tokenize(query)
        out = np.zeros(len(self.docs))
        for i, d in enumerate(self.docs):
            norm = self.k1 * (1 - self.b + self.b * self.lengths[i] / self.avgdl)
            s = 0.0
            for t in q:
                tf = d.get(t, 0)
                if tf:
                    s += self.idf[t] * tf * (self.k1 + 1) / (tf + norm)
            out[i] = s
        return out
