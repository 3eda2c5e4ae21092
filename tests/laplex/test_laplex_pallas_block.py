"""`PallasBlockScan` / `pallas_sym_matvec` (reduce-then-scan Pallas kernels for the
symmetric real operator) in Pallas interpret mode vs the float64 dense matrix; lowering
for GPU (Triton) and TPU (Mosaic) checked on CPU with `jax.export`."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import export

from jaxlab import laplex
from jaxlab._kernels.laplex import PallasBlockScan, pallas_sym_matvec

# small chunks (4 rows x 8 lanes) so a few dozen anchors cross rows and chunks
SMALL = {"rows": 4, "lanes": 8, "interpret": True}


def _anchors(rng, n, kind):
    s = rng.uniform(0, n / 4, n)
    if kind == "grid":  # integer grid: ties inside rows and across row/chunk boundaries
        s = np.round(s)
    if kind == "runs":  # long tie runs spanning several rows and chunks
        s = np.repeat(rng.uniform(0, 5, 3), [n // 3, n // 3, n - 2 * (n // 3)])
    return np.sort(s)


def _dense_sym(x, s, lam, c):
    """float64 NumPy oracle from the anchors as stored (rounded to their dtype)."""
    s = np.asarray(s).astype(np.float64)
    k = c * np.exp(-lam * np.abs(s[:, None] - s[None, :]))
    return k @ np.asarray(x).astype(np.float64)


def _rel(y, ref):
    return float(np.max(np.abs(np.asarray(y) - ref)) / np.max(np.abs(ref)))


@pytest.mark.parametrize("n", [1, 7, 3 * 32 + 5])
@pytest.mark.parametrize("kind", ["uniform", "grid", "runs"])
@pytest.mark.parametrize("lam", [1e-3, 0.7, 1e3])
def test_sym_kernel_matches_dense_float64(n, kind, lam):
    rng = np.random.default_rng(n)
    s, x = _anchors(rng, n, kind), rng.standard_normal(n)
    y = pallas_sym_matvec(jnp.asarray(x), jnp.asarray(s), lam, 1.3, **SMALL)
    assert y.shape == (n,)
    assert y.dtype == jnp.float64
    assert _rel(y, _dense_sym(x, s, lam, 1.3)) < 1e-12


@pytest.mark.parametrize("kind", ["uniform", "grid", "runs"])
def test_sym_kernel_float32_within_1e_5(kind):
    rng = np.random.default_rng(1)
    n = 200
    s = _anchors(rng, n, kind).astype(np.float32)
    x = rng.standard_normal(n).astype(np.float32)
    y = pallas_sym_matvec(jnp.asarray(x), jnp.asarray(s), np.float32(0.7), np.float32(0.9), **SMALL)
    assert y.dtype == jnp.float32
    assert _rel(y, _dense_sym(x, s, 0.7, 0.9)) < 1e-5


def _problem(seed, h, n, *, ties):
    rng = np.random.default_rng(seed)
    s = rng.uniform(-3, 3, (h, n))
    if ties:
        s = np.round(s)
    return s, rng.uniform(0.2, 2.0, h), rng.standard_normal(h)


@pytest.mark.parametrize("presorted", [False, True])
@pytest.mark.parametrize("ties", [False, True])
def test_matvec_takes_the_block_kernels_and_matches_dense(presorted, ties):
    s, a, c = _problem(2, 2, 45, ties=ties)
    if presorted:
        s = np.sort(s, axis=1)
    v = np.random.default_rng(3).standard_normal((45, 2))
    scan = PallasBlockScan(**SMALL)
    plan = laplex.make_plan(s, s)
    ref = laplex.matmat(v, s, s, a, None, c, scan=laplex.AssociativeScan())
    for p in (plan, None):
        y = laplex.matmat(v, s, s, a, None, c, plan=p, scan=scan)
        assert float(jnp.max(jnp.abs(y - ref)) / jnp.max(jnp.abs(ref))) < 1e-12
    dense = np.sum(
        [ci * np.exp(-ai * np.abs(si[:, None] - si)) for si, ai, ci in zip(s, a, c, strict=True)], 0
    )
    assert _rel(laplex.matmat(v, s, s, a, None, c, plan=plan, scan=scan), dense @ v) < 1e-12
    # the symmetric real case runs the new kernels (two pallas_calls per head and column)
    jaxpr = jax.make_jaxpr(lambda v: laplex.matmat(v, s, s, a, None, c, plan=plan, scan=scan))(v)
    assert "laplex_chunk_apply" in str(jaxpr)


def test_other_cases_run_the_chunked_scan_and_stay_exact():
    # M != N and phased kernels go through PallasScan's recurrence
    rng = np.random.default_rng(4)
    t, s = rng.uniform(-3, 3, (2, 9)), rng.uniform(-3, 3, (2, 13))
    a, b, c = rng.uniform(0.2, 2, 2), rng.uniform(-3, 3, 2), rng.standard_normal(2)
    v = rng.standard_normal(13)
    scan = PallasBlockScan(**SMALL)
    dense = np.asarray(laplex.dense_matrix(t, s, a, b, c)) @ v
    assert _rel(laplex.matvec(v, t, s, a, b, c, scan=scan), np.asarray(dense)) < 1e-12
    jaxpr = jax.make_jaxpr(lambda v: laplex.matvec(v, t, s, a, b, c, scan=scan))(v)
    assert "laplex_chunk_apply" not in str(jaxpr)


@pytest.mark.parametrize("presorted", [False, True])
@pytest.mark.parametrize("ties", [False, True])
def test_gradients_by_the_block_kernels_match_dense_autodiff(presorted, ties):
    """v, anchors, decay and weight cotangents (two heads, two columns) from
    `sym_grad`, with the tie conventions, equal JAX autodiff of the dense matrix."""
    s, a, c = _problem(5, 2, 45, ties=ties)
    if presorted:
        s = np.sort(s, axis=1)
    rng = np.random.default_rng(5)
    v, w = rng.standard_normal((45, 2)), rng.standard_normal((45, 2))
    scan = PallasBlockScan(**SMALL)

    def ours(v, s, a, c):
        return jnp.sum(w * laplex.matmat(v, s, s, a, None, c, scan=scan))

    def dense(v, s, a, c):
        return jnp.sum(w * (laplex.dense_matrix(s, s, a, None, c) @ v))

    g = jax.grad(ours, (0, 1, 2, 3))(v, s, a, c)
    r = jax.grad(dense, (0, 1, 2, 3))(v, s, a, c)
    for gi, ri in zip(g, r, strict=True):
        assert _rel(gi, np.asarray(ri)) < 1e-10
    jaxpr = str(jax.make_jaxpr(jax.grad(ours, (0, 1, 2, 3)))(v, s, a, c))
    assert "laplex_grad_apply" in jaxpr


def test_jit_equals_eager_and_vmap_equals_loop():
    rng = np.random.default_rng(6)
    s = jnp.asarray(np.sort(rng.uniform(0, 9, 40)))
    xs = jnp.asarray(rng.standard_normal((3, 40)))

    def f(x):
        return pallas_sym_matvec(x, s, 0.5, 1.0, **SMALL)

    np.testing.assert_array_equal(jax.jit(f)(xs[0]), f(xs[0]))
    batched = jax.vmap(f)(xs)
    for i in range(3):
        np.testing.assert_allclose(batched[i], f(xs[i]), rtol=1e-13, atol=1e-13)


@pytest.mark.parametrize(
    ("target", "platform", "call"),
    [("gpu", "cuda", "__gpu$xla.gpu.triton"), ("tpu", "tpu", "tpu_custom_call")],
)
def test_kernels_lower_for_gpu_and_tpu_without_a_device(target, platform, call):
    """Both kernels lower to the platform's Pallas custom call (Triton on GPU, Mosaic on TPU)
    from a CPU-only host; compiling them needs the device."""
    spec = jax.ShapeDtypeStruct((1 << 14,), jnp.float32)
    scalar = jax.ShapeDtypeStruct((), jnp.float32)

    def f(x, s, lam, c):
        return pallas_sym_matvec(x, s, lam, c, target=target)

    exp = export.export(
        jax.jit(f),
        platforms=[platform],
        disabled_checks=[export.DisabledSafetyCheck.custom_call(call)],
    )(spec, spec, scalar, scalar)
    assert exp.mlir_module().count(call) == 2


def test_bad_settings_raise():
    for kwargs in ({"rows": 3}, {"lanes": 0}, {"target": "cpu"}):
        with pytest.raises(ValueError, match=next(iter(kwargs))):
            PallasBlockScan(**kwargs)
