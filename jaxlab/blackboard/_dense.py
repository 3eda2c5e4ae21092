"""Dense retrieval over table profiles: cosine similarity of centred text embeddings.

The dense baseline of the retrieval family (beside BM25): every profile and the query
are embedded by the same encoder (in the experiments, `jaxlab.lm.embed`: the agents'
own model, mean-pooled final hidden states), the documents' mean embedding is removed
from both (decoder embeddings share a large common direction that would otherwise make
every cosine close to 1), and documents are ranked by cosine similarity.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from .._core import check_strings

__all__ = ["DenseIndex"]


def _unit(x: np.ndarray) -> np.ndarray:
    n = np.linalg.norm(x, axis=-1, keepdims=True)
    return np.where(n > 1e-12, x / np.maximum(n, 1e-12), 0.0)


class DenseIndex:
    """Cosine similarity of centred embeddings.

    **Arguments:**

    - `documents`: the texts to index (one per table profile).
    - `encode`: texts -> (len(texts), d) float array of embeddings (called once for the
      documents, then once per query).

    A single document, or documents whose embeddings are all equal, centre to zero: every
    score is then 0.
    """

    def __init__(self, documents: Sequence[str], encode: Callable[[Sequence[str]], np.ndarray]):
        documents = check_strings("documents", documents)
        if not callable(encode):
            raise ValueError(f"encode: expected a callable, received {type(encode).__name__}")
        self.encode = encode
        e = self._check(encode(list(documents)), len(documents), "encode(documents)")
        self.mean = e.mean(axis=0)
        self.docs = _unit(e - self.mean)

    @staticmethod
    def _check(e, n: int, what: str) -> np.ndarray:
        e = np.asarray(e, dtype=np.float64)
        if e.ndim != 2 or e.shape[0] != n or e.shape[1] == 0:
            raise ValueError(f"{what}: expected an ({n}, d) array, received shape {e.shape}")
        if not np.isfinite(e).all():
            raise ValueError(f"{what}: embeddings contain NaN or inf")
        return e

    def scores(self, query: str) -> np.ndarray:
        """Cosine similarity of every document to `query`, shape (n_documents,), in [-1, 1]."""
        if not isinstance(query, str) or not query.strip():
            raise ValueError(f"query: expected a non-empty string, received {query!r}")
        q = self._check(self.encode([query]), 1, "encode([query])")[0]
        return self.docs @ _unit(q - self.mean)
