"""The one-pass gradient of the symmetric real one-column operator (`fused_sym_grad`, taken
by `matvec`'s VJP when `t is s`) against the dense float64 matrix: a plain numpy oracle
of each cotangent, dense autodiff, and central finite differences."""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxlab import laplex
from jaxlab._kernels.laplex import CpuScan, cpu_kernel_available, fused_sym_grad

from .test_laplex_matvec import _dense

pytestmark = pytest.mark.skipif(not cpu_kernel_available(), reason="no C++ compiler")

FUSED = CpuScan()
CHUNK = 1024  # kGradChunk of laplex_fused.cc


def _anchors(rng, h, n, kind):
    """(h, n) float64 anchors: "plain" (no ties), "ties" (integer grid), "runs" (long runs
    of one value across whole chunks, and ties at every chunk boundary)."""
    if kind == "plain":
        return rng.uniform(0, n, (h, n))
    if kind == "ties":
        return np.floor(rng.uniform(0, max(n / 3, 1), (h, n)))
    x = np.floor(rng.uniform(0, n / 4, (h, n)))
    x[:, : min(n, 2 * CHUNK + 300)] = 7.0  # one value over two chunks and more
    x[:, CHUNK - 5 : CHUNK + 5] = 3.0  # a short run across a chunk boundary
    return x


def _numpy_cotangents(v, w, x, a, c):
    """Plain float64 numpy: v_bar, the anchors' cotangent (t- and s-roles, with autodiff's
    one-sided derivative at ties: d|u|/du = 1 at u = 0), a_bar, c_bar of w . (K v), and the
    scale of the anchors' cotangent (its largest role term: the two roles cancel at a
    lone anchor, so the cotangent itself can be pure rounding)."""
    v, w = np.asarray(v, np.float64), np.asarray(w, np.float64)
    x, a, c = (np.asarray(z, np.float64) for z in (x, a, c))
    v_bar = np.zeros_like(v)
    ts, ab, cb = np.zeros_like(x), np.zeros_like(a), np.zeros_like(c)
    scale = 0.0
    for h in range(x.shape[0]):
        d = x[h][:, None] - x[h][None, :]  # d[i, j] = t_i - s_j
        k = np.exp(-a[h] * np.abs(d))
        sg = np.where(d >= 0, 1.0, -1.0)  # d|d|/dd, 1 at ties
        v_bar += c[h] * (k.T @ w)
        cb[h] = w @ k @ v
        ab[h] = -c[h] * (w @ (np.abs(d) * k) @ v)
        t_role = -a[h] * c[h] * w * ((sg * k) @ v)  # d/dt_i
        s_role = a[h] * c[h] * v * ((sg * k).T @ w)  # d/ds_j
        ts[h] = t_role + s_role
        scale = max(scale, np.max(np.abs(t_role)), np.max(np.abs(s_role)))
    return v_bar, ts, ab, cb, scale


def _err(got, want, scale=None):
    """Largest error over `scale` (default: the largest |want|; 0 when both are 0)."""
    diff = float(np.max(np.abs(np.asarray(got, np.float64) - want)))
    scale = float(np.max(np.abs(want))) if scale is None else scale
    return diff if scale == 0 else diff / scale


def _plan_args(xj, order):
    plan = laplex.make_plan(xj, xj)
    return plan.perm_s, plan.rank_t, plan.perm_t, plan.rank_s, plan.presorted_s


@pytest.mark.parametrize("threads", ["1", "2", "3"])
@pytest.mark.parametrize("kind", ["plain", "ties", "runs"])
@pytest.mark.parametrize("n", [1, 2, 9, 2 * CHUNK + 13])
@pytest.mark.parametrize("order", ["sorted", "unsorted"])
def test_fused_sym_grad_matches_numpy_cotangents(threads, kind, n, order, monkeypatch):
    # every output against the numpy oracle: one and several chunks (n not a multiple of
    # the chunk), 1-3 thread groups (JAXLAB_LAPLEX_THREADS drops the size threshold, so
    # the carries between groups run at this size), two heads (v_bar accumulates),
    # pre-sorted anchors walked in place or unsorted ones gathered and scattered back
    monkeypatch.setenv("JAXLAB_LAPLEX_THREADS", threads)
    rng = np.random.default_rng(n + len(kind) + len(order))
    x = _anchors(rng, 2, n, kind)
    x = np.sort(x, axis=1) if order == "sorted" else x
    v, w = rng.standard_normal(n), rng.standard_normal(n)
    c = rng.standard_normal(2)
    xj = jnp.asarray(x)
    plan = _plan_args(xj, order)
    nondecreasing = np.all(np.diff(x, axis=1) >= 0, axis=1)
    np.testing.assert_array_equal(np.asarray(plan[4]), nondecreasing)
    if order == "unsorted" and n > 2 and not (kind == "runs" and n < CHUNK):
        assert not np.any(nondecreasing)
    for scale in (1e-6, 1e-2, 1.0, 1e3):
        a = scale * rng.uniform(0.5, 2.0, 2)
        vw = (jnp.asarray(v)[:, None], jnp.asarray(w)[:, None])
        got = fused_sym_grad(*vw, xj, jnp.asarray(a), jnp.asarray(c), *plan)
        want = _numpy_cotangents(v, w, x, a, c)
        assert _err(got[0][:, 0], want[0]) < 1e-12
        assert _err(got[1], want[1], want[4]) < 1e-11
        assert _err(got[2], want[2]) < 1e-11
        assert _err(got[3], want[3]) < 1e-12


@pytest.mark.parametrize("threads", ["1", "2"])
@pytest.mark.parametrize("kind", ["plain", "ties", "runs"])
def test_fused_sym_grad_float32_against_float64_oracle(threads, kind, monkeypatch):
    # float32 storage: double recurrences, outputs rounded once (the general passes' bar)
    monkeypatch.setenv("JAXLAB_LAPLEX_THREADS", threads)
    n = 2 * CHUNK + 77
    rng = np.random.default_rng(3 + len(kind))
    x = rng.permutation(_anchors(rng, 1, n, kind)[0])[None].astype(np.float32)
    v, w = (rng.standard_normal(n).astype(np.float32) for _ in range(2))
    c = np.asarray([1.3], np.float32)
    xj = jnp.asarray(x)
    for scale in (1e-4, 0.5, 20.0):
        a = np.asarray([scale], np.float32)
        got = fused_sym_grad(
            jnp.asarray(v)[:, None],
            jnp.asarray(w)[:, None],
            xj,
            jnp.asarray(a),
            jnp.asarray(c),
            *_plan_args(xj, "unsorted"),
        )
        assert all(g.dtype == jnp.float32 for g in got)
        want = _numpy_cotangents(v, w, x, a, c)
        assert _err(got[0][:, 0], want[0]) < 1e-6
        assert _err(got[1], want[1], want[4]) < 1e-6
        assert _err(got[2], want[2]) < 1e-6
        assert _err(got[3], want[3]) < 1e-6


@functools.cache
def _problem(n, kind, seed):
    rng = np.random.default_rng(seed)
    x = _anchors(rng, 2, n, kind)
    a = rng.uniform(0.05, 1.5, 2)
    c = rng.standard_normal(2)
    v, w = rng.standard_normal(n), rng.standard_normal(n)
    return x, a, c, v, w


def _dense_grads(n, kind, seed):
    x, a, c, v, w = _problem(n, kind, seed)

    def loss(v, x, a, c):
        return jnp.vdot(w, _dense(v, x, x, a, None, c))

    return jax.grad(loss, argnums=(0, 1, 2, 3))(v, x, a, c)


@pytest.mark.parametrize("threads", ["1", "2"])
@pytest.mark.parametrize("kind", ["plain", "ties"])
@pytest.mark.parametrize("n", [1, 9, CHUNK + 3])
@pytest.mark.parametrize("use_plan", [True, False])
def test_matvec_symmetric_gradient_matches_dense_autodiff(threads, kind, n, use_plan, monkeypatch):
    # through the public API (t is s, real, one column): the VJP takes the one-pass
    # gradient (checked in the compiled graph) and equals autodiff of the dense matrix
    monkeypatch.setenv("JAXLAB_LAPLEX_THREADS", threads)
    x, a, c, v, w = _problem(n, kind, 5)
    xj = jnp.asarray(x)
    plan = laplex.make_plan(xj, xj) if use_plan else None

    def loss(v, x, a, c):
        return jnp.vdot(w, laplex.matvec(v, x, x, a, c=c, plan=plan, scan=FUSED))

    g = jax.jit(jax.grad(loss, argnums=(0, 1, 2, 3)))
    assert "laplex_fused_symgrad" in g.lower(v, xj, a, c).as_text()
    ours = g(v, xj, a, c)
    ref = _dense_grads(n, kind, 5)
    for o, r in zip(ours, ref, strict=True):
        assert o.dtype == r.dtype
        assert _err(o, np.asarray(r)) < 1e-10


def test_matvec_symmetric_gradient_finite_differences():
    # independent of autodiff's tie convention: tie-free anchors, central differences of
    # the plain numpy loss in float64 for every input (v, each anchor, a, c)
    n = 40
    rng = np.random.default_rng(9)
    x = rng.uniform(0, 10, (2, n))
    a, c = rng.uniform(0.2, 1.0, 2), rng.standard_normal(2)
    v, w = rng.standard_normal(n), rng.standard_normal(n)

    def np_loss(v, x, a, c):
        d = np.abs(x[:, :, None] - x[:, None, :])
        k = np.sum(c[:, None, None] * np.exp(-a[:, None, None] * d), 0)
        return w @ k @ v

    def loss(v, x, a, c):
        return jnp.vdot(w, laplex.matvec(v, x, x, a, c=c, scan=FUSED))

    ours = jax.grad(loss, argnums=(0, 1, 2, 3))(v, jnp.asarray(x), a, c)
    args = [v, x, a, c]
    eps = 1e-6
    for i, g in enumerate(ours):
        fd = np.zeros(args[i].shape)
        for idx in np.ndindex(*args[i].shape):
            up = [z.copy() for z in args]
            dn = [z.copy() for z in args]
            up[i][idx] += eps
            dn[i][idx] -= eps
            fd[idx] = (np_loss(*up) - np_loss(*dn)) / (2 * eps)
        assert _err(g, fd) < 1e-7


def test_fused_sym_grad_refuses_a_malformed_plan_field():
    # all four plan fields are checked (as the general gradient passes check them)
    n = 8
    rng = np.random.default_rng(1)
    xj = jnp.asarray(rng.uniform(0, 5, (1, n)))
    one = jnp.ones((n, 1))
    a, c = jnp.ones(1), jnp.ones(1)
    plan = list(_plan_args(xj, "unsorted"))
    for field in range(4):
        bad = list(plan)
        bad[field] = bad[field].at[0, 2].set(n + 5)
        with pytest.raises((jax.errors.JaxRuntimeError, ValueError), match="head 0"):
            jax.block_until_ready(fused_sym_grad(one, one, xj, a, c, *bad, check=True))
        # unchecked, a bad rank (not read) leaves the result unchanged
    good = fused_sym_grad(one, one, xj, a, c, *plan, check=True)
    bad_rank = list(plan)
    bad_rank[1] = bad_rank[1].at[0, 2].set(n + 5)
    same = fused_sym_grad(one, one, xj, a, c, *bad_rank)
    for g, s in zip(good, same, strict=True):
        np.testing.assert_array_equal(np.asarray(g), np.asarray(s))


@pytest.mark.parametrize("threads", ["1", "2"])
def test_fused_check_on_presorted_anchors_refuses_as_the_full_check(threads, monkeypatch):
    # pre-sorted heads check the plan inside the pass (identity perms, ranks in range),
    # and in full only where that fails: every defect (in a later chunk too) gives the
    # full check's error text (presorted = 0: the full check runs first); a valid but
    # non-identity permutation passes, and a valid plan gives check=False's outputs
    monkeypatch.setenv("JAXLAB_LAPLEX_THREADS", threads)
    n = 2 * CHUNK + 13
    rng = np.random.default_rng(5)
    xj = jnp.asarray(np.sort(_anchors(rng, 2, n, "ties"), axis=1))
    vw = [jnp.asarray(rng.standard_normal((n, 1))) for _ in range(2)]
    a, c = jnp.asarray([0.7, 1.9]), jnp.asarray([1.1, -0.4])
    plan = list(_plan_args(xj, "sorted"))
    np.testing.assert_array_equal(np.asarray(plan[4]), [1, 1])
    full = [*plan[:4], jnp.zeros(2, jnp.int32)]
    want = fused_sym_grad(*vw, xj, a, c, *plan)
    for g, w in zip(fused_sym_grad(*vw, xj, a, c, *plan, check=True), want, strict=True):
        np.testing.assert_array_equal(np.asarray(g), np.asarray(w))
    count = 0
    for field in range(4):
        for head in range(2):
            for pos in (0, 3, CHUNK + 500, n - 1):
                for value in (-1, n + 1, (pos + 1) % n):
                    bad = list(plan)
                    bad[field] = bad[field].at[head, pos].set(value)
                    bad_full = [*bad[:4], full[4]]
                    if field in (1, 3) and 0 <= value <= n:
                        continue  # a rank in [0, n] is well formed
                    msgs = []
                    for args in (bad, bad_full):
                        with pytest.raises((jax.errors.JaxRuntimeError, ValueError)) as err:
                            jax.block_until_ready(fused_sym_grad(*vw, xj, a, c, *args, check=True))
                        msgs.append(str(err.value))
                    assert f"head {head}" in msgs[0]
                    assert msgs[0] == msgs[1]
                    count += 1
    assert count == 2 * 4 * (3 + 2 + 3 + 2)
    swap = list(plan)
    swap[2] = swap[2].at[1, 4].set(5).at[1, 5].set(4)  # a permutation, not the identity
    jax.block_until_ready(fused_sym_grad(*vw, xj, a, c, *swap, check=True))
