"""Read-out statistics: phi of a 2x2 table, soft attribution tables from option
probabilities, expected answers, frequency-estimate bias and a t interval over orders.

Phi (the Pearson correlation of two binary variables) is how Hamilton & Gifford (1976)
scored the attribution task; a table of expected counts (summing each statement's
probability of being attributed to the minority) gives phi of a probabilistic answerer.
"""

from __future__ import annotations

import jax
import jax.core
import jax.numpy as jnp
import numpy as np
import scipy.stats
from jax.typing import ArrayLike
from jaxtyping import Array, Bool, Float

from .._core import as_array, check_array, check_finite, check_range, check_real

__all__ = [
    "phi_coefficient",
    "attribution_table",
    "attribution_phi",
    "option_probabilities",
    "expected_answer",
    "frequency_bias",
    "mean_ci",
]


def phi_coefficient(table: Float[ArrayLike, "2 2"]) -> Float[Array, ""]:
    """Phi of a 2x2 table `[[a, b], [c, d]]`: `(ad - bc) / sqrt((a+b)(c+d)(a+c)(b+d))`.

    With rows (majority, minority) and columns (desirable, undesirable), phi > 0 means the
    minority is associated with undesirable behaviour (the illusory correlation).

    **Arguments:** `table` (2, 2) non-negative counts (expected counts allowed).

    **Returns:** () phi in [-1, 1]; `ValueError` when a row or column sums to zero.
    """
    t = as_array("table", table)
    check_array("table", t, shape=(2, 2))
    if not jnp.issubdtype(t.dtype, jnp.floating):
        t = t.astype(jnp.result_type(float))  # counts: the default float (f64 under x64)
    check_finite("table", t)
    check_range("table", t, low=0)
    if not isinstance(t, jax.core.Tracer):
        margins = np.r_[np.asarray(t).sum(0), np.asarray(t).sum(1)]
        if not (margins > 0).all():
            raise ValueError(f"table: every row and column must have a positive sum, received {t}")
    return _phi(t)


@jax.jit
def _phi(t):
    num = t[0, 0] * t[1, 1] - t[0, 1] * t[1, 0]
    den = jnp.sqrt(jnp.sum(t[0]) * jnp.sum(t[1]) * jnp.sum(t[:, 0]) * jnp.sum(t[:, 1]))
    return num / den


def attribution_table(
    p_minority: Float[ArrayLike, " n"], desirable: Bool[ArrayLike, " n"]
) -> Float[Array, "2 2"]:
    """Expected 2x2 table of an answerer attributing statement i to the minority with
    probability `p_minority[i]`: rows (attributed majority, minority), columns
    (desirable, undesirable).

    **Arguments:** `p_minority` (n,) in [0, 1]; `desirable` (n,) bool.

    **Returns:** (2, 2) expected counts (0/1 probabilities give the hard table).
    """
    p = as_array("p_minority", p_minority)
    if not jnp.issubdtype(p.dtype, jnp.floating):
        p = p.astype(jnp.float32)
    sizes = check_array("p_minority", p, ndim=1)
    d = as_array("desirable", desirable)
    check_array("desirable", d, shape=(p.shape[0],), sizes=sizes, dtype=jnp.bool_)
    check_finite("p_minority", p)
    check_range("p_minority", p, low=0, high=1)
    return _table(p, d)


@jax.jit
def _table(p, d):
    df = d.astype(p.dtype)
    minority = jnp.stack([p @ df, p @ (1 - df)])
    majority = jnp.stack([(1 - p) @ df, (1 - p) @ (1 - df)])
    return jnp.stack([majority, minority])


def attribution_phi(
    p_minority: Float[ArrayLike, " n"], desirable: Bool[ArrayLike, " n"]
) -> Float[Array, ""]:
    """Phi between attributed group and desirability (`phi_coefficient` of
    `attribution_table`); > 0: undesirable behaviours go to the minority.

    **Arguments:** `p_minority` (n,) in [0, 1]; `desirable` (n,) bool.

    **Returns:** () phi.
    """
    return phi_coefficient(attribution_table(p_minority, desirable))


def option_probabilities(loglik: Float[ArrayLike, "... K"]) -> Float[Array, "... K"]:
    """Softmax of option log-likelihoods over the last axis (the answer distribution
    restricted to the options).

    **Arguments:** `loglik` (..., K) log-likelihoods (e.g. `jaxlab.lm.score(...).sum[i]`).

    **Returns:** (..., K) probabilities summing to 1.
    """
    x = as_array("loglik", loglik)
    check_array("loglik", x, dtype=jnp.floating)
    if x.ndim == 0 or x.shape[-1] == 0:
        raise ValueError(f"loglik: expected (..., K) with K >= 1 options, received {x.shape}")
    check_finite("loglik", x)
    return jax.nn.softmax(x, axis=-1)


def expected_answer(
    loglik: Float[ArrayLike, " K"], values: Float[ArrayLike, " K"]
) -> Float[Array, ""]:
    """Mean of the option `values` under `option_probabilities(loglik)` (e.g. an
    expected count or rating).

    **Arguments:** `loglik` (K,) (1-D: a batch raises); `values` (K,) the number each
    option stands for (finite).

    **Returns:** () expected value.
    """
    as_array("loglik", loglik, ndim=1)
    p = option_probabilities(loglik)
    v = as_array("values", values)
    check_array("values", v, shape=p.shape)
    check_finite("values", v)
    return p @ v.astype(p.dtype)


def frequency_bias(
    estimates: Float[ArrayLike, " 2"], true_counts: Float[ArrayLike, " 2"]
) -> dict[str, Array]:
    """Bias of estimated undesirable counts (majority, minority) against the true ones.

    **Arguments:** `estimates` (2,) estimated undesirable behaviours of (majority,
    minority); `true_counts` (2,) the true counts (8 and 4 in the original).

    **Returns:** {"error": (2,) estimate - truth, "ratio": (2,) estimate / truth,
    "minority_excess": () ratio[minority] - ratio[majority] (> 0: the minority's
    undesirable behaviours are over-estimated relative to the majority's)}.
    """
    e, t = as_array("estimates", estimates), as_array("true_counts", true_counts)
    e = e if jnp.issubdtype(e.dtype, jnp.floating) else e.astype(jnp.float32)
    check_array("estimates", e, shape=(2,))
    check_array("true_counts", t, shape=(2,))
    check_finite("estimates", e)
    check_finite("true_counts", t)
    check_range("estimates", e, low=0)
    t = t.astype(e.dtype)
    check_range("true_counts", t, low=0, low_inclusive=False)
    ratio = e / t
    return {"error": e - t, "ratio": ratio, "minority_excess": ratio[1] - ratio[0]}


def mean_ci(values: Float[ArrayLike, " n"], *, level: float = 0.95) -> tuple[float, float, float]:
    """Mean and Student-t confidence interval over independent replicates (e.g. orders).

    **Arguments:** `values` (n,) with n >= 2; `level` two-sided coverage in (0, 1).

    **Returns:** (mean, low, high) floats.
    """
    as_array("values", values, ndim=1, finite=True)  # lists, None, strings: one clear error
    v = np.asarray(values, np.float64)
    if v.shape[0] < 2:
        raise ValueError(f"values: expected at least 2 replicates, received {v.shape[0]}")
    check_finite("values", v)
    level = check_real("level", level, low=0.0, high=1.0, low_inclusive=False, high_inclusive=False)
    m = float(v.mean())
    half = float(scipy.stats.t.ppf((1 + level) / 2, v.size - 1) * v.std(ddof=1) / np.sqrt(v.size))
    return m, m - half, m + half
