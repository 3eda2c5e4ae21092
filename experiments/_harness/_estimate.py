"""`Estimate`: a number with its confidence interval, and the one implementation of each
estimator the experiments use (bootstrap over items, t over seeds, Wilson, Spearman).

Every estimator returns an `Estimate(value, low, high, level, method, n)`: `value` the
statistic on the data, `[low, high]` its two-sided confidence interval at `level`,
`method` how the interval was formed, `n` the number of independent units it rests on
(items, seeds, trials, pairs). A claim compares the interval with a named null
(`experiments._harness._claim`); a one-sided test at `alpha` reads one end of the
two-sided interval at `level = 1 - 2 alpha`.

Randomised estimators take `seed`: an int or a `numpy.random.Generator` (derive it from
the run's key, e.g. `int(jax.random.randint(key, (), 0, 2**31 - 1))`, so `--seed`
changes it). Bootstrap and permutation resamples are capped at `MAX_RESAMPLES`, checked
before anything is allocated, and drawn in batches of at most `BATCH_ELEMENTS` numbers.
"""

from __future__ import annotations

import dataclasses
import math
import operator
from collections.abc import Callable
from typing import Any

import numpy as np
from scipy import stats

__all__ = [
    "MAX_RESAMPLES",
    "BATCH_ELEMENTS",
    "Estimate",
    "PermutationTest",
    "bootstrap",
    "paired_bootstrap",
    "t_mean",
    "paired_t",
    "welch_t",
    "t_interval",
    "wilson",
    "spearman",
    "permutation_test",
    "loglog_slope",
]

# the most bootstrap / permutation resamples one call may ask for (99,999 resamples put the
# Monte Carlo error of a 2.5% quantile near 0.05 percentage points; more is never needed)
MAX_RESAMPLES = 100_000
# resamples are evaluated in batches of at most this many numbers (n_items x batch)
BATCH_ELEMENTS = 2**22
# methods whose interval need not contain the point value (bootstrap percentiles of a
# skewed statistic can exclude it); every other method's interval does, and is checked
_MAY_EXCLUDE_VALUE = ("bootstrap",)


def _text_method(method: Any) -> str:
    if not isinstance(method, str) or not method.strip():
        raise ValueError(f"method: expected a non-empty string, received {method!r}")
    return method


def _float(name: str, v: Any) -> float:
    try:
        return float(v)
    except (TypeError, ValueError) as e:
        raise ValueError(f"{name}: expected a real number, received {v!r}") from e


@dataclasses.dataclass(frozen=True)
class Estimate:
    """A statistic and its two-sided confidence interval.

    - `value`: the statistic on the data (NaN: not computable here).
    - `low`, `high`: the interval's ends, `low <= high` (NaN: not computable).
    - `level`: its coverage in (0, 1); `1.0` marks a value without an interval,
      `low == value == high`: an exact computation (`Estimate.point`) or one measurement of a
      random quantity (`Estimate.single`).
    - `method`: how the interval was formed ("t", "Welch t", "percentile bootstrap",
      "BCa bootstrap", "Wilson", "Fisher z (Fieller SE)", ...).
    - `n`: the number of independent units it rests on (items, seeds, trials), >= 1.
    - `is_single`: one draw of a random quantity (one timing run, one training fit, one image
      pair), `level == 1`: a claim on it is `inconclusive`, never holds / fails (nothing says
      how far another draw would land). False for an exact point value and every interval.

    Where finite, `low <= value <= high` is checked, except for bootstrap intervals
    (a percentile interval of a skewed statistic may exclude the value).

    `format(est, ".3f")` gives `"0.123 [0.100, 0.150]"`; `est.as_dict()` the JSON form.
    """

    value: float
    low: float
    high: float
    level: float
    method: str
    n: int
    is_single: bool = False

    def __post_init__(self):
        for name in ("value", "low", "high", "level"):
            object.__setattr__(self, name, _float(name, getattr(self, name)))
        if isinstance(self.n, bool) or not isinstance(self.n, int | np.integer) or self.n < 1:
            raise ValueError(f"n: expected an integer >= 1, received {self.n!r}")
        object.__setattr__(self, "n", int(self.n))
        if not isinstance(self.is_single, bool | np.bool_):
            raise ValueError(f"is_single: expected a bool, received {self.is_single!r}")
        object.__setattr__(self, "is_single", bool(self.is_single))
        if not isinstance(self.method, str) or not self.method:
            raise ValueError(f"method: expected a non-empty string, received {self.method!r}")
        if self.level == 1.0:
            if not (self.low == self.value == self.high or np.isnan(self.value)):
                raise ValueError(
                    "level: 1.0 marks a point value (low == value == high), received "
                    f"value {self.value!r}, low {self.low!r}, high {self.high!r}"
                )
        elif self.is_single:
            raise ValueError(
                "is_single: one measurement has no interval (level 1.0), received level "
                f"{self.level!r}"
            )
        elif not 0 < self.level < 1:
            raise ValueError(f"level: expected a number in (0, 1), received {self.level!r}")
        if math.isfinite(self.low) and math.isfinite(self.high) and self.low > self.high:
            raise ValueError(f"low, high: expected low <= high, received {self.low}, {self.high}")
        if (
            not any(w in self.method for w in _MAY_EXCLUDE_VALUE)
            and all(math.isfinite(x) for x in (self.value, self.low, self.high))
            and not self.low - 1e-12 * abs(self.low)
            <= self.value
            <= self.high + 1e-12 * abs(self.high)
        ):
            raise ValueError(
                f"value: expected low <= value <= high for a {self.method} interval, received "
                f"{self.low} <= {self.value} <= {self.high}"
            )

    @classmethod
    def point(cls, value, *, n: int = 1, method: str = "point value (no interval)") -> Estimate:
        """An exact value without sampling interval: `low == value == high`, `level == 1`.

        Only for exact computations, whose value another run would reproduce: a maximum
        error over `n` fixed cases, an exact greedy check, a solver certificate, a count over
        a fixed set. A claim compares it as is (alpha 0). One draw of a random quantity (one
        timing run, one training fit, one image pair, one text) is `Estimate.single`."""
        v = _float("value", value)
        return cls(v, v, v, 1.0, method, n)

    @classmethod
    def single(cls, value, *, method: str, n: int = 1) -> Estimate:
        """One measurement of a random quantity, without interval (one wall-clock timing run,
        one training fit, one image pair, one text): `low == value == high`, `level == 1`,
        `is_single` True. `method` says what was measured (e.g. "one timing run"); `n` the units
        inside the one draw (e.g. 3 sizes of one fitted slope), 1 by default.

        Every claim constructor gives it the verdict `inconclusive` ("one measurement, no
        interval"), never holds / fails: replace it by an interval over rounds, seeds or
        items (`bootstrap`, `t_mean`) where the experiment can afford one."""
        v = _float("value", value)
        return cls(v, v, v, 1.0, _text_method(method), n, is_single=True)

    @property
    def has_interval(self) -> bool:
        return self.level < 1.0

    @property
    def finite(self) -> bool:
        return all(math.isfinite(x) for x in (self.value, self.low, self.high))

    def as_dict(self) -> dict[str, Any]:
        """JSON form: non-finite numbers become None; `"single": true` only for one
        measurement (`Estimate.single`; a record without the key is an interval or an exact
        point value, as every record written before the key existed)."""

        def num(x):
            return x if math.isfinite(x) else None

        d: dict[str, Any] = {
            "value": num(self.value),
            "low": num(self.low),
            "high": num(self.high),
            "level": self.level,
            "method": self.method,
            "n": self.n,
        }
        if self.is_single:
            d["single"] = True
        return d

    def flat(self, name: str) -> dict[str, float | int]:
        """The metrics naming rule: `name`, `name_lo`, `name_hi`, `name_n`."""
        return {
            name: self.value,
            f"{name}_lo": self.low,
            f"{name}_hi": self.high,
            f"{name}_n": self.n,
        }

    def __format__(self, spec: str) -> str:
        spec = spec or ".3g"
        if not self.has_interval:
            return format(self.value, spec)
        return f"{self.value:{spec}} [{self.low:{spec}}, {self.high:{spec}}]"

    def __str__(self) -> str:
        return format(self, "")


@dataclasses.dataclass(frozen=True)
class PermutationTest:
    """Result of `permutation_test`: the observed statistic and its p-value.

    `n_resamples` is 0 for an exact test (every distinct permutation enumerated),
    else the number of Monte Carlo permutations drawn."""

    statistic: float
    pvalue: float
    alternative: str
    method: str
    n: int
    n_resamples: int

    def as_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


# ---------------------------------------------------------------- input checks


def _level(level) -> float:
    level = _float("level", level)
    if not 0 < level < 1:
        raise ValueError(f"level: expected a number in (0, 1), received {level!r}")
    return level


def _vector(name: str, x, min_size: int = 1) -> np.ndarray:
    x = np.asarray(x, dtype=np.float64)
    if x.ndim != 1 or x.size < min_size:
        raise ValueError(
            f"{name}: expected a 1-D array of >= {min_size} values, received shape {x.shape}"
        )
    if not np.all(np.isfinite(x)):
        raise ValueError(f"{name}: expected finite values, received NaN or inf")
    return x


def _resamples(n_resamples) -> int:
    try:
        r = operator.index(n_resamples)
    except TypeError as e:
        raise ValueError(f"n_resamples: expected an integer, received {n_resamples!r}") from e
    if not 1 <= r <= MAX_RESAMPLES:
        raise ValueError(f"n_resamples: expected 1..{MAX_RESAMPLES} (MAX_RESAMPLES), received {r}")
    return r


def _rng(seed) -> np.random.Generator:
    if isinstance(seed, np.random.Generator):
        return seed
    if isinstance(seed, int | np.integer) and not isinstance(seed, bool) and seed >= 0:
        return np.random.default_rng(int(seed))
    raise ValueError(f"seed: expected a non-negative int or numpy Generator, received {seed!r}")


# ---------------------------------------------------------------- bootstrap

_METHODS = {"percentile": "percentile", "bca": "BCa"}


def bootstrap(
    data,
    statistic: Callable[..., Any] = np.mean,
    *,
    seed,
    method: str = "percentile",
    level: float = 0.95,
    n_resamples: int = 2000,
) -> Estimate:
    """Bootstrap confidence interval of `statistic` over items (Efron & Tibshirani 1993).

    Items (rows) are resampled with replacement, `n_resamples` times; the interval is the
    `(1 - level) / 2` and `(1 + level) / 2` quantiles of the resampled statistic
    (`method="percentile"`), or those quantiles shifted by the bias correction
    `z0 = Phi^-1(P(theta* < theta))` and the jackknife acceleration `a`
    (`method="bca"`, Efron 1987). Computed by `scipy.stats.bootstrap`.

    **Arguments:**

    - `data`: a 1-D array of n items, or a tuple of 1-D arrays of one length n (paired:
      item i of every array is resampled together).
    - `statistic`: vectorised, `statistic(*samples, axis=-1)` (NumPy reductions such as
      `np.mean`, `np.median` qualify); its value on `data` is the estimate.
    - `seed`: int or `numpy.random.Generator`.
    - `method`: "percentile" or "bca".
    - `level`: two-sided coverage in (0, 1).
    - `n_resamples`: 1..`MAX_RESAMPLES`.

    **Returns:** an `Estimate` (method "percentile bootstrap" or "BCa bootstrap", `n` the
    items). A degenerate resample distribution (all items equal) gives BCa NaN bounds.
    """
    if method not in _METHODS:
        raise ValueError(f"method: expected one of {tuple(_METHODS)}, received {method!r}")
    level = _level(level)
    r = _resamples(n_resamples)
    samples = tuple(data) if isinstance(data, tuple | list) else (data,)
    if not samples:
        raise ValueError("data: expected an array or a tuple of arrays, received an empty tuple")
    samples = tuple(_vector(f"data[{i}]", s, min_size=2) for i, s in enumerate(samples))
    n = samples[0].size
    if any(s.size != n for s in samples):
        raise ValueError(
            f"data: paired arrays must have one length, received {[s.size for s in samples]}"
        )
    value = float(np.asarray(statistic(*samples, axis=-1)))
    res = stats.bootstrap(
        samples,
        statistic,
        n_resamples=r,
        batch=max(1, BATCH_ELEMENTS // n),
        vectorized=True,
        paired=len(samples) > 1,
        confidence_level=level,
        method=_METHODS[method],
        rng=_rng(seed),
    )
    lo, hi = (float(res.confidence_interval.low), float(res.confidence_interval.high))
    return Estimate(value, lo, hi, level, f"{_METHODS[method]} bootstrap", n)


def paired_bootstrap(
    a,
    b,
    statistic: Callable[..., Any] = np.mean,
    *,
    seed,
    method: str = "percentile",
    level: float = 0.95,
    n_resamples: int = 2000,
) -> Estimate:
    """Bootstrap interval of the difference `statistic(a) - statistic(b)` of two measurements
    of the same n items (e.g. two models' per-item errors): item i of `a` and of `b` are
    resampled together, so the item-to-item variation they share cancels.
    Arguments as `bootstrap`; method "paired percentile bootstrap" / "paired BCa bootstrap".
    """
    a, b = _vector("a", a, 2), _vector("b", b, 2)
    if a.shape != b.shape:
        raise ValueError(f"a, b: expected one length (paired items), received {a.size}, {b.size}")

    def diff(x, y, axis=-1):
        return np.asarray(statistic(x, axis=axis)) - np.asarray(statistic(y, axis=axis))

    est = bootstrap((a, b), diff, seed=seed, method=method, level=level, n_resamples=n_resamples)
    return dataclasses.replace(est, method=f"paired {est.method}")


# ---------------------------------------------------------------- t intervals


def _t_half(sd: float, n_eff: float, df: float, level: float) -> float:
    if sd == 0:
        return 0.0
    q = stats.t.ppf(0.5 + level / 2, df) if math.isfinite(df) else stats.norm.ppf(0.5 + level / 2)
    return float(q * sd / math.sqrt(n_eff))


def t_mean(x, level: float = 0.95) -> Estimate:
    """Mean of `x` and its Student-t interval `mean +- t_{(1+level)/2, n-1} s / sqrt(n)`
    (`s` the sample standard deviation; the t quantile, never 2 SE). For one value per
    seed; `x` 1-D with at least two finite values. Method "t"."""
    x = _vector("x", x, min_size=2)
    level = _level(level)
    mean = float(x.mean())
    half = _t_half(float(x.std(ddof=1)), x.size, x.size - 1, level)
    return Estimate(mean, mean - half, mean + half, level, "t", x.size)


def paired_t(a, b, level: float = 0.95) -> Estimate:
    """Mean of the paired differences `a - b` (e.g. per fold or per seed, both methods on
    the same fold) and its t interval (as `scipy.stats.ttest_rel(a, b).confidence_interval`).
    Method "paired t"."""
    a, b = _vector("a", a, 2), _vector("b", b, 2)
    if a.shape != b.shape:
        raise ValueError(f"a, b: expected one length (paired), received {a.size}, {b.size}")
    return dataclasses.replace(t_mean(a - b, level), method="paired t")


def welch_t(a, b, level: float = 0.95) -> Estimate:
    """Difference of the means of two independent samples, `mean(a) - mean(b)`, with the
    Welch interval: SE^2 = s_a^2 / n_a + s_b^2 / n_b, Welch-Satterthwaite degrees of freedom
    `SE^4 / ((s_a^2/n_a)^2 / (n_a - 1) + (s_b^2/n_b)^2 / (n_b - 1))` (as
    `scipy.stats.ttest_ind(a, b, equal_var=False).confidence_interval`). `n` is
    `min(n_a, n_b)`. Method "Welch t"."""
    a, b = _vector("a", a, 2), _vector("b", b, 2)
    level = _level(level)
    va, vb = a.var(ddof=1) / a.size, b.var(ddof=1) / b.size
    diff = float(a.mean() - b.mean())
    if va + vb == 0:
        half = 0.0
    else:
        df = (va + vb) ** 2 / (va**2 / (a.size - 1) + vb**2 / (b.size - 1))
        half = _t_half(math.sqrt(va + vb), 1, df, level)
    return Estimate(diff, diff - half, diff + half, level, "Welch t", min(a.size, b.size))


def t_interval(x, level: float = 0.95) -> tuple[float, float, float]:
    """`(mean, low, high)` of `t_mean(x, level)` (the tuple form older experiments use)."""
    e = t_mean(x, level)
    return e.value, e.low, e.high


# ---------------------------------------------------------------- scaling slope


def loglog_slope(
    sizes,
    rounds,
    *,
    seed,
    level: float = 0.95,
    n_resamples: int = 2000,
) -> Estimate:
    """Least-squares slope of log(median seconds) on log(size), with a percentile bootstrap
    interval over the timing rounds (how a run time scales: 1 linear, 2 quadratic).

    `rounds[i]` holds the per-round measurements at `sizes[i]` (every size one number of
    rounds, >= 2). The slope is `sum((x - x_bar)(y - y_bar)) / sum((x - x_bar)^2)`,
    `x = log size`, `y = log median_r rounds[i]`; a resample draws round indices with
    replacement (the same indices at every size: `bootstrap` over the tuple of per-size
    arrays), takes each size's median of them and re-fits the slope.

    **Arguments:** `sizes` (>= 2 distinct positive numbers); `rounds` (one sequence of
    positive seconds per size); `seed`, `level`, `n_resamples` as `bootstrap`.

    **Returns:** an `Estimate` (method "percentile bootstrap over rounds of the log-log
    slope (K sizes)", `n` the rounds).
    """
    x = _vector("sizes", sizes, min_size=2)
    if np.any(x <= 0) or np.unique(x).size < 2:
        raise ValueError(f"sizes: expected >= 2 distinct positive numbers, received {sizes!r}")
    if not isinstance(rounds, list | tuple) or len(rounds) != x.size:
        raise ValueError(f"rounds: expected one sequence of seconds per size ({x.size})")
    data = tuple(_vector(f"rounds[{i}]", r, min_size=2) for i, r in enumerate(rounds))
    if any(np.any(r <= 0) for r in data):
        raise ValueError("rounds: expected positive seconds")
    if len({r.size for r in data}) != 1:
        raise ValueError(
            f"rounds: expected one number of rounds per size, received {[r.size for r in data]}"
        )
    xc = np.log(x) - np.log(x).mean()

    def slope(*per_size, axis=-1):
        y = np.log(np.stack([np.median(t, axis=axis) for t in per_size], axis=-1))
        yc = y - y.mean(axis=-1, keepdims=True)
        return (yc * xc).sum(axis=-1) / (xc**2).sum()

    est = bootstrap(data, slope, seed=seed, level=level, n_resamples=n_resamples)
    return dataclasses.replace(
        est, method=f"percentile bootstrap over rounds of the log-log slope ({x.size} sizes)"
    )


# ---------------------------------------------------------------- proportions, correlation


def wilson(successes: int, trials: int, level: float = 0.95) -> Estimate:
    """Proportion `successes / trials` with the Wilson score interval (Wilson 1927), from
    `scipy.stats.binomtest(successes, trials).proportion_ci(method="wilson")`."""
    try:
        k, n = operator.index(successes), operator.index(trials)
    except TypeError as e:
        raise ValueError(
            f"successes, trials: expected integers, received {successes!r}, {trials!r}"
        ) from e
    if n < 1 or not 0 <= k <= n:
        raise ValueError(
            f"successes, trials: expected 0 <= successes <= trials, trials >= 1, received {k}, {n}"
        )
    level = _level(level)
    ci = stats.binomtest(k, n).proportion_ci(confidence_level=level, method="wilson")
    return Estimate(k / n, float(ci.low), float(ci.high), level, "Wilson", n)


def spearman(
    x,
    y,
    level: float = 0.95,
    *,
    method: str = "fisher",
    seed=None,
    n_resamples: int = 2000,
) -> Estimate:
    """Spearman rank correlation of paired samples with a confidence interval.

    `method="fisher"`: `tanh(atanh(r) +- z_{(1+level)/2} sqrt(1.06 / (n - 3)))`, the Fisher
    z interval with the Fieller, Hartley & Pearson (1957) variance for Spearman's r
    (n >= 4). `method="bootstrap"`: percentile bootstrap over pairs (`seed` required).
    `r` is `scipy.stats.spearmanr(x, y).statistic` (NaN for a constant input).
    """
    x, y = _vector("x", x, 2), _vector("y", y, 2)
    if x.shape != y.shape:
        raise ValueError(f"x, y: expected one length (pairs), received {x.size}, {y.size}")
    level = _level(level)
    if method == "bootstrap":

        def rho(u, v, axis=-1):
            ru, rv = stats.rankdata(u, axis=axis), stats.rankdata(v, axis=axis)
            ru = ru - ru.mean(axis, keepdims=True)
            rv = rv - rv.mean(axis, keepdims=True)
            with np.errstate(invalid="ignore", divide="ignore"):
                return (ru * rv).sum(axis) / np.sqrt((ru**2).sum(axis) * (rv**2).sum(axis))

        est = bootstrap((x, y), rho, seed=seed, level=level, n_resamples=n_resamples)
        return dataclasses.replace(est, method="Spearman, percentile bootstrap")
    if method != "fisher":
        raise ValueError(f"method: expected 'fisher' or 'bootstrap', received {method!r}")
    n = x.size
    if n < 4:
        raise ValueError(f"x, y: the Fisher z interval needs >= 4 pairs, received {n}")
    r = float(stats.spearmanr(x, y).statistic)
    if not math.isfinite(r):
        return Estimate(float("nan"), float("nan"), float("nan"), level, "Fisher z (Fieller SE)", n)
    half = stats.norm.ppf(0.5 + level / 2) * math.sqrt(1.06 / (n - 3))
    with np.errstate(divide="ignore"):
        z = np.arctanh(np.clip(r, -1.0, 1.0))
    lo, hi = float(np.tanh(z - half)), float(np.tanh(z + half))
    return Estimate(r, min(lo, r), max(hi, r), level, "Fisher z (Fieller SE)", n)


# ---------------------------------------------------------------- permutation test


def _mean_diff(x, y, axis=-1):
    return np.mean(x, axis=axis) - np.mean(y, axis=axis)


def permutation_test(
    a,
    b,
    *,
    paired: bool,
    seed,
    statistic: Callable[..., Any] = _mean_diff,
    alternative: str = "two-sided",
    n_resamples: int = 9999,
    exact_max: int = 2**16,
) -> PermutationTest:
    """Permutation test of `statistic(a, b)` (default: `mean(a) - mean(b)`).

        - `paired=True`: a sign-flip test: each pair's members are swapped or not (for the mean
          difference, the signs of `a - b` flipped), 2^n arrangements.
        - `paired=False`: a two-sample test: the pooled values relabelled, C(n_a + n_b, n_a)
          arrangements.

        When the arrangements number at most `exact_max`, every one is enumerated (an exact
        test, `n_resamples` 0 in the result); otherwise `n_resamples` (<= `MAX_RESAMPLES`) random
        ones are drawn (Monte Carlo, p-value `(1 + #{T* as extreme}) / (1 + n_resamples)`).
        Computed by `scipy.stats.permutation_test`; `statistic` must be vectorised
        (`statistic(x, y, axis=-1)`). `alternative`: "two-sided" (twice the smaller one-sided
    p-value, at most 1), "greater" or "less".
    """
    a, b = _vector("a", a, 1), _vector("b", b, 1)
    if alternative not in ("two-sided", "greater", "less"):
        raise ValueError(
            f"alternative: expected 'two-sided', 'greater' or 'less', received {alternative!r}"
        )
    r = _resamples(n_resamples)
    if paired:
        if a.shape != b.shape:
            raise ValueError(f"a, b: expected one length (paired), received {a.size}, {b.size}")
        count = 2**a.size if a.size < 63 else math.inf
        kind, n = "samples", a.size
    else:
        count = math.comb(a.size + b.size, a.size)
        kind, n = "independent", a.size + b.size
    exact = count <= exact_max
    res = stats.permutation_test(
        (a, b),
        statistic,
        permutation_type=kind,
        vectorized=True,
        n_resamples=np.inf if exact else r,
        batch=max(1, BATCH_ELEMENTS // n),
        alternative=alternative,
        rng=_rng(seed),
    )
    label = "paired sign-flip" if paired else "two-sample"
    method = (
        f"exact {label} permutation ({count} arrangements)"
        if exact
        else f"Monte Carlo {label} permutation ({r} resamples)"
    )
    return PermutationTest(
        float(res.statistic), float(res.pvalue), alternative, method, n, 0 if exact else r
    )
