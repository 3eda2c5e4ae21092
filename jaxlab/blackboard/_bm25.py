"""Okapi BM25 over table profiles (Robertson & Zaragoza, 2009), the retrieval baseline."""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Sequence

import numpy as np

from .._core import check_instance, check_real, check_strings

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
    - `k1`, `b`: the usual saturation and length-normalisation parameters (`k1` >= 0,
      `b` in [0, 1]; a bad value, or `documents` that are not a non-empty sequence of
      strings, raises a `ValueError` naming it).
    """

    def __init__(self, documents: Sequence[str], *, k1: float = 1.5, b: float = 0.75):
        documents = check_strings("documents", documents)
        self.k1 = check_real("k1", k1, low=0.0)
        self.b = check_real("b", b, low=0.0, high=1.0)
        self.docs = [Counter(tokenize(d)) for d in documents]
        self.lengths = np.array([sum(d.values()) for d in self.docs], dtype=np.float64)
        self.avgdl = max(float(self.lengths.mean()), 1e-12)
        df: Counter = Counter()
        for d in self.docs:
            df.update(d.keys())
        n = len(self.docs)
        self.idf = {t: math.log(1 + (n - c + 0.5) / (c + 0.5)) for t, c in df.items()}

    def scores(self, query: str) -> np.ndarray:
        """BM25 score of every document for `query` (a string), shape (n_documents,)."""
        check_instance("query", query, str)
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
