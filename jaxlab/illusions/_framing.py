"""Prompt-level framing (an analytic vs a holistic instruction) and the SAE latents it
moves: paired shift statistics with family-wise permutation p-values and bootstrap
intervals, and the overlap of two latent sets against a hypergeometric null.

Papers: the analytic/holistic contrast follows dual-process accounts of illusory
correlation (e.g. Hamilton & Gifford 1976 explain it by distinctiveness, and
instructions to count reduce it); the paired sign-flip test with the max statistic is
the step-down family-wise permutation test of Westfall & Young (1993).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import scipy.stats
from jaxtyping import Array, Float, Int, PRNGKeyArray

from .._core import (
    as_array,
    check_array,
    check_memory,
    check_positive_int,
    check_real,
    check_size,
)

__all__ = ["INSTRUCTIONS", "framed_context", "framing_feature_shift", "latent_overlap"]

# instruction paragraphs put before a presentation's context ("" = the plain prompt)
INSTRUCTIONS: dict[str, str] = {
    "none": "",
    "analytic": ("Think analytically: count the statements for each group before answering."),
    "holistic": "Go with your overall impression of each group.",
}
"""Instruction paragraphs put before a presentation's context: name -> text (`""`: the plain
prompt)."""

# more resamples than this add nothing a p-value or a percentile interval can show
MAX_RESAMPLES = 10_000_000


def framed_context(context: str, instruction: str) -> str:
    """`context` with `instruction` as its first paragraph; an empty `instruction` gives
    `context` unchanged (so the plain prompt's scores are reproduced exactly).

    **Arguments:** `context` (non-empty str); `instruction` (str, may be empty; e.g. a
    value of `INSTRUCTIONS`).

    **Returns:** str.
    """
    if not isinstance(context, str) or not context:
        raise ValueError(f"context: expected a non-empty string, received {context!r}")
    if not isinstance(instruction, str):
        raise ValueError(f"instruction: expected a string, received {instruction!r}")
    return f"{instruction}\n\n{context}" if instruction else context


def _group_sums(diff: np.ndarray, groups: np.ndarray | None) -> tuple[np.ndarray, np.ndarray]:
    """(G, m) summed differences and (G,) pair counts per resampling unit."""
    if groups is None:
        return diff, np.ones(diff.shape[0])
    _, inv = np.unique(groups, return_inverse=True)
    sums = np.zeros((int(inv.max()) + 1, diff.shape[1]))
    np.add.at(sums, inv, diff)
    return sums, np.bincount(inv).astype(np.float64)


def framing_feature_shift(
    z_a: Float[Array, "n m"],
    z_b: Float[Array, "n m"],
    *,
    key: PRNGKeyArray,
    k: int = 16,
    groups: Int[Array, " n"] | None = None,
    resamples: int = 2000,
    level: float = 0.95,
) -> dict[str, np.ndarray]:
    """The k latents whose mean activation changes most between two framings of the same
    prompts (row i of `z_a` and of `z_b` is one prompt under framing a and b).

    The statistic of latent j is the mean paired difference `mean_i(z_a - z_b)[:, j]`; the
    top k by absolute value are reported. Their p-values come from a paired sign-flip
    permutation test (under the null that the framing changes nothing, a and b are
    exchangeable within a pair) with the step-down max statistic: for the latent of rank
    r, p_r = (1 + #{perm: max over the latents of rank >= r of |perm mean| >= |mean_r|})
    / (1 + resamples), made non-decreasing in r; family-wise over all m latents, so
    picking the top k does not inflate them. The intervals are percentile bootstrap
    intervals of each reported mean (resampling pairs; not corrected for the selection).
    With `groups`, pairs of one group (e.g. the questions of one presentation) are flipped
    and resampled together.

    **Arguments:**

    - `z_a`, `z_b`: (n, m) activations (e.g. SAE latents at the answer position), n >= 2.
    - `key`: randomness of the permutations and resamples.
    - `k`: number of latents reported (<= m).
    - `groups`: optional (n,) ints, the resampling unit of each pair (>= 2 distinct).
    - `resamples`: permutations and bootstrap resamples.
    - `level`: two-sided coverage of the intervals.

    **Returns:** {"latents": (k,) int64 ordered by |shift|; "shift": (k,) mean a - b;
    "ci_low", "ci_high": (k,); "p_value": (k,) family-wise; "mean_shift": (m,) mean
    a - b of every latent}.
    """
    a = np.asarray(as_array("z_a", z_a), np.float64)
    b = np.asarray(as_array("z_b", z_b), np.float64)
    check_array("z_a", a, ndim=2)
    check_array("z_b", b, shape=a.shape)
    for name, x in (("z_a", a), ("z_b", b)):
        if not np.isfinite(x).all():
            raise ValueError(f"{name}: expected finite activations, received NaN or inf")
    n, m = a.shape
    if n < 2:
        raise ValueError(f"z_a: expected at least 2 paired rows, received {n}")
    check_positive_int("k", k)
    if k > m:
        raise ValueError(f"k: expected at most {m} (the number of latents), received {k}")
    check_size("resamples", resamples, cap=MAX_RESAMPLES, why="illusions.MAX_RESAMPLES")
    level = check_real("level", level, low=0.0, high=1.0, low_inclusive=False, high_inclusive=False)
    g = None
    if groups is not None:
        g = np.asarray(groups)
        check_array("groups", g, shape=(n,), dtype=np.integer)
        if np.unique(g).size < 2:
            raise ValueError("groups: expected at least 2 distinct groups, received 1")
    sums, counts = _group_sums(a - b, g)
    mean = sums.sum(0) / n
    top = np.argsort(-np.abs(mean), kind="stable")[:k]
    k_perm, k_boot = jax.random.split(key)
    G = sums.shape[0]
    # the sign matrix, the (R, m) permuted means and the (R, G) resampling weights
    check_memory("resamples", 8.0 * resamples * (m + 2 * G + k))
    signs = np.asarray(jax.random.rademacher(k_perm, (resamples, G), dtype=jnp.float32))
    # step-down max-T: the null of rank r is the max over the latents ranked r and below
    ranked = np.argsort(-np.abs(mean), kind="stable")
    perm = np.abs(signs.astype(np.float64) @ sums[:, ranked[:]] / n)  # (R, m) by rank
    null_max = np.maximum.accumulate(perm[:, ::-1], axis=1)[:, ::-1][:, :k]
    exceed = (null_max >= np.abs(mean[top])[None, :] - 1e-12).sum(0)
    p = np.maximum.accumulate((1 + exceed) / (1 + resamples))
    draws = np.asarray(jax.random.randint(k_boot, (resamples, G), 0, G))
    w = np.zeros((resamples, G))
    np.add.at(w, (np.arange(resamples)[:, None], draws), 1.0)
    boot = (w @ sums[:, top]) / (w @ counts)[:, None]
    alpha = (1 - level) / 2
    lo, hi = np.quantile(boot, [alpha, 1 - alpha], axis=0)
    return {
        "latents": top.astype(np.int64),
        "shift": mean[top],
        "ci_low": lo,
        "ci_high": hi,
        "p_value": p,
        "mean_shift": mean,
    }


def latent_overlap(
    first: Int[Array, " k1"], second: Int[Array, " k2"], *, population: int
) -> dict[str, float]:
    """Overlap of two latent sets against the overlap of two independent random sets.

    Under the null, `second` is a uniform draw of its size from `population` latents
    independent of `first`, so the overlap is hypergeometric with mean k1 k2 / M.

    **Arguments:** `first`, `second` distinct ints in [0, population) (one index or a
    1-D sequence, non-empty); `population` M,
    the number of latents either set could have come from (e.g. those alive at the
    read-out position).

    **Returns:** {"overlap": count, "expected": k1 k2 / M, "p_value": P(overlap >=
    observed) under the null}.
    """
    check_positive_int("population", population)
    sets = []
    for name, x in (("first", first), ("second", second)):
        arr = np.asarray(x)
        check_array(name, arr.reshape(-1) if arr.ndim == 0 else arr, ndim=1, dtype=np.integer)
        arr = arr.reshape(-1)
        if arr.size == 0 or np.unique(arr).size != arr.size:
            raise ValueError(f"{name}: expected distinct latent indices, received {arr.tolist()}")
        if arr.min() < 0 or arr.max() >= population:
            raise ValueError(
                f"{name}: expected indices in [0, {population}), received {arr.tolist()}"
            )
        sets.append(set(arr.tolist()))
    k1, k2 = len(sets[0]), len(sets[1])
    overlap = len(sets[0] & sets[1])
    return {
        "overlap": float(overlap),
        "expected": k1 * k2 / population,
        "p_value": float(scipy.stats.hypergeom.sf(overlap - 1, population, k1, k2)),
    }
