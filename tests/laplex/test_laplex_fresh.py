"""The plan-less symmetric fused pass (`fused_sym_fresh`: the radix sort carries the
values, undoing the sort restores the order) against the float64 dense matrix,
and `matvec` without a plan routed through it (values and gradients)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxlab import laplex
from jaxlab._kernels.laplex import CpuScan, cpu_kernel_available, fused_sym_fresh

from .test_laplex_fused import _sym_np
from .test_laplex_matvec import _dense, _rel

pytestmark = pytest.mark.skipif(not cpu_kernel_available(), reason="no C++ compiler")

FUSED = CpuScan()


def _heads(rng, n):
    """Five anchor sets: uniform over [0, n) (floats over many binades), an integer grid
    (ties), one repeated value, negatives mixed with a tight cluster at 0 (-0.0 too),
    and nondecreasing anchors (walked in place)."""
    cluster = rng.normal(0, 1e-3, n // 2)
    cluster[:3] = [-0.0, 0.0, -0.0][: cluster.size]
    return np.stack(
        [
            rng.uniform(0, n, n),
            np.floor(rng.uniform(0, n / 4, n)),
            np.full(n, 2.5),
            np.concatenate([cluster, rng.uniform(-1e3, 1e3, n - n // 2)]),
            np.sort(rng.uniform(-n, n, n)),
        ]
    )


@pytest.mark.parametrize("threads", ["1", "2", "3"])
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("n", [1, 2, 33, 2500])
def test_fused_sym_fresh_matches_dense(threads, dtype, n, monkeypatch):
    # every head alone (H = 1) and all five summed (H = 5: heads after the first
    # accumulate through the scatter), 1-3 threads (JAXLAB_LAPLEX_THREADS drops the size
    # threshold: per-thread histograms, bucket claims and scatter offsets)
    monkeypatch.setenv("JAXLAB_LAPLEX_THREADS", threads)
    rng = np.random.default_rng(n)
    x = _heads(rng, n).astype(dtype)
    h = x.shape[0]
    v = rng.standard_normal((n, 1)).astype(dtype)
    a = rng.uniform(0.05, 1.0, h).astype(dtype)
    c = rng.standard_normal(h).astype(dtype)
    tol = 1e-12 if dtype == np.float64 else 2e-5
    refs = [_sym_np(v, x[i : i + 1], a[i : i + 1], c[i : i + 1]) for i in range(h)]
    for sl, ref in [(slice(i, i + 1), refs[i]) for i in range(h)] + [(slice(None), sum(refs))]:
        y = fused_sym_fresh(
            jnp.asarray(v), jnp.asarray(x[sl]), jnp.asarray(a[sl]), jnp.asarray(c[sl])
        )
        assert y.shape == (n, 1)
        assert y.dtype == dtype
        assert _rel(y, ref) < tol, sl


def test_fused_sym_fresh_at_scale_threads_agree(monkeypatch):
    # 2^20 + 5 anchors (a few hundred buckets of ~4000, skewed bucket sizes, the multi-range
    # scatter back): 1 and 2 threads against the plan path (gathers through perm_s)
    n = (1 << 20) + 5
    rng = np.random.default_rng(3)
    x = jnp.asarray(rng.uniform(0, n, (1, n)).astype(np.float32))
    v = jnp.asarray(rng.standard_normal((n, 1)).astype(np.float32))
    a, c = jnp.asarray([0.5], jnp.float32), jnp.asarray([1.0], jnp.float32)
    plan = laplex.make_plan(x, x)
    from jaxlab._kernels.laplex import fused_sym

    ref = np.asarray(fused_sym(v, x, a, c, plan.perm_s, plan.presorted_s))
    for threads in ("1", "2"):
        monkeypatch.setenv("JAXLAB_LAPLEX_THREADS", threads)
        y = np.asarray(fused_sym_fresh(v, x, a, c))
        assert _rel(y, ref) < 1e-6, threads


def test_matvec_without_plan_matches_dense_and_planned():
    # matvec(v, x, x, ...) without a plan takes fused_sym_fresh (one real column); with a
    # plan the gather path; K columns and the phased kernel keep the plan path
    rng = np.random.default_rng(5)
    n, h = 300, 2
    x = jnp.asarray(np.floor(rng.uniform(0, 80, (h, n))))
    a = jnp.asarray(rng.uniform(0.1, 1.0, h))
    b = jnp.asarray(rng.uniform(-1.0, 1.0, h))
    c = jnp.asarray(rng.standard_normal(h))
    v = jnp.asarray(rng.standard_normal(n))
    vk = jnp.asarray(rng.standard_normal((n, 3)))
    plan = laplex.make_plan(x, x)
    for vv, bb in ((v, None), (vk, None), (v, b)):
        ref = _dense(vv, x, x, a, bb, c)
        y = laplex.matvec(vv, x, x, a, bb, c, scan=FUSED)
        yp = laplex.matvec(vv, x, x, a, bb, c, plan=plan, scan=FUSED)
        assert _rel(y, ref) < 1e-12
        assert _rel(yp, ref) < 1e-12
    jitted = jax.jit(lambda v, x: laplex.matvec(v, x, x, a, c=c, scan=FUSED))
    assert _rel(jitted(v, x), _dense(v, x, x, a, None, c)) < 1e-12


def test_matvec_without_plan_gradients_match_dense_autodiff():
    # differentiated, the plan-less call sorts once for the plan the backward pass needs:
    # every cotangent (v, anchors, decay, weight) equals autodiff through the dense matrix
    rng = np.random.default_rng(7)
    n, h = 60, 2
    x = jnp.asarray(rng.uniform(0, 20, (h, n)))
    a = jnp.asarray(rng.uniform(0.1, 1.0, h))
    c = jnp.asarray(rng.standard_normal(h))
    v = jnp.asarray(rng.standard_normal(n))
    w = jnp.asarray(rng.standard_normal(n))

    def ours(v, x, a, c):
        return jnp.vdot(w, laplex.matvec(v, x, x, a, c=c, scan=FUSED))

    def dense(v, x, a, c):
        return jnp.vdot(w, _dense(v, x, x, a, None, c))

    val, got = jax.value_and_grad(ours, argnums=(0, 1, 2, 3))(v, x, a, c)
    val_ref, want = jax.value_and_grad(dense, argnums=(0, 1, 2, 3))(v, x, a, c)
    assert abs(float(val) - float(val_ref)) < 1e-10 * abs(float(val_ref))
    for g, r in zip(got, want, strict=True):
        assert _rel(g, r) < 1e-9


def test_fused_sym_fresh_bad_input():
    x = jnp.zeros((1, 4), jnp.float32)
    one = jnp.ones(1, jnp.float32)
    with pytest.raises(ValueError, match="one real column"):
        fused_sym_fresh(jnp.zeros((4, 2), jnp.float32), x, one, one)
