"""`LaplexPlan`: the sort permutations and merge ranks of a LAPLEX operator.

Sorting is the only super-linear step of a LAPLEX matvec. A plan stores, per
head, the permutations sorting the source anchors `s` and target anchors `t`,
and the ranks that merge one into the other. While anchors move little (one
optimiser step), the order does not change and the plan can be reused;
`update_plan` checks that in O(M + N) and re-sorts only when the order changed.
"""

from __future__ import annotations

import equinox as eqx
import jax
import jax.numpy as jnp
from jax import lax
from jaxtyping import Array, Bool, Float, Int

__all__ = ["LaplexPlan", "make_plan", "plan_is_valid", "update_plan"]


class LaplexPlan(eqx.Module):
    """Sort/merge state of one LAPLEX operator (all fields int32, per head).

    - `perm_s` (H, N): `s[h, perm_s[h]]` is nondecreasing.
    - `rank_t` (H, M): number of sources `<= t[h, i]`.
    - `perm_t` (H, M): `t[h, perm_t[h]]` is nondecreasing.
    - `rank_s` (H, N): number of targets `<= s[h, j]`.
    """

    perm_s: Int[Array, "H N"]
    rank_t: Int[Array, "H M"]
    perm_t: Int[Array, "H M"]
    rank_s: Int[Array, "H N"]


def _one_side(src, tgt):
    perm = jnp.argsort(src, stable=True).astype(jnp.int32)
    srt = src[perm]
    rank = jnp.searchsorted(srt, tgt, side="right").astype(jnp.int32)
    return perm, rank


def make_plan(t: Float[Array, "H M"], s: Float[Array, "H N"]) -> LaplexPlan:
    """Sort both anchor sets and merge-rank them: O((M + N) log(M + N)) per head."""
    perm_s, rank_t = jax.vmap(_one_side)(s, t)
    perm_t, rank_s = jax.vmap(_one_side)(t, s)
    return LaplexPlan(perm_s=perm_s, rank_t=rank_t, perm_t=perm_t, rank_s=rank_s)


def _side_ok(src, perm, tgt, rank):
    srt = src[perm]
    n = srt.shape[0]
    sorted_ok = jnp.all(srt[1:] >= srt[:-1])
    lo = jnp.where(rank > 0, srt[jnp.clip(rank - 1, 0, n - 1)], -jnp.inf)
    hi = jnp.where(rank < n, srt[jnp.clip(rank, 0, n - 1)], jnp.inf)
    return sorted_ok & jnp.all((lo <= tgt) & (tgt < hi))


def plan_is_valid(
    plan: LaplexPlan, t: Float[Array, "H M"], s: Float[Array, "H N"]
) -> Bool[Array, ""]:
    """Whether `plan` still sorts and merges the anchors `t`, `s` exactly (O(M + N))."""
    ok_s = jax.vmap(_side_ok)(s, plan.perm_s, t, plan.rank_t)
    ok_t = jax.vmap(_side_ok)(t, plan.perm_t, s, plan.rank_s)
    return jnp.all(ok_s) & jnp.all(ok_t)


def update_plan(plan: LaplexPlan, t: Float[Array, "H M"], s: Float[Array, "H N"]) -> LaplexPlan:
    """Keep `plan` if it is still valid for `t`, `s`, else re-sort (works under jit)."""
    return lax.cond(plan_is_valid(plan, t, s), lambda: plan, lambda: make_plan(t, s))
