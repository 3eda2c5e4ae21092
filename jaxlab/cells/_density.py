"""kNN density baseline: atypicality as the mean distance to the k nearest neighbours."""

from __future__ import annotations

import numpy as np
from scipy.spatial import KDTree

from jaxlab._core import as_array, check_positive_int

__all__ = ["knn_atypicality"]


def knn_atypicality(embedding: np.ndarray, k: int = 15) -> np.ndarray:
    """Mean Euclidean distance of each point to its k nearest other points (higher = rarer).

    Accepts `embedding` `(N, D)` finite numbers with N > k and `k` a positive integer;
    anything else raises a `ValueError` naming the argument.
    """
    check_positive_int("k", k)
    as_array("embedding", embedding, finite=True)
    x = np.asarray(embedding, dtype=np.float64)
    if x.ndim != 2 or x.shape[0] <= k:
        raise ValueError(f"embedding: expected (cells > k={k}, dims), received shape {x.shape}")
    dist, _ = KDTree(x).query(x, k=k + 1)
    return dist[:, 1:].mean(1)
