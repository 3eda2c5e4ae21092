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

from jaxlab._kernels.laplex import cpu_kernel_available, cpu_plan

__all__ = ["LaplexPlan", "make_plan", "plan_is_valid", "update_plan"]


class LaplexPlan(eqx.Module):
    """Sort/merge state of one LAPLEX operator (all fields int32, per head).

    - `perm_s` (H, N): `s[h, perm_s[h]]` is nondecreasing.
    - `rank_t` (H, M): number of sources `<= t[h, i]`.
    - `perm_t` (H, M): `t[h, perm_t[h]]` is nondecreasing.
    - `rank_s` (H, N): number of targets `<= s[h, j]`.
    - `presorted_s` (H,): 1 where `perm_s[h]` is the identity (the sources came
      sorted; the fused CPU pass then skips reading the permutation), or None
      when unknown.
    """

    perm_s: Int[Array, "H N"]
    rank_t: Int[Array, "H M"]
    perm_t: Int[Array, "H M"]
    rank_s: Int[Array, "H N"]
    presorted_s: Int[Array, " H"] | None = None


def _one_side(src, tgt):
    perm = jnp.argsort(src, stable=True).astype(jnp.int32)
    srt = src[perm]
    rank = jnp.searchsorted(srt, tgt, side="right").astype(jnp.int32)
    return perm, rank


def _presorted(perm):
    ident = jnp.arange(perm.shape[-1], dtype=perm.dtype)
    return jnp.all(perm == jnp.broadcast_to(ident, perm.shape), axis=-1).astype(jnp.int32)


def make_plan(t: Float[Array, "H M"], s: Float[Array, "H N"]) -> LaplexPlan:
    """Sort both anchor sets and merge-rank them: O((M + N) log(M + N)) per head.

    Passing the same array for `t` and `s` (a symmetric operator) sorts once. On
    CPU (when the C++ kernels build) the plan comes from `jaxlab._kernels.laplex.cpu_plan`
    (radix argsort, several times faster than XLA's sort); elsewhere from
    `jnp.argsort` / `jnp.searchsorted`. Both give the same plan.
    """
    same = t is s
    t = lax.stop_gradient(t)  # integer outputs: nothing to differentiate
    s = t if same else lax.stop_gradient(s)
    if jnp.dtype(t.dtype) in (jnp.float32, jnp.float64) and cpu_kernel_available():
        return lax.platform_dependent(
            t,
            s,
            cpu=lambda t, s: _cpu_make_plan(t, s, same),
            default=lambda t, s: _jax_make_plan(t, s, same),
        )
    return _jax_make_plan(t, s, same)


def _cpu_make_plan(t, s, same):
    perm_s, rank_t, perm_t, rank_s, presorted = cpu_plan(t, s, same=same)
    return LaplexPlan(
        perm_s=perm_s, rank_t=rank_t, perm_t=perm_t, rank_s=rank_s, presorted_s=presorted
    )


def _jax_make_plan(t, s, same):
    perm_s, rank_t = jax.vmap(_one_side)(s, t)
    presorted = _presorted(perm_s)
    if same:
        return LaplexPlan(
            perm_s=perm_s, rank_t=rank_t, perm_t=perm_s, rank_s=rank_t, presorted_s=presorted
        )
    perm_t, rank_s = jax.vmap(_one_side)(t, s)
    return LaplexPlan(
        perm_s=perm_s, rank_t=rank_t, perm_t=perm_t, rank_s=rank_s, presorted_s=presorted
    )


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
    if plan.presorted_s is None:  # a hand-made plan: fill in the flag (same tree as make_plan's)
        plan = LaplexPlan(
            plan.perm_s, plan.rank_t, plan.perm_t, plan.rank_s, _presorted(plan.perm_s)
        )
    return lax.cond(plan_is_valid(plan, t, s), lambda: plan, lambda: make_plan(t, s))
