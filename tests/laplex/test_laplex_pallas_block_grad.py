"""`pallas_sym_grad` (cotangents of the symmetric real operator by reduce-then-scan Pallas
kernels) in Pallas interpret mode vs autodiff of the float64 dense matrix and finite
differences; `matvec`'s VJP through `PallasBlockScan`; lowering for GPU (Triton) and TPU
(Mosaic) checked on CPU with `jax.export`."""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import export

from jaxlab import laplex
from jaxlab._kernels.laplex import PallasBlockScan, pallas_sym_grad

from .test_laplex_pallas_block import SMALL, _anchors

# one compilation per shape (decay and weight traced): interpret mode is slow eagerly
_grad = jax.jit(functools.partial(pallas_sym_grad, **SMALL))


def _dense_loss(x, s, lam, c, w):
    return jnp.sum(w * (c * jnp.exp(-lam * jnp.abs(s[:, None] - s[None, :])) @ x))


def _dense_grads(x, w, s, lam, c):
    args = (jnp.asarray(x), jnp.asarray(s), jnp.asarray(lam), jnp.asarray(c))
    return jax.grad(_dense_loss, (0, 1, 2, 3))(*args, jnp.asarray(w))


def _err(got, ref):
    """Error relative to the largest reference entry (absolute where that is ~0)."""
    got, ref = np.asarray(got, np.float64), np.asarray(ref, np.float64)
    return float(np.max(np.abs(got - ref)) / max(np.max(np.abs(ref)), 1e-30))


@pytest.mark.parametrize("n", [1, 2, 7, 2 * 32 + 5])
@pytest.mark.parametrize("kind", ["uniform", "grid", "runs"])
def test_sym_grad_matches_dense_autodiff_float64(n, kind):
    rng = np.random.default_rng(n)
    s = _anchors(rng, n, kind)
    x, w = rng.standard_normal(n), rng.standard_normal(n)
    for lam in (1e-3, 0.7, 1e3):
        got = _grad(jnp.asarray(x), jnp.asarray(w), jnp.asarray(s), lam, 1.3)
        ref = _dense_grads(x, w, s, lam, 1.3)
        for name, g, r in zip(("x", "s", "lam", "c"), got, ref, strict=True):
            assert np.shape(g) == np.shape(r), name
            # lam = 1e3 with spread anchors: the kernel is ~exp(-1e3); compare absolutely
            scale = 1.0 if lam > 1 and kind == "uniform" else None
            err = _err(g, r) if scale is None else float(np.max(np.abs(np.asarray(g) - r)))
            assert err < 1e-12, (name, lam, err)


@pytest.mark.parametrize("counts", [[10, 80, 11], [101], [31, 1, 69], [32, 64, 5]])
def test_sym_grad_tie_runs_across_whole_chunks(counts):
    # runs covering whole chunks (32 anchors): the tie carries chain through constant chunks
    rng = np.random.default_rng(len(counts))
    s = np.repeat(np.arange(len(counts)) * 0.5, counts)
    n = s.shape[0]
    x, w = rng.standard_normal(n), rng.standard_normal(n)
    got = pallas_sym_grad(jnp.asarray(x), jnp.asarray(w), jnp.asarray(s), 0.7, 1.3, **SMALL)
    for g, r in zip(got, _dense_grads(x, w, s, 0.7, 1.3), strict=True):
        assert _err(g, r) < 1e-12


def test_sym_grad_matches_finite_differences():
    rng = np.random.default_rng(11)
    n = 40
    s, x, w = np.sort(rng.uniform(0, 8, n)), rng.standard_normal(n), rng.standard_normal(n)
    lam, c = 0.6, 1.1
    _, s_bar, lam_bar, c_bar = pallas_sym_grad(
        jnp.asarray(x), jnp.asarray(w), jnp.asarray(s), lam, c, **SMALL
    )

    def loss(s, lam, c):
        return float(np.sum(w * (c * np.exp(-lam * np.abs(s[:, None] - s[None, :])) @ x)))

    h = 1e-6
    k = 17
    e = np.zeros(n)
    e[k] = h
    fd_s = (loss(s + e, lam, c) - loss(s - e, lam, c)) / (2 * h)
    fd_lam = (loss(s, lam + h, c) - loss(s, lam - h, c)) / (2 * h)
    fd_c = (loss(s, lam, c + h) - loss(s, lam, c - h)) / (2 * h)
    np.testing.assert_allclose(float(s_bar[k]), fd_s, rtol=1e-6)
    np.testing.assert_allclose(float(lam_bar), fd_lam, rtol=1e-6)
    np.testing.assert_allclose(float(c_bar), fd_c, rtol=1e-6)


def test_sym_grad_float32_within_1e_5():
    rng = np.random.default_rng(2)
    n = 200
    s = np.sort(rng.uniform(0, 50, n)).astype(np.float32)
    x, w = rng.standard_normal(n).astype(np.float32), rng.standard_normal(n).astype(np.float32)
    got = pallas_sym_grad(
        jnp.asarray(x), jnp.asarray(w), jnp.asarray(s), np.float32(0.7), np.float32(0.9), **SMALL
    )
    ref = _dense_grads(x.astype(np.float64), w.astype(np.float64), s.astype(np.float64), 0.7, 0.9)
    for g, r in zip(got, ref, strict=True):
        assert g.dtype == jnp.float32
        assert _err(g, r) < 1e-5


@pytest.mark.parametrize("presorted", [False, True])
@pytest.mark.parametrize("cols", [1, 2])
def test_matvec_vjp_runs_the_grad_kernels_and_matches_dense(presorted, cols):
    rng = np.random.default_rng(3 + cols)
    h, n = 2, 37
    s = np.round(rng.uniform(-3, 3, (h, n)), 1)  # some ties
    if presorted:
        s = np.sort(s, axis=1)
    a, c = rng.uniform(0.2, 2.0, h), rng.standard_normal(h)
    v, w = rng.standard_normal((n, cols)), rng.standard_normal((n, cols))
    scan = PallasBlockScan(**SMALL)
    plan = laplex.make_plan(s, s)

    def ours(v, s, a, c):
        return jnp.sum(w * laplex.matmat(v, s, s, a, None, c, plan=plan, scan=scan))

    def dense(v, s, a, c):
        return jnp.sum(w * (laplex.dense_matrix(s, s, a, None, c) @ v))

    args = tuple(jnp.asarray(z) for z in (v, s, a, c))
    got = jax.grad(ours, (0, 1, 2, 3))(*args)
    ref = jax.grad(dense, (0, 1, 2, 3))(*args)
    for g, r in zip(got, ref, strict=True):
        assert _err(g, r) < 1e-12
    jaxpr = str(jax.make_jaxpr(jax.grad(ours, (0, 1, 2, 3)))(*args))
    assert "name=laplex_grad_apply" in jaxpr
    # every Pallas call is one of the reduce-then-scan kernels (none of PallasScan's)
    ours = jaxpr.count("name=laplex_chunk_") + jaxpr.count("name=laplex_grad_")
    assert jaxpr.count("pallas_call") == ours


def test_jit_equals_eager_and_vmap_equals_loop():
    rng = np.random.default_rng(6)
    s = jnp.asarray(np.sort(rng.uniform(0, 9, 40)))
    xs = jnp.asarray(rng.standard_normal((2, 40)))
    w = jnp.asarray(rng.standard_normal(40))

    def f(x):
        return pallas_sym_grad(x, w, s, 0.5, 1.0, **SMALL)

    jf = jax.jit(f)
    for a, b in zip(jf(xs[0]), f(xs[0]), strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-14, atol=1e-14)
    batched = jax.vmap(f)(xs)
    for i in range(2):
        for a, b in zip(batched, jf(xs[i]), strict=True):
            np.testing.assert_allclose(a[i], b, rtol=1e-13, atol=1e-13)


@pytest.mark.parametrize(
    ("target", "platform", "call"),
    [("gpu", "cuda", "__gpu$xla.gpu.triton"), ("tpu", "tpu", "tpu_custom_call")],
)
def test_grad_kernels_lower_for_gpu_and_tpu_without_a_device(target, platform, call):
    """Both gradient kernels lower to the platform's Pallas custom call (Triton on GPU,
    Mosaic on TPU) from a CPU-only host; compiling them needs the device."""
    spec = jax.ShapeDtypeStruct((1 << 14,), jnp.float32)
    scalar = jax.ShapeDtypeStruct((), jnp.float32)

    def f(x, w, s, lam, c):
        return pallas_sym_grad(x, w, s, lam, c, target=target)

    exp = export.export(
        jax.jit(f),
        platforms=[platform],
        disabled_checks=[export.DisabledSafetyCheck.custom_call(call)],
    )(spec, spec, spec, scalar, scalar)
    assert exp.mlir_module().count(call) == 2
