"""Reliability laws: per-step error from accuracy ~ (1 - epsilon)^steps, and calibration.

P7's third difference: LM computation is probabilistically reliable. If each of s
elementary steps fails independently with probability epsilon, accuracy is
(1 - epsilon)^s. `fit_step_error` fits epsilon across sizes (binomial maximum
likelihood over a grid, no iterative fit) and reports R^2 of the fitted curve on the
accuracy scale. `expected_calibration_error` is the binned ECE of Naeini et al. 2015 /
Guo et al. 2017 ("On Calibration of Modern Neural Networks"), here for option-likelihood
confidences.
"""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np

from jaxlab._core import short_repr

from .._core import as_array, check_memory, check_positive_int, check_range

__all__ = ["StepErrorFit", "expected_calibration_error", "fit_step_error", "option_confidence"]


@dataclasses.dataclass(frozen=True)
class StepErrorFit:
    """accuracy ~ (1 - epsilon)^steps.

    - `epsilon`: fitted per-step error rate in [0, 1).
    - `r2`: 1 - SS_res / SS_tot of the fitted curve against the accuracies (nan when the
      accuracies do not vary).
    - `predicted`: (m,) fitted accuracies at the given steps.
    """

    __repr__ = short_repr  # arrays as dtype[shape], long sequences cut

    epsilon: float
    r2: float
    predicted: np.ndarray


def fit_step_error(steps, accuracy, *, items=None) -> StepErrorFit:
    """Fit the per-step error rate epsilon of accuracy ~ (1 - epsilon)^steps.

    epsilon maximises the binomial likelihood of the solved counts (accuracy x items) under
    accuracy = (1 - epsilon)^steps, over a grid of 4001 points in logit(epsilon) from -14
    to 14 refined by a parabola through the best three (no iterative fit); sizes with no
    solved item count as evidence of a high rate, not as log(0).

    **Arguments:**

    - `steps`: (m,) elementary steps per size (finite, >= 0, fractional means allowed;
      m >= 1, not all 0).
    - `accuracy`: (m,) measured accuracies in [0, 1].
    - `items`: (m,) items behind each accuracy (binomial counts; default 100 each).

    **Returns:** a `StepErrorFit`.
    """
    s = np.asarray(as_array("steps", steps, finite=True), np.float64)
    a = np.asarray(as_array("accuracy", accuracy), np.float64)
    if s.ndim != 1 or a.shape != s.shape or s.size < 1:
        raise ValueError(
            f"steps, accuracy: expected equal non-empty shapes, received {s.shape} and {a.shape}"
        )
    check_range("steps", s, low=0.0)
    check_range("accuracy", a, low=0.0, high=1.0)
    if not np.any(s > 0):
        raise ValueError("steps: expected at least one positive step count, received all 0")
    m = (
        np.full_like(a, 100.0)
        if items is None
        else np.asarray(as_array("items", items, finite=True), np.float64)
    )
    if m.shape != a.shape or not np.all(m >= 1):
        raise ValueError(f"items: expected {a.shape} counts >= 1, received {m}")
    eps = _max_likelihood_epsilon(s, a * m, m)
    pred = (1.0 - eps) ** s
    ss_tot = float(np.sum((a - a.mean()) ** 2))
    r2 = 1.0 - float(np.sum((a - pred) ** 2)) / ss_tot if ss_tot > 0 else float("nan")
    return StepErrorFit(eps, r2, pred)


def _max_likelihood_epsilon(s, k, m) -> float:
    u = np.linspace(-14.0, 14.0, 4001)

    def loglik(u):
        log_q = -np.logaddexp(0.0, u)[:, None] * s[None, :]  # log (1 - eps)^s, eps = sigmoid(u)
        log_miss = np.log(-np.expm1(np.minimum(log_q, -1e-300)))
        return np.sum(k * log_q + (m - k) * np.where(m - k > 0, log_miss, 0.0), axis=1)

    ll = loglik(u)
    i = int(np.clip(np.argmax(ll), 1, u.size - 2))
    y0, y1, y2 = ll[i - 1 : i + 2]
    h = u[1] - u[0]
    curv = y0 - 2 * y1 + y2
    best = u[i] + (0.5 * h * (y0 - y2) / curv if curv < 0 else 0.0)
    return float(1.0 / (1.0 + np.exp(-np.clip(best, u[0], u[-1]))))


def option_confidence(scores) -> tuple[jax.Array, jax.Array]:
    """Confidence from option log-likelihoods: softmax over the K options.

    **Arguments:** `scores`: (..., K) finite log-likelihoods, K >= 2 (else a `ValueError`).

    **Returns:** (choice (...) int argmax, confidence (...) its softmax probability).
    """
    s = as_array("scores", scores, finite=True)
    if s.ndim < 1 or s.shape[-1] < 2:
        raise ValueError(f"scores: expected (..., K) with K >= 2, received {s.shape}")
    probs = jax.nn.softmax(s, axis=-1)
    choice = jnp.argmax(s, axis=-1)
    return choice, jnp.take_along_axis(probs, choice[..., None], axis=-1)[..., 0]


def expected_calibration_error(confidence, correct, *, bins: int = 10) -> jax.Array:
    """Binned expected calibration error: sum_b (n_b / N) |accuracy_b - confidence_b|.

    Bins are equal-width on [0, 1]; bin b holds confidences in (b/B, (b+1)/B] (the first
    also holds 0).

    **Arguments:**

    - `confidence`: (N,) in [0, 1] (N >= 1).
    - `correct`: (N,) bool/0-1.
    - `bins`: number of bins (>= 1).

    **Returns:** scalar ECE in [0, 1]. jit-able.
    """
    conf = as_array("confidence", confidence, ndim=1, finite=True)
    correct = as_array("correct", correct, ndim=1, finite=True, low=0.0, high=1.0)
    bins = check_positive_int("bins", bins)
    check_memory("bins", 8.0 * bins * (conf.size + 4))  # the (N, bins) membership
    if not jnp.issubdtype(conf.dtype, jnp.floating):
        conf = conf.astype(jnp.result_type(float))
    corr = jnp.asarray(correct).astype(conf.dtype)
    if conf.shape != corr.shape or conf.size == 0:
        raise ValueError(
            f"confidence, correct: expected equal non-empty shapes, received "
            f"{conf.shape} and {corr.shape}"
        )
    check_range("confidence", conf, low=0.0, high=1.0)
    b = jnp.clip(jnp.ceil(conf * bins).astype(jnp.int32) - 1, 0, bins - 1)
    conf_sum = jnp.zeros(bins, conf.dtype).at[b].add(conf)
    corr_sum = jnp.zeros(bins, conf.dtype).at[b].add(corr)
    return jnp.sum(jnp.abs(corr_sum - conf_sum)) / conf.size
