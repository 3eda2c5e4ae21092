"""Residualisation on group labels (a score with a confound removed before a correlation).
Intervals and tests are in `_estimate.py`."""

from __future__ import annotations

import numpy as np

__all__ = ["residualize"]


def residualize(y, groups) -> np.ndarray:
    """`y` minus the mean of its group: the least-squares residual of `y` regressed on
    one-hot indicators of `groups` (e.g. a score with the cell-type effect removed).

    **Arguments:** `y` `(n,)` values, `groups` `(n,)` labels (any hashable dtype).

    **Returns:** `(n,)` residuals (each group's residuals sum to zero).
    """
    y = np.asarray(y, dtype=np.float64)
    g = np.asarray(groups)
    if y.ndim != 1 or g.shape != y.shape:
        raise ValueError(
            f"y, groups: expected two 1-D arrays of one length, received {y.shape}, {g.shape}"
        )
    _, inv = np.unique(g, return_inverse=True)
    inv = inv.reshape(-1)
    means = np.bincount(inv, weights=y) / np.bincount(inv)
    return y - means[inv]
