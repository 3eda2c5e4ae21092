"""Linear probes: ridge regression (closed form, GCV / k-fold over the penalty) and
multinomial logistic regression (L2, damped Newton through the training driver `jaxlab.run_steps`).

Rows are selected by 0/1 `weights` rather than by indexing, so one compiled fit
serves every split, fold and layer and `jax.vmap` runs them together
(`probe_sweep`: all layers of a store in one jitted call).

Objectives (the same as scikit-learn's, so `Ridge(alpha=penalty)` and
`LogisticRegression(C=1 / (penalty * n))` give the same coefficients):

- ridge: `sum_i w_i (y_i - x_i @ coef - intercept)^2 + penalty * ||coef||^2`;
- logistic: `(1/n_w) sum_i w_i CE(y_i, softmax(x_i @ W + b)) + penalty / 2 * ||W||^2`
  with `n_w = sum w`; two classes use one logit (class 1 vs class 0) as sklearn does.

Papers: Hoerl & Kennard 1970 (ridge); Golub, Heath & Wahba 1979 (GCV);
Alain & Bengio 2016 ("Understanding intermediate layers using linear classifier probes").
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, cast

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Bool, Float, Int

from .._core import (
    AbstractStep,
    Driver,
    NoProgress,
    as_array,
    check_array,
    check_finite,
    check_memory,
    check_positive_int,
    check_range,
    run_steps,
)
from ._stats import accuracy, r2_score

if TYPE_CHECKING:
    from ..lm import ActivationStore

# Default ridge grid, 1e-3 .. 1e5 (one tuple shared by the three selectors).
_PENALTIES = tuple(10.0 ** np.arange(-3, 6))

__all__ = [
    "RidgeProbe",
    "LogisticProbe",
    "fit_ridge",
    "ridge_gcv",
    "ridge_kfold",
    "LogisticState",
    "LogisticStep",
    "fit_logistic",
    "probe_sweep",
]


class RidgeProbe(eqx.Module):
    """A fitted linear read-out `x @ coef + intercept`.

    **Attributes:** `coef` (d,) or (d, m); `intercept` () or (m,); `penalty` ().
    """

    coef: Float[Array, " d *m"]
    intercept: Float[Array, " *m"]
    penalty: Float[Array, ""]

    def __call__(self, x: Float[Array, " d"]) -> Float[Array, " *m"]:
        """Prediction for one row x (d,)."""
        return x @ self.coef + self.intercept


class LogisticProbe(eqx.Module):
    """A fitted multinomial logistic read-out.

    **Attributes:** `coef` (d, K), `intercept` (K,) with K = 1 for two classes (the logit of
    class 1) and K = n_classes otherwise; `penalty` ().
    """

    coef: Float[Array, "d K"]
    intercept: Float[Array, " K"]
    penalty: Float[Array, ""]

    def logits(self, x: Float[Array, " d"]) -> Float[Array, " C"]:
        """Class logits (C,) of one row (two classes: (0, logit))."""
        z = x @ self.coef + self.intercept
        return jnp.concatenate([jnp.zeros((1,), z.dtype), z]) if z.shape[0] == 1 else z

    def proba(self, x: Float[Array, " d"]) -> Float[Array, " C"]:
        """Class probabilities (C,) of one row."""
        return jax.nn.softmax(self.logits(x))

    def __call__(self, x: Float[Array, " d"]) -> Int[Array, ""]:
        """Predicted class of one row."""
        return jnp.argmax(self.logits(x))


def _xy(x, y, weights):
    x = as_array("x", x)
    if not jnp.issubdtype(x.dtype, jnp.floating):
        x = x.astype(jnp.float32)
    sizes = check_array("x", x, shape=("n", "d"))
    y = as_array("y", y)
    check_array("y", y, shape=("n",) + y.shape[1:], sizes=sizes)
    if y.ndim > 2:
        raise ValueError(f"y: expected shape (n,) or (n, m), received {y.shape}")
    if weights is None:
        w = jnp.ones((x.shape[0],), x.dtype)
    else:
        w = as_array("weights", weights).astype(x.dtype)
        check_array("weights", w, shape=("n",), sizes=sizes)
    check_finite("x", x)
    check_finite("y", y)
    return x, y, w


def _ridge_parts(x, y, w):
    """Weighted centring and the eigen-decomposition of the centred Gram matrix."""
    sw = jnp.sum(w)
    mx = (w @ x) / sw
    my = jnp.tensordot(w, y, axes=1) / sw
    xc = x - mx[None]
    yc = y - my[None]
    s2, v = jnp.linalg.eigh(xc.T @ (w[:, None] * xc))
    s2 = jnp.maximum(s2, 0)
    wy = w[:, None] * yc if yc.ndim == 2 else w * yc
    b = v.T @ (xc.T @ wy)
    return mx, my, yc, s2, v, b, sw


def _ridge_coef(parts, penalty):
    mx, my, _, s2, v, b, _ = parts
    shrink = 1 / (s2 + penalty)
    coef = v @ (b * (shrink if b.ndim == 1 else shrink[:, None]))
    return coef, my - mx @ coef


def _gcv(parts, w, penalty):
    _, _, yc, s2, _, b, sw = parts
    shrink = 1 / (s2 + penalty)
    b2 = b**2 if b.ndim == 1 else jnp.sum(b**2, axis=1)
    wyy = jnp.sum(w * (yc**2 if yc.ndim == 1 else jnp.sum(yc**2, axis=1)))
    rss = wyy - 2 * jnp.sum(b2 * shrink) + jnp.sum(s2 * b2 * shrink**2)
    df = 1 + jnp.sum(s2 * shrink)
    return sw * rss / (sw - df) ** 2


def _penalties(penalties, dtype):
    p = as_array("penalties", penalties, dtype=jnp.floating, finite=True)
    if p.ndim > 1:
        raise ValueError(f"penalties: expected a scalar or a 1-D array, received shape {p.shape}")
    p = p.astype(dtype).reshape(-1)
    if p.shape[0] == 0:
        raise ValueError("penalties: expected at least one penalty, received none")
    check_range("penalties", p, low=0, low_inclusive=False)
    return p


def fit_ridge(
    x: Float[Array, "n d"],
    y: Float[Array, " n *m"],
    *,
    penalty: float,
    weights: Float[Array, " n"] | None = None,
) -> RidgeProbe:
    """Closed-form ridge regression with an unpenalised intercept.

    **Arguments:** `x` (n, d); `y` (n,) or (n, m); `penalty` > 0 (sklearn's `alpha`);
    `weights` (n,) >= 0 (a 0/1 mask selects the training rows).

    **Returns:** `RidgeProbe`.
    """
    x, y, w = _xy(x, y, weights)
    p = _penalties(penalty, x.dtype)
    if p.shape[0] != 1:
        raise ValueError(f"penalty: expected one positive number, received {penalty!r}")
    return _fit_ridge(x, y.astype(x.dtype), w, p[0])


@jax.jit
def _fit_ridge(x, y, w, penalty):
    coef, intercept = _ridge_coef(_ridge_parts(x, y, w), penalty)
    return RidgeProbe(coef, intercept, penalty)


@jax.jit
def _ridge_gcv(x, y, w, penalties):
    parts = _ridge_parts(x, y, w)
    scores = jax.vmap(lambda p: _gcv(parts, w, p))(penalties)
    best = penalties[jnp.argmin(scores)]
    coef, intercept = _ridge_coef(parts, best)
    return RidgeProbe(coef, intercept, best), scores


def ridge_gcv(
    x: Float[Array, "n d"],
    y: Float[Array, " n *m"],
    *,
    penalties: Sequence[float] | Float[Array, " P"] = _PENALTIES,
    weights: Float[Array, " n"] | None = None,
) -> tuple[RidgeProbe, Float[Array, " P"]]:
    """Ridge with the penalty chosen by generalised cross-validation.

    `GCV(p) = n_w RSS(p) / (n_w - df(p))^2` with `df = 1 + sum_j s_j^2 / (s_j^2 + p)`
    (the intercept counts one), from one eigen-decomposition of the centred Gram matrix.

    **Arguments:** as `fit_ridge`, with `penalties` (P,) candidate penalties.

    **Returns:** (`RidgeProbe` refitted at the best penalty, GCV scores (P,)).
    """
    x, y, w = _xy(x, y, weights)
    return _ridge_gcv(x, y.astype(x.dtype), w, _penalties(penalties, x.dtype))


@jax.jit
def _ridge_kfold(x, y, w, folds, fold_ids, penalties):
    def fold_mse(f):
        train = w * (folds != f).astype(w.dtype)
        test = w * (folds == f).astype(w.dtype)
        parts = _ridge_parts(x, y, train)

        def mse(p):
            coef, b = _ridge_coef(parts, p)
            err = (y - (x @ coef + b)) ** 2
            err = err if err.ndim == 1 else jnp.mean(err, axis=1)
            return jnp.sum(test * err) / jnp.sum(test)

        return jax.vmap(mse)(penalties)

    scores = jnp.mean(jax.vmap(fold_mse)(fold_ids), axis=0)
    best = penalties[jnp.argmin(scores)]
    coef, intercept = _ridge_coef(_ridge_parts(x, y, w), best)
    return RidgeProbe(coef, intercept, best), scores


def ridge_kfold(
    x: Float[Array, "n d"],
    y: Float[Array, " n *m"],
    *,
    folds: Int[Array, " n"],
    penalties: Sequence[float] | Float[Array, " P"] = _PENALTIES,
    weights: Float[Array, " n"] | None = None,
) -> tuple[RidgeProbe, Float[Array, " P"]]:
    """Ridge with the penalty chosen by k-fold cross-validation (held-out MSE).

    **Arguments:** as `ridge_gcv`, with `folds` (n,) int fold ids in [0, k) (e.g. from
    `group_kfold`, so that the tokens of one prompt share a fold).

    **Returns:** (`RidgeProbe` refitted on all weighted rows, mean held-out MSE (P,)).
    """
    x, y, w = _xy(x, y, weights)
    f = np.asarray(folds)
    check_array("folds", f, shape=(x.shape[0],), dtype=np.integer)
    ids = np.unique(f)
    if ids.shape[0] < 2:
        raise ValueError(f"folds: expected at least 2 distinct folds, received {ids.tolist()}")
    return _ridge_kfold(
        x, y.astype(x.dtype), w, jnp.asarray(f), jnp.asarray(ids), _penalties(penalties, x.dtype)
    )


# ---------------------------------------------------------------- logistic (Newton)


def _logistic_objective(theta, x, y1h, w, penalty):
    W, b = theta
    z = x @ W + b[None]
    if W.shape[1] == 1:
        z = jnp.concatenate([jnp.zeros_like(z), z], axis=1)
    ce = -jnp.sum(y1h * jax.nn.log_softmax(z, axis=1), axis=1)
    return jnp.sum(w * ce) / jnp.sum(w) + penalty / 2 * jnp.sum(W**2)


def _newton(theta, x, y1h, w, penalty):
    W, b = theta
    n, d = x.shape
    K = W.shape[1]
    sw = jnp.sum(w)
    xt = jnp.concatenate([x, jnp.ones((n, 1), x.dtype)], axis=1)
    z = x @ W + b[None]
    if K == 1:
        p = jax.nn.sigmoid(z)
        r = p - y1h[:, 1:]
        a = (p * (1 - p))[:, :, None]
    else:
        p = jax.nn.softmax(z, axis=1)
        r = p - y1h
        a = jax.vmap(lambda q: jnp.diag(q) - jnp.outer(q, q))(p)
    g = xt.T @ (w[:, None] * r) / sw  # (d+1, K)
    g = g.at[:d].add(penalty * W)
    h = jnp.einsum("ia,ib,ikl->akbl", xt, (w / sw)[:, None] * xt, a)
    reg = jnp.concatenate([jnp.full((d,), penalty, x.dtype), jnp.zeros((1,), x.dtype)])
    h = h + (
        reg[:, None, None, None]
        * jnp.eye(d + 1, dtype=x.dtype)[:, None, :, None]
        * jnp.eye(K, dtype=x.dtype)[None, :, None, :]
    )
    m = (d + 1) * K
    hm = h.reshape(m, m)
    # the multinomial intercepts are shift-invariant: a tiny ridge fixes that null direction
    hm = hm + jnp.finfo(x.dtype).eps * jnp.trace(hm) / m * jnp.eye(m, dtype=x.dtype)
    step = jnp.linalg.solve(hm, g.reshape(m)).reshape(d + 1, K)
    ts = 0.5 ** jnp.arange(8, dtype=x.dtype)

    def at(t):
        return (W - t * step[:d], b - t * step[d])

    objs = jax.vmap(lambda t: _logistic_objective(at(t), x, y1h, w, penalty))(ts)
    f0 = _logistic_objective(theta, x, y1h, w, penalty)
    best = jnp.argmin(objs)
    t = jnp.where(objs[best] < f0, ts[best], jnp.zeros((), x.dtype))
    W2, b2 = at(t)
    if K > 1:
        b2 = b2 - jnp.mean(b2)
    return (W2, b2), jnp.minimum(objs[best], f0), jnp.sqrt(jnp.sum(g**2))


class LogisticState(eqx.Module):
    """Newton iterate: `coef` (*L, d, K), `intercept` (*L, K)."""

    coef: Float[Array, "*L d K"]
    intercept: Float[Array, "*L K"]


class LogisticStep(AbstractStep):
    """One damped Newton step of L2 multinomial logistic regression (for `run_steps`).

    The step is the full Newton direction (Hessian of the objective in the module
    docstring) with the best of 8 halving step sizes; a leading layer axis on `x`
    fits every layer at once (vmapped).

    **Arguments (fields):** `x` (*L, n, d) float; `labels` (n,) int in [0, n_classes);
    `weights` (n,) 0/1 training mask; `penalty` () > 0; static `n_classes`.

    aux: "loss" (objective after the step, mean over layers) and "grad_norm" (largest
    gradient norm over layers, before the step).
    """

    x: Float[Array, "*L n d"]
    labels: Int[Array, " n"]
    weights: Float[Array, " n"]
    penalty: Float[Array, ""]
    n_classes: int = eqx.field(static=True)

    def init(self, model=None, key=None) -> LogisticState:
        """Zero coefficients (`model`, if given, is a `LogisticState` to start from)."""
        if model is not None:
            return model
        K = 1 if self.n_classes == 2 else self.n_classes
        lead = self.x.shape[:-2]
        return LogisticState(
            jnp.zeros(lead + (self.x.shape[-1], K), self.x.dtype),
            jnp.zeros(lead + (K,), self.x.dtype),
        )

    def step(self, state: LogisticState, key=None) -> tuple[LogisticState, dict[str, Array]]:
        y1h = jax.nn.one_hot(self.labels, self.n_classes, dtype=self.x.dtype)

        def one(W, b, x):
            return _newton((W, b), x, y1h, self.weights, self.penalty)

        fn = one
        for _ in range(self.x.ndim - 2):
            fn = jax.vmap(fn)
        (W, b), obj, gn = fn(state.coef, state.intercept, self.x)
        return LogisticState(W, b), {"loss": jnp.mean(obj), "grad_norm": jnp.max(gn)}


def _logistic_step(x, labels, n_classes, penalty, weights):
    x = as_array("x", x)
    if not jnp.issubdtype(x.dtype, jnp.floating):
        x = x.astype(jnp.float32)
    if x.ndim not in (2, 3):
        raise ValueError(f"x: expected shape (n, d) or (L, n, d), received {x.shape}")
    n = x.shape[-2]
    labels = as_array("labels", labels)
    check_array("labels", labels, shape=(n,), dtype=jnp.integer)
    n_classes = check_positive_int("n_classes", n_classes)
    if n_classes < 2:
        raise ValueError(f"n_classes: expected >= 2, received {n_classes}")
    # coefficients (L, d + 1, C), logits (L, n, C) and their gradients, before allocation
    lead = x.shape[0] if x.ndim == 3 else 1
    check_memory("n_classes", 4.0 * x.dtype.itemsize * lead * n_classes * (x.shape[-1] + 1 + n))
    if n and not (int(labels.min()) >= 0 and int(labels.max()) < n_classes):
        raise ValueError(
            f"labels: expected values in [0, {n_classes}), received "
            f"[{int(labels.min())}, {int(labels.max())}]"
        )
    w = jnp.ones((n,), x.dtype) if weights is None else jnp.asarray(weights).astype(x.dtype)
    check_array("weights", w, shape=(n,))
    if not float(jnp.sum(w)) > 0:
        raise ValueError("weights: expected some positive weight, received none")
    check_finite("x", x)
    if not penalty > 0:
        raise ValueError(f"penalty: expected a positive number, received {penalty!r}")
    return LogisticStep(x, labels, w, jnp.asarray(penalty, x.dtype), n_classes)


def fit_logistic(
    x: Float[Array, "n d"],
    labels: Int[Array, " n"],
    *,
    n_classes: int,
    penalty: float,
    weights: Float[Array, " n"] | None = None,
    iterations: int = 30,
) -> LogisticProbe:
    """L2-penalised multinomial logistic regression by damped Newton (through `run_steps`).

    **Arguments:** `x` (n, d); `labels` (n,) ints in [0, n_classes); `n_classes` >= 2;
    `penalty` > 0 (sklearn's `C = 1 / (penalty * n_w)`); `weights` (n,) 0/1 training
    mask; `iterations` Newton steps (quadratic convergence: 20-30 suffice).

    **Returns:** `LogisticProbe`.
    """
    step = _logistic_step(x, labels, n_classes, penalty, weights)
    if step.x.ndim != 2:
        raise ValueError(
            f"x: expected shape (n, d), received {step.x.shape}; use probe_sweep for a layer axis"
        )
    iterations = check_positive_int("iterations", iterations)
    state, _ = run_steps(
        step,
        step.init(),
        key=jax.random.key(0),
        steps=iterations,
        driver=Driver(chunk=iterations, progress=NoProgress()),
    )
    return LogisticProbe(state.coef, state.intercept, step.penalty)


@jax.jit
def _ridge_sweep(x, y, train, penalties):
    test = 1 - train

    def one(xl):
        probe, scores = _ridge_gcv(xl, y, train, penalties)
        pred = xl @ probe.coef + probe.intercept
        return probe.penalty, pred, r2_score(y, pred, weights=test), probe.coef, jnp.min(scores)

    return jax.vmap(one)(x)


def probe_sweep(
    acts: Float[Array, "L n d"] | ActivationStore,
    y: Float[Array, " n"],
    *,
    train: Bool[Array, " n"],
    kind: str = "ridge",
    penalties: Sequence[float] | Float[Array, " P"] = _PENALTIES,
    n_classes: int | None = None,
    iterations: int = 30,
) -> dict[str, Array]:
    """Fit one probe per layer (all layers in one jitted, vmapped call) and score it.

    **Arguments:**

    - `acts`: (L, n, d) activations of n rows at L layers, or an activation store
      (`jaxlab.lm.collect`), whose columns (site/layer pairs, in store order) become the L
      axis (per-prompt labels map to rows through `store.text_index`).
    - `y`: (n,) targets (ridge) or int labels (logistic).
    - `train`: (n,) bool training mask (e.g. `group_split`); the rest is held out.
    - `kind`: "ridge" (penalty by GCV over `penalties`) or "logistic" (the first of
      `penalties`, Newton `iterations` through `run_steps`).
    - `n_classes`: classes of a logistic probe (default max label + 1).

    **Returns:** {"penalty": (L,), "prediction": (L, n) (ridge: values; logistic: P(class 1)
    for two classes else the argmax), "r2" or "accuracy": (L,) held-out metric,
    "coef": (L, d[, K]), and for ridge "gcv": (L,) the best GCV score of each layer (computed
    on the training rows only, so it can choose a layer without touching held-out rows)}.
    """
    if hasattr(acts, "columns") and hasattr(acts, "array"):
        store = cast("ActivationStore", acts)
        if store.n_tokens == 0:
            raise ValueError("acts: expected a non-empty activation store, received 0 rows")
        cols = [c.rsplit(".L", 1) for c in store.columns]
        acts = jnp.stack([jnp.asarray(store.array(site, int(layer))) for site, layer in cols])
    sizes: dict[str, int] = {}
    acts = as_array("acts", acts, shape=(None, "n", None), sizes=sizes, nonempty=True, real=True)
    if not jnp.issubdtype(acts.dtype, jnp.floating):
        acts = acts.astype(jnp.float32)
    train = as_array("train", train, shape=("n",), sizes=sizes, dtype=jnp.bool_)
    y = as_array("y", y, shape=("n",), sizes=sizes, finite=True, real=True)
    if not bool(jnp.any(train)) or bool(jnp.all(train)):
        raise ValueError("train: expected both training and held-out rows")
    check_finite("acts", acts)
    tr = train.astype(acts.dtype)
    if kind == "ridge":
        pen, pred, r2, coef, gcv = _ridge_sweep(
            acts, y.astype(acts.dtype), tr, _penalties(penalties, acts.dtype)
        )
        return {"penalty": pen, "prediction": pred, "r2": r2, "coef": coef, "gcv": gcv}
    if kind != "logistic":
        raise ValueError(f"kind: expected 'ridge' or 'logistic', received {kind!r}")
    y = y.astype(jnp.int32) if y.dtype == jnp.bool_ else y  # binary labels as 0/1
    n_classes = int(jnp.max(y)) + 1 if n_classes is None else n_classes
    penalty = float(_penalties(penalties, acts.dtype)[0])
    step = _logistic_step(acts, y, n_classes, penalty, tr)
    state, _ = run_steps(
        step,
        step.init(),
        key=jax.random.key(0),
        steps=iterations,
        driver=Driver(chunk=iterations, progress=NoProgress()),
    )
    probe = LogisticProbe(state.coef, state.intercept, step.penalty)
    logits = jax.vmap(lambda W, b, x: jax.vmap(LogisticProbe(W, b, step.penalty).logits)(x))(
        probe.coef, probe.intercept, acts
    )
    labels = jnp.argmax(logits, axis=-1)
    acc = jax.vmap(lambda p: accuracy(y, p, weights=1 - tr))(labels)
    pred = jax.nn.softmax(logits, axis=-1)[..., 1] if n_classes == 2 else labels
    return {
        "penalty": jnp.full((acts.shape[0],), penalty, acts.dtype),
        "prediction": pred,
        "accuracy": acc,
        "coef": probe.coef,
    }
