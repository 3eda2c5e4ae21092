"""Token complexity B*(n, p) and its growth class (P7's core concept, made measurable).

B*(n, p) is the smallest reasoning budget at which accuracy on size-n items reaches p.
Accuracy is measured on a budget grid (B = 0: the answer forced with no reasoning);
between grid points it is interpolated linearly in log(1 + B), so B* is continuous and the
no-reasoning point sits on the same axis (for budgets >> 1 this is log B). Uncertainty
comes from a bootstrap over items. Growth classes
(constant, log n, n, n log n, n^2, 2^n) are fitted as B* ~ a + b f(n) with b >= 0 by
weighted least squares (weights 1/sigma^2 from the bootstrap) and compared by AIC; Akaike
weights say how confident the selection is (Burnham & Anderson 2002, "Model Selection and
Multimodel Inference").
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence

import jax
import jax.numpy as jnp
import numpy as np

from .._core import as_array, check_memory, check_range, check_real, check_size, short_repr
from ._budget import check_budgets

__all__ = [
    "BudgetEstimate",
    "GROWTH_CLASSES",
    "GrowthFit",
    "fit_growth",
    "min_budget",
    "min_budget_ci",
]

GROWTH_CLASSES: dict[str, Callable[[np.ndarray], np.ndarray] | None] = {
    "constant": None,
    "log n": np.log,
    "n": lambda n: n,
    "n log n": lambda n: n * np.log(n),
    "n^2": lambda n: n**2,
    "2^n": lambda n: 2.0**n,
}
"""The growth classes `fit_growth` compares: name -> f(n) of the model y(n) ~ a + b f(n) (None:
the constant class)."""


def min_budget(accuracy, budgets: Sequence[int], p: float) -> jax.Array:
    """Smallest budget at which `accuracy` reaches `p` (interpolated linearly in
    log(1 + B)).

    **Arguments:**

    - `accuracy`: (len(budgets),) accuracy at each budget.
    - `budgets`: increasing budgets (>= 0).
    - `p`: target accuracy in (0, 1].

    **Returns:** scalar: the first crossing of p, `budgets[0]` if already reached there,
    `inf` if never reached on the grid. jit/vmap-able over `accuracy`.
    """
    budgets = check_budgets(budgets)
    p = check_real("p", p, low=0.0, high=1.0, low_inclusive=False)
    acc = as_array("accuracy", accuracy, finite=True, low=0.0, high=1.0)
    if acc.shape[-1:] != (len(budgets),):
        raise ValueError(
            f"accuracy: expected last axis {len(budgets)} (one per budget), "
            f"received shape {acc.shape}"
        )
    return _min_budget(acc, jnp.asarray(budgets, jnp.result_type(acc.dtype, float)), p)


def _min_budget(acc, b, p):
    logb = jnp.log1p(b)
    reach = acc >= p
    j = jnp.argmax(reach)
    prev = jnp.maximum(j - 1, 0)
    a0, a1 = acc[prev], acc[j]
    t = jnp.clip(jnp.where(a1 > a0, (p - a0) / jnp.where(a1 > a0, a1 - a0, 1.0), 1.0), 0, 1)
    crossing = jnp.expm1(logb[prev] + t * (logb[j] - logb[prev]))
    # grid points exactly (no expm1(log1p(b)) rounding)
    crossing = jnp.where(t == 1.0, b[j], jnp.where(t == 0.0, b[prev], crossing))
    crossing = jnp.where(j == 0, b[0], crossing)
    return jnp.where(jnp.any(reach), crossing, jnp.inf)


@dataclasses.dataclass(frozen=True)
class BudgetEstimate:
    """B*(n, p) with its bootstrap distribution.

    - `value`: B* on all items (inf: p not reached on the grid).
    - `low`, `high`: the central `level` bootstrap interval (inf where censored).
    - `sd`: bootstrap standard deviation of the finite replicates (nan if none).
    - `finite_fraction`: share of replicates that reach p on the grid.
    """

    value: float
    low: float
    high: float
    sd: float
    finite_fraction: float


# bootstrap replicates beyond this change no reported digit of B*
MAX_BOOT = 1_000_000


def min_budget_ci(
    correct,
    budgets: Sequence[int],
    p: float,
    *,
    key: jax.Array,
    n_boot: int = 1000,
    level: float = 0.9,
) -> BudgetEstimate:
    """B*(n, p) from per-item correctness at each budget, with a bootstrap over items.

    **Arguments:**

    - `correct`: (items, len(budgets)) bool/0-1, item i solved at budget j (values
      outside [0, 1] or NaN raise a `ValueError` naming it).
    - `budgets`: increasing budgets (>= 0).
    - `p`: target accuracy in (0, 1].
    - `key`: PRNG key for the resampling (keyword-only).
    - `n_boot`: bootstrap replicates; `level`: interval coverage in (0, 1).

    **Returns:** a `BudgetEstimate`.
    """
    budgets = check_budgets(budgets)
    correct = as_array("correct", correct, ndim=2, finite=True, low=0.0, high=1.0)
    c = np.asarray(correct, np.float64)
    if c.shape[0] < 1 or c.shape[1] != len(budgets):
        raise ValueError(f"correct: expected (items >= 1, {len(budgets)}), received {c.shape}")
    n_boot = check_size("n_boot", n_boot, cap=MAX_BOOT, why="cslm.MAX_BOOT")
    check_memory("n_boot", 8.0 * n_boot * c.shape[0] * (c.shape[1] + 1))  # gathered items
    level = check_real("level", level, low=0.0, high=1.0, low_inclusive=False, high_inclusive=False)
    p = check_real("p", p, low=0.0, high=1.0, low_inclusive=False)
    c = jnp.asarray(c)
    b = jnp.asarray(budgets, c.dtype)
    idx = jax.random.randint(key, (n_boot, c.shape[0]), 0, c.shape[0])
    boot = np.asarray(jax.vmap(lambda i: _min_budget(c[i].mean(0), b, p))(idx))
    value = float(_min_budget(c.mean(0), b, p))
    q = (1.0 - level) / 2
    finite = boot[np.isfinite(boot)]
    return BudgetEstimate(
        value,
        float(np.quantile(boot, q, method="lower")),
        float(np.quantile(boot, 1 - q, method="higher")),
        float(finite.std(ddof=1)) if finite.size > 1 else float("nan"),
        float(finite.size / boot.size),
    )


@dataclasses.dataclass(frozen=True)
class GrowthFit:
    """Growth-class fits of y(n) ~ a + b f(n), b >= 0, compared by AIC.

    - `classes`: class names in fit order.
    - `params`: (C, 2) fitted (a, b) per class (b = 0 for "constant").
    - `aic`: (C,) AIC per class; `weights`: (C,) Akaike weights (sum to 1).
    - `selected`: the class of least AIC; `confidence`: its Akaike weight.
    """

    __repr__ = short_repr  # arrays as dtype[shape], long sequences cut

    classes: tuple[str, ...]
    params: np.ndarray
    aic: np.ndarray
    weights: np.ndarray
    selected: str
    confidence: float

    def predict(self, n, growth: str | None = None) -> np.ndarray:
        """The fitted curve of class `growth` (default: the selected one) at sizes `n`."""
        growth = self.selected if growth is None else growth
        if growth not in self.classes:
            raise ValueError(f"growth: expected one of {self.classes}, received {growth!r}")
        a, b = self.params[self.classes.index(growth)]
        f = GROWTH_CLASSES[growth]
        n = np.asarray(n, np.float64)
        return a + (b * f(n) if f is not None else 0.0 * n)


def fit_growth(
    n,
    y,
    *,
    sigma=None,
    classes: Mapping[str, Callable | None] | Sequence[str] = tuple(GROWTH_CLASSES),
) -> GrowthFit:
    """Fit growth classes to y(n) by weighted least squares and select one by AIC.

    With `sigma` (known standard errors, e.g. `BudgetEstimate.sd`) the AIC is
    chi^2 + 2k; without it the residual scale is estimated, AIC = m log(RSS/m) + 2k
    (m points, k parameters; the scale counts as one more parameter in both classes
    alike, so it cancels). A class whose best slope is negative is fitted with b = 0.

    **Arguments:**

    - `n`: (m,) sizes >= 1 (m >= 2).
    - `y`: (m,) finite measurements (B* per size).
    - `sigma`: (m,) positive standard errors, or None.
    - `classes`: names among `GROWTH_CLASSES` (or a mapping name -> f).

    **Returns:** a `GrowthFit`.
    """
    n = np.asarray(as_array("n", n, finite=True), np.float64)
    y = np.asarray(as_array("y", y), np.float64)
    if n.ndim != 1 or n.size < 2 or y.shape != n.shape:
        raise ValueError(
            f"n, y: expected equal shapes with at least 2 points, received {n.shape} and {y.shape}"
        )
    if not np.all(np.isfinite(y)):
        raise ValueError("y: expected finite values (drop censored B* = inf first)")
    check_range("n", n, low=1.0)
    if sigma is None:
        w = np.ones_like(y)
    else:
        sigma = np.asarray(as_array("sigma", sigma), np.float64)
        if sigma.shape != y.shape or not np.all(np.isfinite(sigma) & (sigma > 0)):
            raise ValueError(f"sigma: expected {y.shape} positive finite values, received {sigma}")
        w = 1.0 / sigma**2
    table = dict(classes) if isinstance(classes, Mapping) else {}
    for name in [] if isinstance(classes, Mapping) else classes:
        if name not in GROWTH_CLASSES:
            raise ValueError(
                f"classes: expected names among {list(GROWTH_CLASSES)}, received {name!r}"
            )
        table[name] = GROWTH_CLASSES[name]
    if not table:
        raise ValueError("classes: expected at least one growth class, received none")
    names = tuple(table)
    params = np.zeros((len(names), 2))
    aic = np.zeros(len(names))
    for c, name in enumerate(names):
        f = table[name]
        a, b, k = float(np.sum(w * y) / np.sum(w)), 0.0, 1
        if f is not None:
            x = np.asarray(f(n), np.float64)
            xm, ym = np.sum(w * x) / np.sum(w), np.sum(w * y) / np.sum(w)
            sxx = np.sum(w * (x - xm) ** 2)
            if sxx > 0:
                slope = np.sum(w * (x - xm) * (y - ym)) / sxx
                if slope > 0:
                    a, b = float(ym - slope * xm), float(slope)
            k = 2
            params[c] = a, b
        else:
            params[c] = a, 0.0
        fit = a + (b * np.asarray(f(n), np.float64) if f is not None else 0.0)
        chi2 = float(np.sum(w * (y - fit) ** 2))
        if sigma is None:
            scale = max(chi2 / n.size, 1e-12 * max(1.0, float(np.mean(y**2))))
            aic[c] = n.size * np.log(scale) + 2 * k
        else:
            aic[c] = chi2 + 2 * k
    rel = np.exp(-(aic - aic.min()) / 2)
    weights = rel / rel.sum()
    best = int(np.argmin(aic))
    return GrowthFit(names, params, aic, weights, names[best], float(weights[best]))
