"""Exact LAPLEX matvec / matmat in O((M + N) log(M + N)) with a custom VJP (P9).

    y[i] = sum_h c_h sum_j exp(-(a_h + i b_h) |t_h[i] - s_h[j]|) v[j]

Per head, the sources are sorted (`LaplexPlan`); with gaps `d_j = s_j - s_{j-1}`
and `alpha_j = exp(-lambda d_j)` (|alpha| <= 1, nothing overflows):

    F_j = alpha_j F_{j-1} + v_j       sources at or left of s_j, decayed to s_j
    B_j = alpha_{j+1} B_{j+1} + v_j   sources at or right of s_j, decayed to s_j

and a target t with r = #{s <= t} reads `e^{-lambda (t - s_{r-1})} F_{r-1} +
e^{-lambda (s_r - t)} B_r`. The backward pass reuses the same scans:

- `v`: the transposed operator (targets and sources swap roles).
- `t` (`s`): `-lambda c w (left - right)`. At ties `t == s` the kernel has
  a kink; we return the one-sided derivative that autodiff of `|t - s|` gives
  (JAX: d|x|/dx = 1 at x = 0), i.e. tied sources count as left of a target for
  `t`-gradients and tied targets count as right of a source for `s`-gradients;
  ties are summed by a third scan with `alpha = [d == 0]`.
- `a`, `b`: `d/dlambda` of the kernel is `-|x| e^{-lambda |x|}`; its one-sided
  sums follow the 2x2 Jordan-block recurrence
  `G_j = alpha_j (G_{j-1} + d_j F_{j-1})`.
- `c`: the per-head outputs.

On CPU the default strategy (`CpuScan(fused=True)`) runs each of these as fused
C++ passes over the sorted anchors (`jaxlab._kernels.laplex.fused_apply` / `fused_parts`,
in double precision for every storage dtype), and, when `t is s` (one array for
both roles, e.g. a Gram operator), as one interleaved forward/backward loop with
`y = F + B - x` (`fused_sym`; for one real float32 column on AVX-512 CPUs, on all
cores and with float32 recurrences where the anchors decay fast enough, see its
docstring). The gradient of that symmetric case with a real kernel and one real column
is one fused pass too (`fused_sym_grad`: `v`'s cotangent `c K w`, the anchors' through
both roles, `a`'s from the left Jordan sums and `c`'s, with the tie convention above).
`PallasBlockScan` runs the symmetric case (`t is s`) as reduce-then-scan Pallas
kernels in the sorted order: the real value and gradient (`pallas_sym_matvec`,
`pallas_sym_grad`) and the phased (or complex-`v`) value and gradient
(`pallas_sym_matvec_phased`, `pallas_sym_grad_phased`: the same passes in real
arithmetic on (re, im) pairs, `b`'s cotangent from the complex Jordan sums). For targets
other than the sources (`t` not `s`, M != N), real or phased kernel and real or complex
`v`, it runs the same symmetric kernels on each head's merged sequence of targets and
sources (M + N anchors; merged positions from the plan, `merged_positions`, no sort): `v`
at the sources and zeros at the targets, so the symmetric operator's value at a target
is exactly `sum_j K(t, s_j) v_j`; for the gradient `w` at the targets, so the symmetric
loss is the operator's (`t`'s and `s`'s cotangents are the merged anchor cotangent at
their positions: the symmetric kernels sign a tied pair by role, not by merged order,
so a tied source counts as left of a target for `t` and a tied target as right of a
source for `s`, the convention above; `v`'s is `c K w` at the sources; `a`, `b`, `c` are
the operator's). So `PallasBlockScan` never runs a plain recurrence. Other strategies
run the scans one by one.

Complex cotangents follow JAX's convention (transpose, no conjugation; real
inputs take the real part), so gradients equal autodiff through the dense matrix.
"""

from __future__ import annotations

import functools
from typing import cast

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float, Inexact

from jaxlab._core import (
    as_array,
    check_array,
    check_finite,
    check_range,
    error_if_not_finite,
)
from jaxlab._kernels.laplex import (
    AbstractScan,
    CpuScan,
    PallasBlockScan,
    default_scan,
    fused_apply,
    fused_parts_separate,
    fused_sym,
    fused_sym_fresh,
    fused_sym_grad,
)

from ._plan import LaplexPlan, _make_plan, check_plan, merged_positions, plan_error_if

__all__ = ["matvec", "matmat"]


def _gather_rows(x, idx):
    return jnp.take(x, idx, axis=0, mode="clip")


def _expm1(z):
    """`exp(z) - 1`, accurate for small |z| (complex too)."""
    if not jnp.issubdtype(z.dtype, jnp.complexfloating):
        return jnp.expm1(z)
    x, y = jnp.real(z), jnp.imag(z)
    half = jnp.sin(0.5 * y)
    re = jnp.expm1(x) * jnp.cos(y) - 2 * half * half
    return jax.lax.complex(re, jnp.exp(x) * jnp.sin(y))


def _side(scan, src, perm, tgt, rank, lam, x, *, tie: bool, jordan: bool):
    """One head: sums over sources left/right of each target (see module doc).

    src (N,), perm (N,), tgt (M,), rank (M,), lam scalar, x (N, K) in the work dtype.
    """
    n = src.shape[0]
    srt = src[perm]
    xs = _gather_rows(x, perm)
    zero = jnp.zeros((1,), srt.dtype)
    delta = jnp.concatenate([zero, srt[1:] - srt[:-1]])
    wd = x.dtype
    beta = _expm1(-lam * delta.astype(wd))  # alpha - 1, exact even when alpha ~ 1
    alpha = beta + 1
    f = scan.scan_beta(beta, xs)
    b = scan.scan_beta(beta, xs, reverse=True)
    rm1 = jnp.clip(rank - 1, 0, n - 1)
    rc = jnp.clip(rank, 0, n - 1)
    has_l = rank > 0
    has_r = rank < n
    dl = jnp.where(has_l, tgt - srt[rm1], 0)
    dr = jnp.where(has_r, srt[rc] - tgt, 0)
    el = jnp.where(has_l, jnp.exp(-lam * dl.astype(wd)), 0)[:, None]
    er = jnp.where(has_r, jnp.exp(-lam * dr.astype(wd)), 0)[:, None]
    f_l = _gather_rows(f, rm1)
    b_r = _gather_rows(b, rc)
    out = {"left": el * f_l, "right": er * b_r}
    if tie:
        same = (delta == 0).astype(x.dtype)
        g = scan.scan_beta(same - 1, xs)
        out["tie"] = jnp.where((has_l & (dl == 0))[:, None], _gather_rows(g, rm1), 0)
    if jordan:
        ad = alpha * delta.astype(x.dtype)
        f_prev = jnp.concatenate([jnp.zeros_like(f[:1]), f[:-1]], axis=0)
        gf = scan.scan_beta(beta, ad[:, None] * f_prev)
        u = jnp.concatenate([(ad[:, None] * b)[1:], jnp.zeros_like(b[:1])], axis=0)
        gb = scan.scan_beta(beta, u, reverse=True)
        dlx = dl.astype(x.dtype)[:, None]
        drx = dr.astype(x.dtype)[:, None]
        out["jordan"] = el * (_gather_rows(gf, rm1) + dlx * f_l) + er * (
            _gather_rows(gb, rc) + drx * b_r
        )
    return out


_COMPLEX = {
    jnp.dtype(jnp.float32): jnp.dtype(jnp.complex64),
    jnp.dtype(jnp.float64): jnp.dtype(jnp.complex128),
}


def _work_dtype(v, b):
    dt = jnp.dtype(v.dtype)
    if b is not None and not jnp.issubdtype(dt, jnp.complexfloating):
        dt = _COMPLEX[dt]
    return dt


def _lam(a, b, wd):
    lam = a if b is None else jax.lax.complex(a, b)
    return lam.astype(wd)


def _is_fused(scan):
    """Whether the whole operator runs as fused C++ passes (`CpuScan(fused=True)`)."""
    return isinstance(scan, CpuScan) and scan.fused


def _sym_column(scan, sym, v, b):
    """The fused CPU strategy, `t is s`, a real kernel and one real column: a plan-less
    call sorts inside the fused pass (`fused_sym_fresh`) and the gradient is one pass
    (`fused_sym_grad`)."""
    real = b is None and not jnp.issubdtype(v.dtype, jnp.complexfloating)
    return _is_fused(scan) and sym and real and v.shape[1] == 1


def _block_sym(scan, sym):
    """`PallasBlockScan` with `t is s`: the reduce-then-scan kernels, value and gradient
    (real kernel and real `v`; a phase or a complex `v` takes the phased kernels)."""
    return isinstance(scan, PallasBlockScan) and sym


def _sorted_apply(scan, sh, lh, ch, xs, real_v):
    """One head, sorted anchors `sh`: `ch K xs` column by column by
    `PallasBlockScan.sym_matvec` (a complex work dtype, i.e. a phase or a complex `xs`:
    `sym_matvec_phased`; `real_v`: `v` was real, so only the real part of `xs` is read,
    one real-column pass instead of two)."""
    if jnp.issubdtype(xs.dtype, jnp.complexfloating):
        a, b, cr = jnp.real(lh), jnp.imag(lh), jnp.real(ch)  # c is real (H,)
        op = lambda col: scan.sym_matvec_phased(  # noqa: E731
            jnp.real(col) if real_v else col, sh, a, b, cr
        )
        return jax.vmap(op, 1, 1)(xs).astype(xs.dtype)
    dt = jnp.promote_types(sh.dtype, xs.dtype)  # distances in the wider dtype
    sh, lh, ch = sh.astype(dt), lh.astype(dt), ch.astype(dt)
    ys = jax.vmap(lambda col: scan.sym_matvec(col, sh, lh, ch), 1, 1)(xs.astype(dt))
    return ys.astype(xs.dtype)


def _sorted_grad(scan, sh, lh, ch, xs, ws, v_dtype):
    """One head, sorted anchors `sh`: the cotangents `(v, anchors, a, b, c)` of
    `sum(ws * ch K xs)` column by column (columns summed), by `PallasBlockScan.sym_grad`
    for a real work dtype and `sym_grad_phased` for a complex one (a phase, or a
    complex `v`; a real `v` (`v_dtype`) takes the real part of its cotangent; `b`'s
    cotangent is zero for a real kernel)."""
    real_v = not jnp.issubdtype(v_dtype, jnp.complexfloating)

    def column(xc, wc):
        if not jnp.issubdtype(xc.dtype, jnp.complexfloating):
            vb, sb, ab, cb = scan.sym_grad(xc, wc, sh, lh, ch)
            return vb, sb, ab, jnp.zeros_like(ab), cb
        xc = jnp.real(xc) if real_v else xc
        a, b, cr = jnp.real(lh), jnp.imag(lh), jnp.real(ch)  # c is real (H,)
        return scan.sym_grad_phased(xc, wc, sh, a, b, cr)

    if not jnp.issubdtype(xs.dtype, jnp.complexfloating):
        dt = jnp.promote_types(sh.dtype, xs.dtype)  # distances in the wider dtype
        sh, lh, ch = sh.astype(dt), lh.astype(dt), ch.astype(dt)
        xs, ws = xs.astype(dt), ws.astype(dt)
    if xs.shape[1] == 1:  # one column: no batch axis in the kernels' grid
        vb, sb, ab, bb, cb = column(xs[:, 0], ws[:, 0])
        return vb[:, None].astype(v_dtype), sb, ab, bb, cb
    vb, sb, ab, bb, cb = jax.vmap(column, 1, (1, 0, 0, 0, 0))(xs, ws)
    return vb.astype(v_dtype), jnp.sum(sb, 0), jnp.sum(ab), jnp.sum(bb), jnp.sum(cb)


def _block_sym_apply(scan, x, s, lam, c, plan, real_v):
    """Sum over heads of `c_h K_h x` by `_sorted_apply` in each head's sorted order (no
    gather or scatter where the plan says presorted); `real_v` as there."""
    y = jnp.zeros_like(x)
    for h in range(s.shape[0]):
        perm = plan.perm_s[h]

        def gathered(h=h, perm=perm):
            ys = _sorted_apply(scan, s[h][perm], lam[h], c[h], x[perm], real_v)
            return jnp.zeros_like(x).at[perm].set(ys)

        def direct(h=h):
            return _sorted_apply(scan, s[h], lam[h], c[h], x, real_v)

        if plan.presorted_s is None:
            y = y + gathered()
        else:
            y = y + jax.lax.cond(plan.presorted_s[h] != 0, direct, gathered)
    return y


def _block_sym_bwd(scan, x, w, s, lam, c, plan, v_dtype, phased):
    """Cotangents of the symmetric operator by `_sorted_grad`, head by head in each head's
    sorted order (no gather or scatter where the plan says presorted). `v_dtype`: `v`'s
    dtype; `phased`: `b` was given (its cotangent is returned, else None). `t is s`: the
    anchors' cotangent (both roles) goes to `t`, zeros to `s`, as in `_sym_bwd`."""
    v_bar = jnp.zeros(x.shape, v_dtype)
    s_bars, a_bars, b_bars, c_bars = [], [], [], []
    for h in range(s.shape[0]):
        perm = plan.perm_s[h]

        def gathered(h=h, perm=perm):
            vb, sb, ab, bb, cb = _sorted_grad(
                scan, s[h][perm], lam[h], c[h], x[perm], w[perm], v_dtype
            )
            vb = jnp.zeros(x.shape, v_dtype).at[perm].set(vb)
            return vb, jnp.zeros_like(sb).at[perm].set(sb), ab, bb, cb

        def direct(h=h):
            return _sorted_grad(scan, s[h], lam[h], c[h], x, w, v_dtype)

        if plan.presorted_s is None:
            vb, sb, ab, bb, cb = gathered()
        else:
            vb, sb, ab, bb, cb = jax.lax.cond(plan.presorted_s[h] != 0, direct, gathered)
        v_bar = v_bar + vb
        s_bars.append(sb)
        a_bars.append(ab)
        b_bars.append(bb)
        c_bars.append(cb)
    return _block_cotangents(
        v_bar,
        s_bars,
        [jnp.zeros_like(s[0])] * s.shape[0],
        a_bars,
        b_bars if phased else None,
        c_bars,
        s.dtype,
    )


def _block_cotangents(v_bar, t_bars, s_bars, a_bars, b_bars, c_bars, f):
    """The `_core` cotangent tuple from per-head lists (anchors and scalars in dtype `f`)."""
    return (
        v_bar,
        jnp.stack(t_bars).astype(f),
        jnp.stack(s_bars).astype(f),
        jnp.stack(a_bars).astype(f),
        None if b_bars is None else jnp.stack(b_bars).astype(f),
        jnp.stack(c_bars).astype(f),
        None,
    )


def _block_merge(scan, sym):
    """`PallasBlockScan` with targets other than the sources (`t` not `s`, M != N in
    general), real or phased kernel, real or complex `v`: the symmetric kernels on each
    head's merged sequence (`_block_merge_apply`, `_block_merge_bwd`)."""
    return isinstance(scan, PallasBlockScan) and not sym


def _place(q, x, size):
    """`x` (rows) at positions `q` of `size` zero rows (`q` distinct)."""
    return jnp.zeros((size,) + x.shape[1:], x.dtype).at[q].set(x, unique_indices=True)


def _merged(t, s, plan, h):
    """Head `h`'s merged sequence: the positions `(q_t, q_s)` of targets and sources
    (`merged_positions`) and the anchors `u` (M + N,) in merged (sorted) order."""
    size = t.shape[1] + s.shape[1]
    if size >= 2**31:  # the positions are int32, like the plan
        raise ValueError(
            f"t, s: PallasBlockScan merges targets and sources into one sequence and needs "
            f"M + N < 2**31, received M + N = {size}"
        )
    q_t, q_s = merged_positions(plan, h)
    u = _place(q_s, s[h], size).at[q_t].set(t[h], unique_indices=True)
    return q_t, q_s, u


def _block_merge_apply(scan, x, t, s, lam, c, plan, real_v):
    """Sum over heads of `c_h K_h x` for M targets and N sources by the symmetric kernels
    (`_sorted_apply`: real, or phased for a complex work dtype) on the merged sequence of
    both: `x` at the sources' positions and zeros at the targets', so the symmetric
    operator's value at a target is `sum_j K(t, s_j) x_j` exactly. The scatter into merged
    order and the gather of the targets' rows out of it are the only data movement
    besides the kernels. `real_v` as in `_sorted_apply`."""
    size = t.shape[1] + s.shape[1]
    y = jnp.zeros((t.shape[1], x.shape[1]), x.dtype)
    for h in range(t.shape[0]):
        q_t, q_s, u = _merged(t, s, plan, h)
        y = y + _gather_rows(
            _sorted_apply(scan, u, lam[h], c[h], _place(q_s, x, size), real_v), q_t
        )
    return y


def _block_merge_bwd(scan, x, w, t, s, lam, c, plan, v_dtype, phased):
    """Cotangents of the M != N operator by `_sorted_grad` (real or phased kernels) on each
    head's merged sequence, with `x` at the sources and `w` at the targets (zeros
    elsewhere), so the symmetric loss `sum W c K X` is the operator's `sum w c K x`: the
    merged anchor cotangent at a target's (source's) position is `t`'s (`s`'s), with JAX's
    tie convention (the symmetric kernels sign a tied pair by role, `+1` for the `w` side
    and `-1` for the `x` side, as autodiff through the dense matrix does, not by merged
    order); `c K W` at the sources' positions is `v`'s; the decay, phase and weight
    cotangents are the operator's. `v_dtype`, `phased` as in `_block_sym_bwd`."""
    size = t.shape[1] + s.shape[1]
    v_bar = jnp.zeros(x.shape, v_dtype)
    t_bars, s_bars, a_bars, b_bars, c_bars = [], [], [], [], []
    for h in range(t.shape[0]):
        q_t, q_s, u = _merged(t, s, plan, h)
        xm, wm = _place(q_s, x, size), _place(q_t, w, size)
        vb, sb, ab, bb, cb = _sorted_grad(scan, u, lam[h], c[h], xm, wm, v_dtype)
        v_bar = v_bar + _gather_rows(vb, q_s)
        t_bars.append(_gather_rows(sb, q_t))
        s_bars.append(_gather_rows(sb, q_s))
        a_bars.append(ab)
        b_bars.append(bb)
        c_bars.append(cb)
    return _block_cotangents(
        v_bar, t_bars, s_bars, a_bars, b_bars if phased else None, c_bars, t.dtype
    )


def _fresh_plan(t, s, sym):
    return _make_plan(jax.lax.stop_gradient(t), jax.lax.stop_gradient(s), sym)


@functools.partial(jax.custom_vjp, nondiff_argnums=(0, 1, 2))
def _core(scan, sym, check, v, t, s, a, b, c, plan):
    """`sym`: t and s are the same array (and plan was made from it): one sort.

    `plan` None: sort here (inside the fused pass when `_sym_column`, else a fresh plan).
    `check`: the fused C++ pass checks a given `plan` before reading it (a fresh plan,
    made here, is not checked); other strategies were given a checked plan.
    """
    wd = _work_dtype(v, b)
    lam = _lam(a, b, wd)
    x = v.astype(wd)
    if plan is None and _sym_column(scan, sym, v, b):
        return fused_sym_fresh(x, jax.lax.stop_gradient(s), lam, c.astype(wd))
    if plan is None:
        plan, check = _fresh_plan(t, s, sym), False
    real_v = not jnp.issubdtype(v.dtype, jnp.complexfloating)
    if _block_sym(scan, sym):
        return _block_sym_apply(scan, x, s, lam, c.astype(wd), plan, real_v)
    if _block_merge(scan, sym):
        return _block_merge_apply(scan, x, t, s, lam, c.astype(wd), plan, real_v)
    if _is_fused(scan) and sym:
        return fused_sym(x, s, lam, c.astype(wd), plan.perm_s, plan.presorted_s, check=check)
    if _is_fused(scan):
        perms = (plan.perm_s, plan.rank_t, plan.perm_t)
        return fused_apply(x, t, s, lam, c.astype(wd), *perms, check=check)

    def head(th, sh, lh, ch, perm_s, rank_t):
        p = _side(scan, sh, perm_s, th, rank_t, lh, x, tie=False, jordan=False)
        return ch.astype(wd) * (p["left"] + p["right"])

    ys = jax.vmap(head)(t, s, lam, c, plan.perm_s, plan.rank_t)
    return jnp.sum(ys, axis=0)


def _core_fwd(scan, sym, check, v, t, s, a, b, c, plan):
    # differentiated: the backward pass needs the plan, so sort once here and reuse it
    # (a fresh plan is not checked: `check` is only set for a given plan)
    if plan is None:
        plan, check = _fresh_plan(t, s, sym), False
    return _core(scan, sym, check, v, t, s, a, b, c, plan), (v, t, s, a, b, c, plan)


def _core_bwd(scan, sym, check, res, w):
    v, t, s, a, b, c, plan = res
    wd = _work_dtype(v, b)
    lam = _lam(a, b, wd)
    x = v.astype(wd)
    w = w.astype(wd)
    if _sym_column(scan, sym, v, b):
        return _sym_bwd(x, w, s, lam, c.astype(wd), plan, check)
    if _block_sym(scan, sym):
        return _block_sym_bwd(scan, x, w, s, lam, c.astype(wd), plan, v.dtype, b is not None)
    if _block_merge(scan, sym):
        return _block_merge_bwd(scan, x, w, t, s, lam, c.astype(wd), plan, v.dtype, b is not None)
    if _is_fused(scan):
        v_bar, t_bar, s_bar, a_bar, b_bar, c_bar = _fused_bwd(
            x, t, s, lam, c.astype(wd), plan, w, check
        )
    else:
        v_bar, t_bar, s_bar, a_bar, b_bar, c_bar = _scan_bwd(scan, x, t, s, lam, c, plan, w)
    v_bar = jnp.sum(v_bar, axis=0)
    if not jnp.issubdtype(v.dtype, jnp.complexfloating):
        v_bar = jnp.real(v_bar)
    v_bar = v_bar.astype(v.dtype)
    f = t.dtype
    return (
        v_bar,
        t_bar.astype(f),
        s_bar.astype(f),
        a_bar.astype(f),
        None if b is None else b_bar.astype(f),
        c_bar.astype(f),
        None,
    )


def _sym_bwd(x, w, s, lam, c, plan, check):
    """Cotangents of the symmetric real one-column operator from one fused call
    (`jaxlab._kernels.laplex.fused_sym_grad`). `t is s`, so JAX adds the two anchor
    cotangents: the call returns their sum, passed as `t`'s, with zeros for `s`.
    `check`: the call checks all four plan fields, as the general passes do."""
    v_bar, ts_bar, a_bar, c_bar = fused_sym_grad(
        x,
        w,
        s,
        lam,
        c,
        plan.perm_s,
        plan.rank_t,
        plan.perm_t,
        plan.rank_s,
        plan.presorted_s,
        check=check,
    )
    f = s.dtype
    zeros = jnp.zeros_like(s)
    return (v_bar, ts_bar.astype(f), zeros, a_bar.astype(f), None, c_bar.astype(f), None)


def _fused_bwd(x, t, s, lam, c, plan, w, check):
    """Per-head cotangents from two fused calls (`jaxlab._kernels.laplex.fused_parts_separate`);
    `check`: each call checks the plan fields it reads (together all four: a gradient
    whose forward value is unused, and so dropped, still checks the plan)."""
    p0, p1, p2 = fused_parts_separate(
        x, t, s, lam, plan.perm_s, plan.rank_t, plan.perm_t, jordan=True, tie=False, check=check
    )
    q0, q1 = fused_parts_separate(
        w,
        s,
        t,
        lam,
        plan.perm_t,
        plan.rank_s,
        plan.perm_s,
        jordan=False,
        tie=True,
        check=check,
        transposed=True,
    )
    lc = (lam * c)[:, None]
    c_bar = jnp.real(jnp.sum(w[None] * p0, axis=(1, 2)))
    t_bar = jnp.real(-lc * jnp.sum(w[None] * p1, axis=2))
    big_lam = -c * jnp.sum(w[None] * p2, axis=(1, 2))
    s_bar = jnp.real(-lc * jnp.sum(x[None] * q1, axis=2))
    v_bar = c[:, None, None] * q0
    return v_bar, t_bar, s_bar, jnp.real(big_lam), -jnp.imag(big_lam), c_bar


def _scan_bwd(scan, x, t, s, lam, c, plan, w):
    """Per-head cotangents from the scan-by-scan path."""
    wd = x.dtype

    def head(th, sh, lh, ch, perm_s, rank_t, perm_t, rank_s):
        p = _side(scan, sh, perm_s, th, rank_t, lh, x, tie=False, jordan=True)
        q = _side(scan, th, perm_t, sh, rank_s, lh, w, tie=True, jordan=False)
        chw = ch.astype(wd)
        c_bar = jnp.real(jnp.sum(w * (p["left"] + p["right"])))
        t_bar = jnp.real(-lh * chw * jnp.sum(w * (p["left"] - p["right"]), axis=1))
        big_lam = -chw * jnp.sum(w * p["jordan"])
        s_bar = jnp.real(-lh * chw * jnp.sum(x * (q["left"] - 2 * q["tie"] - q["right"]), axis=1))
        v_bar = chw * (q["left"] + q["right"])
        return v_bar, t_bar, s_bar, jnp.real(big_lam), -jnp.imag(big_lam), c_bar

    return jax.vmap(head)(t, s, lam, c, plan.perm_s, plan.rank_t, plan.perm_t, plan.rank_s)


_core.defvjp(_core_fwd, _core_bwd)


def validate_kernel(t, s, a, b, c, *, call: str = "matvec(v, t, s, a, c=c)"):
    """Convert the kernel parameters once and check them (shapes (H, M), (H, N), (H,);
    one float dtype; finite; decays `a` > 0); returns `(t, s, a, b, c, sizes)`, `sizes`
    binding "H", "M" and "N". `call` shows the real kernel's call in the message for a
    missing `c`."""
    if c is None:
        raise ValueError(
            f"c: expected the (H,) head weights, received None (the real kernel is {call})"
        )
    same = t is s
    t = as_array("t", t, dtype=jnp.floating)
    s = t if same else as_array("s", s, dtype=jnp.floating)
    a = as_array("a", a, dtype=jnp.floating)
    c = as_array("c", c, dtype=jnp.floating)
    b = None if b is None else as_array("b", b, dtype=jnp.floating)
    sizes = check_array("t", t, shape=("H", "M"), dtype=jnp.floating)
    check_array("s", s, shape=("H", "N"), dtype=jnp.floating, sizes=sizes)
    check_array("a", a, shape=("H",), dtype=jnp.floating, sizes=sizes)
    check_array("c", c, shape=("H",), dtype=jnp.floating, sizes=sizes)
    if b is not None:
        check_array("b", b, shape=("H",), dtype=jnp.floating, sizes=sizes)
    ft = jnp.dtype(t.dtype)
    for name, x in (("s", s), ("a", a), ("b", b), ("c", c)):
        if x is not None and jnp.dtype(x.dtype) != ft:
            raise ValueError(f"{name}: expected dtype {ft} (the dtype of t), received {x.dtype}")
    for name, x in (("t", t), ("s", s), ("a", a), ("b", b), ("c", c)):
        if x is not None:
            check_finite(name, x)
    check_range("a", a, low=0.0, low_inclusive=False)
    return t, s, a, b, c, sizes


def _validate(v, t, s, a, b, c, plan):
    """Convert lists/NumPy once and check everything; returns `(v, t, s, a, b, c)`."""
    t, s, a, b, c, sizes = validate_kernel(t, s, a, b, c)
    v = as_array("v", v, dtype=jnp.number)  # complex v is a supported input
    if v.ndim not in (1, 2):
        raise ValueError(f"v: expected shape (N,) or (N, K), received shape {tuple(v.shape)}")
    check_array("v", v, shape=("N",) + (None,) * (v.ndim - 1), dtype=jnp.inexact, sizes=sizes)
    ft = jnp.dtype(t.dtype)
    if jnp.dtype(jnp.real(jnp.zeros((), v.dtype)).dtype) != ft:
        raise ValueError(f"v: expected dtype {ft} or its complex counterpart, received {v.dtype}")
    check_finite("v", v)
    if plan is not None:
        check_plan(plan, t, s, m=sizes["M"], n=sizes["N"])
    return v, t, s, a, b, c


def matvec(
    v: Inexact[Array, " N"] | Inexact[Array, "N K"],
    t: Float[Array, "H M"],
    s: Float[Array, "H N"],
    a: Float[Array, " H"],
    b: Float[Array, " H"] | None = None,
    c: Float[Array, " H"] | None = None,
    *,
    plan: LaplexPlan | None = None,
    scan: AbstractScan | None = None,
    traced_checks: bool = True,
) -> Inexact[Array, " M"] | Inexact[Array, "M K"]:
    """Exact LAPLEX product `K v` with `K[i, j] = sum_h c_h exp(-(a_h + i b_h)|t_h[i] - s_h[j]|)`.

    LAPLEX (P9). O((M + N) log(M + N)) with a fresh plan, O(M + N) with a
    reusable one; differentiable in `v, t, s, a, b, c` by a custom VJP built
    from the same scans. Anchors may be unsorted and may tie; M != N is fine.

    **Arguments:**

    - `v`: (N,) or (N, K) right-hand sides, real or complex.
    - `t`: (H, M) output anchors; `s`: (H, N) input anchors.
    - `a`: (H,) decays, > 0. `b`: (H,) phases, or None (the default) for the real kernel.
    - `c`: (H,) head weights (required).
    - `plan`: a `LaplexPlan` from `make_plan(t, s)` (reused across calls while the
      anchor order is unchanged); None sorts afresh.
    - `scan`: scan strategy (`BlockedScan`, `CpuScan`, `PallasScan`, ...; default: the
      fastest available, `default_scan()`).
    - `traced_checks`: False skips the value checks under `jit` (decays, anchors, plan) for a
      hot loop whose inputs were checked once (default True).

    The real kernel is `matvec(v, t, s, a, c=c)`; the complex one
    `matvec(v, t, s, a, b=b, c=c)` (the positional form `matvec(v, t, s, a, b, c)`,
    with `b=None` for the real kernel, is the same call).

    **Returns:** (M,) or (M, K); complex when `b` is given or `v` is complex.

    Bad shapes/dtypes, NaN/inf values, `a <= 0` or a malformed `plan` raise `ValueError`
    (value checks on concrete inputs). Under `jit` a non-positive decay and NaN/inf
    anchors raise `equinox.EquinoxRuntimeError` (`equinox.error_if`), and so does a plan
    whose permutations or ranks are out of range, except on the fused CPU strategy
    (`CpuScan(fused=True)`, the default on CPU), where each C++ pass checks the plan
    fields it reads before reading them (`t is s`: the matvec reads `perm_s`; otherwise
    `perm_s`, `rank_t`, `perm_t`; the gradient passes read all four) and a malformed one
    fails the compiled call with the same message ("plan: expected perm_s/perm_t rows that
    are permutations ..."), followed by the field, the head and the offending entry:
    raised as `jax.errors.JaxRuntimeError` by the call that compiles the computation and
    as `ValueError` by later calls of the compiled executable (jaxlib's mapping of the
    kernel's INVALID_ARGUMENT status), when the result is ready. (A concrete plan is
    checked whole, eagerly, whatever the strategy.)
    `traced_checks=False` switches those traced checks off for a hot loop whose inputs
    were checked once (each setting compiles once). Lists and NumPy arrays are accepted
    and converted once.
    """
    # the same array for t and s (a Gram / symmetric operator, also when traced) lets the
    # fused CPU path use one sort and no target factors
    sym = t is s
    v, t, s, a, b, c = _validate(v, t, s, a, b, c, plan)
    scan = default_scan() if scan is None else scan
    return _matvec_jit(scan, sym, bool(traced_checks), v, t, s, a, b, c, plan)


@functools.partial(jax.jit, static_argnums=(0, 1, 2))
def _matvec_jit(scan, sym, checks, v, t, s, a, b, c, plan):
    # `checks` (static, so each setting has its own compilation): the traced value checks
    # on decays, anchors and plan, O(H (M + N)); `matvec(..., traced_checks=False)` skips
    if checks:
        a = eqx.error_if(a, jnp.any(a <= 0), "a: decays must be > 0")
    if checks and plan is None and not _is_fused(scan):
        t = error_if_not_finite("t", t)  # NaN/inf anchors would break the sort
        s = t if sym else error_if_not_finite("s", s)
    elif checks:
        # hang the finiteness checks on the (H,) decays, which every pass reads, rather
        # than on the anchors (an error_if output is a new array: XLA copies it, O(M + N)
        # bytes, ~15% of a plan-less fused matvec at 1e7): a reused plan sorts nothing,
        # and the fused strategy's sorts (C++ radix sorts on the anchors' bit patterns,
        # `cpu_plan` / `fused_sym_fresh`) terminate on NaN/inf, the error then raised
        a = eqx.error_if(a, ~jnp.all(jnp.isfinite(t)), "t: expected finite values")
        if not sym:
            a = eqx.error_if(a, ~jnp.all(jnp.isfinite(s)), "s: expected finite values")
    # a reused plan on the fused CPU path is checked inside the C++ passes, each field
    # before a pass reads it (`_core`'s `check`, laplex_check.h): streaming reads and a
    # cache-resident bitmap instead of the XLA scatter-add of `plan_error_if`
    fused_check = checks and plan is not None and _is_fused(scan)
    if plan is not None and checks and not fused_check:
        plan = plan_error_if(plan, t.shape[1], s.shape[1])
    vec = v.ndim == 1
    v2 = v[:, None] if vec else v
    # cast: the custom_vjp wrapper (built through functools.partial) loses the return type
    y = cast(jax.Array, _core(scan, sym, fused_check, v2, t, s, a, b, c, plan))
    return y[:, 0] if vec else y


def matmat(
    v: Inexact[Array, "N K"],
    t: Float[Array, "H M"],
    s: Float[Array, "H N"],
    a: Float[Array, " H"],
    b: Float[Array, " H"] | None = None,
    c: Float[Array, " H"] | None = None,
    *,
    plan: LaplexPlan | None = None,
    scan: AbstractScan | None = None,
    traced_checks: bool = True,
) -> Inexact[Array, "M K"]:
    """`matvec` for a matrix of right-hand sides `v` (N, K); returns (M, K).

    Real kernel: `matmat(v, t, s, a, c=c)`; `traced_checks` as in `matvec`.
    """
    v = as_array("v", v, dtype=jnp.number)  # complex v is a supported input
    if v.ndim != 2:
        raise ValueError(f"v: expected shape (N, K), received shape {np.shape(v)}")
    return matvec(v, t, s, a, b, c, plan=plan, scan=scan, traced_checks=traced_checks)
