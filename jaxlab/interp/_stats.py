"""Held-out metrics (weighted), bootstrap confidence intervals and grouped splits.

Every metric takes optional non-negative `weights` (n,): a 0/1 mask selects rows
inside `jit`, and integer counts replicate rows, which is how `bootstrap_ci`
resamples (rows or whole groups) without changing shapes. With unit weights they
equal scikit-learn's `r2_score`, `accuracy_score`, `roc_auc_score` and SciPy's
`spearmanr` (average ranks for ties).
"""

from __future__ import annotations

import functools
from collections.abc import Callable

import jax
import jax.numpy as jnp
import numpy as np
from jax.core import Tracer
from jaxtyping import Array, Bool, Float, Int, PRNGKeyArray

from .._core import (
    as_array,
    check_array,
    check_memory,
    check_positive_int,
    check_range,
    check_real,
)

__all__ = [
    "r2_score",
    "spearman",
    "accuracy",
    "auroc",
    "bootstrap_ci",
    "group_split",
    "group_kfold",
]


def _vectors(weights=None, **named):
    """The named `(n,)` arguments (and `weights`) as arrays of one length `n >= 1`, finite
    where concrete (inside `jit`, e.g. `bootstrap_ci`, only shapes are checked)."""
    sizes: dict[str, int] = {}
    out = [
        as_array(k, v, shape=("n",), sizes=sizes, finite=True, nonempty=True)
        for k, v in named.items()
    ]
    if weights is not None:
        weights = as_array("weights", weights, shape=("n",), sizes=sizes, finite=True, low=0.0)
    return (*out, weights)


def _concrete(x) -> np.ndarray | None:
    """x as a NumPy array when its values are known (None inside `jit` / `vmap`)."""
    return None if isinstance(x, Tracer) else np.asarray(x)


def _check_labels(name: str, x, *, binary: bool, hint: str) -> None:
    """Concrete `x` must hold integer labels ({0, 1} when `binary`): a ValueError naming
    `name` otherwise (scores or probabilities passed where labels belong)."""
    v = _concrete(x)
    if v is None or v.dtype == bool:
        return
    ok = np.all(v == np.round(v)) if np.issubdtype(v.dtype, np.floating) else True
    if ok and binary:
        ok = bool(np.all((v == 0) | (v == 1)))
    if not ok:
        kind = "binary labels (0/1)" if binary else "integer labels"
        shown = ", ".join(f"{float(t):g}" for t in np.unique(v)[:4])
        raise ValueError(f"{name}: expected {kind}, received values such as {shown}; {hint}")


def _w(weights, n, dtype):
    return jnp.ones((n,), dtype) if weights is None else jnp.asarray(weights).astype(dtype)


def _float(x):
    x = jnp.asarray(x)
    return x if jnp.issubdtype(x.dtype, jnp.floating) else x.astype(jnp.float32)


def _floats(*xs):
    """The arrays in one common float dtype (the widest float among them, else float32)."""
    xs = [_float(x) for x in xs]
    dt = jnp.result_type(*[x.dtype for x in xs])
    return [x.astype(dt) for x in xs]


def r2_score(
    y_true: Float[Array, " n"],
    y_pred: Float[Array, " n"],
    *,
    weights: Float[Array, " n"] | None = None,
) -> Float[Array, ""]:
    """Coefficient of determination `1 - sum w (y - p)^2 / sum w (y - mean_w y)^2`.

    **Arguments:** `y_true`, `y_pred` (n,); `weights` (n,) >= 0 (default 1).

    **Returns:** () R^2.
    """
    y_true, y_pred, weights = _vectors(weights, y_true=y_true, y_pred=y_pred)
    y, p = _floats(y_true, y_pred)
    w = _w(weights, y.shape[0], y.dtype)
    mean = jnp.sum(w * y) / jnp.sum(w)
    return 1 - jnp.sum(w * (y - p) ** 2) / jnp.sum(w * (y - mean) ** 2)


def accuracy(
    y_true: Int[Array, " n"], y_pred: Int[Array, " n"], *, weights: Float[Array, " n"] | None = None
) -> Float[Array, ""]:
    """Weighted fraction of `y_pred == y_true` (labels, not scores). **Returns:** ().

    Concrete `y_true` / `y_pred` holding non-integer values (probabilities or scores) are
    refused with a `ValueError` naming the argument: threshold or argmax them first.
    """
    y, y_pred, weights = _vectors(weights, y_true=y_true, y_pred=y_pred)
    hint = "accuracy compares labels: threshold (p > 0.5) or argmax scores first"
    _check_labels("y_true", y, binary=False, hint=hint)
    _check_labels("y_pred", y_pred, binary=False, hint=hint)
    w = _w(weights, y.shape[0], jnp.float32 if weights is None else _float(weights).dtype)
    return jnp.sum(w * (y == jnp.asarray(y_pred).astype(y.dtype)).astype(w.dtype)) / jnp.sum(w)


def _weight_below(values, weights, queries):
    """(sum of weights of values < q, sum of weights of values <= q) for each query."""
    order = jnp.argsort(values)
    sv, cw = (
        values[order],
        jnp.concatenate([jnp.zeros((1,), weights.dtype), jnp.cumsum(weights[order])]),
    )
    lo = cw[jnp.searchsorted(sv, queries, side="left")]
    hi = cw[jnp.searchsorted(sv, queries, side="right")]
    return lo, hi


def _ranks(x, w):
    # average rank of each row among the weighted (replicated) sample, 1-based
    lo, hi = _weight_below(x, w, x)
    return lo + (hi - lo + 1) / 2


def spearman(
    x: Float[Array, " n"], y: Float[Array, " n"], *, weights: Float[Array, " n"] | None = None
) -> Float[Array, ""]:
    """Spearman rank correlation (average ranks for ties; weights replicate rows).

    **Returns:** () correlation in [-1, 1].
    """
    x, y, weights = _vectors(weights, x=x, y=y)
    x, y = _floats(x, y)
    w = _w(weights, x.shape[0], x.dtype)
    rx, ry = _ranks(x, w), _ranks(y, w)
    sw = jnp.sum(w)
    rx = rx - jnp.sum(w * rx) / sw
    ry = ry - jnp.sum(w * ry) / sw
    return jnp.sum(w * rx * ry) / jnp.sqrt(jnp.sum(w * rx**2) * jnp.sum(w * ry**2))


def auroc(
    y_true: Int[Array, " n"],
    score: Float[Array, " n"],
    *,
    weights: Float[Array, " n"] | None = None,
) -> Float[Array, ""]:
    """Area under the ROC curve: P(score_pos > score_neg) + P(tie) / 2 (Mann-Whitney).

    **Arguments:** `y_true` (n,) binary labels (1 = positive), `score` (n,), `weights`.

    **Returns:** () AUROC in [0, 1].

    Concrete arguments are checked: `y_true` must hold 0/1 labels (a `ValueError` naming
    it otherwise, e.g. when `y_true` and `score` are swapped) and both classes (the AUROC
    of one class is undefined).
    """
    y_true, score, weights = _vectors(weights, y_true=y_true, score=score)
    _check_labels(
        "y_true",
        y_true,
        binary=True,
        hint="the argument order is auroc(y_true, score): are they swapped?",
    )
    v = _concrete(y_true)
    if v is not None and np.unique(v > 0).size < 2:
        raise ValueError(
            "y_true: expected both classes (0 and 1), received only "
            f"{int(v.reshape(-1)[0] > 0)}; the AUROC of one class is undefined"
        )
    s = _float(score)
    w = _w(weights, s.shape[0], s.dtype)
    pos = (jnp.asarray(y_true).astype(jnp.int32) > 0).astype(s.dtype)
    wp, wn = w * pos, w * (1 - pos)
    lo, hi = _weight_below(s, wn, s)
    return jnp.sum(wp * (lo + (hi - lo) / 2)) / (jnp.sum(wp) * jnp.sum(wn))


@functools.partial(jax.jit, static_argnames=("metric", "n_groups"))
def _resampled(metric, arrays, base, gid, p, keys, n_draw, *, n_groups):
    # compiled once per (metric, shapes): repeated intervals of one metric reuse it, also
    # over subsets (masks) with different numbers of groups to draw. n_groups draws of which
    # the first n_draw count are the n_draw draws of `choice(k, n_groups, (n_draw,), p=p)`:
    # threefry's bits for element i do not depend on the shape (jax_threefry_partitionable,
    # the default)
    def one(k):
        draw = jax.random.choice(k, n_groups, (n_groups,), p=p)
        keep = (jnp.arange(n_groups, dtype=n_draw.dtype) < n_draw).astype(base.dtype)
        counts = jnp.zeros((n_groups,), base.dtype).at[draw].add(keep)
        return metric(*arrays, weights=base * counts[gid])

    return jax.vmap(one)(keys)


def bootstrap_ci(
    metric: Callable[..., Array],
    *arrays,
    key: PRNGKeyArray,
    n_resamples: int = 1000,
    level: float = 0.95,
    groups: Int[Array, " n"] | None = None,
    weights: Float[Array, " n"] | None = None,
) -> tuple[Array, Array, Array]:
    """Percentile bootstrap confidence interval of a held-out metric.

    Efron & Tibshirani 1993. Rows (or, with `groups`, whole groups such as the
    tokens of one prompt) are resampled with replacement by integer weights, so
    `metric(*arrays, weights=w)` must accept weights (all metrics here do).

    **Arguments:**

    - `metric`: e.g. `r2_score`, `spearman`, `accuracy`, `auroc`.
    - `*arrays`: its positional arguments, each (n, ...).
    - `key`: PRNG key of the resampling.
    - `n_resamples`: bootstrap replicates.
    - `level`: two-sided coverage in (0, 1).
    - `groups`: (n,) int group ids resampled as units (default: rows).
    - `weights`: (n,) 0/1 mask of the rows to evaluate on (e.g. the test split).

    **Returns:** (estimate, low, high), each ().
    """
    if not arrays:
        raise ValueError("arrays: expected at least one array for the metric, received none")
    # lists, None, strings, complex and NaN are refused here, naming the argument
    arrays = tuple(
        as_array(f"arrays[{i}]", a, real=True, finite=True) for i, a in enumerate(arrays)
    )
    if arrays[0].ndim < 1:
        raise ValueError("arrays[0]: expected (n, ...) rows, received a scalar")
    n = arrays[0].shape[0]
    for i, a in enumerate(arrays):
        check_array(f"arrays[{i}]", a, shape=(n,) + a.shape[1:])
    n_resamples = check_positive_int("n_resamples", n_resamples)
    if not 0 < level < 1:
        raise ValueError(f"level: expected a number in (0, 1), received {level!r}")
    base = jnp.ones((n,), jnp.float32) if weights is None else _float(weights)
    check_array("weights", base, shape=(n,))
    check_range("weights", base, low=0)
    if groups is None:
        gid = jnp.arange(n)
    else:
        g = np.asarray(groups)
        check_array("groups", g, shape=(n,), dtype=np.integer)
        gid = jnp.asarray(np.unique(g, return_inverse=True)[1].reshape(-1))
    n_groups = int(jnp.max(gid)) + 1 if n else 0
    # every replicate at once: its key, resampled weights and the metric's row temporaries
    check_memory("n_resamples", float(n_resamples) * (8 + 4 * (n + n_groups) * (len(arrays) + 2)))
    # only groups with some evaluated row are resampled
    present = jnp.zeros((n_groups,), base.dtype).at[gid].add(base) > 0
    n_draw = int(jnp.sum(present))
    p = present.astype(base.dtype) / n_draw
    stats = _resampled(
        metric,
        tuple(jnp.asarray(a) for a in arrays),
        base,
        gid,
        p,
        jax.random.split(key, n_resamples),
        jnp.asarray(n_draw, jnp.int32),
        n_groups=n_groups,
    )
    alpha = (1 - level) / 2
    low, high = jnp.nanquantile(stats, jnp.asarray([alpha, 1 - alpha], stats.dtype))
    return metric(*arrays, weights=base), low, high


def _group_ids(groups):
    g = np.asarray(groups)
    if g.ndim != 1 or g.shape[0] == 0:
        raise ValueError(f"groups: expected a non-empty (n,) array, received shape {g.shape}")
    return np.unique(g, return_inverse=True)[1].reshape(-1)


def group_split(
    groups: Int[Array, " n"], *, key: PRNGKeyArray, test_fraction: float = 0.25
) -> Bool[Array, " n"]:
    """Train mask of a random split that keeps every group (e.g. prompt) on one side.

    **Arguments:** `groups` (n,) ids; `key`; `test_fraction` of the groups held out.

    **Returns:** (n,) bool, True for training rows (at least one group on each side).
    """
    gid = _group_ids(groups)
    n_groups = int(gid.max()) + 1
    if n_groups < 2:
        raise ValueError(f"groups: expected at least 2 distinct groups, received {n_groups}")
    test_fraction = check_real(
        "test_fraction", test_fraction, low=0, high=1, low_inclusive=False, high_inclusive=False
    )
    n_test = min(max(round(test_fraction * n_groups), 1), n_groups - 1)
    perm = np.asarray(jax.random.permutation(key, n_groups))
    is_test = np.zeros(n_groups, bool)
    is_test[perm[:n_test]] = True
    return jnp.asarray(~is_test[gid])


def group_kfold(groups: Int[Array, " n"], n_folds: int, *, key: PRNGKeyArray) -> Int[Array, " n"]:
    """Fold id in [0, n_folds) of every row; a group's rows share one fold.

    **Arguments:** `groups` (n,) ids; `n_folds` >= 2 (at most the number of groups); `key`.

    **Returns:** (n,) int32 fold ids (groups dealt round-robin in a random order).
    """
    gid = _group_ids(groups)
    n_folds = check_positive_int("n_folds", n_folds)
    n_groups = int(gid.max()) + 1
    if not 2 <= n_folds <= n_groups:
        raise ValueError(f"n_folds: expected 2 <= n_folds <= {n_groups} groups, received {n_folds}")
    perm = np.asarray(jax.random.permutation(key, n_groups))
    fold_of_group = np.empty(n_groups, np.int32)
    fold_of_group[perm] = np.arange(n_groups) % n_folds
    return jnp.asarray(fold_of_group[gid])
