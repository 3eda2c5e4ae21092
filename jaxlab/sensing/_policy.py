"""Probe-selection policies and the closed-loop foraging episode.

All policies see, for every candidate action on a grid, the expected information
gain (joint modality) and the expected reward under the current posterior, plus
a scalar posterior uncertainty (mean latent variance, 1 under the prior). They
are strategy objects passed to the single entry point `run_episode`.

- `LexicographicPolicy`: uncertainty-gated lexicographic ordering (P4). While
  uncertainty exceeds `gate`, information comes first and reward breaks near-ties;
  below the gate, reward comes first and information breaks near-ties.
- `ExploitPolicy`: maximise expected reward only.
- `EpsilonGreedyPolicy`: exploit, with a uniformly random probe w.p. `epsilon`.
- `WeightedPolicy`: maximise reward + beta * information (non-lexicographic).

Paper: P4.
"""

from __future__ import annotations

import abc

import equinox as eqx
import jax
import jax.numpy as jnp
from jaxtyping import Array, Float, Int

from jaxlab._core import as_array, check_memory, check_range, check_steps

from ._flower import Flower, nectar_reward, observe
from ._infomap import expected_reward, information_map
from ._model import MultimodalVAE

__all__ = [
    "AbstractPolicy",
    "LexicographicPolicy",
    "ExploitPolicy",
    "EpsilonGreedyPolicy",
    "WeightedPolicy",
    "Episode",
    "run_episode",
]


class AbstractPolicy(eqx.Module):
    """A probing policy: `choose(info, reward, uncertainty, *, key)` picks one of G
    candidate actions from their information gains and predicted rewards `(G,)` and the
    current posterior uncertainty (a scalar)."""

    @abc.abstractmethod
    def choose(
        self,
        info: Float[Array, " G"],
        reward: Float[Array, " G"],
        uncertainty: Float[Array, ""],
        *,
        key: jax.Array,
    ) -> Int[Array, ""]:
        """Index of the chosen action among G candidates."""


class LexicographicPolicy(AbstractPolicy):
    """Uncertainty-gated lexicographic policy (P4). While the posterior uncertainty is
    above `gate`, information comes first: among the actions whose information gain is
    within `tolerance` (a fraction of the range over candidates) of the best, take the one
    of highest predicted reward. Below the gate the order flips: reward first, then
    information among the near-best."""

    gate: float = 0.3
    tolerance: float = 0.1

    def __check_init__(self):
        check_range("gate", self.gate, low=0.0)
        check_range("tolerance", self.tolerance, low=0.0, high=1.0)

    def choose(self, info, reward, uncertainty, *, key):
        def lexi(primary, secondary):
            near = primary >= jnp.max(primary) - self.tolerance * (
                jnp.max(primary) - jnp.min(primary)
            )
            return jnp.argmax(jnp.where(near, secondary, -jnp.inf))

        return jnp.where(uncertainty > self.gate, lexi(info, reward), lexi(reward, info))


class ExploitPolicy(AbstractPolicy):
    """Baseline: always the action of highest predicted reward (no exploration)."""

    def choose(self, info, reward, uncertainty, *, key):
        return jnp.argmax(reward)


class EpsilonGreedyPolicy(AbstractPolicy):
    """Baseline: a uniformly random action with probability `epsilon`, else the action of
    highest predicted reward."""

    epsilon: float = 0.2

    def __check_init__(self):
        check_range("epsilon", self.epsilon, low=0.0, high=1.0)

    def choose(self, info, reward, uncertainty, *, key):
        k1, k2 = jax.random.split(key)
        explore = jax.random.uniform(k1) < self.epsilon
        return jnp.where(
            explore, jax.random.randint(k2, (), 0, reward.shape[0]), jnp.argmax(reward)
        )


class WeightedPolicy(AbstractPolicy):
    """Baseline: the action maximising `reward + beta * info` (a weighted sum)."""

    beta: float = 0.1

    def choose(self, info, reward, uncertainty, *, key):
        return jnp.argmax(reward + self.beta * info)


class Episode(eqx.Module):
    """One flower visit: chosen actions, rewards, and the uncertainty before each probe."""

    actions: Float[Array, "T 3"]
    rewards: Float[Array, " T"]
    uncertainty: Float[Array, " T"]


def run_episode(
    model: MultimodalVAE,
    flower: Flower,
    policy: AbstractPolicy,
    candidates: Float[Array, "G 3"],
    n_steps: int,
    *,
    key: jax.Array,
) -> Episode:
    """Probe `flower` for `n_steps`, each time choosing among `candidates` with `policy`.

    The posterior is the model's product of experts over all probes made so far;
    maps are recomputed every step. `lax.scan` over steps; vmap over flowers.
    `n_steps` is an integer in [1, `jaxlab.MAX_RUN_STEPS`] (10**7) whose probe history
    fits in memory; other values raise a `ValueError` naming it.
    """
    check_steps("n_steps", n_steps)
    check_memory("n_steps", 2 * 8.0 * n_steps * (9 + 6 + 3 + 1))  # probe history and outputs
    candidates = as_array(
        "candidates", candidates, shape=(None, 3), dtype=jnp.floating, finite=True
    )
    if candidates.shape[0] == 0:
        raise ValueError(
            "candidates: expected at least one candidate action, received shape (0, 3)"
        )
    flower = jax.tree.map(lambda x: jnp.asarray(x) if eqx.is_array_like(x) else x, flower)
    dt = candidates.dtype
    hist = (
        jnp.zeros((n_steps, 9), dt),
        jnp.zeros((n_steps, 6), dt),
        jnp.zeros((n_steps, 3), dt),
        jnp.zeros((n_steps,), dt),
    )

    def step(carry, inp):
        (vis, mech, acts, mask) = carry
        t, k = inp
        kp, ko = jax.random.split(k)
        post = model.posterior(vis, mech, acts, mask)
        uncertainty = jnp.mean(1 / post.precision)
        info = information_map(model, post, candidates, "joint")
        rew = jax.vmap(lambda a: expected_reward(model, post, a))(candidates)
        a = candidates[policy.choose(info, rew, uncertainty, key=kp)]
        v, m = observe(flower, a, key=ko)
        carry = (vis.at[t].set(v), mech.at[t].set(m), acts.at[t].set(a), mask.at[t].set(1.0))
        return carry, (a, nectar_reward(flower, a), uncertainty)

    _, (a, r, u) = jax.lax.scan(step, hist, (jnp.arange(n_steps), jax.random.split(key, n_steps)))
    return Episode(actions=a, rewards=r, uncertainty=u)
