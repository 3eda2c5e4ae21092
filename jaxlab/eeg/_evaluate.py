"""Evaluation protocols (P10): leave-subjects-out folds, balanced accuracy, macro-F1,
and confidence intervals across folds."""

from __future__ import annotations

import jax
import numpy as np
import scipy.stats

from jaxlab._core import as_array, check_positive_int

__all__ = ["leave_subjects_out", "balanced_accuracy", "macro_f1", "fold_ci"]


def leave_subjects_out(subject, n_folds: int, *, key):
    """Split rows into `n_folds` folds by subject: every subject's rows are in exactly
    one test fold and never in that fold's training set.

    **Arguments:** `subject` `(N,)` integer subject id per row; `n_folds` >= 2; `key`.

    **Returns:** list of `(train_idx, test_idx)` integer numpy arrays.
    """
    if subject is None or isinstance(subject, str | bytes):
        raise ValueError(f"subject: expected a 1-D integer array, received {subject!r:.60}")
    subject = np.asarray(subject)
    if subject.ndim != 1 or not np.issubdtype(subject.dtype, np.integer):
        raise ValueError(
            f"subject: expected a 1-D integer array, got {subject.dtype} {subject.shape}"
        )
    ids = np.unique(subject)
    n_folds = check_positive_int("n_folds", n_folds)
    if not 2 <= n_folds <= len(ids):
        raise ValueError(
            f"n_folds: expected an int in [2, {len(ids)}] (number of subjects), got {n_folds!r}"
        )
    perm = np.asarray(jax.random.permutation(key, len(ids)))
    folds = np.array_split(ids[perm], n_folds)
    out = []
    for test_ids in folds:
        test = np.isin(subject, test_ids)
        out.append((np.flatnonzero(~test), np.flatnonzero(test)))
    return out


def _check_labels(y_true, y_pred):
    y_true, y_pred = np.asarray(y_true), np.asarray(y_pred)
    if y_true.shape != y_pred.shape or y_true.ndim != 1 or y_true.size == 0:
        raise ValueError(
            f"y_true/y_pred: expected equal non-empty 1-D shapes, got "
            f"{y_true.shape} and {y_pred.shape}"
        )
    return y_true, y_pred


def balanced_accuracy(y_true, y_pred) -> float:
    """Mean per-class recall over the classes present in `y_true`."""
    y_true, y_pred = _check_labels(y_true, y_pred)
    return float(np.mean([np.mean(y_pred[y_true == c] == c) for c in np.unique(y_true)]))


def macro_f1(y_true, y_pred) -> float:
    """Unweighted mean F1 over the classes in `y_true` or `y_pred` (F1 = 0 when undefined)."""
    y_true, y_pred = _check_labels(y_true, y_pred)
    f1s = []
    for c in np.union1d(y_true, y_pred):
        tp = np.sum((y_pred == c) & (y_true == c))
        denom = np.sum(y_pred == c) + np.sum(y_true == c)
        f1s.append(0.0 if denom == 0 else 2 * tp / denom)
    return float(np.mean(f1s))


def fold_ci(scores, *, level: float = 0.95):
    """Mean and Student-t confidence interval across fold scores: `(mean, low, high)`."""
    s = np.asarray(as_array("scores", scores, ndim=1, dtype=np.number, finite=True))
    if np.iscomplexobj(s):  # float64 would drop the imaginary part silently
        raise ValueError(f"scores: expected real fold scores, received dtype {s.dtype}")
    s = s.astype(np.float64)
    if s.ndim != 1 or s.size < 2:
        raise ValueError(f"scores: expected >= 2 fold scores, got shape {s.shape}")
    m = float(s.mean())
    half = float(scipy.stats.t.ppf(0.5 + level / 2, s.size - 1) * s.std(ddof=1) / np.sqrt(s.size))
    return m, m - half, m + half
