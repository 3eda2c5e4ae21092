"""Baselines a length probe must beat (all fitted on training rows, in log1p space).

- `family_mean`: the mean log1p length of the row's family (the dataset-mean baseline);
- `prompt_length_fit`: log1p length linear in the number of prompt tokens (TRAIL-style
  prompt-only prediction, reduced to its cheapest feature);
- `bag_of_words`: ridge on prompt token counts (the P17 "statistical baseline");
- `position_only`: for remaining length, the mean log1p remaining length of training rows
  at the same position in the completion (per family when families are given) — a
  predictor that sees where it is but nothing of the content.

Returned predictions are in log1p space, like the probes'.
"""

from __future__ import annotations

from collections.abc import Sequence

import jax.numpy as jnp
import numpy as np

from .. import interp
from .._core import (
    as_array,
    check_array,
    check_ids,
    check_lengths,
    check_memory,
    check_positive_int,
)

__all__ = ["family_mean", "prompt_length_fit", "bag_of_words", "bow_features", "position_only"]


def _mask(name, train, n):
    m = np.asarray(train)
    check_array(name, m, shape=(n,), dtype=np.bool_)
    if not m.any():
        raise ValueError(f"{name}: expected some training rows, received none")
    return m


def _targets(name, y) -> np.ndarray:
    """(n,) finite targets as float64."""
    return np.asarray(as_array(name, y, ndim=1, finite=True, nonempty=True), np.float64)


def _id_lists(name, prompts) -> list[list[int]]:
    """A sequence of token-id lists (not a bare string), each of integer ids >= 0."""
    if isinstance(prompts, str | bytes) or not hasattr(prompts, "__len__"):
        raise ValueError(f"{name}: expected a sequence of id lists, received {prompts!r:.60}")
    out = []
    for p in prompts:
        if isinstance(p, str | bytes):
            raise ValueError(f"{name}: expected id lists, received the string {p!r:.40}")
        out.append(check_ids(name, p, None, what="token ids").reshape(-1).tolist())
    return out


def family_mean(y: np.ndarray, families: np.ndarray, train: np.ndarray) -> np.ndarray:
    """Per-family mean of `y` over training rows (the pooled mean for unseen families).

    **Arguments:** `y` (n,) finite targets; `families` (n,) integer family ids >= 0;
    `train` (n,) bool with at least one True. Anything else raises a `ValueError` naming
    the argument.

    **Returns:** (n,) predictions.
    """
    y = _targets("y", y)
    f = check_ids("families", families, None, what="family ids")
    check_array("families", f, shape=y.shape)
    m = _mask("train", train, y.shape[0])
    pooled = y[m].mean()
    out = np.full(y.shape, pooled)
    for g in np.unique(f):
        sel = m & (f == g)
        if sel.any():
            out[f == g] = y[sel].mean()
    return out


def prompt_length_fit(y: np.ndarray, prompt_lengths: np.ndarray, train: np.ndarray) -> np.ndarray:
    """Least squares of `y` on the prompt's token count (training rows).

    **Arguments:** `y` (n,) finite targets; `prompt_lengths` (n,) finite lengths >= 0 (token
    counts, or fractional means over samples);
    `train` (n,) bool with at least one True (else a `ValueError` naming the argument).

    **Returns:** (n,) predictions.
    """
    y = _targets("y", y)
    x = np.asarray(as_array("prompt_lengths", prompt_lengths, finite=True, low=0.0), np.float64)
    check_array("prompt_lengths", x, shape=y.shape)
    m = _mask("train", train, y.shape[0])
    a = np.stack([x[m], np.ones(m.sum())], 1)
    coef, *_ = np.linalg.lstsq(a, y[m], rcond=None)
    return coef[0] * x + coef[1]


def bow_features(
    prompts: Sequence[Sequence[int]], train: np.ndarray, *, max_features: int = 512
) -> np.ndarray:
    """Token-count features of prompts over the most frequent training-prompt tokens.

    **Arguments:** `prompts` N id lists (integer ids >= 0; not a string); `train` (N,) bool;
    `max_features` vocabulary size, a positive integer (tokens ranked by the number of
    training prompts containing them). Anything else raises a `ValueError` naming it.

    **Returns:** (N, V) float32 log1p counts, V <= max_features.
    """
    prompts = _id_lists("prompts", prompts)
    max_features = check_positive_int("max_features", max_features)
    m = _mask("train", train, len(prompts))
    df: dict[int, int] = {}
    for p, t in zip(prompts, m, strict=True):
        if t:
            for tok in set(p):
                df[tok] = df.get(tok, 0) + 1
    vocab = sorted(df, key=lambda t: (-df[t], t))[:max_features]
    col = {t: j for j, t in enumerate(vocab)}
    x = np.zeros((len(prompts), len(vocab)), np.float32)
    for i, p in enumerate(prompts):
        for tok in p:
            j = col.get(tok)
            if j is not None:
                x[i, j] += 1
    return np.log1p(x)


def bag_of_words(
    y: np.ndarray, prompts: Sequence[Sequence[int]], train: np.ndarray, *, max_features: int = 512
) -> np.ndarray:
    """Ridge (penalty by GCV, `jaxlab.interp.ridge_gcv`) of `y` on `bow_features`.

    **Arguments:** `y` (n,) finite targets; `prompts`, `train`, `max_features` as in
    `bow_features` (`prompts` one per row of `y`).

    **Returns:** (n,) predictions.
    """
    y = _targets("y", y).astype(np.float32)
    prompts = _id_lists("prompts", prompts)
    check_lengths(y=y, prompts=prompts)
    m = _mask("train", train, y.shape[0])
    x = bow_features(prompts, m, max_features=max_features)
    probe, _ = interp.ridge_gcv(jnp.asarray(x), jnp.asarray(y), weights=jnp.asarray(m, jnp.float32))
    return np.asarray(jnp.asarray(x) @ probe.coef + probe.intercept, np.float64)


def position_only(
    y: np.ndarray,
    positions: np.ndarray,
    train: np.ndarray,
    *,
    families: np.ndarray | None = None,
) -> np.ndarray:
    """Mean training target at each completion position (per family if given).

    Positions beyond the longest training completion take the value at the largest
    training position (of the family); families without training rows use the pooled
    curve.

    **Arguments:** `y` (n,) finite targets (e.g. log1p remaining length); `positions` (n,)
    integer positions >= 0 inside the completion; `train` (n,) bool; `families` (n,)
    integer ids >= 0 or None. Anything else raises a `ValueError` naming the argument.

    **Returns:** (n,) predictions.
    """
    y = _targets("y", y)
    pos = check_ids("positions", positions, None, what="positions")
    check_array("positions", pos, shape=y.shape)
    check_memory("positions", 8.0 * 3 * (int(pos.max()) + 1))  # the per-position curve
    m = _mask("train", train, y.shape[0])
    fam = (
        np.zeros(y.shape, np.int64)
        if families is None
        else check_ids("families", families, None, what="family ids")
    )
    check_array("families", fam, shape=y.shape)

    def curve(sel):
        top = int(pos[sel].max()) + 1
        s = np.bincount(pos[sel], weights=y[sel], minlength=top)
        c = np.bincount(pos[sel], minlength=top)
        means = np.where(c > 0, s / np.maximum(c, 1), np.nan)
        # fill holes with the previous position's value (forward fill)
        idx = np.where(c > 0, np.arange(top), 0)
        np.maximum.accumulate(idx, out=idx)
        return means[idx]

    pooled = curve(m)
    out = np.empty(y.shape)
    for g in np.unique(fam):
        rows = fam == g
        sel = m & rows
        c = curve(sel) if sel.any() else pooled
        out[rows] = c[np.minimum(pos[rows], c.shape[0] - 1)]
    return out
