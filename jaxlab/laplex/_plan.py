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
import numpy as np
from jax import lax
from jax.core import Tracer
from jaxtyping import Array, Bool, Float, Int

from jaxlab._core import as_array, check_array, error_if_not_finite
from jaxlab._kernels.laplex import cpu_kernel_available, cpu_plan

__all__ = ["LaplexPlan", "make_plan", "plan_is_valid", "update_plan"]

# plan_error_if's message; the fused C++ passes' check (kernels/laplex/laplex_check.h,
# kPlanMalformed) starts its error text with the same words, then names field and head
PLAN_MALFORMED = (
    "plan: expected perm_s/perm_t rows that are permutations of 0..N-1 / 0..M-1 and "
    "ranks in [0, N] / [0, M] (build plans with make_plan), received a malformed plan"
)


class LaplexPlan(eqx.Module):
    """Sort/merge state of one LAPLEX operator (all fields int32, per head).

    - `perm_s` (H, N): `s[h, perm_s[h]]` is nondecreasing.
    - `rank_t` (H, M): number of sources `<= t[h, i]`.
    - `perm_t` (H, M): `t[h, perm_t[h]]` is nondecreasing.
    - `rank_s` (H, N): number of targets `<= s[h, j]`.
    - `presorted_s` (H,): 1 where `perm_s[h]` is the identity (the sources came
      sorted; the fused CPU pass then skips reading the permutation), or None
      when unknown.

    Build plans with `make_plan` / `update_plan`. A plan given to `matvec` is checked:
    each `perm_*` row must be a permutation of `0..len-1` and each `rank_*` lie in
    `[0, len]`, and a concrete plan must sort and merge the concrete anchors it is used
    with. A concrete plan that fails raises `ValueError` eagerly; a traced one (under `jit`)
    is checked by the fused C++ passes on CPU, each field before a pass reads it
    (`jax.errors.JaxRuntimeError` or `ValueError`) and by `equinox.error_if` on other strategies
    (`equinox.EquinoxRuntimeError`), both
    with the message "plan: expected perm_s/perm_t rows that are permutations ..."; see
    `matvec`.
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
    CPU (when the C++ kernels build) the plan comes from the C++ kernel `laplex_plan.cc`
    (radix argsort, several times faster than XLA's sort); elsewhere from
    `jnp.argsort` / `jnp.searchsorted`. Both give the same plan.
    """
    same = t is s
    t, s = _check_anchors(t, s)
    t = error_if_not_finite("t", t)  # the radix sort's precondition, also under jit
    s = t if same else error_if_not_finite("s", s)
    return _make_plan(t, s, same)


def _make_plan(t, s, same: bool) -> LaplexPlan:
    """`make_plan` without the checks (its callers have made them)."""
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


def _perm_ok(perm, n):
    """Whether every row of `perm` is a permutation of 0..n-1 (O(n) per row)."""
    counts = jax.vmap(lambda p: jnp.zeros(n, jnp.int32).at[p].add(1, mode="drop"))(perm)
    return jnp.all(counts == 1)


def plan_error_if(plan: LaplexPlan, m: int, n: int) -> LaplexPlan:
    """`plan`, with an `equinox.error_if` unless its permutations and ranks are in range.

    The traced counterpart of `check_plan` (a malformed permutation would make the
    kernels read or leave unwritten memory): O(M + N).
    """
    bad = ~(
        _perm_ok(plan.perm_s, n)
        & _perm_ok(plan.perm_t, m)
        & jnp.all((plan.rank_t >= 0) & (plan.rank_t <= n))
        & jnp.all((plan.rank_s >= 0) & (plan.rank_s <= m))
    )
    perm_s = eqx.error_if(plan.perm_s, bad, PLAN_MALFORMED)
    return LaplexPlan(perm_s, plan.rank_t, plan.perm_t, plan.rank_s, plan.presorted_s)


def _check_plan_shapes(plan: LaplexPlan, *, m: int, n: int, h: int | None = None) -> dict:
    """Raise `ValueError` unless `plan` is a `LaplexPlan` whose fields are integer arrays
    of shapes (H, N) / (H, M) (`h`: the number of heads when known); returns the fields'
    lengths by name."""
    if not isinstance(plan, LaplexPlan):
        raise ValueError(f"plan: expected a LaplexPlan or None, received {type(plan).__name__}")
    fields = {"perm_s": n, "rank_t": m, "perm_t": m, "rank_s": n}
    sizes: dict[str, int] = {} if h is None else {"H": h}
    for name, length in fields.items():
        x = getattr(plan, name)
        check_array(f"plan.{name}", x, shape=("H", length), dtype=jnp.integer, sizes=sizes)
    if plan.presorted_s is not None:
        check_array("plan.presorted_s", plan.presorted_s, shape=("H",), sizes=sizes)
    return fields


def check_plan(plan: LaplexPlan, t=None, s=None, *, m: int, n: int) -> None:
    """Raise `ValueError` unless a concrete `plan` is well formed (and fits concrete `t`, `s`).

    Checks integer dtypes, the shapes (H, N) / (H, M), that each `perm_*` row is a
    permutation of `0..len-1`, that `rank_*` lie in `[0, len]`, and, when `t` and `s` are
    concrete, that the plan sorts and merges them exactly. Tracers are skipped (see
    `plan_error_if`).
    """
    fields = _check_plan_shapes(plan, m=m, n=n)
    leaves = [getattr(plan, k) for k in fields]
    if any(isinstance(x, Tracer) for x in leaves):
        return
    perm_s, rank_t, perm_t, rank_s = (np.asarray(x) for x in leaves)
    ident = {n: np.arange(n), m: np.arange(m)}
    for name, perm, length in (("perm_s", perm_s, n), ("perm_t", perm_t, m)):
        if not np.array_equal(np.sort(perm, axis=-1), np.broadcast_to(ident[length], perm.shape)):
            raise ValueError(
                f"plan.{name}: expected each row to be a permutation of 0..{length - 1}, "
                "received a row that is not (build plans with make_plan)"
            )
    for name, rank, length in (("rank_t", rank_t, n), ("rank_s", rank_s, m)):
        if rank.size and (rank.min() < 0 or rank.max() > length):
            raise ValueError(
                f"plan.{name}: expected values in [0, {length}], received "
                f"min {rank.min()} max {rank.max()}"
            )
    if t is None or s is None or isinstance(t, Tracer) or isinstance(s, Tracer):
        return
    t_np, s_np = np.asarray(t), np.asarray(s)
    for src, perm, tgt, rank, what in (
        (s_np, perm_s, t_np, rank_t, "perm_s/rank_t"),
        (t_np, perm_t, s_np, rank_s, "perm_t/rank_s"),
    ):
        srt = np.take_along_axis(src, perm, axis=-1)
        want = np.stack(
            [np.searchsorted(a, b, side="right") for a, b in zip(srt, tgt, strict=True)]
        )
        if np.any(np.diff(srt, axis=-1) < 0) or not np.array_equal(want, rank):
            raise ValueError(
                f"plan: expected a plan of these anchors t, s, received one whose {what} "
                "do not sort and merge them (make_plan(t, s) or update_plan)"
            )


def _side_ok(src, perm, tgt, rank):
    n = src.shape[0]
    srt = src[perm]
    sorted_ok = jnp.all(srt[1:] >= srt[:-1]) & _perm_ok(perm[None], n)
    lo = jnp.where(rank > 0, srt[jnp.clip(rank - 1, 0, n - 1)], -jnp.inf)
    hi = jnp.where(rank < n, srt[jnp.clip(rank, 0, n - 1)], jnp.inf)
    return sorted_ok & jnp.all((lo <= tgt) & (tgt < hi))


def _check_anchors(t, s) -> tuple[Array, Array]:
    """Finite (H, M) / (H, N) anchors `t`, `s` of one float dtype (`s` may be `t`)."""
    same = t is s
    t = as_array("t", t, shape=("H", "M"), dtype=jnp.floating, finite=True)
    sizes = {"H": t.shape[0]}
    s = t if same else as_array("s", s, shape=("H", "N"), dtype=jnp.floating, sizes=sizes)
    if jnp.dtype(s.dtype) != jnp.dtype(t.dtype):
        raise ValueError(f"s: expected dtype {t.dtype} (the dtype of t), received {s.dtype}")
    if not same:
        s = as_array("s", s, finite=True)
    return t, s


def _check_plan_inputs(plan, t, s) -> tuple[LaplexPlan, Array, Array]:
    """`plan_is_valid` / `update_plan`'s checks: finite (H, M) / (H, N) anchors of one
    float dtype and a plan of those shapes (its values may be stale or malformed)."""
    t, s = _check_anchors(t, s)
    # shapes only: a plan whose values no longer sort the anchors is what these functions
    # detect (plan_is_valid False) and replace (update_plan)
    _check_plan_shapes(plan, m=t.shape[1], n=s.shape[1], h=t.shape[0])
    return plan, t, s


def plan_is_valid(
    plan: LaplexPlan, t: Float[Array, "H M"], s: Float[Array, "H N"]
) -> Bool[Array, ""]:
    """Whether `plan` still sorts and merges the anchors `t`, `s` exactly (O(M + N)).

    `t` (H, M) and `s` (H, N) must be finite anchors of one float dtype and `plan` a
    `LaplexPlan` of those shapes (`ValueError` for concrete inputs); a plan whose values
    are malformed is not valid (False).
    """
    plan, t, s = _check_plan_inputs(plan, t, s)
    ok_s = jax.vmap(_side_ok)(s, plan.perm_s, t, plan.rank_t)
    ok_t = jax.vmap(_side_ok)(t, plan.perm_t, s, plan.rank_s)
    return jnp.all(ok_s) & jnp.all(ok_t)


def update_plan(plan: LaplexPlan, t: Float[Array, "H M"], s: Float[Array, "H N"]) -> LaplexPlan:
    """Keep `plan` if it is still valid for `t`, `s`, else re-sort (works under jit).

    Inputs as `plan_is_valid`."""
    plan, t, s = _check_plan_inputs(plan, t, s)
    if plan.presorted_s is None:  # a hand-made plan: fill in the flag (same tree as make_plan's)
        plan = LaplexPlan(
            plan.perm_s, plan.rank_t, plan.perm_t, plan.rank_s, _presorted(plan.perm_s)
        )
    return lax.cond(plan_is_valid(plan, t, s), lambda: plan, lambda: make_plan(t, s))


def merged_positions(plan: LaplexPlan, h: int) -> tuple[Int[Array, " M"], Int[Array, " N"]]:
    """Head `h`'s targets and sources in one sorted sequence of length M + N, from the
    plan alone (no sort): `(q_t, q_s)`, the merged position of each target and source in
    their original order (together a permutation of `0..M+N-1`; the anchors placed there
    are nondecreasing).

    Ties follow `rank_t` (`#{s <= t}`): tied sources before a target. The target of sorted
    index i sits at `i + rank_t`; a source of sorted index j has the targets with
    `rank_t <= j` before it (a histogram of `rank_t` and a cumulative sum, O(M + N)).
    Where `presorted_s` says so, the sources' scatter back to their original order is
    skipped (`lax.cond`).
    """
    perm_s, rank_t, perm_t = plan.perm_s[h], plan.rank_t[h], plan.perm_t[h]
    m, n = rank_t.shape[0], perm_s.shape[0]
    dt = rank_t.dtype
    inv_t = jnp.zeros(m, dt).at[perm_t].set(jnp.arange(m, dtype=dt), unique_indices=True)
    q_t = inv_t + rank_t
    hist = jnp.zeros(n + 1, dt).at[rank_t].add(1)
    q_sorted = jnp.arange(n, dtype=dt) + jnp.cumsum(hist)[:n].astype(dt)

    def scatter():
        return jnp.zeros(n, dt).at[perm_s].set(q_sorted, unique_indices=True)

    if plan.presorted_s is None:
        return q_t, scatter()
    return q_t, lax.cond(plan.presorted_s[h] != 0, lambda: q_sorted, scatter)
