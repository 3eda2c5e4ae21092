"""Contextual-bandit backbones as pure `(init, select, update)` triples.

Every backbone (and TDGE, which is built from backbones) follows one protocol:

- `state = policy.init(dim, n_arms, key=key)`;
- `choice = policy.select(state, contexts, mask, key=key)` with `contexts` of
  shape `(K, d)` (one feature row per candidate arm) and `mask` of shape `(K,)`
  (which arms may be chosen this round); `choice.arm` is the chosen index;
- `state = policy.update(state, choice, contexts, reward)`.

States are pytrees, so whole runs are `lax.scan`s and `vmap` over seeds/users.
Linear models keep the inverse Gram matrix and update it with the exact
Sherman–Morrison rank-one formula (O(d^2) per round instead of O(d^3)).

LinUCB: Li, Chu, Langford, Schapire (2010), "A contextual-bandit approach to
personalized news article recommendation". Linear Thompson sampling: Agrawal &
Goyal (2013). These are the backbones over which TDGE (P16) explores.
"""

from __future__ import annotations

import abc

import equinox as eqx
import jax
import jax.numpy as jnp
from jaxtyping import Array, Bool, Float, Int

from jaxlab._core import as_array, check_array

__all__ = [
    "sherman_morrison",
    "AbstractBackbone",
    "Selection",
    "LinearState",
    "LinUCB",
    "LinearTS",
    "EpsilonGreedy",
    "DisjointState",
    "DisjointLinUCB",
    "masked_argmax",
    "masked_uniform",
]


def sherman_morrison(a_inv: Float[Array, "d d"], x: Float[Array, " d"]) -> Float[Array, "d d"]:
    """Inverse of `A + x x^T` from the inverse of a symmetric `A`, exactly.

    **Arguments:**

    - `a_inv`: `(d, d)` inverse of a symmetric positive-definite matrix `A`.
    - `x`: `(d,)` the rank-one update vector.

    **Returns:** `(d, d)` the inverse of `A + x x^T`:
    `A^{-1} - (A^{-1} x)(A^{-1} x)^T / (1 + x^T A^{-1} x)`.
    """
    sizes = check_array("a_inv", as_array("a_inv", a_inv), shape=("d", "d"))
    a_inv = as_array("a_inv", a_inv, dtype=jnp.floating, finite=True)
    x = as_array("x", x, shape=("d",), dtype=jnp.floating, sizes=sizes, finite=True)
    u = a_inv @ x
    return a_inv - jnp.outer(u, u) / (1 + x @ u)


def masked_argmax(scores: Float[Array, " K"], mask: Bool[Array, " K"]) -> Int[Array, ""]:
    """Index of the largest score among allowed arms (first one on ties)."""
    return jnp.argmax(jnp.where(mask, scores, -jnp.inf)).astype(jnp.int32)


def masked_uniform(key: Array, mask: Bool[Array, " K"]) -> Int[Array, ""]:
    """An allowed arm drawn uniformly at random."""
    return jax.random.categorical(key, jnp.where(mask, 0.0, -jnp.inf)).astype(jnp.int32)


class AbstractChoice(eqx.Module):
    """What `select` returns: at least the chosen arm."""

    arm: eqx.AbstractVar[Int[Array, ""]]


class Selection(AbstractChoice):
    """A backbone's decision: the chosen arm and the score of every arm."""

    arm: Int[Array, ""]
    scores: Float[Array, " K"]


class LinearState(eqx.Module):
    """Ridge-regression sufficient statistics of a shared linear reward model.

    `a_inv = (lam I + sum x x^T)^{-1}`, `b = sum r x`, `count` = number of updates.
    """

    a_inv: Float[Array, "d d"]
    b: Float[Array, " d"]
    count: Int[Array, ""]

    @property
    def theta(self) -> Float[Array, " d"]:
        """Ridge estimate of the reward weights, `A^{-1} b`."""
        return self.a_inv @ self.b


class AbstractBackbone(eqx.Module):
    """A contextual bandit as a pure `(init, select, update)` triple.

    - `state = policy.init(dim, n_arms, key=key)`;
    - `choice = policy.select(state, contexts, mask, key=key)` with `contexts` (K, d), one
      feature row per candidate arm, and `mask` (K,), the arms that may be chosen this
      round; `choice.arm` is the chosen index;
    - `state = policy.update(state, choice, contexts, reward)`.

    States are pytrees, so a run is a `lax.scan` and seeds/users are a `vmap`. TDGE (P16)
    explores over these backbones.
    """

    @abc.abstractmethod
    def init(self, dim: int, n_arms: int, *, key: Array | None = None) -> eqx.Module: ...

    @abc.abstractmethod
    def select(self, state, contexts, mask, *, key: Array) -> AbstractChoice: ...

    @abc.abstractmethod
    def update(self, state, choice, contexts, reward) -> eqx.Module: ...


def _check_hyper(
    name: str, value: float, *, low: float, high: float | None = None, low_inclusive: bool = True
) -> None:
    ok = value > low or (low_inclusive and value == low)
    if high is not None:
        ok = ok and value <= high
    if not ok:
        bracket = "[" if low_inclusive else "("
        raise ValueError(
            f"{name}: expected a value in {bracket}{low}, {'inf' if high is None else high}], "
            f"received {value}"
        )


class _SharedLinear(AbstractBackbone):
    """One linear reward model shared by all arms (arms differ by their contexts).

    Subclasses define a `lam` field (the ridge prior).
    """

    def init(self, dim: int, n_arms: int = 1, *, key: Array | None = None) -> LinearState:
        """Prior state: `A = lam I`, `b = 0` (float dtype: JAX's default float)."""
        del n_arms, key
        dtype = jnp.zeros(()).dtype
        return LinearState(
            a_inv=jnp.eye(dim, dtype=dtype) / jnp.asarray(self.lam, dtype),  # type: ignore[attr-defined]
            b=jnp.zeros(dim, dtype),
            count=jnp.zeros((), jnp.int32),
        )

    def update(
        self,
        state: LinearState,
        choice: Selection,
        contexts: Float[Array, "K d"],
        reward: Float[Array, ""],
    ) -> LinearState:
        """Rank-one (Sherman–Morrison) update with the chosen arm's context and its reward."""
        x = contexts[choice.arm].astype(state.b.dtype)
        r = jnp.asarray(reward).astype(state.b.dtype)
        return LinearState(
            a_inv=sherman_morrison(state.a_inv, x), b=state.b + r * x, count=state.count + 1
        )


def _as_float(contexts, state_dtype):
    return jnp.asarray(contexts).astype(state_dtype)


class LinUCB(_SharedLinear):
    """LinUCB with a shared linear model: score = `x.theta + alpha sqrt(x^T A^{-1} x)`.

    **Arguments:** `alpha` (>= 0) exploration width; `lam` (> 0) ridge prior.
    """

    alpha: float = 1.0
    lam: float = 1.0

    def __check_init__(self):
        _check_hyper("alpha", self.alpha, low=0.0)
        _check_hyper("lam", self.lam, low=0.0, low_inclusive=False)

    def select(
        self,
        state: LinearState,
        contexts: Float[Array, "K d"],
        mask: Bool[Array, " K"],
        *,
        key: Array | None = None,
    ) -> Selection:
        """Arm with the largest upper confidence bound among `mask`."""
        del key
        x = _as_float(contexts, state.b.dtype)
        width = jnp.sqrt(jnp.maximum(jnp.sum((x @ state.a_inv) * x, axis=-1), 0.0))
        scores = x @ state.theta + self.alpha * width
        return Selection(arm=masked_argmax(scores, mask), scores=scores)


class LinearTS(_SharedLinear):
    """Linear Thompson sampling: theta ~ N(A^{-1} b, v^2 A^{-1}), score = `x.theta`.

    **Arguments:** `v` (>= 0) posterior scale; `lam` (> 0) ridge prior.
    """

    v: float = 1.0
    lam: float = 1.0

    def __check_init__(self):
        _check_hyper("v", self.v, low=0.0)
        _check_hyper("lam", self.lam, low=0.0, low_inclusive=False)

    def select(
        self,
        state: LinearState,
        contexts: Float[Array, "K d"],
        mask: Bool[Array, " K"],
        *,
        key: Array,
    ) -> Selection:
        """Arm that is best under one posterior sample of the weights."""
        x = _as_float(contexts, state.b.dtype)
        cov = 0.5 * (state.a_inv + state.a_inv.T)
        chol = jnp.linalg.cholesky(cov)
        z = jax.random.normal(key, state.b.shape, state.b.dtype)
        theta = state.theta + self.v * (chol @ z)
        scores = x @ theta
        return Selection(arm=masked_argmax(scores, mask), scores=scores)


class EpsilonGreedy(_SharedLinear):
    """Epsilon-greedy on a ridge estimate: uniform arm w.p. `epsilon`, else greedy.

    **Arguments:** `epsilon` in [0, 1]; `lam` (> 0) ridge prior.
    """

    epsilon: float = 0.1
    lam: float = 1.0

    def __check_init__(self):
        _check_hyper("epsilon", self.epsilon, low=0.0, high=1.0)
        _check_hyper("lam", self.lam, low=0.0, low_inclusive=False)

    def select(
        self,
        state: LinearState,
        contexts: Float[Array, "K d"],
        mask: Bool[Array, " K"],
        *,
        key: Array,
    ) -> Selection:
        """Greedy arm, or a uniformly random allowed arm with probability `epsilon`."""
        x = _as_float(contexts, state.b.dtype)
        scores = x @ state.theta
        k_explore, k_arm = jax.random.split(key)
        explore = jax.random.uniform(k_explore) < self.epsilon
        arm = jnp.where(explore, masked_uniform(k_arm, mask), masked_argmax(scores, mask))
        return Selection(arm=arm, scores=scores)


class DisjointState(eqx.Module):
    """One ridge model per arm: `a_inv` `(K, d, d)`, `b` `(K, d)`, `count` `(K,)`."""

    a_inv: Float[Array, "K d d"]
    b: Float[Array, "K d"]
    count: Int[Array, " K"]

    @property
    def theta(self) -> Float[Array, "K d"]:
        return jnp.einsum("kij,kj->ki", self.a_inv, self.b)


class DisjointLinUCB(AbstractBackbone):
    """LinUCB with disjoint per-arm models (Li et al. 2010, Algorithm 1).

    Arm `k` scores `x_k.theta_k + alpha sqrt(x_k^T A_k^{-1} x_k)`; usually every row
    of `contexts` is the same user context. This is the model mabwiser's
    `LearningPolicy.LinUCB` fits, so runs can be compared arm by arm.

    **Arguments:** `alpha` (>= 0) exploration width; `lam` (> 0) ridge prior.
    """

    alpha: float = 1.0
    lam: float = 1.0

    def __check_init__(self):
        _check_hyper("alpha", self.alpha, low=0.0)
        _check_hyper("lam", self.lam, low=0.0, low_inclusive=False)

    def init(self, dim: int, n_arms: int, *, key: Array | None = None) -> DisjointState:
        del key
        dtype = jnp.zeros(()).dtype
        eye = jnp.eye(dim, dtype=dtype) / jnp.asarray(self.lam, dtype)
        return DisjointState(
            a_inv=jnp.broadcast_to(eye, (n_arms, dim, dim)),
            b=jnp.zeros((n_arms, dim), dtype),
            count=jnp.zeros(n_arms, jnp.int32),
        )

    def select(
        self,
        state: DisjointState,
        contexts: Float[Array, "K d"],
        mask: Bool[Array, " K"],
        *,
        key: Array | None = None,
    ) -> Selection:
        del key
        x = _as_float(contexts, state.b.dtype)
        mean = jnp.sum(x * state.theta, axis=-1)
        quad = jnp.einsum("ki,kij,kj->k", x, state.a_inv, x)
        scores = mean + self.alpha * jnp.sqrt(jnp.maximum(quad, 0.0))
        return Selection(arm=masked_argmax(scores, mask), scores=scores)

    def update(
        self,
        state: DisjointState,
        choice: Selection,
        contexts: Float[Array, "K d"],
        reward: Float[Array, ""],
    ) -> DisjointState:
        a = choice.arm
        x = contexts[a].astype(state.b.dtype)
        r = jnp.asarray(reward).astype(state.b.dtype)
        return DisjointState(
            a_inv=state.a_inv.at[a].set(sherman_morrison(state.a_inv[a], x)),
            b=state.b.at[a].add(r * x),
            count=state.count.at[a].add(1),
        )
