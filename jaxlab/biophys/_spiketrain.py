"""Spike trains from voltage traces, and matching of two spike trains within a tolerance."""

from __future__ import annotations

import numpy as np
from jaxtyping import ArrayLike

from jaxlab._core import as_array

__all__ = ["spike_indices", "match_fraction"]


def spike_indices(voltage: ArrayLike, *, threshold: float = 0.0) -> np.ndarray:
    """Step indices of the voltage peak of each spike (excursion above `threshold`).

    For every excursion of `voltage` (`(T,)`, mV) above `threshold` the index of
    its maximum is returned: the time a spike sorter assigns to the
    extracellular trough. Returns a sorted int64 array.
    """
    v = np.asarray(as_array("voltage", voltage, ndim=1, dtype=np.number, finite=True))
    above = v >= threshold
    starts = np.nonzero(above[1:] & ~above[:-1])[0] + 1
    if v.size and above[0]:
        starts = np.concatenate([[0], starts])
    ends = np.nonzero(~above[1:] & above[:-1])[0] + 1
    out = []
    for s in starts:
        e = ends[ends > s]
        e = int(e[0]) if e.size else v.size
        out.append(s + int(np.argmax(v[s:e])))
    return np.asarray(out, dtype=np.int64)


def _indices(name: str, x: ArrayLike) -> np.ndarray:
    """A 1-D array of sample indices as int64 (an empty list, of no dtype, is allowed)."""
    a = np.asarray(as_array(name, x, ndim=1, dtype=np.number))
    if a.size and a.dtype.kind not in "iu":
        raise ValueError(f"{name}: expected integer sample indices, received dtype {a.dtype}")
    return a.astype(np.int64)


def match_fraction(true_idx: ArrayLike, pred_idx: ArrayLike, *, tolerance: int) -> float:
    """Fraction of `true_idx` spikes matched one-to-one by a `pred_idx` spike within `tolerance`.

    Greedy in time order (each predicted spike is used at most once); 1.0 when
    there are no true spikes and no predicted ones, 0.0 when only predicted.
    """
    t = np.sort(_indices("true_idx", true_idx))
    p = np.sort(_indices("pred_idx", pred_idx))
    if t.size == 0:
        return 1.0 if p.size == 0 else 0.0
    used = np.zeros(p.size, dtype=bool)
    hits = 0
    for x in t:
        cand = np.nonzero((~used) & (np.abs(p - x) <= tolerance))[0]
        if cand.size:
            j = cand[np.argmin(np.abs(p[cand] - x))]
            used[j] = True
            hits += 1
    return hits / t.size
