"""`pallas_sym_matvec_phased` (the symmetric phased operator by reduce-then-scan Pallas
kernels in real arithmetic) in Pallas interpret mode vs the float64 dense matrix;
`matvec` with a phase through `PallasBlockScan`; lowering for GPU (Triton) and TPU
(Mosaic) checked on CPU with `jax.export`."""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import export

from jaxlab import laplex
from jaxlab._kernels.laplex import PallasBlockScan, pallas_sym_matvec_phased

from .test_laplex_pallas_block import SMALL, _anchors

# one compilation per shape and dtype (decays and weight traced): interpret mode is slow
_phased = jax.jit(functools.partial(pallas_sym_matvec_phased, **SMALL))


def _dense_phased(x, s, a, b, c):
    s = np.asarray(s).astype(np.float64)
    k = c * np.exp(-(a + 1j * b) * np.abs(s[:, None] - s[None, :]))
    return k @ np.asarray(x).astype(np.complex128)


def _rel(y, ref):
    return float(np.max(np.abs(np.asarray(y) - ref)) / np.max(np.abs(ref)))


@pytest.mark.parametrize("n", [1, 2, 7, 32 + 5])
@pytest.mark.parametrize("kind", ["uniform", "grid", "runs"])
def test_phased_kernel_matches_dense_float64(n, kind):
    rng = np.random.default_rng(n)
    s = _anchors(rng, n, kind)
    x = rng.standard_normal(n) + 1j * rng.standard_normal(n)
    for a, b in ((1e-3, 0.3), (0.7, 2.0), (1e3, -5.0)):
        for xx in (x.real, x):
            y = _phased(jnp.asarray(xx), jnp.asarray(s), a, b, 1.3)
            assert y.shape == (n,)
            assert y.dtype == jnp.complex128
            assert _rel(y, _dense_phased(xx, s, a, b, 1.3)) < 1e-12


def test_phased_kernel_float32_within_1e_5():
    rng = np.random.default_rng(1)
    n = 200
    s = np.sort(rng.uniform(0, 50, n)).astype(np.float32)
    x = rng.standard_normal(n).astype(np.float32)
    f32 = np.float32
    y = pallas_sym_matvec_phased(
        jnp.asarray(x), jnp.asarray(s), f32(0.7), f32(1.9), f32(0.9), **SMALL
    )
    assert y.dtype == jnp.complex64
    assert _rel(y, _dense_phased(x, s, 0.7, 1.9, 0.9)) < 1e-5


def _heads(presorted):
    rng = np.random.default_rng(7)
    h, n = 2, 37
    s = np.round(rng.uniform(-3, 3, (h, n)), 1)  # some ties
    if presorted:
        s = np.sort(s, axis=1)
    a, b, c = rng.uniform(0.2, 2.0, h), rng.uniform(-3, 3, h), rng.standard_normal(h)
    v = rng.standard_normal((n, 2)) + 1j * rng.standard_normal((n, 2))
    return s, a, b, c, v, laplex.make_plan(s, s), PallasBlockScan(**SMALL)


def test_matvec_with_a_phase_takes_the_phased_kernels_and_matches_dense():
    s, a, b, c, v, plan, scan = _heads(presorted=True)
    y = laplex.matmat(v, s, s, a, b, c, plan=plan, scan=scan)
    assert _rel(y, np.asarray(laplex.dense_matrix(s, s, a, b, c)) @ v) < 1e-12
    jaxpr = str(jax.make_jaxpr(lambda v: laplex.matmat(v, s, s, a, b, c, plan=plan, scan=scan))(v))
    assert "name=laplex_phased_apply" in jaxpr
    assert jaxpr.count("pallas_call") == jaxpr.count("name=laplex_phased_")


@pytest.mark.slow  # four compilations of two heads' kernels in interpret mode: 14-25 s
def test_matvec_phased_unsorted_real_v_fresh_plan_and_complex_v_real_kernel():
    s, a, b, c, v, plan, scan = _heads(presorted=False)
    dense = np.asarray(laplex.dense_matrix(s, s, a, b, c))
    for vv in (v.real, v):
        y = laplex.matmat(vv, s, s, a, b, c, plan=plan, scan=scan)
        assert _rel(y, dense @ vv) < 1e-12
    y = laplex.matmat(v, s, s, a, b, c, scan=scan)  # no plan: sorts afresh
    assert _rel(y, dense @ v) < 1e-12
    # a complex v with the real kernel takes them too (phase 0)
    y = laplex.matmat(v, s, s, a, None, c, plan=plan, scan=scan)
    assert _rel(y, np.asarray(laplex.dense_matrix(s, s, a, None, c)) @ v) < 1e-12


def test_phased_gradients_through_the_block_strategy_match_dense_autodiff():
    # value by the phased kernels, cotangents by the phased gradient kernels
    rng = np.random.default_rng(8)
    n = 21
    s = np.round(rng.uniform(-3, 3, (1, n)), 1)
    a, b, c = np.array([0.8]), np.array([1.7]), np.array([1.2])
    v, w = rng.standard_normal(n), rng.standard_normal(n)
    scan = PallasBlockScan(**SMALL)

    def loss(fn):
        return lambda v, s, a, b, c: jnp.sum(w * jnp.real(fn(v, s, a, b, c)))

    def ours(v, s, a, b, c):
        return laplex.matvec(v, s, s, a, b, c, scan=scan)

    def dense(v, s, a, b, c):
        return laplex.dense_matrix(s, s, a, b, c) @ v.astype(jnp.complex128)

    args = tuple(jnp.asarray(z) for z in (v, s, a, b, c))
    got = jax.grad(loss(ours), (0, 1, 2, 3, 4))(*args)
    ref = jax.grad(loss(dense), (0, 1, 2, 3, 4))(*args)
    for g, r in zip(got, ref, strict=True):
        assert _rel(g, np.asarray(r)) < 1e-10


@pytest.mark.parametrize(
    ("target", "platform", "call"),
    [("gpu", "cuda", "__gpu$xla.gpu.triton"), ("tpu", "tpu", "tpu_custom_call")],
)
def test_phased_kernels_lower_for_gpu_and_tpu_without_a_device(target, platform, call):
    """Both phased kernels (cos/sin in the kernel) lower to the platform's Pallas custom
    call (Triton on GPU, Mosaic on TPU) from a CPU-only host."""
    spec = jax.ShapeDtypeStruct((1 << 14,), jnp.float32)
    scalar = jax.ShapeDtypeStruct((), jnp.float32)

    def f(x, s, a, b, c):
        return pallas_sym_matvec_phased(x, s, a, b, c, target=target)

    exp = export.export(
        jax.jit(f),
        platforms=[platform],
        disabled_checks=[export.DisabledSafetyCheck.custom_call(call)],
    )(spec, spec, scalar, scalar, scalar)
    assert exp.mlir_module().count(call) == 2


def test_phased_jit_equals_eager_and_vmap_equals_loop():
    rng = np.random.default_rng(9)
    s = jnp.asarray(np.sort(rng.uniform(0, 9, 40)))
    xs = jnp.asarray(rng.standard_normal((2, 40)))

    def f(x):
        return pallas_sym_matvec_phased(x, s, 0.5, 1.5, 1.0, **SMALL)

    jf = jax.jit(f)
    np.testing.assert_allclose(jf(xs[0]), f(xs[0]), rtol=1e-14, atol=1e-14)
    batched = jax.vmap(f)(xs)
    for i in range(2):
        np.testing.assert_allclose(batched[i], jf(xs[i]), rtol=1e-13, atol=1e-13)
