"""Small statistics the claims share: a Student-t interval of a mean and residualisation
on group labels (the pieces that issue #34 asks every noisy comparison to state)."""

from __future__ import annotations

import numpy as np
from scipy import stats

__all__ = ["t_interval", "residualize"]


def t_interval(x, level: float = 0.95) -> tuple[float, float, float]:
    """Mean of `x` and its two-sided Student-t confidence interval.

    For paired comparisons pass the per-item differences (the paired t interval);
    for seeds pass one value per seed. `x`: 1-D, at least two finite values.

    **Returns:** `(mean, low, high)`.
    """
    x = np.asarray(x, dtype=np.float64)
    if x.ndim != 1 or x.size < 2:
        raise ValueError(f"x: expected a 1-D array of >= 2 values, received shape {x.shape}")
    if not np.all(np.isfinite(x)):
        raise ValueError("x: expected finite values, received NaN or inf")
    if not 0 < level < 1:
        raise ValueError(f"level: expected a number in (0, 1), received {level!r}")
    mean = float(x.mean())
    half = float(stats.t.ppf(0.5 + level / 2, x.size - 1) * x.std(ddof=1) / np.sqrt(x.size))
    return mean, mean - half, mean + half


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
