"""Running a policy: online simulation and Li et al.'s replay evaluator, as `lax.scan`s."""

from __future__ import annotations

import equinox as eqx
import jax
import jax.core
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Bool, Float, Int

from jaxlab._core import as_array, check_array

from ._backbone import AbstractBackbone

__all__ = ["Trajectory", "play", "ReplayResult", "replay"]


class Trajectory(eqx.Module):
    """What `play` returns: per-round arms, rewards and decisions, and the final state."""

    arms: Int[Array, " T"]
    rewards: Float[Array, " T"]
    choices: eqx.Module
    state: eqx.Module


def _check_mask(name: str, mask, expected_shape) -> jax.Array:
    mask = as_array(name, mask, shape=expected_shape, dtype=jnp.bool_)
    if not isinstance(mask, jax.core.Tracer) and not bool(np.all(np.any(np.asarray(mask), -1))):
        raise ValueError(f"{name}: every round needs at least one allowed arm")
    return mask


def _contexts_at(contexts, t):
    return contexts if contexts.ndim == 2 else contexts[t]


def play(
    policy: AbstractBackbone,
    contexts: Float[Array, "T K d"] | Float[Array, "K d"],
    rewards: Float[Array, "T K"],
    mask: Bool[Array, "T K"] | None = None,
    *,
    key: Array,
    state=None,
) -> Trajectory:
    """Run `policy` online for T rounds with full reward tables (simulation).

    **Arguments:**

    - `policy`: a backbone or TDGE.
    - `contexts`: `(T, K, d)` per-round arm contexts, or `(K, d)` fixed ones.
    - `rewards`: `(T, K)` the reward each arm would give in each round (only the
      chosen arm's reward is revealed to the policy).
    - `mask`: `(T, K)` allowed arms per round (default: all).
    - `key`: PRNG key (keyword-only); `state`: optional initial state.

    **Returns:** a `Trajectory` with `arms` `(T,)`, `rewards` `(T,)`, the
    per-round `choices` and the final `state`.
    """
    sizes: dict[str, int] = {}
    rewards = as_array(
        "rewards", rewards, shape=("T", "K"), dtype=jnp.floating, sizes=sizes, finite=True
    )
    contexts = as_array("contexts", contexts, dtype=jnp.floating, finite=True)
    if contexts.ndim == 2:
        check_array("contexts", contexts, shape=("K", None), sizes=sizes)
    else:
        check_array("contexts", contexts, shape=("T", "K", None), sizes=sizes)
    t_len, k = sizes["T"], sizes["K"]
    if t_len == 0 or k == 0:
        raise ValueError(f"rewards: expected at least one round and one arm, received {(t_len, k)}")
    if mask is None:
        mask = jnp.ones((t_len, k), bool)
    mask = _check_mask("mask", mask, (t_len, k))
    k_init, key = jax.random.split(key)
    if state is None:
        state = policy.init(contexts.shape[-1], k, key=k_init)

    def step(state, inp):
        t, r_t, m_t, k_t = inp
        x = _contexts_at(contexts, t)
        choice = policy.select(state, x, m_t, key=k_t)
        r = r_t[choice.arm]
        state = policy.update(state, choice, x, r)
        return state, (choice.arm, r, choice)

    keys = jax.random.split(key, t_len)
    state, (arms, got, choices) = jax.lax.scan(
        step, state, (jnp.arange(t_len), rewards, mask, keys)
    )
    return Trajectory(arms=arms, rewards=got, choices=choices, state=state)


class ReplayResult(eqx.Module):
    """Replay evaluation: per-event match flags and rewards, the estimate, final state.

    `value` = sum of matched rewards / number of matched events (the Li et al.
    2011 estimator); `n_matched` counts the events used.
    """

    matched: Bool[Array, " T"]
    rewards: Float[Array, " T"]
    arms: Int[Array, " T"]
    choices: eqx.Module
    value: Float[Array, ""]
    n_matched: Int[Array, ""]
    state: eqx.Module


def replay(
    policy: AbstractBackbone,
    contexts: Float[Array, "T K d"],
    logged_arms: Int[Array, " T"],
    logged_rewards: Float[Array, " T"],
    mask: Bool[Array, "T K"] | None = None,
    *,
    key: Array,
    state=None,
) -> ReplayResult:
    """Li, Chu, Langford, Wang (2011) replay evaluator of a learning policy.

    Logged events come from a policy that chose uniformly at random among the
    allowed arms. The evaluated policy sees each event's candidates; when it
    picks the logged arm, the event is kept (reward revealed, policy updated),
    otherwise it is skipped. The kept rewards are an unbiased sample of the
    policy's online behaviour, so their mean estimates its per-round value.

    **Arguments:**

    - `contexts`: `(T, K, d)` candidate contexts of each logged event.
    - `logged_arms`: `(T,)` int, the logged (uniformly random) arm.
    - `logged_rewards`: `(T,)` its observed reward.
    - `mask`: `(T, K)` candidates per event (default: all K).
    - `key`, `state`: PRNG key (keyword-only), optional initial state.

    **Returns:** a `ReplayResult`.
    """
    sizes: dict[str, int] = {}
    contexts = as_array(
        "contexts", contexts, shape=("T", "K", None), dtype=jnp.floating, sizes=sizes, finite=True
    )
    logged_arms = as_array("logged_arms", logged_arms, shape=("T",), dtype=jnp.integer, sizes=sizes)
    logged_rewards = as_array(
        "logged_rewards",
        logged_rewards,
        shape=("T",),
        dtype=jnp.floating,
        sizes=sizes,
        finite=True,
    )
    t_len, k = sizes["T"], sizes["K"]
    if not isinstance(logged_arms, jax.core.Tracer):
        la = np.asarray(logged_arms)
        if la.size and (la.min() < 0 or la.max() >= k):
            raise ValueError(
                f"logged_arms: expected values in [0, {k - 1}], "
                f"received range [{la.min()}, {la.max()}]"
            )
    if mask is None:
        mask = jnp.ones((t_len, k), bool)
    mask = _check_mask("mask", mask, (t_len, k))
    k_init, key = jax.random.split(key)
    if state is None:
        state = policy.init(contexts.shape[-1], k, key=k_init)

    def step(state, inp):
        x, a_log, r_log, m_t, k_t = inp
        choice = policy.select(state, x, m_t, key=k_t)
        hit = choice.arm == a_log.astype(choice.arm.dtype)
        new = policy.update(state, choice, x, r_log)
        state = jax.tree_util.tree_map(lambda n, o: jnp.where(hit, n, o), new, state)
        return state, (hit, jnp.where(hit, r_log, jnp.zeros((), r_log.dtype)), choice.arm, choice)

    keys = jax.random.split(key, t_len)
    state, (hit, got, arms, choices) = jax.lax.scan(
        step, state, (contexts, logged_arms, logged_rewards, mask, keys)
    )
    n = jnp.sum(hit.astype(jnp.int32))
    value = jnp.sum(got) / jnp.maximum(n, 1).astype(got.dtype)
    return ReplayResult(
        matched=hit, rewards=got, arms=arms, choices=choices, value=value, n_matched=n, state=state
    )
