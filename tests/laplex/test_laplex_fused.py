"""The fused C++ CPU passes (`CpuScan(fused=True)`, the default on CPU) against the dense
float64 matrix (an independent numpy oracle) and dense autodiff."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxlab import laplex
from jaxlab._kernels.laplex import CpuScan, cpu_kernel_available, fused_parts, fused_sym

from .test_laplex_matvec import _dense, _dense_np, _loss, _rel

pytestmark = pytest.mark.skipif(not cpu_kernel_available(), reason="no C++ compiler")

FUSED = CpuScan()


def _anchors(rng, h, m, n, *, ties, presorted=False):
    t = rng.uniform(0, n, (h, m))
    s = rng.uniform(0, n, (h, n))
    t[:, : m // 3] = s[:, rng.integers(0, n, m // 3)]  # targets sitting on sources
    if ties:  # integer grid: ties within and between the sets
        t, s = np.floor(t), np.floor(s)
    if presorted:
        t, s = np.sort(t, axis=1), np.sort(s, axis=1)
    return t, s


@pytest.mark.parametrize("phased", [False, True])
@pytest.mark.parametrize("ties", [False, True])
@pytest.mark.parametrize(("m", "n", "k"), [(1, 1, 1), (40, 100, 5), (1300, 1100, 2)])
def test_fused_apply_matches_dense(phased, ties, m, n, k):
    rng = np.random.default_rng(m + 7 * n + k + 2 * ties + phased)
    t, s = _anchors(rng, 2, m, n, ties=ties, presorted=m > 1000)
    if m > 1000:  # partly pre-sorted: identity chunks and permuted chunks
        s[0, 200:300] = rng.permutation(s[0, 200:300])
    a = rng.uniform(0.2, 2.0, 2)
    b = rng.uniform(-2, 2, 2) if phased else None
    c = rng.standard_normal(2)
    v = rng.standard_normal((n, k))
    y = laplex.matmat(v, t, s, a, b, c, scan=FUSED)
    assert y.shape == (m, k)
    assert _rel(y, _dense_np(v, t, s, a, b, c)) < 1e-12


@pytest.mark.parametrize("phased", [False, True])
@pytest.mark.parametrize("ties", [False, True])
@pytest.mark.parametrize(("n", "k", "h"), [(1, 1, 1), (9, 6, 2), (1201, 3, 2)])
def test_fused_symmetric_matches_dense(phased, ties, n, k, h):
    # t is s: the one-sort path y = F + B - x (odd and even n, several chunks)
    rng = np.random.default_rng(n + k + h + 2 * ties + phased)
    x = rng.uniform(0, n, (h, n))
    if ties:
        x = np.floor(x / 3)
    if n > 1000:
        x = np.sort(x, axis=1)
        x[:, 600:700] = x[:, 600:700][:, ::-1].copy()  # a reversed stretch
    a = rng.uniform(0.2, 2.0, h)
    b = rng.uniform(-2, 2, h) if phased else None
    c = rng.standard_normal(h)
    v = rng.standard_normal((n, k)) + (1j * rng.standard_normal((n, k)) if k == 3 else 0)
    xj = jnp.asarray(x)
    y = laplex.matmat(v, xj, xj, a, b, c, scan=FUSED)
    assert _rel(y, _dense_np(v, x, x, a, b, c)) < 1e-12
    plan = laplex.make_plan(xj, xj)
    y2 = laplex.matmat(v, xj, xj, a, b, c, plan=plan, scan=FUSED)
    assert _rel(y2, _dense_np(v, x, x, a, b, c)) < 1e-12


@pytest.mark.parametrize("scale", [1e-6, 1e6])
@pytest.mark.parametrize("sym", [False, True])
def test_fused_extreme_decays(scale, sym):
    rng = np.random.default_rng(11)
    t, s = _anchors(rng, 2, 30, 30, ties=True)
    if sym:
        t = s
    a, b, c = scale * rng.uniform(0.5, 2.0, 2), rng.uniform(-2, 2, 2), rng.standard_normal(2)
    v = rng.standard_normal(30)
    y = laplex.matvec(v, t, s, a, b, c, scan=FUSED)
    assert _rel(y, _dense_np(v, t, s, a, b, c)) < 1e-10


@pytest.mark.parametrize("sym", [False, True])
def test_fused_float32_tiny_decays_phased(sym):
    # the worst float32 case: phased kernels with decay 1e-6 x spacing on an integer
    # grid; the fused passes run in double, so only the output rounding remains
    rng = np.random.default_rng(12)
    n = 2000
    t, s = _anchors(rng, 2, n + 300, n, ties=True)
    if sym:
        t = s
    a, b, c = 1e-6 * rng.uniform(0.5, 2.0, 2), rng.uniform(-2, 2, 2), rng.standard_normal(2)
    v = rng.standard_normal(n)
    f32 = [np.asarray(z, np.float32) for z in (v, t, s, a, b, c)]
    if sym:
        f32[1] = f32[2] = jnp.asarray(f32[2])
    y = laplex.matvec(*f32, scan=FUSED)
    assert y.dtype == jnp.complex64
    ref = _dense_np(*[np.asarray(z, np.float64) for z in f32])
    assert _rel(y, ref) < 1e-6


@pytest.mark.parametrize(
    ("phased", "ties", "complex_v"),
    [(False, False, False), (True, True, False), (False, True, True), (True, False, True)],
)
@pytest.mark.parametrize("threads", ["1", "2"])
def test_fused_gradients_match_dense_autodiff(phased, ties, complex_v, threads, monkeypatch):
    # threads "2": each head's left and right walks on two threads (the right walk into
    # zeroed copies, added in), as the gradient passes run at scale on two cores
    monkeypatch.setenv("JAXLAB_LAPLEX_THREADS", threads)
    m, n, k = 9, 12, 5
    rng = np.random.default_rng(13 + phased + 2 * ties)
    t, s = _anchors(rng, 3, m, n, ties=ties)
    a, c = rng.uniform(0.2, 2.0, 3), rng.standard_normal(3)
    b = rng.uniform(-2, 2, 3) if phased else None
    v = rng.standard_normal((n, k)) + (1j * rng.standard_normal((n, k)) if complex_v else 0)
    wr, wi = rng.standard_normal((m, k)), rng.standard_normal((m, k))
    argnums = (0, 1, 2, 3, 4, 5) if phased else (0, 1, 2, 3, 5)
    ours = jax.jit(jax.grad(_loss(lambda *z: laplex.matmat(*z, scan=FUSED), wr, wi), argnums))(
        v, t, s, a, b, c
    )
    ref = jax.jit(jax.grad(_loss(_dense, wr, wi), argnums))(v, t, s, a, b, c)
    for g, r in zip(ours, ref, strict=True):
        assert g.dtype == r.dtype
        assert _rel(g, r) < 1e-10


@pytest.mark.parametrize("phased", [False, True])
def test_fused_symmetric_gradients_match_dense_autodiff(phased):
    # t is s: the anchor gradient flows through both roles
    n = 14
    rng = np.random.default_rng(14 + phased)
    x = np.floor(rng.uniform(0, 8, (2, n)))  # ties
    a, c = rng.uniform(0.2, 2.0, 2), rng.standard_normal(2)
    b = rng.uniform(-2, 2, 2) if phased else None
    v, wr, wi = (rng.standard_normal(n) for _ in range(3))

    def ours(v, x, a, b, c):
        return _loss(lambda v, t, s, a, b, c: laplex.matvec(v, t, t, a, b, c, scan=FUSED), wr, wi)(
            v, x, x, a, b, c
        )

    def ref(v, x, a, b, c):
        return _loss(_dense, wr, wi)(v, x, x, a, b, c)

    argnums = (0, 1, 2, 3, 4) if phased else (0, 1, 2, 4)
    g1 = jax.jit(jax.grad(ours, argnums))(v, x, a, b, c)
    g2 = jax.jit(jax.grad(ref, argnums))(v, x, a, b, c)
    for g, r in zip(g1, g2, strict=True):
        assert _rel(g, r) < 1e-10


@pytest.mark.parametrize("threads", ["1", "2", "3"])
def test_fused_parts_against_dense_sums(threads, monkeypatch):
    # the backward building block itself: L + R, L - R - 2T and the Jordan sums (the two
    # walks on one thread, or on two with the right walk's sums added in)
    monkeypatch.setenv("JAXLAB_LAPLEX_THREADS", threads)
    rng = np.random.default_rng(15)
    t, s = _anchors(rng, 1, 20, 16, ties=True)
    lam = np.array([0.7 + 0.4j])
    x = rng.standard_normal((16, 2)) + 0j
    plan = laplex.make_plan(t, s)
    out = fused_parts(
        jnp.asarray(x),
        jnp.asarray(t),
        jnp.asarray(s),
        jnp.asarray(lam),
        plan.perm_s,
        plan.rank_t,
        plan.perm_t,
        jordan=True,
        tie=True,
    )
    d = t[0][:, None] - s[0][None, :]
    e = np.exp(-lam[0] * np.abs(d))
    left, right, tied = (d >= 0) * e, (d < 0) * e, (d == 0) * 1.0
    np.testing.assert_allclose(out[0, 0], (left + right) @ x, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(out[0, 1], (left - right - 2 * tied) @ x, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(out[0, 2], (np.abs(d) * e) @ x, rtol=1e-12, atol=1e-12)


def test_fused_jit_and_vmap_over_rhs():
    rng = np.random.default_rng(16)
    t, s = _anchors(rng, 2, 11, 9, ties=True)
    a, b, c = rng.uniform(0.2, 2.0, 2), rng.uniform(-2, 2, 2), rng.standard_normal(2)
    vs = rng.standard_normal((4, 9))
    plan = laplex.make_plan(t, s)
    f = jax.jit(jax.vmap(lambda v: laplex.matvec(v, t, s, a, b, c, plan=plan, scan=FUSED)))
    np.testing.assert_allclose(f(vs), _dense_np(vs.T, t, s, a, b, c).T, rtol=1e-12, atol=1e-12)
    g = jax.jit(
        jax.vmap(
            jax.grad(
                lambda v: jnp.sum(
                    jnp.abs(laplex.matvec(v, t, s, a, b, c, plan=plan, scan=FUSED)) ** 2
                )
            )
        )
    )
    ref = jax.vmap(jax.grad(lambda v: jnp.sum(jnp.abs(_dense(v, t, s, a, b, c)) ** 2)))
    np.testing.assert_allclose(g(vs), ref(vs), rtol=1e-10, atol=1e-10)


def test_presorted_flag_and_hand_made_plan():
    rng = np.random.default_rng(17)
    x = np.sort(rng.uniform(0, 50, (2, 700)), axis=1)
    x[1] = rng.permutation(x[1])  # head 0 pre-sorted, head 1 not
    xj = jnp.asarray(x)
    plan = laplex.make_plan(xj, xj)
    np.testing.assert_array_equal(plan.presorted_s, [1, 0])
    a, c = rng.uniform(0.2, 2.0, 2), rng.standard_normal(2)
    v = rng.standard_normal(700)
    ref = _dense_np(v, x, x, a, None, c)
    y = laplex.matvec(v, xj, xj, a, c=c, plan=plan, scan=FUSED)
    assert _rel(y, ref) < 1e-12
    # a plan without the flag (e.g. built by hand): same result; update_plan fills it in
    bare = laplex.LaplexPlan(plan.perm_s, plan.rank_t, plan.perm_t, plan.rank_s)
    assert _rel(laplex.matvec(v, xj, xj, a, c=c, plan=bare, scan=FUSED), ref) < 1e-12
    kept = jax.jit(laplex.update_plan)(bare, xj, xj)
    np.testing.assert_array_equal(kept.presorted_s, [1, 0])


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("same", [False, True])
def test_cpu_plan_equals_jax_plan(dtype, same):
    # the C++ radix-sort plan against jnp.argsort / jnp.searchsorted, with ties and +-0
    from jaxlab.laplex._plan import _jax_make_plan

    rng = np.random.default_rng(18)
    t = np.floor(rng.uniform(-20, 20, (3, 1500))).astype(dtype)
    s = np.floor(rng.uniform(-20, 20, (3, 700))).astype(dtype)
    t[0, :3], s[0, :2] = -0.0, 0.0
    s[2] = np.sort(s[2])  # a pre-sorted head
    tj, sj = jnp.asarray(t), jnp.asarray(s)
    if same:
        tj = sj
    ours = jax.jit(laplex.make_plan)(tj, tj) if same else laplex.make_plan(tj, sj)
    ref = _jax_make_plan(tj, sj, same)
    for name in ("perm_s", "rank_t", "perm_t", "rank_s", "presorted_s"):
        np.testing.assert_array_equal(getattr(ours, name), getattr(ref, name), err_msg=name)
    assert int(ours.presorted_s[2]) == 1
    assert bool(laplex.plan_is_valid(ours, tj, sj))


@pytest.mark.parametrize("threads", ["1", "2", "3"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_cpu_plan_bucket_sort_on_all_threads_equals_jax_plan(monkeypatch, threads, dtype):
    # the bucket scatter + per-bucket radix sort, on 1-3 threads (JAXLAB_LAPLEX_THREADS
    # drops the size threshold), against jnp.argsort / jnp.searchsorted: continuous
    # anchors over a wide span (most buckets hold several keys, some many), heavy ties
    # (small buckets, insertion sort), one repeated value (no bucket bits), negatives
    from jaxlab.laplex._plan import _jax_make_plan

    monkeypatch.setenv("JAXLAB_LAPLEX_THREADS", threads)
    rng = np.random.default_rng(23)
    n = 5000
    heads = np.stack(
        [
            rng.uniform(0, 1e5, n),
            np.floor(rng.uniform(-3, 3, n)),
            np.full(n, 2.5),
            np.concatenate([rng.normal(0, 1e-3, n // 2), rng.uniform(-1e6, 1e6, n - n // 2)]),
        ]
    ).astype(dtype)
    t = np.concatenate([heads[:, : n // 2], heads[:, ::-1][:, : n // 2]], axis=1)
    for tj, sj, same in (
        (jnp.asarray(heads),) * 2 + (True,),
        (jnp.asarray(t), jnp.asarray(heads), False),
    ):
        ours = laplex.make_plan(tj, tj) if same else laplex.make_plan(tj, sj)
        ref = _jax_make_plan(tj, sj, same)
        for name in ("perm_s", "rank_t", "perm_t", "rank_s", "presorted_s"):
            np.testing.assert_array_equal(getattr(ours, name), getattr(ref, name), err_msg=name)


@pytest.mark.parametrize("phased", [False, True])
def test_fused_presorted_anchors_value_and_gradients(phased):
    # identity permutations: the walks read the inputs in place (no sorted copies)
    rng = np.random.default_rng(19 + phased)
    t, s = _anchors(rng, 2, 700, 600, ties=True, presorted=True)
    a, c = rng.uniform(0.2, 2.0, 2), rng.standard_normal(2)
    b = rng.uniform(-2, 2, 2) if phased else None
    v = rng.standard_normal((600, 5))
    plan = laplex.make_plan(t, s)
    np.testing.assert_array_equal(plan.perm_t[0], np.arange(700))
    np.testing.assert_array_equal(plan.presorted_s, [1, 1])
    y = laplex.matmat(v, t, s, a, b, c, plan=plan, scan=FUSED)
    assert _rel(y, _dense_np(v, t, s, a, b, c)) < 1e-12
    wr, wi = rng.standard_normal((700, 5)), rng.standard_normal((700, 5))
    argnums = (0, 1, 2, 3, 4, 5) if phased else (0, 1, 2, 3, 5)
    ours = jax.grad(_loss(lambda *z: laplex.matmat(*z, plan=plan, scan=FUSED), wr, wi), argnums)(
        v, t, s, a, b, c
    )
    ref = jax.grad(_loss(_dense, wr, wi), argnums)(v, t, s, a, b, c)
    for g, r in zip(ours, ref, strict=True):
        assert _rel(g, r) < 1e-10


def _rows_np(v, t, s, a, b, c, rows):
    """`_dense_np` for the targets `rows` only, in groups (memory stays small at large N)."""
    return np.concatenate(
        [_dense_np(v, t[:, rows[i : i + 8]], s, a, b, c) for i in range(0, len(rows), 8)]
    )


@pytest.mark.parametrize("phased", [False, True])
def test_fused_large_unsorted_pooled_buffers(phased):
    # N large enough that the kernels' temporaries are huge-page pool blocks (>= 4 MiB);
    # two sizes in a row so a recycled (larger) block is reused; values on sampled rows
    # and the v- and t-gradients against the plain float64 oracle
    rng = np.random.default_rng(11 + phased)
    for m, n in ((210_000, 200_000), (180_000, 190_000)):
        t, s = rng.uniform(0, n, (2, m)), rng.uniform(0, n, (2, n))
        a = rng.uniform(0.2, 2.0, 2)
        b = rng.uniform(-2, 2, 2) if phased else None
        c = rng.standard_normal(2)
        v = rng.standard_normal((n, 3))
        w = rng.standard_normal((m, 3))
        rows = rng.choice(m, 24, replace=False)
        cols = rng.choice(n, 24, replace=False)

        def loss(v, t, s, a, b, c, w):
            return jnp.sum(jnp.real(laplex.matmat(v, t, s, a, b, c, scan=FUSED)) * w)

        y = laplex.matmat(v, t, s, a, b, c, scan=FUSED)
        assert _rel(np.asarray(y)[rows], _rows_np(v, t, s, a, b, c, rows)) < 1e-12
        gv, gt = jax.grad(loss, argnums=(0, 1))(v, t, s, a, b, c, w)
        lam = a if b is None else a + 1j * b
        # d loss / d v_j = sum_i w_i Re K[i, j]: the transposed operator on w
        ref_v = np.real(_rows_np(w, s, t, a, b, c, cols))
        assert _rel(np.asarray(gv)[cols], ref_v) < 1e-12
        # d loss / d t[h, i] = Re sum_j -lam_h c_h sign(t - s_j) e^{-lam_h |t - s_j|} (v_j . w_i)
        for h in range(2):
            d = t[h, rows][:, None] - s[h][None, :]
            kh = -lam[h] * c[h] * np.sign(d) * np.exp(-lam[h] * np.abs(d))
            ref_t = np.real(np.sum((kh @ v) * w[rows], axis=1))
            assert _rel(np.asarray(gt)[h, rows], ref_t) < 1e-10


def _sym_np(v, x, a, c):
    """float64 y = sum_h c_h exp(-a_h |x_h[i] - x_h[j]|) v_j, in row blocks (plain numpy)."""
    x, v = np.asarray(x, np.float64), np.asarray(v, np.float64)
    y = np.zeros_like(v)
    for h in range(x.shape[0]):
        for i0 in range(0, x.shape[1], 1024):
            d = np.abs(x[h, i0 : i0 + 1024, None] - x[h, None, :])
            y[i0 : i0 + 1024] += float(c[h]) * (np.exp(-float(a[h]) * d) @ v)
    return y


@pytest.mark.parametrize("threads", ["", "1", "2", "3"])
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("n", [7, 2 * 2048 + 13])
def test_fused_symmetric_presorted_real_blocks(dtype, n, threads, monkeypatch):
    # the pre-sorted real one-column path (chunks of 2048, 8-element register scans,
    # carries across vectors and chunks, the chunk-tail fix-up pass and its skip of
    # underflowed decays): ties on an integer grid (also across chunk boundaries),
    # two heads (accumulation), decays from tiny (every carry reaches the far end) to
    # huge (every non-tied factor underflows to 0), against the float64 oracle.
    # JAXLAB_LAPLEX_THREADS forces the chunks into 1-3 thread groups (default: by size),
    # which exercises the carries between groups at this small size
    monkeypatch.setenv("JAXLAB_LAPLEX_THREADS", threads)
    rng = np.random.default_rng(n + (dtype == np.float32))
    x = np.sort(np.floor(rng.uniform(0, n / 3, (2, n))), axis=1).astype(dtype)
    x[1] = np.sort(rng.uniform(0, n, n)).astype(dtype)  # head 1: no ties
    v = rng.standard_normal((n, 1)).astype(dtype)
    c = rng.standard_normal(2).astype(dtype)
    ident = jnp.broadcast_to(jnp.arange(n, dtype=jnp.int32), (2, n))
    tol = 1e-12 if dtype == np.float64 else 1e-5
    for scale in (1e-6, 1e-2, 1.0, 1e3):
        a = (scale * rng.uniform(0.5, 2.0, 2)).astype(dtype)
        ref = _sym_np(v, x, a, c)
        for flag in (1, 0):  # vouched pre-sorted, or found by the identity check
            y = fused_sym(
                jnp.asarray(v),
                jnp.asarray(x),
                jnp.asarray(a),
                jnp.asarray(c),
                ident,
                jnp.full((2,), flag, jnp.int32),
            )
            assert y.dtype == dtype
            assert _rel(y, ref) < tol
    # through the public API with a plan on pre-sorted anchors (the benchmark's case)
    xj = jnp.asarray(x)
    plan = laplex.make_plan(xj, xj)
    y = laplex.matvec(
        jnp.asarray(v[:, 0]), xj, xj, jnp.asarray(a), None, jnp.asarray(c), plan=plan, scan=FUSED
    )
    assert _rel(y, ref[:, 0]) < tol


def test_fused_symmetric_threads_agree_at_scale(monkeypatch):
    # large enough for the automatic thread split (>= 2^18 elements per thread) on a
    # multi-core machine: the threaded result equals the serial one (itself checked
    # against the dense oracle above) to float32 rounding
    n = 600_000
    rng = np.random.default_rng(5)
    x = jnp.asarray(np.sort(rng.uniform(0, n, (1, n))).astype(np.float32))
    v = jnp.asarray(rng.standard_normal((n, 1)).astype(np.float32))
    c = jnp.ones((1,), jnp.float32)
    ident = jnp.arange(n, dtype=jnp.int32)[None]
    flag = jnp.ones((1,), jnp.int32)
    for decay in (1e-5, 0.5):
        a = jnp.asarray([decay], jnp.float32)
        out = {}
        for threads in ("1", "", "4"):
            monkeypatch.setenv("JAXLAB_LAPLEX_THREADS", threads)
            out[threads] = np.asarray(fused_sym(v, x, a, c, ident, flag), np.float64)
        for threads in ("", "4"):
            assert _rel(out[threads], out["1"]) < 1e-6


@pytest.mark.parametrize("threads", ["1", "3"])
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_fused_symmetric_unsorted_one_column(dtype, threads, monkeypatch):
    # unsorted anchors, one real column: sorted copies gathered (split over threads),
    # walked by the register-scan pass on AVX-512 CPUs, scattered back; two heads
    # (the second accumulates through the scatter), ties, vs the float64 oracle
    monkeypatch.setenv("JAXLAB_LAPLEX_THREADS", threads)
    n = 2 * 2048 + 77
    rng = np.random.default_rng(11)
    x = np.floor(rng.uniform(0, n / 2, (2, n))).astype(dtype)
    v = rng.standard_normal((n, 1)).astype(dtype)
    c = rng.standard_normal(2).astype(dtype)
    a = rng.uniform(0.05, 1.0, 2).astype(dtype)
    xj = jnp.asarray(x)
    plan = laplex.make_plan(xj, xj)
    assert not np.any(np.asarray(plan.presorted_s))
    y = laplex.matvec(
        jnp.asarray(v[:, 0]), xj, xj, jnp.asarray(a), None, jnp.asarray(c), plan=plan, scan=FUSED
    )
    tol = 1e-12 if dtype == np.float64 else 1e-5
    assert _rel(y, _sym_np(v, x, a, c)[:, 0]) < tol


@pytest.mark.parametrize("threads", ["1", "2"])
def test_fused_symmetric_float32_recurrences(threads, monkeypatch):
    # float32 storage, pre-sorted, one real column: chunks whose every 32-gap window
    # decays by e^-4 or more run their recurrences in float32, the others in double.
    # Here chunk 0 is spread out (float32), chunk 1 a dense cluster with ties (double),
    # chunk 2 spread again, at a decay just above the criterion (the float32 worst
    # case); against the float64 oracle and against double everywhere
    # (JAXLAB_LAPLEX_F32_SCAN=0)
    monkeypatch.setenv("JAXLAB_LAPLEX_THREADS", threads)
    rng = np.random.default_rng(21)
    n = 3 * 2048
    gaps = rng.uniform(0.9, 1.1, n)
    gaps[2048:4096] = np.floor(rng.uniform(0, 2, 2048)) * 1e-3  # cluster: ties and tiny gaps
    x = np.cumsum(gaps).astype(np.float32)[None]
    v = rng.standard_normal((n, 1)).astype(np.float32)
    a = np.asarray([4.0 / 32 * 1.05], np.float32)
    c = np.ones(1, np.float32)
    ident = jnp.arange(n, dtype=jnp.int32)[None]
    flag = jnp.ones((1,), jnp.int32)
    ref = _sym_np(v, x, a, c)
    args = (jnp.asarray(v), jnp.asarray(x), jnp.asarray(a), jnp.asarray(c), ident, flag)
    y = np.asarray(fused_sym(*args), np.float64)
    monkeypatch.setenv("JAXLAB_LAPLEX_F32_SCAN", "0")
    y_double = np.asarray(fused_sym(*args), np.float64)
    assert _rel(y, ref) < 1e-5
    assert _rel(y_double, ref) < 1e-6
    # the clustered chunk took the double path: it agrees with double everywhere to
    # float32 output rounding of the carries
    assert _rel(y[2048:4096], y_double[2048:4096]) < 1e-6


def _numpy_plan(t, s):
    # the plan from NumPy's stable argsort and searchsorted (the oracle; -0.0 == +0.0).
    # Subnormals are flushed to zero first: the kernel computes its keys under XLA's
    # denormals-are-zero mode and so orders them as 0 (as main's plan already did)
    tiny = np.finfo(s.dtype).tiny
    t, s = (np.where(np.abs(a) < tiny, 0, a).astype(a.dtype) for a in (t, s))
    perm_s = np.argsort(s, axis=1, kind="stable")
    perm_t = np.argsort(t, axis=1, kind="stable")
    ss, ts = np.take_along_axis(s, perm_s, 1), np.take_along_axis(t, perm_t, 1)
    rank_t = np.stack([np.searchsorted(a, b, side="right") for a, b in zip(ss, t, strict=True)])
    rank_s = np.stack([np.searchsorted(a, b, side="right") for a, b in zip(ts, s, strict=True)])
    presorted = (perm_s == np.arange(s.shape[1])).all(axis=1).astype(np.int32)
    return {
        "perm_s": perm_s,
        "rank_t": rank_t,
        "perm_t": perm_t,
        "rank_s": rank_s,
        "presorted_s": presorted,
    }


@pytest.mark.parametrize("threads", ["1", "2"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_cpu_plan_equals_numpy_stable_argsort_plan(monkeypatch, threads, dtype):
    # make_plan's data-sized bucket sort (laplex_sort.h, shared with the fused pass)
    # against NumPy argsort(kind="stable"): random, tied, all equal, already sorted,
    # reversed, a huge range, subnormals and -0.0/+0.0 mixes, bit for bit
    monkeypatch.setenv("JAXLAB_LAPLEX_THREADS", threads)
    rng = np.random.default_rng(41)
    n = 3000
    fi = np.finfo(dtype)
    tiny = fi.smallest_subnormal
    heads = [
        rng.standard_normal(n),
        np.floor(rng.uniform(-4, 4, n)),
        np.full(n, -1.5),
        np.sort(rng.uniform(-10, 10, n)),
        np.sort(rng.uniform(-10, 10, n))[::-1],
        rng.choice([-fi.max, -1.0, -fi.tiny, 0.0, fi.tiny, 1.0, fi.max], n)
        * rng.uniform(0.5, 1, n),
        rng.integers(-40, 40, n) * tiny,
        rng.choice([-0.0, 0.0, tiny, -tiny], n),
    ]
    s = np.stack(heads).astype(dtype)
    t = np.stack([rng.permutation(h)[: n // 2] for h in s]).astype(dtype)
    assert np.count_nonzero(s[6]) > n // 2  # subnormals
    assert np.all(np.abs(s[6]) < fi.tiny)
    for tt, same in ((s, True), (t, False)):
        ours = (
            laplex.make_plan(jnp.asarray(s), jnp.asarray(s))
            if same
            else laplex.make_plan(jnp.asarray(tt), jnp.asarray(s))
        )
        ref = _numpy_plan(tt, s)
        for name, want in ref.items():
            np.testing.assert_array_equal(getattr(ours, name), want, err_msg=name)
    # all equal and sorted heads take the sorted shortcut; the subnormal and +-0 heads too
    # (all 0 as keys); the others the bucket sort
    np.testing.assert_array_equal(
        laplex.make_plan(jnp.asarray(s), jnp.asarray(s)).presorted_s, [0, 0, 1, 1, 0, 0, 1, 1]
    )
