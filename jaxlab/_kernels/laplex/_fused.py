"""Fused LAPLEX operator passes on CPU (C++ XLA FFI, `laplex_fused.cc`).

Where the scan-based path gathers the sorted inputs, runs one scan per
direction, gathers the scan states at the targets, forms the decay factors and
scatters the result (each an XLA pass over memory), a fused pass does all of it
in two streaming merge walks over the sorted anchors per head, in double
precision for every storage dtype (one exception: `fused_sym`'s float32 fast
path, see there). Inputs are the plan's permutations and
ranks (`jaxlab.laplex.LaplexPlan`); nothing is sorted here.

Both functions work under `jit`, `vmap` (batched calls run sequentially) and
are differentiated by `jaxlab.laplex`'s custom VJP (which calls `fused_parts`, or
`fused_sym_grad` for the symmetric real one-column operator).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float, Inexact, Int

from ._cpu import _register, fused_target

__all__ = [
    "cpu_plan",
    "fused_apply",
    "fused_parts",
    "fused_parts_separate",
    "fused_sym",
    "fused_sym_fresh",
    "fused_sym_grad",
]


def _check(x, lam):
    if not _register():
        raise RuntimeError("laplex fused passes: the C++ kernel is unavailable (no compiler?)")
    if jnp.dtype(lam.dtype) != jnp.dtype(x.dtype):
        raise ValueError(f"lam: expected dtype {x.dtype} (that of x), received {lam.dtype}")


def _check_real_column(x, lam):
    """`_check`, and `x` one float32 / float64 column (N, 1); returns its dtype."""
    _check(x, lam)
    dt = jnp.dtype(x.dtype)
    if dt not in (jnp.dtype(jnp.float32), jnp.dtype(jnp.float64)) or x.shape[1:] != (1,):
        raise ValueError(f"x: expected one real column (N, 1), received {x.shape} {dt}")
    return dt


def fused_apply(
    x: Inexact[Array, "N K"],
    tgt: Float[Array, "H M"],
    src: Float[Array, "H N"],
    lam: Inexact[Array, " H"],
    c: Inexact[Array, " H"],
    perm_src: Int[Array, "H N"],
    rank_tgt: Int[Array, "H M"],
    perm_tgt: Int[Array, "H M"],
    *,
    check: bool = False,
) -> Inexact[Array, "M K"]:
    """`y = sum_h c_h exp(-lam_h |tgt_h[:, None] - src_h[None, :]|) @ x`, fused (P9).

    **Arguments:** `x` (N, K) in the work dtype (complex when `lam` is), anchors
    `tgt` (H, M), `src` (H, N) in its real dtype, `lam`, `c` (H,) in the work
    dtype, and the plan: `perm_src` sorts `src`, `perm_tgt` sorts `tgt`,
    `rank_tgt[h, i] = #{src_h <= tgt_h[i]}` (all int32).
    `check=True` checks the plan fields the pass reads in C++ first (`laplex_check.h`:
    each `perm_*` row a permutation, each rank in range): a malformed plan fails the call
    with `plan_error_if`'s message (`jaxlab.laplex`) followed by the field and the head
    (`jax.errors.JaxRuntimeError` from a call that compiles, `ValueError` from a compiled
    executable: jaxlib's mapping of the INVALID_ARGUMENT status).

    **Returns:** (M, K) in the work dtype.
    """
    _check(x, lam)
    m = tgt.shape[1]
    call = jax.ffi.ffi_call(
        fused_target("apply", x.dtype),
        jax.ShapeDtypeStruct((m, x.shape[1]), x.dtype),
        vmap_method="sequential",
    )
    i32 = jnp.int32
    return call(
        x,
        tgt,
        src,
        lam,
        c.astype(x.dtype),
        perm_src.astype(i32),
        rank_tgt.astype(i32),
        perm_tgt.astype(i32),
        check=bool(check),
    )


def fused_sym(
    x: Inexact[Array, "N K"],
    src: Float[Array, "H N"],
    lam: Inexact[Array, " H"],
    c: Inexact[Array, " H"],
    perm_src: Int[Array, "H N"],
    presorted: Int[Array, " H"] | None = None,
    *,
    check: bool = False,
) -> Inexact[Array, "N K"]:
    """`fused_apply` for targets equal to the sources (`tgt = src`, one sort), fused (P9).

    Uses `y_j = F_j + B_j - x_j` (forward and backward one-sided sums both include
    `j`), so no target factors are formed and the two recurrences run
    interleaved in one streaming loop. For a real kernel and one column on an
    AVX-512 CPU, each factor is formed once and the recurrences are scanned eight
    elements at a time (a forward pass plus a short chunk-carry pass), with the
    chunks split over all cores (carries passed between thread groups; at least
    2^18 elements per thread; `JAXLAB_LAPLEX_THREADS=k` caps the thread count);
    unsorted sources take the same pass on sorted copies (gathered and scattered
    back on all cores). With float32 storage, chunks of 2048 anchors in which every
    32 consecutive gaps decay by at least e^-4 (so rounding errors are forgotten
    within ~32 steps) run their recurrences in float32, 16 lanes per vector, with
    normwise error ~1e-6 instead of ~1e-7; other chunks (ties, clusters, small
    decays) run in double. `JAXLAB_LAPLEX_F32_SCAN=0` keeps double everywhere.
    Arguments as in `fused_apply`;
    `presorted` (H,) nonzero where `perm_src` is known to be the identity (it
    is then not read; `LaplexPlan.presorted_s`). `check=True` checks `perm_src` (the
    one plan field the pass reads, named `perm_s` in the error) as in `fused_apply`.
    Returns (N, K).
    """
    _check(x, lam)
    if presorted is None:
        presorted = jnp.zeros(src.shape[:1], jnp.int32)
    call = jax.ffi.ffi_call(
        fused_target("sym", x.dtype),
        jax.ShapeDtypeStruct(x.shape, x.dtype),
        vmap_method="sequential",
    )
    return call(
        x,
        src,
        lam,
        c.astype(x.dtype),
        perm_src.astype(jnp.int32),
        presorted.astype(jnp.int32),
        check=bool(check),
    )


def fused_sym_fresh(
    x: Float[Array, "N 1"],
    src: Float[Array, "H N"],
    lam: Float[Array, " H"],
    c: Float[Array, " H"],
) -> Float[Array, "N 1"]:
    """`fused_sym` from unsorted anchors, sorting inside: real kernel, one column (P9).

    `y = sum_h c_h exp(-lam_h |src_h[:, None] - src_h[None, :]|) @ x` without a plan. Per
    head the anchors are radix-sorted in C++ with the values carried through the
    passes (no random gather of `x`), the sorted copies take `fused_sym`'s pass, and
    the result returns to the original order by undoing the sort's bucket scatter and
    in-bucket sort (no random scatter); nondecreasing anchors are walked in place
    (`laplex_sort.h`). `x` (N, 1),
    `src` (H, N), `lam`, `c` (H,), all float32 or all float64; anchors finite (the
    caller's check). Returns (N, 1).
    """
    dt = _check_real_column(x, lam)
    call = jax.ffi.ffi_call(
        fused_target("symfresh", dt),
        jax.ShapeDtypeStruct(x.shape, dt),
        vmap_method="sequential",
    )
    return call(x, src.astype(dt), lam, c.astype(dt))


def fused_sym_grad(
    x: Float[Array, "N 1"],
    w: Float[Array, "N 1"],
    src: Float[Array, "H N"],
    lam: Float[Array, " H"],
    c: Float[Array, " H"],
    perm_s: Int[Array, "H N"],
    rank_t: Int[Array, "H N"],
    perm_t: Int[Array, "H N"],
    rank_s: Int[Array, "H N"],
    presorted: Int[Array, " H"] | None = None,
    *,
    check: bool = False,
) -> tuple[Float[Array, "N 1"], Float[Array, "H N"], Float[Array, " H"], Float[Array, " H"]]:
    """Cotangents of `w . y` for the symmetric real operator, one column, in one pass (P9).

    With `y = sum_h c_h K_h x`, `K_h[i, j] = exp(-lam_h |src_h[i] - src_h[j]|)` (targets
    are the sources, `fused_sym`'s operator), per head over the sorted anchors: the
    one-sided sums `F, B` of `x` and of `w`, and the left Jordan sums `G` (of
    `|s_j - s_k| exp(-lam |s_j - s_k|)`), give
    `v_bar = sum_h c_h K_h w`, `c_bar_h = w . K_h x`, `a_bar_h = -c_h sum_j (w_j G_j + x_j
    G^w_j)` and the anchors' cotangent through both roles `-lam c (w T + x S)` with
    `T = F - B + x`, `S = F^w - B^w - w` plus the tie terms that give the one-sided
    derivative at equal anchors the general passes give (`fused_parts`: tied sources
    count as left of a target, tied targets as right of a source). The recurrences run
    in double in chunks (factors formed once per chunk, forward and backward chains in
    one loop), the chunks split over all cores with the carries between them summed
    directly; unsorted anchors walk sorted copies, gathered and scattered back on all
    cores.

    **Arguments:** `x`, `w` (N, 1), `src` (H, N), `lam`, `c` (H,), all float32 or all
    float64 (anchors finite: the caller's check); the plan of `src` with itself
    (`jaxlab.laplex.LaplexPlan`: `perm_s`, `rank_t`, `perm_t`, `rank_s`; the pass reads
    `perm_s`) and `presorted` as in `fused_sym`. `check=True` checks all four plan fields,
    as the general gradient passes do (`fused_apply`'s message): first, or, when every head
    is flagged pre-sorted, inside the pass (identity permutations, ranks in range) with
    the full check only where that fails, so the error text is the same.

    **Returns:** `(v_bar (N, 1), ts_bar (H, N), a_bar (H,), c_bar (H,))`.
    """
    dt = _check_real_column(x, lam)
    h, n = src.shape
    if presorted is None:
        presorted = jnp.zeros((h,), jnp.int32)
    out = (
        jax.ShapeDtypeStruct((n, 1), dt),
        jax.ShapeDtypeStruct((h, n), dt),
        jax.ShapeDtypeStruct((h,), dt),
        jax.ShapeDtypeStruct((h,), dt),
    )
    call = jax.ffi.ffi_call(fused_target("symgrad", dt), out, vmap_method="sequential")
    i32 = jnp.int32
    plan = (perm_s, rank_t, perm_t, rank_s, presorted)
    v_bar, ts_bar, a_bar, c_bar = call(
        x,
        w.astype(dt),
        src.astype(dt),
        lam,
        c.astype(dt),
        *(p.astype(i32) for p in plan),
        check=bool(check),
    )
    return v_bar, ts_bar, a_bar, c_bar


def fused_parts(*args, **kwargs) -> Inexact[Array, "H P M K"]:
    """Per-head one-sided sums for the LAPLEX backward pass, fused (P9).

    With `L` (`R`) the sums over sources left of or tied with (strictly right
    of) each target, `T` the sum over tied sources and `J` the Jordan sums of
    `|t - s| exp(-lam |t - s|) x`, returns (H, 2 + jordan, M, K):
    `[L + R, L - R - 2 T if tie else L - R, J (if jordan)]`: the parts of
    `fused_parts_separate` (same arguments) stacked on axis 1.
    """
    return jnp.stack(fused_parts_separate(*args, **kwargs), axis=1)


def fused_parts_separate(
    x: Inexact[Array, "N K"],
    tgt: Float[Array, "H M"],
    src: Float[Array, "H N"],
    lam: Inexact[Array, " H"],
    perm_src: Int[Array, "H N"],
    rank_tgt: Int[Array, "H M"],
    perm_tgt: Int[Array, "H M"],
    *,
    jordan: bool,
    tie: bool,
    check: bool = False,
    transposed: bool = False,
) -> tuple[Inexact[Array, "H M K"], ...]:
    """The parts of the LAPLEX backward pass (`fused_parts`) as 2 + jordan separate
    (H, M, K) arrays, one C++ output each (P9): a reduction over one part reads it where
    it lies (slicing a part out of a stacked output made XLA copy it first).

    **Arguments:** `x` (N, K), `tgt` (H, M), `src` (H, N), `lam` (H,) and the plan
    fields as in `fused_apply` (without `c`); `check` as there, with `transposed=True`
    naming the fields for the transposed call (`perm_src`, `rank_tgt`, `perm_tgt` are
    the plan's `perm_t`, `rank_s`, `perm_s`); `jordan`, `tie` which parts to form.

    **Returns:** `(L + R, L - R - 2 T if tie else L - R[, J if jordan])`, each (H, M, K).
    """
    _check(x, lam)
    h, m = tgt.shape
    part = jax.ShapeDtypeStruct((h, m, x.shape[1]), x.dtype)
    third = part if jordan else jax.ShapeDtypeStruct((0,), x.dtype)
    call = jax.ffi.ffi_call(
        fused_target("parts", x.dtype),
        (part, part, third),
        vmap_method="sequential",
    )
    i32 = jnp.int32
    out = call(
        x,
        tgt,
        src,
        lam,
        perm_src.astype(i32),
        rank_tgt.astype(i32),
        perm_tgt.astype(i32),
        jordan=np.int32(jordan),
        tie=np.int32(tie),
        check=bool(check),
        transposed=bool(transposed),
    )
    return tuple(out[: 2 + int(jordan)])


def cpu_plan(
    t: Float[Array, "H M"], s: Float[Array, "H N"], *, same: bool = False
) -> tuple[Array, Array, Array, Array, Array]:
    """Sort plan on CPU in C++ (`laplex_plan.cc`): stable LSD radix argsorts and merge ranks.

    **Returns:** `(perm_s, rank_t, perm_t, rank_s, presorted_s)`, int32, as the
    fields of `jaxlab.laplex.LaplexPlan`. `same=True` promises `t` and `s` are
    one array (sorted once). float32 / float64 anchors, finite.
    """
    if not _register():
        raise RuntimeError("laplex cpu_plan: the C++ kernel is unavailable (no compiler?)")
    h, m = t.shape
    n = s.shape[1]
    i32 = jnp.int32
    out = (
        jax.ShapeDtypeStruct((h, n), i32),
        jax.ShapeDtypeStruct((h, m), i32),
        jax.ShapeDtypeStruct((h, m), i32),
        jax.ShapeDtypeStruct((h, n), i32),
        jax.ShapeDtypeStruct((h,), i32),
    )
    name = "laplex_plan_f32" if jnp.dtype(t.dtype) == jnp.float32 else "laplex_plan_f64"
    call = jax.ffi.ffi_call(name, out, vmap_method="sequential")
    perm_s, rank_t, perm_t, rank_s, presorted_s = call(t, s, same=np.int32(same))
    return perm_s, rank_t, perm_t, rank_s, presorted_s
