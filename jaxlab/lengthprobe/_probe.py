"""Length probes: cross-fitted ridge read-outs over layers, and the transfer matrix.

`cross_fit` gives every row an out-of-fold prediction: prompts are dealt into k folds
(`jaxlab.interp.group_kfold`), each fold's probes are fitted on the other folds at every
layer in one vmapped call (`jaxlab.interp.probe_sweep`, penalty by GCV), and the layer of a
fold is the one with the smallest GCV score, computed on its training rows only, so no
held-out row chooses anything.

`transfer_matrix` fits one probe per source family (on its training prompts) and scores it,
without refitting, on every target family's held-out prompts; `directional_transfer` does
the same between two groups of families (natural -> synthetic and back) against the
position-only baseline fitted on the same source rows.

Papers: Alain & Bengio 2016 (linear probes); Piotrowski et al. 2025 (remaining tokens from
hidden states); the P17 abstract (transfer and its asymmetry).
"""

from __future__ import annotations

from collections.abc import Callable

import jax
import jax.numpy as jnp
import numpy as np

from .. import interp
from .._core import as_array, check_array, check_ids, check_size
from ._baselines import position_only

__all__ = ["cross_fit", "transfer_matrix", "directional_transfer"]

_PENALTIES = tuple(10.0 ** np.arange(-2, 6))


def _acts(acts):
    a = as_array("acts", acts, finite=True)
    if a.ndim == 2:
        a = a[None]
    if not jnp.issubdtype(a.dtype, jnp.floating):
        a = a.astype(jnp.float32)
    check_array("acts", a, ndim=3)
    return a.astype(jnp.float32)


def cross_fit(
    acts,
    y,
    *,
    groups,
    key: jax.Array,
    n_folds: int = 5,
    penalties=_PENALTIES,
) -> dict[str, np.ndarray]:
    """Out-of-fold ridge predictions of `y` from activations at several layers.

    **Arguments:**

    - `acts`: (L, n, d) activations (or (n, d) for one layer).
    - `y`: (n,) targets (e.g. log1p lengths).
    - `groups`: (n,) prompt ids; a prompt's rows share a fold.
    - `key`: PRNG key of the fold assignment.
    - `n_folds`: an integer k in [2, n].
    - `penalties`: candidate ridge penalties (GCV).

    **Returns:** {"prediction": (n,) out-of-fold at each fold's GCV-chosen layer,
    "by_layer": (L, n) out-of-fold at every layer, "layer": (k,) chosen layer index per
    fold, "fold": (n,) fold ids}.
    """
    a = _acts(acts)
    n = a.shape[1]
    yv = as_array("y", y, shape=(n,), finite=True).astype(jnp.float32)
    g = np.asarray(groups)
    check_array("groups", g, shape=(n,))
    n_folds = check_size("n_folds", n_folds, cap=n, why="the number of rows")
    if n_folds < 2:
        raise ValueError(f"n_folds: expected >= 2, received {n_folds}")
    folds = np.asarray(interp.group_kfold(jnp.asarray(g), n_folds, key=key))
    by_layer = np.zeros((a.shape[0], n), np.float32)
    pred = np.zeros(n, np.float32)
    chosen = np.zeros(n_folds, np.int64)
    for f in range(n_folds):
        test = folds == f
        out = interp.probe_sweep(a, yv, train=jnp.asarray(~test), penalties=penalties)
        p = np.asarray(out["prediction"], np.float32)
        by_layer[:, test] = p[:, test]
        chosen[f] = int(np.argmin(np.asarray(out["gcv"])))
        pred[test] = p[chosen[f], test]
    return {"prediction": pred, "by_layer": by_layer, "layer": chosen, "fold": folds}


def _fit_predict(x, y, train, penalties):
    probe, _ = interp.ridge_gcv(x, y, penalties=penalties, weights=jnp.asarray(train, jnp.float32))
    return np.asarray(x @ probe.coef + probe.intercept, np.float64)


def _spearman(y, p, weights=None):
    return float(interp.spearman(jnp.asarray(y), jnp.asarray(p), weights=weights))


def transfer_matrix(
    x,
    y,
    *,
    families,
    train,
    metric: Callable = _spearman,
    penalties=_PENALTIES,
) -> np.ndarray:
    """Probe trained on one family, scored on another (no refit).

    **Arguments:**

    - `x`: (n, d) activations of one layer.
    - `y`: (n,) targets.
    - `families`: (n,) int family ids 0..F-1 (F <= n; negative ids raise).
    - `train`: (n,) bool; sources fit on their training rows, targets are scored on their
      held-out rows (so the diagonal is held-out, in-family performance). A family without
      training rows (or with fewer than 2 held-out rows) gets a NaN row (column).
    - `metric`: `metric(y_true, y_pred) -> float` on the target's held-out rows
      (default Spearman).
    - `penalties`: ridge penalties (GCV on the source rows).

    **Returns:** (F, F) matrix, row = source family, column = target family. `x`, `y`
    finite; `train` a bool array; other inputs raise a `ValueError` naming the argument.
    """
    xv = as_array("x", x, ndim=2, finite=True).astype(jnp.float32)
    n = xv.shape[0]
    yv = as_array("y", y, shape=(n,), finite=True).astype(jnp.float32)
    fam = check_ids("families", families, n, what="family ids")
    check_array("families", fam, shape=(n,))
    tr = np.asarray(as_array("train", train, shape=(n,), dtype=np.bool_))
    if not callable(metric):
        raise ValueError(f"metric: expected a callable, received {type(metric).__name__}")
    n_fam = int(fam.max()) + 1
    out = np.full((n_fam, n_fam), np.nan)
    yn = np.asarray(yv, np.float64)
    for s in range(n_fam):
        src = tr & (fam == s)
        if not src.any():
            continue
        p = _fit_predict(xv, yv, src, penalties)
        for t in range(n_fam):
            tgt = ~tr & (fam == t)
            if tgt.sum() >= 2:
                out[s, t] = metric(yn[tgt], p[tgt])
    return out


def directional_transfer(
    x,
    y,
    positions,
    *,
    source,
    target,
    train,
    penalties=_PENALTIES,
) -> dict[str, np.ndarray]:
    """Probe and position-only baseline fitted on `source` training rows, applied to the
    `target` held-out rows.

    **Arguments:** `x` (n, d); `y` (n,) log1p remaining lengths; `positions` (n,) position
    in the completion; `source`, `target` (n,) bool row groups (e.g. natural / synthetic
    families); `train` (n,) bool. `x`, `y` finite, every (n,) argument of length n;
    anything else raises a `ValueError` naming the argument.

    **Returns:** {"rows": (m,) indices of the scored rows, "probe": (m,) predictions,
    "baseline": (m,) position-only predictions}.
    """
    xv = as_array("x", x, ndim=2, finite=True).astype(jnp.float32)
    n = xv.shape[0]
    yv = as_array("y", y, shape=(n,), finite=True).astype(jnp.float32)
    source, target, train = (
        np.asarray(as_array(name, v, shape=(n,), dtype=np.bool_))
        for name, v in (("source", source), ("target", target), ("train", train))
    )
    as_array("positions", positions, shape=(n,))
    src = source & train
    tgt = target & ~train
    if not src.any() or not tgt.any():
        raise ValueError(
            "source/target: expected training rows in source and held-out rows in target"
        )
    p = _fit_predict(xv, yv, src, penalties)
    base = position_only(np.asarray(yv), positions, src)
    rows = np.flatnonzero(tgt)
    return {"rows": rows, "probe": p[rows], "baseline": base[rows]}
