"""`reinforce_surrogate`: the score-function (REINFORCE) gradient of an expected reward.

Williams 1992, "Simple statistical gradient-following algorithms for connectionist
reinforcement learning". For a policy pi = softmax(logits) over M choices and rewards r,
grad E_{j ~ pi}[r_j] = E_{j ~ pi}[(r_j - b) grad log pi_j] for any baseline b that does
not depend on the sampled j. The surrogate below has that estimate as its gradient.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from jaxtyping import Array, Float

from jaxlab._core import as_array, check_size

REINFORCE_MAX_SAMPLES = 1 << 20  # samples per call: (n_samples,) draws are allocated

__all__ = ["reinforce_surrogate"]


def reinforce_surrogate(
    logits: Float[Array, " M"],
    rewards: Float[Array, " M"],
    *,
    key: jax.Array,
    n_samples: int = 1,
) -> Float[Array, ""]:
    """A scalar whose gradient in `logits` is an unbiased estimate of grad E_pi[r].

    Samples `n_samples` choices j ~ softmax(logits) and returns
    mean_s (r_{j_s} - b) log pi_{j_s}, rewards and baseline held constant
    (`stop_gradient`), with the baseline b = sum_j pi_j r_j (the expected reward, which
    does not depend on the samples, so the estimate stays unbiased and its variance is
    that of a centred reward). Maximise it (or minimise its negative).

    **Arguments:**
        logits: (M,) policy logits.
        rewards: (M,) reward of every choice (only the sampled ones and the baseline
            enter; where rewards are only known for the sampled choice, pass any b-free
            estimate).
        key: PRNG key (keyword-only).
        n_samples: samples per call (at most `REINFORCE_MAX_SAMPLES`).

    `logits` and `rewards` are finite (M,) arrays, M >= 1 (checked when concrete; inside
    `jit` only their shapes); anything else raises a `ValueError` naming the argument.

    **Returns:** a scalar surrogate.
    """
    n_samples = check_size(
        "n_samples", n_samples, cap=REINFORCE_MAX_SAMPLES, why="routing.REINFORCE_MAX_SAMPLES"
    )
    sizes: dict[str, int] = {}
    logits = as_array("logits", logits, shape=("M",), sizes=sizes, finite=True, real=True)
    rewards = as_array("rewards", rewards, shape=("M",), sizes=sizes, finite=True, real=True)
    if logits.shape[0] == 0:
        raise ValueError("logits: expected at least one choice, received shape (0,)")
    logp = jax.nn.log_softmax(logits)
    r = jax.lax.stop_gradient(rewards)
    b = jnp.sum(jax.lax.stop_gradient(jnp.exp(logp)) * r)
    j = jax.random.categorical(key, jax.lax.stop_gradient(logits), shape=(n_samples,))
    return jnp.mean((r[j] - b) * logp[j])
