"""Off-policy value estimators on logged bandit feedback: IPS, SNIPS, DR, with bootstrap CIs.

Logged data are events i with action a_i, reward r_i and the logging
propensity p_i = pi_0(a_i | x_i). For an evaluation policy pi with action
probabilities `pi(a | x_i)`:

- IPS  (Horvitz–Thompson): mean_i  w_i r_i,  w_i = pi(a_i|x_i) / p_i;
- SNIPS (self-normalised):   sum_i w_i r_i / sum_i w_i;
- DR (Dudík, Langford, Li 2011): mean_i [ sum_a pi(a|x_i) q(x_i, a) + w_i (r_i - q(x_i, a_i)) ].

Confidence intervals are percentile bootstrap intervals over events.
"""

from __future__ import annotations

import functools

import equinox as eqx
import jax
import jax.numpy as jnp
from jaxtyping import Array, Float, Int

from jaxlab._core import (
    as_array,
    check_array,
    check_finite,
    check_memory,
    check_positive_int,
    check_range,
    check_real,
)

__all__ = [
    "ips",
    "snips",
    "doubly_robust",
    "doubly_robust_terms",
    "OffPolicyEstimate",
    "estimate_with_ci",
]


def _check_log(actions, rewards, pscores, action_probs):
    # lists/NumPy converted once; None/str/ragged: a ValueError naming the argument
    actions, rewards, pscores, action_probs = (
        as_array(name, x)
        for name, x in (
            ("actions", actions),
            ("rewards", rewards),
            ("pscores", pscores),
            ("action_probs", action_probs),
        )
    )
    if actions.size == 0:
        raise ValueError("actions: expected at least one logged round, received none")
    sizes = check_array("action_probs", action_probs, shape=("n", "K"), dtype=jnp.floating)
    check_array("actions", actions, shape=("n",), dtype=jnp.integer, sizes=sizes)
    check_array("rewards", rewards, shape=("n",), dtype=jnp.floating, sizes=sizes)
    check_array("pscores", pscores, shape=("n",), dtype=jnp.floating, sizes=sizes)
    check_finite("rewards", rewards)
    check_range("pscores", pscores, low=0.0, high=1.0, low_inclusive=False)
    check_range("action_probs", action_probs, low=0.0, high=1.0)
    check_range("actions", actions, low=0, high=sizes["K"] - 1)
    return sizes, (actions, rewards, pscores, action_probs)


def _weights(actions, pscores, action_probs):
    pi = jnp.take_along_axis(action_probs, actions[:, None], axis=1)[:, 0]
    return pi / pscores


def ips(
    actions: Int[Array, " n"],
    rewards: Float[Array, " n"],
    pscores: Float[Array, " n"],
    action_probs: Float[Array, "n K"],
) -> Float[Array, ""]:
    """Inverse-propensity-scored value of the policy whose probabilities are `action_probs`.

    **Arguments:** logged `actions` `(n,)`, `rewards` `(n,)`, logging propensities
    `pscores` `(n,)` in (0, 1]; `action_probs` `(n, K)` the evaluation policy.

    **Returns:** scalar estimate of the evaluation policy's expected reward.
    """
    _, (actions, rewards, pscores, action_probs) = _check_log(
        actions, rewards, pscores, action_probs
    )
    return jnp.mean(_weights(actions, pscores, action_probs) * rewards)


def snips(
    actions: Int[Array, " n"],
    rewards: Float[Array, " n"],
    pscores: Float[Array, " n"],
    action_probs: Float[Array, "n K"],
) -> Float[Array, ""]:
    """Self-normalised IPS (same arguments as `ips`)."""
    _, (actions, rewards, pscores, action_probs) = _check_log(
        actions, rewards, pscores, action_probs
    )
    w = _weights(actions, pscores, action_probs)
    return jnp.sum(w * rewards) / jnp.sum(w)


def doubly_robust(
    actions: Int[Array, " n"],
    rewards: Float[Array, " n"],
    pscores: Float[Array, " n"],
    action_probs: Float[Array, "n K"],
    q_hat: Float[Array, "n K"],
) -> Float[Array, ""]:
    """Doubly-robust value estimate with reward model `q_hat` `(n, K)` (others as `ips`):
    the mean of `doubly_robust_terms`."""
    return jnp.mean(doubly_robust_terms(actions, rewards, pscores, action_probs, q_hat))


def doubly_robust_terms(
    actions: Int[Array, " n"],
    rewards: Float[Array, " n"],
    pscores: Float[Array, " n"],
    action_probs: Float[Array, "n K"],
    q_hat: Float[Array, "n K"],
) -> Float[Array, " n"]:
    """Per-event doubly-robust terms `sum_a pi(a|x_i) q(x_i, a) + w_i (r_i - q(x_i, a_i))`
    (arguments as `doubly_robust`, whose value is their mean).

    Two policies' terms on the same log are paired: their difference, event by event,
    is the per-event DR estimate of the value difference, so a paired bootstrap over
    events compares the policies with the event-to-event variation they share removed.

    **Returns:** `(n,)` terms.
    """
    sizes, (actions, rewards, pscores, action_probs) = _check_log(
        actions, rewards, pscores, action_probs
    )
    q_hat = as_array("q_hat", q_hat, shape=("n", "K"), dtype=jnp.floating, sizes=sizes, finite=True)
    return _dr_event_terms(actions, rewards, pscores, action_probs, q_hat)


def _dr_event_terms(actions, rewards, pscores, action_probs, q_hat):
    w = _weights(actions, pscores, action_probs)
    q_a = jnp.take_along_axis(q_hat, actions[:, None], axis=1)[:, 0]
    return jnp.sum(action_probs * q_hat, axis=1) + w * (rewards - q_a)


class OffPolicyEstimate(eqx.Module):
    """A point estimate and its percentile-bootstrap confidence interval."""

    value: Float[Array, ""]
    low: Float[Array, ""]
    high: Float[Array, ""]


def estimate_with_ci(
    estimator, *args, key: Array, n_boot: int = 200, level: float = 0.95
) -> OffPolicyEstimate:
    """Point estimate of `estimator(*args)` and a bootstrap CI over logged events.

    **Arguments:** `estimator` one of `ips`, `snips`, `doubly_robust`; `args`
    its arrays (all with leading event axis n); `key` PRNG key; `n_boot`
    bootstrap resamples; `level` confidence level in (0, 1).

    **Returns:** an `OffPolicyEstimate`.
    """
    check_positive_int("n_boot", n_boot)
    level = check_real("level", level, low=0.0, high=1.0, low_inclusive=False, high_inclusive=False)
    value = estimator(*args)  # validates the log (lists and NumPy arrays accepted)
    args = tuple(jnp.asarray(a) for a in args)
    n = args[0].shape[0]
    # the resample indices, and one resampled log at a time per batch of 8
    check_memory("n_boot", 8.0 * n_boot * n + 8 * 8.0 * sum(a.size for a in args))
    idx = jax.random.randint(key, (n_boot, n), 0, n)
    # Validation happened on the full log; the resamples only reuse those entries.
    raw = {ips: _ips_raw, snips: _snips_raw, doubly_robust: _dr_raw}.get(estimator, estimator)
    low, high = _bootstrap_interval(raw, level, idx, *args)
    return OffPolicyEstimate(value=value, low=low, high=high)


@functools.partial(jax.jit, static_argnums=(0, 1))
def _bootstrap_interval(raw, level, idx, *args):
    """Percentile interval of `raw` over the resamples `idx` (one compilation per estimator
    and shape: run eagerly, every call compiled its `lax.map` anew)."""
    # lax.map in small batches: a vmap over all resamples would hold n_boot copies of the log.
    boots = jax.lax.map(lambda i: raw(*(a[i] for a in args)), idx, batch_size=8)
    q = jnp.quantile(boots, jnp.asarray([(1 - level) / 2, (1 + level) / 2], boots.dtype))
    return q[0], q[1]


def _ips_raw(actions, rewards, pscores, action_probs):
    return jnp.mean(_weights(actions, pscores, action_probs) * rewards)


def _snips_raw(actions, rewards, pscores, action_probs):
    w = _weights(actions, pscores, action_probs)
    return jnp.sum(w * rewards) / jnp.sum(w)


def _dr_raw(actions, rewards, pscores, action_probs, q_hat):
    return jnp.mean(_dr_event_terms(actions, rewards, pscores, action_probs, q_hat))
