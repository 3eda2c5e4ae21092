"""LAPLEX matvec/matmat vs the dense float64 matrix; gradients vs dense autodiff."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxlab import laplex
from jaxlab._kernels.laplex import AssociativeScan, BlockedScan, CpuScan, PallasScan


def _problem(seed, h, m, n, *, ties=False, phased=True, decay_scale=1.0):
    rng = np.random.default_rng(seed)
    t = rng.uniform(-3, 3, (h, m))
    s = rng.uniform(-3, 3, (h, n))
    if ties:  # integer grid: many ties among and between targets and sources
        t, s = np.round(t), np.round(s)
    a = decay_scale * rng.uniform(0.2, 2.0, h)
    b = rng.uniform(-3, 3, h) if phased else None
    c = rng.standard_normal(h)
    return t, s, a, b, c


def _dense(v, t, s, a, b, c):
    """jnp dense oracle (differentiable by autodiff)."""
    k = laplex.dense_matrix(t, s, a, b, c)
    if jnp.iscomplexobj(v) and not jnp.iscomplexobj(k):
        k = k.astype(v.dtype)
    return k @ v.astype(k.dtype)


def _dense_np(v, t, s, a, b, c):
    """Plain float64 numpy oracle, independent of jaxlab."""
    lam = np.asarray(a, np.float64) + (0 if b is None else 1j * np.asarray(b, np.float64))
    d = np.abs(np.asarray(t, np.float64)[:, :, None] - np.asarray(s, np.float64)[:, None, :])
    k = np.sum(np.asarray(c, np.float64)[:, None, None] * np.exp(-lam[:, None, None] * d), 0)
    return k @ np.asarray(v)


def _rel(x, y):
    return float(np.max(np.abs(np.asarray(x) - np.asarray(y))) / np.max(np.abs(np.asarray(y))))


@pytest.mark.parametrize("phased", [False, True])
@pytest.mark.parametrize("ties", [False, True])
@pytest.mark.parametrize(("m", "n"), [(1, 1), (5, 13), (40, 17)])
def test_matvec_matches_dense(phased, ties, m, n):
    t, s, a, b, c = _problem(m * 100 + n, 3, m, n, ties=ties, phased=phased)
    v = np.random.default_rng(0).standard_normal(n)
    y = laplex.matvec(jnp.asarray(v), t, s, a, b, c)
    assert y.shape == (m,)
    assert jnp.iscomplexobj(y) == phased
    assert _rel(y, _dense_np(v, t, s, a, b, c)) < 1e-12


@pytest.mark.parametrize("scale", [1e-6, 1e6])
def test_extreme_decays(scale):
    # decay x spacing from 1e-6 to 1e6: alpha ~ 1 - 1e-6 .. exactly 0
    # integer anchors (spacing 1, with ties) keep the exact result away from 0
    t, s, a, b, c = _problem(1, 2, 30, 30, ties=True, phased=True, decay_scale=scale)
    v = np.random.default_rng(1).standard_normal(30)
    assert _rel(laplex.matvec(v, t, s, a, b, c), _dense_np(v, t, s, a, b, c)) < 1e-10


def test_matmat_and_complex_rhs():
    t, s, a, b, c = _problem(2, 2, 9, 11, ties=True)
    rng = np.random.default_rng(2)
    v = rng.standard_normal((11, 3)) + 1j * rng.standard_normal((11, 3))
    y = laplex.matmat(v, t, s, a, b, c)
    assert y.shape == (9, 3)
    assert _rel(y, _dense_np(v, t, s, a, b, c)) < 1e-12
    y_real_kernel = laplex.matmat(v, t, s, a, None, c)
    assert _rel(y_real_kernel, _dense_np(v, t, s, a, None, c)) < 1e-12


@pytest.mark.parametrize(
    "scan",
    [AssociativeScan(), BlockedScan(block=4), CpuScan(), PallasScan(chunk=4, interpret=True)],
    ids=["assoc", "blocked", "cpu", "pallas_interpret"],
)
def test_every_scan_strategy_is_exact(scan):
    t, s, a, b, c = _problem(3, 2, 12, 10, ties=True)
    v = np.random.default_rng(3).standard_normal((10, 2))
    assert _rel(laplex.matmat(v, t, s, a, b, c, scan=scan), _dense_np(v, t, s, a, b, c)) < 1e-12


def test_float32_accuracy():
    t, s, a, b, c = _problem(4, 2, 200, 300)
    v = np.random.default_rng(4).standard_normal(300)
    f32 = [np.asarray(x, np.float32) for x in (v, t, s, a, b, c)]
    y = laplex.matvec(*f32)
    assert y.dtype == jnp.complex64
    assert _rel(y, _dense_np(v, t, s, a, b, c)) < 1e-5


def _loss(fn, wr, wi):
    def loss(v, t, s, a, b, c):
        y = fn(v, t, s, a, b, c)
        out = jnp.sum(jnp.real(y) * wr)
        if jnp.iscomplexobj(y):
            out = out + jnp.sum(jnp.imag(y) * wi)
        return out

    return loss


@pytest.mark.parametrize(
    ("phased", "ties", "complex_v"),
    [(False, False, False), (True, True, False), (False, True, True), (True, False, True)],
)
def test_gradients_match_dense_autodiff(phased, ties, complex_v):
    m, n, k = 8, 11, 2
    t, s, a, b, c = _problem(5, 3, m, n, ties=ties, phased=phased)
    rng = np.random.default_rng(5)
    v = rng.standard_normal((n, k))
    if complex_v:
        v = v + 1j * rng.standard_normal((n, k))
    wr, wi = rng.standard_normal((m, k)), rng.standard_normal((m, k))
    argnums = (0, 1, 2, 3, 4, 5) if phased else (0, 1, 2, 3, 5)
    ours = jax.jit(jax.grad(_loss(laplex.matmat, wr, wi), argnums))(v, t, s, a, b, c)
    ref = jax.jit(jax.grad(_loss(_dense, wr, wi), argnums))(v, t, s, a, b, c)
    for g, r in zip(ours, ref, strict=True):
        assert g.dtype == r.dtype
        assert _rel(g, r) < 1e-10


def test_gradient_matches_finite_differences():
    t, s, a, b, c = _problem(6, 2, 6, 7, phased=True)
    v = np.random.default_rng(6).standard_normal(7)
    w = np.random.default_rng(7).standard_normal(6)

    def f(theta):
        return jnp.sum(
            jnp.real(laplex.matvec(v, theta[:12].reshape(2, 6), s, theta[12:14], b, c)) * w
        )

    theta = np.concatenate([t.ravel(), a])
    g = jax.grad(f)(theta)
    f = jax.jit(f)
    eps = 1e-6
    fd = np.array(
        [(f(theta + eps * e) - f(theta - eps * e)) / (2 * eps) for e in np.eye(theta.size)]
    )
    np.testing.assert_allclose(g, fd, rtol=1e-6, atol=1e-8)


def test_jit_equals_eager_and_vmap_equals_loop():
    t, s, a, b, c = _problem(8, 2, 6, 9, ties=True)
    vs = np.random.default_rng(8).standard_normal((4, 9))
    f = lambda v: laplex.matvec(v, t, s, a, b, c)  # noqa: E731
    eager = np.stack([f(v) for v in vs])
    np.testing.assert_allclose(jax.jit(jax.vmap(f))(vs), eager, rtol=1e-13, atol=1e-13)
    np.testing.assert_allclose(jax.jit(f)(vs[0]), eager[0], rtol=1e-13, atol=1e-13)
    # vmap over anchors (different sort orders per batch element) and their gradients
    ts = np.stack([_problem(9 + i, 2, 6, 9)[0] for i in range(3)])

    def g(tt):
        return jnp.sum(jnp.abs(laplex.matvec(vs[0], tt, s, a, b, c)) ** 2)

    gj = jax.jit(jax.grad(g))
    np.testing.assert_allclose(
        jax.vmap(jax.grad(g))(ts), np.stack([gj(x) for x in ts]), rtol=1e-12, atol=1e-12
    )


def test_plan_reuse_and_update():
    t, s, a, b, c = _problem(10, 2, 20, 25)
    v = np.random.default_rng(10).standard_normal(25)
    plan = laplex.make_plan(t, s)
    assert bool(laplex.plan_is_valid(plan, t, s))
    # a small move keeps the order: the old plan stays valid and exact
    t2, s2 = t + 1e-9, s - 1e-9
    assert bool(laplex.plan_is_valid(plan, t2, s2))
    np.testing.assert_allclose(
        laplex.matvec(v, t2, s2, a, b, c, plan=plan),
        _dense_np(v, t2, s2, a, b, c),
        rtol=1e-12,
        atol=1e-12,
    )
    # a big move changes the order: invalid, and update_plan re-sorts (under jit)
    s3 = s[:, ::-1] * np.linspace(1, 2, 25)
    assert not bool(laplex.plan_is_valid(plan, t, s3))
    new = jax.jit(laplex.update_plan)(plan, t, s3)
    assert bool(laplex.plan_is_valid(new, t, s3))
    np.testing.assert_allclose(
        laplex.matvec(v, t, s3, a, b, c, plan=new),
        _dense_np(v, t, s3, a, b, c),
        rtol=1e-12,
        atol=1e-12,
    )
    kept = laplex.update_plan(plan, t2, s2)
    assert all(
        np.array_equal(x, y)
        for x, y in zip(jax.tree.leaves(kept), jax.tree.leaves(plan), strict=True)
    )


def test_real_kernel_by_keyword_equals_the_positional_none():
    t, s, a, _, c = _problem(12, 2, 6, 7)
    v = np.random.default_rng(0).standard_normal(7)
    by_kw = laplex.matvec(v, t, s, a, c=c)
    np.testing.assert_array_equal(by_kw, laplex.matvec(v, t, s, a, None, c))
    np.testing.assert_allclose(by_kw, _dense_np(v, t, s, a, None, c), rtol=1e-10)
    np.testing.assert_array_equal(
        laplex.matmat(v[:, None], t, s, a, c=c), laplex.matmat(v[:, None], t, s, a, None, c)
    )
    np.testing.assert_array_equal(
        laplex.dense_matrix(t, s, a, c=c), laplex.dense_matrix(t, s, a, None, c)
    )
    for fn, x in ((laplex.matvec, v), (laplex.matmat, v[:, None])):
        with pytest.raises(ValueError, match=r"^c: expected the \(H,\) head weights"):
            fn(x, t, s, a)
    with pytest.raises(ValueError, match="^c:"):
        laplex.dense_matrix(t, s, a)


def test_bad_input_raises():
    t, s, a, b, c = _problem(11, 2, 4, 5)
    v = np.ones(5)
    with pytest.raises(ValueError, match="^a:"):
        laplex.matvec(v, t, s, -a, b, c)
    with pytest.raises(ValueError, match="^a:"):
        laplex.matvec(v, t, s, 0 * a, b, c)
    bad_t = t.copy()
    bad_t[0, 1] = np.nan
    with pytest.raises(ValueError, match="^t:"):
        laplex.matvec(v, bad_t, s, a, b, c)
    with pytest.raises(ValueError, match="^v:"):
        laplex.matvec(np.ones(6), t, s, a, b, c)
    with pytest.raises(ValueError, match="^s:"):
        laplex.matvec(v, t, s[:1], a, b, c)
    with pytest.raises(ValueError, match="^c:"):
        laplex.matvec(v, t, s, a, b, c[:1])
    with pytest.raises(ValueError, match="^s:"):
        laplex.matvec(v, t, s.astype(np.float32), a, b, c)
    with pytest.raises(ValueError, match="^v:"):
        laplex.matmat(v, t, s, a, b, c)
    with pytest.raises(Exception, match="decays must be > 0"):
        jax.jit(lambda a: laplex.matvec(v, t, s, a, b, c))(-a)
