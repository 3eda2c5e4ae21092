"""TDGE: task-dimension-guided exploration (P16).

Items are described by categorical *dimensions* (genre, decade, popularity
tier, ...); each dimension has several *features* (its values) and an item's
context row is the 0/1 indicator of the features it has (`contexts[k, f] = 1`
when item k has feature f; `feature_dim[f]` names f's dimension). TDGE
explores top-down, with the same backbone at each level:

1. **dimension level** — arms are the dimensions (one-hot contexts); during the
   probing phase (the first `probe_rounds * M` rounds) dimensions are probed
   round-robin, each probe trying a uniformly random value of the dimension;
   afterwards the backbone picks the dimension it believes drives
   reward;
2. **feature level** — arms are the features of the chosen dimension (one-hot
   contexts over all F features, restricted by the mask);
3. **item level** — arms are the candidate items that have the chosen feature
   (the restriction of the decision space); contexts are the item rows.

All three levels are updated with the observed reward. Because the feature
model is shared across rounds, the spread of its estimates inside a dimension
says how much choosing a value of that dimension changes reward: that is the
dimension relevance TDGE reports (`dimension_relevance`).
"""

from __future__ import annotations

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Bool, Float, Int

from jaxlab._core import check_array, check_finite, check_instance

from ._backbone import AbstractBackbone, AbstractChoice, LinearState, masked_uniform

__all__ = ["TDGE", "TDGEState", "TDGEChoice", "dimension_relevance"]


class TDGEState(eqx.Module):
    """Backbone states of the three levels and the round counter."""

    dim_state: eqx.Module
    feat_state: eqx.Module
    item_state: eqx.Module
    t: Int[Array, ""]


class TDGEChoice(AbstractChoice):
    """One TDGE decision: the dimension, the feature inside it and the item."""

    arm: Int[Array, ""]
    dimension: Int[Array, ""]
    feature: Int[Array, ""]
    dim_choice: eqx.Module
    feat_choice: eqx.Module
    item_choice: eqx.Module


class TDGE(AbstractBackbone):
    """Task-dimension-guided exploration over a contextual-bandit backbone.

    **Arguments:**

    - `backbone`: the bandit used at the dimension, feature and item levels
      (e.g. `LinUCB()`, `LinearTS()`, `EpsilonGreedy()`).
    - `feature_dim`: tuple of length F, the dimension index (0..M-1) of each
      feature column of the item contexts.
    - `probe_rounds`: each dimension is probed this many times (round-robin)
      before the dimension level is left to the backbone.
    - `dimension_credit`: what the dimension level learns from. "reward": the
      observed reward. "gain": how much restricting to the chosen feature raises
      the item model's predicted reward over the dimension's average feature
      (`theta[f] - mean_{g in dim} theta[g]`), i.e. how reward-relevant the
      dimension is; needs a shared-linear backbone.

    Paper: P16, "Human-inspired task-dimension-guided exploration" (TDGE).
    """

    backbone: AbstractBackbone
    feature_dim: tuple[int, ...] = eqx.field(static=True)
    probe_rounds: int = eqx.field(static=True, default=2)
    dimension_credit: str = eqx.field(static=True, default="reward")

    def __check_init__(self):
        fd = np.asarray(self.feature_dim)
        if fd.ndim != 1 or fd.size == 0 or not np.issubdtype(fd.dtype, np.integer):
            raise ValueError(
                f"feature_dim: expected a non-empty tuple of ints, received {self.feature_dim!r}"
            )
        if fd.min() != 0 or set(np.unique(fd).tolist()) != set(range(int(fd.max()) + 1)):
            raise ValueError(
                "feature_dim: expected dimension indices 0..M-1 each used by at least one "
                f"feature, received {sorted(set(fd.tolist()))}"
            )
        if self.dimension_credit not in ("reward", "gain"):
            raise ValueError(
                f"dimension_credit: expected 'reward' or 'gain', received {self.dimension_credit!r}"
            )
        if (
            isinstance(self.probe_rounds, bool)
            or not isinstance(self.probe_rounds, int)
            or (self.probe_rounds < 0)
        ):
            raise ValueError(
                f"probe_rounds: expected a non-negative integer, received {self.probe_rounds!r}"
            )

    @property
    def n_dims(self) -> int:
        return int(max(self.feature_dim)) + 1

    @property
    def n_features(self) -> int:
        return len(self.feature_dim)

    def init(self, dim: int, n_arms: int = 1, *, key: Array | None = None) -> TDGEState:
        """Fresh backbone states: M one-hot arms, F one-hot arms, `dim`-wide items."""
        if dim != self.n_features:
            raise ValueError(
                f"dim: expected the item context width to equal len(feature_dim)="
                f"{self.n_features}, received {dim}"
            )
        keys = jax.random.split(jax.random.key(0) if key is None else key, 3)
        m, f = self.n_dims, self.n_features
        return TDGEState(
            dim_state=self.backbone.init(m, m, key=keys[0]),
            feat_state=self.backbone.init(f, f, key=keys[1]),
            item_state=self.backbone.init(dim, n_arms, key=keys[2]),
            t=jnp.zeros((), jnp.int32),
        )

    def _level_contexts(self, dtype):
        fd = jnp.asarray(self.feature_dim, jnp.int32)
        eye_m = jnp.eye(self.n_dims, dtype=dtype)
        eye_f = jnp.eye(self.n_features, dtype=dtype)
        return fd, eye_m, eye_f

    def select(
        self,
        state: TDGEState,
        contexts: Float[Array, "K F"],
        mask: Bool[Array, " K"],
        *,
        key: Array,
    ) -> TDGEChoice:
        """Dimension, then feature inside it, then an item that has the feature."""
        x = jnp.asarray(contexts)
        dtype = x.dtype if jnp.issubdtype(x.dtype, jnp.floating) else jnp.zeros(()).dtype
        x = x.astype(dtype)
        fd, eye_m, eye_f = self._level_contexts(dtype)
        has = (x > 0) & mask[:, None]  # (K, F): allowed item k has feature f
        feat_avail = jnp.any(has, axis=0)
        dim_avail = (
            jax.ops.segment_max(feat_avail.astype(jnp.int32), fd, num_segments=self.n_dims) > 0
        )
        k_dim, k_feat, k_item = jax.random.split(key, 3)

        dim_choice = self.backbone.select(state.dim_state, eye_m, dim_avail, key=k_dim)
        probing = state.t < self.probe_rounds * self.n_dims
        # Round-robin probe: the next available dimension at or after t mod M.
        order = (state.t + jnp.arange(self.n_dims, dtype=jnp.int32)) % self.n_dims
        probe_dim = order[jnp.argmax(dim_avail[order])]
        dimension = jnp.where(probing, probe_dim, dim_choice.arm)
        dim_choice = eqx.tree_at(lambda c: c.arm, dim_choice, dimension)

        feat_mask = feat_avail & (fd == dimension)
        k_feat, k_probe = jax.random.split(k_feat)
        feat_choice = self.backbone.select(state.feat_state, eye_f, feat_mask, key=k_feat)
        # A probe tries a random value of the probed dimension (no preference yet).
        feature = jnp.where(probing, masked_uniform(k_probe, feat_mask), feat_choice.arm)
        feat_choice = eqx.tree_at(lambda c: c.arm, feat_choice, feature)

        item_mask = has[:, feature]
        item_choice = self.backbone.select(state.item_state, x, item_mask, key=k_item)
        return TDGEChoice(
            arm=item_choice.arm,
            dimension=dimension,
            feature=feature,
            dim_choice=dim_choice,
            feat_choice=feat_choice,
            item_choice=item_choice,
        )

    def update(
        self,
        state: TDGEState,
        choice: TDGEChoice,
        contexts: Float[Array, "K F"],
        reward: Float[Array, ""],
    ) -> TDGEState:
        """Credit the observed reward to the chosen dimension, feature and item."""
        x = jnp.asarray(contexts)
        dtype = x.dtype if jnp.issubdtype(x.dtype, jnp.floating) else jnp.zeros(()).dtype
        fd, eye_m, eye_f = self._level_contexts(dtype)
        if self.dimension_credit == "gain":
            if not isinstance(state.item_state, LinearState):
                raise ValueError(
                    "dimension_credit: 'gain' needs a shared-linear backbone, "
                    f"received {type(self.backbone).__name__}"
                )
            theta = state.item_state.theta
            dim_mean = jax.ops.segment_sum(theta, fd, num_segments=self.n_dims) / jnp.asarray(
                np.bincount(np.asarray(self.feature_dim)), theta.dtype
            )
            dim_signal = theta[choice.feature] - dim_mean[choice.dimension]
        else:
            dim_signal = reward
        return TDGEState(
            dim_state=self.backbone.update(state.dim_state, choice.dim_choice, eye_m, dim_signal),
            feat_state=self.backbone.update(state.feat_state, choice.feat_choice, eye_f, reward),
            item_state=self.backbone.update(
                state.item_state, choice.item_choice, x.astype(dtype), reward
            ),
            t=state.t + 1,
        )


def dimension_relevance(
    policy: TDGE, state: TDGEState, *, level: str = "item"
) -> Float[Array, " M"]:
    """How strongly each dimension drives reward, read from TDGE's linear models.

    **Arguments:**

    - `policy`, `state`: the `TDGE` policy and its state after some rounds.
    - `level`: "item" (default) reads the item-level model, whose weights are
      per feature; "feature" reads the feature-level model (one weight per
      feature, only features tried at least once count).

    **Returns:** `(M,)` for each dimension the range (max - min) of the reward
    weights of its features. A per-dimension constant cancels in the range, so
    it measures how much changing the value of that dimension changes reward (0
    for a dimension the model found irrelevant). Needs a shared-linear backbone
    (LinUCB, LinearTS, EpsilonGreedy). The model read must hold a float `(F, F)` `a_inv`
    and `(F,)` `b` (F = `len(policy.feature_dim)`), finite where concrete: otherwise a
    `ValueError` naming the field (e.g. `state.item_state.b`), never a NaN relevance.
    """
    check_instance("policy", policy, TDGE)
    check_instance("state", state, TDGEState)
    if level not in ("item", "feature"):
        raise ValueError(f"level: expected 'item' or 'feature', received {level!r}")
    model = state.item_state if level == "item" else state.feat_state
    lam = getattr(policy.backbone, "lam", None)
    if lam is None or not isinstance(model, LinearState):
        raise ValueError(
            "policy: dimension_relevance needs a shared-linear backbone (LinUCB, LinearTS, "
            f"EpsilonGreedy), received {type(policy.backbone).__name__}"
        )
    where = "state.item_state" if level == "item" else "state.feat_state"
    f = policy.n_features
    for field, shape in (("a_inv", (f, f)), ("b", (f,))):
        value = getattr(model, field)
        check_array(f"{where}.{field}", value, shape=shape, dtype=jnp.floating)
        check_finite(f"{where}.{field}", value)
    theta = model.theta
    if level == "feature":
        # One-hot feature contexts keep A diagonal: A_ff = lam + n_f, so f was tried
        # iff its inverse is below the prior 1/lam.
        tried = jnp.diag(model.a_inv) * lam < 1 - 1e-6
    else:
        tried = jnp.ones(theta.shape, bool)
    fd = jnp.asarray(policy.feature_dim, jnp.int32)
    m = policy.n_dims
    hi = jax.ops.segment_max(jnp.where(tried, theta, -jnp.inf), fd, num_segments=m)
    lo = jax.ops.segment_min(jnp.where(tried, theta, jnp.inf), fd, num_segments=m)
    n_tried = jax.ops.segment_sum(tried.astype(jnp.int32), fd, num_segments=m)
    return jnp.where(n_tried >= 2, hi - lo, jnp.zeros((), theta.dtype))
