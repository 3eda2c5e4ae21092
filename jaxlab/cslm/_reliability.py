"""Reliability laws: per-step error from accuracy ~ (1 - epsilon)^steps, and calibration.

P7's third difference: LM computation is probabilistically reliable. If each of s
elementary steps fails independently with probability epsilon, accuracy is
(1 - epsilon)^s. `fit_step_error` fits epsilon across sizes by weighted least squares of
log accuracy on steps (through the origin; delta-method weights n acc / (1 - acc)) and
reports R^2 of the fitted curve on the accuracy scale. `expected_calibration_error` is the
binned ECE of Naeini et al. 2015 / Guo et al. 2017 ("On Calibration of Modern Neural
Networks"), here for option-likelihood confidences.
"""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np

from .._core import check_array, check_positive_int, check_range

__all__ = ["StepErrorFit", "expected_calibration_error", "fit_step_error", "option_confidence"]


@dataclasses.dataclass(frozen=True)
class StepErrorFit:
    """accuracy ~ (1 - epsilon)^steps.

    - `epsilon`: fitted per-step error rate in [0, 1).
    - `r2`: 1 - SS_res / SS_tot of the fitted curve against the accuracies (nan when the
      accuracies do not vary).
    - `predicted`: (m,) fitted accuracies at the given steps.
    """

    epsilon: float
    r2: float
    predicted: np.ndarray


def fit_step_error(steps, accuracy, *, items=None) -> StepErrorFit:
    """Fit the per-step error rate epsilon of accuracy ~ (1 - epsilon)^steps.

    Accuracies are floored at 1/(2 items) before the logarithm (a size with no solved
    item still says the rate is high, not infinite).

    **Arguments:**

    - `steps`: (m,) elementary steps per size (>= 0; m >= 1, not all 0).
    - `accuracy`: (m,) measured accuracies in [0, 1].
    - `items`: (m,) items behind each accuracy (weights and floor; default 100 each).

    **Returns:** a `StepErrorFit`.
    """
    s, a = np.asarray(steps, np.float64), np.asarray(accuracy, np.float64)
    if s.ndim != 1 or a.shape != s.shape or s.size < 1:
        raise ValueError(f"steps, accuracy: expected equal non-empty shapes, received "
                         f"{s.shape} and {a.shape}")
    check_range("steps", s, low=0.0)
    check_range("accuracy", a, low=0.0, high=1.0)
    if not np.any(s > 0):
        raise ValueError("steps: expected at least one positive step count, received all 0")
    m = np.full_like(a, 100.0) if items is None else np.asarray(items, np.float64)
    if m.shape != a.shape or not np.all(m >= 1):
        raise ValueError(f"items: expected {a.shape} counts >= 1, received {m}")
    lo = 1.0 / (2.0 * m)
    af = np.clip(a, lo, 1.0 - lo)
    w = m * af / (1.0 - af)
    slope = float(np.sum(w * s * np.log(af)) / np.sum(w * s * s))
    eps = float(np.clip(-np.expm1(slope), 0.0, 1.0 - 1e-12))
    pred = (1.0 - eps) ** s
    ss_tot = float(np.sum((a - a.mean()) ** 2))
    r2 = 1.0 - float(np.sum((a - pred) ** 2)) / ss_tot if ss_tot > 0 else float("nan")
    return StepErrorFit(eps, r2, pred)


def option_confidence(scores) -> tuple[jax.Array, jax.Array]:
    """Confidence from option log-likelihoods: softmax over the K options.

    **Arguments:** `scores`: (..., K) log-likelihoods.

    **Returns:** (choice (...) int argmax, confidence (...) its softmax probability).
    """
    s = jnp.asarray(scores)
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
    confidence = np.asarray(confidence) if isinstance(confidence, list | tuple) else confidence
    check_array("confidence", confidence, ndim=1)
    correct = np.asarray(correct) if isinstance(correct, list | tuple) else correct
    check_array("correct", correct, ndim=1)
    bins = check_positive_int("bins", bins)
    conf = jnp.asarray(confidence)
    if not jnp.issubdtype(conf.dtype, jnp.floating):
        conf = conf.astype(jnp.result_type(float))
    corr = jnp.asarray(correct).astype(conf.dtype)
    if conf.shape != corr.shape or conf.size == 0:
        raise ValueError(f"confidence, correct: expected equal non-empty shapes, received "
                         f"{conf.shape} and {corr.shape}")
    check_range("confidence", conf, low=0.0, high=1.0)
    b = jnp.clip(jnp.ceil(conf * bins).astype(jnp.int32) - 1, 0, bins - 1)
    conf_sum = jnp.zeros(bins, conf.dtype).at[b].add(conf)
    corr_sum = jnp.zeros(bins, conf.dtype).at[b].add(corr)
    return jnp.sum(jnp.abs(corr_sum - conf_sum)) / conf.size
