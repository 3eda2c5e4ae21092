"""`pallas_sym_grad_phased` (cotangents of the symmetric phased operator by reduce-then-scan
Pallas kernels in real arithmetic) in Pallas interpret mode vs the VJP of the float64
dense matrix and finite differences; `matvec`'s VJP with a phase (or a complex `v`)
through `PallasBlockScan`; lowering for GPU (Triton) and TPU (Mosaic) checked on CPU with
`jax.export`."""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import export

from jaxlab import laplex
from jaxlab._kernels.laplex import PallasBlockScan, pallas_sym_grad_phased
from jaxlab._kernels.laplex._pallas_block_grad import chunk_carries

from .test_laplex_pallas_block import SMALL, _anchors

# one compilation per shape and dtype (decays and weight traced): interpret mode is slow
_grad = jax.jit(functools.partial(pallas_sym_grad_phased, **SMALL))
NAMES = ("x", "s", "a", "b", "c")


def _dense(x, s, a, b, c):
    lam = jax.lax.complex(a, b)
    cd = lam.dtype
    return c.astype(cd) * jnp.exp(-lam * jnp.abs(s[:, None] - s[None, :]).astype(cd)) @ x.astype(cd)


def _dense_vjp(x, w, s, a, b, c):
    """Autodiff through the float64 dense matrix (JAX's complex convention)."""
    args = [
        jnp.asarray(z, jnp.complex128 if k == 0 and np.iscomplexobj(z) else jnp.float64)
        for k, z in enumerate((x, s, a, b, c))
    ]
    _, vjp = jax.vjp(_dense, *args)
    return vjp(jnp.asarray(w, jnp.complex128))


def _err(got, ref, floor=0.0):
    """Error relative to the largest reference entry (or `floor`, where that is ~0)."""
    got, ref = np.asarray(got), np.asarray(ref)
    return float(np.max(np.abs(got - ref)) / max(np.max(np.abs(ref)), floor, 1e-300))


def _case(rng, n, kind, cx):
    s = _anchors(rng, n, kind)
    x = rng.standard_normal(n) + (1j * rng.standard_normal(n) if cx else 0)
    w = rng.standard_normal(n) + 1j * rng.standard_normal(n)
    return s, x, w


# every (n, kind, cx) under `-m slow`; by default each n, kind and cx at least once
_GRAD_CASES = [
    (n, kind, cx)
    for cx in [False, True]
    for kind in ["uniform", "grid", "runs"]
    for n in [1, 7, 69]
]
_GRAD_DEFAULT = {
    (1, "uniform", True),
    (7, "grid", False),
    (69, "runs", True),
    (69, "uniform", False),
}


@pytest.mark.parametrize(
    ("n", "kind", "cx"),
    [c if c in _GRAD_DEFAULT else pytest.param(*c, marks=pytest.mark.slow) for c in _GRAD_CASES],
)
def test_phased_grad_matches_dense_autodiff_float64(n, kind, cx):
    rng = np.random.default_rng(n + 10 * cx)
    s, x, w = _case(rng, n, kind, cx)
    for a, b in ((1e-3, 0.3), (0.7, 2.0), (1e3, -5.0)):
        got = _grad(jnp.asarray(x), jnp.asarray(w), jnp.asarray(s), a, b, 1.3)
        ref = _dense_vjp(x, w, s, a, b, 1.3)
        for name, g, r in zip(NAMES, got, ref, strict=True):
            assert np.shape(g) == np.shape(r), name
            assert g.dtype == (jnp.complex128 if cx and name == "x" else jnp.float64), name
            # exact zeros (one anchor: no s gradient) and ~exp(-1e3) kernels (a = 1e3 with
            # spread anchors): compare against the values' scale (~1), absolutely
            assert _err(g, r, floor=1.0) < 1e-12, (name, a, b, _err(g, r, floor=1.0))
            if np.max(np.abs(np.asarray(r))) > 1e-3:
                assert _err(g, r) < 1e-10, (name, a, b, _err(g, r))


@pytest.mark.parametrize("counts", [[10, 80, 11], [31, 1, 69], [32, 64, 5]])
def test_phased_grad_tie_runs_across_whole_chunks(counts):
    # runs covering whole chunks (32 anchors): the tie carries chain through constant chunks
    rng = np.random.default_rng(len(counts) + counts[0])
    s = np.repeat(np.arange(len(counts)) * 0.5, counts)
    _, x, w = _case(rng, s.shape[0], "uniform", True)
    got = _grad(jnp.asarray(x), jnp.asarray(w), jnp.asarray(s), 0.7, 1.9, 1.3)
    for name, g, r in zip(NAMES, got, _dense_vjp(x, w, s, 0.7, 1.9, 1.3), strict=True):
        assert _err(g, r) < 1e-12, name


def test_phased_grad_matches_finite_differences():
    rng = np.random.default_rng(11)
    n = 40
    s, x, w = _case(rng, n, "uniform", True)
    s = s * 8
    a, b, c = 0.6, 1.7, 1.1
    got = _grad(jnp.asarray(x), jnp.asarray(w), jnp.asarray(s), a, b, c)

    def loss(x, s, a, b, c):  # L = Re(sum(w y)): its gradient is the VJP at w
        k = c * np.exp(-(a + 1j * b) * np.abs(s[:, None] - s[None, :]))
        return float(np.real(np.sum(w * (k @ x))))

    h = 1e-6
    k = 17
    e = np.zeros(n)
    e[k] = h
    args = (x, s, a, b, c)
    for i, name in ((1, "s"), (2, "a"), (3, "b"), (4, "c")):
        up, down = list(args), list(args)
        step = e if name == "s" else h
        up[i], down[i] = args[i] + step, args[i] - step
        fd = (loss(*up) - loss(*down)) / (2 * h)
        g = got[i][k] if name == "s" else got[i]
        np.testing.assert_allclose(float(g), fd, rtol=1e-6, err_msg=name)
    # x's real and imaginary parts: L changes by Re(x_bar) and -Im(x_bar) (no conjugation)
    for part, unit in ((np.real, 1.0), (lambda z: -np.imag(z), 1j)):
        up = x.copy()
        up[k] += unit * h
        down = x.copy()
        down[k] -= unit * h
        fd = (loss(up, s, a, b, c) - loss(down, s, a, b, c)) / (2 * h)
        np.testing.assert_allclose(float(part(got[0][k])), fd, rtol=1e-6)


@pytest.mark.parametrize("cx", [False, True])
def test_phased_grad_float32(cx):
    rng = np.random.default_rng(2)
    n = 200
    s, x, w = _case(rng, n, "uniform", cx)
    s = (s * 4).astype(np.float32)
    x = x.astype(np.complex64 if cx else np.float32)
    w = w.astype(np.complex64)
    f32 = np.float32
    got = _grad(jnp.asarray(x), jnp.asarray(w), jnp.asarray(s), f32(0.7), f32(1.9), f32(0.9))
    ref = _dense_vjp(x, w, s, 0.7, 1.9, 0.9)  # float64 from the stored (float32) inputs
    for name, g, r in zip(NAMES, got, ref, strict=True):
        assert g.dtype == (jnp.complex64 if cx and name == "x" else jnp.float32), name
        assert _err(g, r) < 1e-5, (name, _err(g, r))


def _heads(presorted, cols):
    rng = np.random.default_rng(7 + cols)
    h, n = 2, 37
    s = np.round(rng.uniform(-3, 3, (h, n)), 1)  # some ties
    if presorted:
        s = np.sort(s, axis=1)
    a, b, c = rng.uniform(0.2, 2.0, h), rng.uniform(-3, 3, h), rng.standard_normal(h)
    v = rng.standard_normal((n, cols)) + 1j * rng.standard_normal((n, cols))
    w = rng.standard_normal((n, cols)) + 1j * rng.standard_normal((n, cols))
    return s, a, b, c, v, w, laplex.make_plan(s, s), PallasBlockScan(**SMALL)


def _vjp_both(v, s, a, b, c, w, plan, scan):
    """VJPs of `matmat` through `scan` and through the dense matrix, in all arguments."""
    bb = () if b is None else (jnp.asarray(b),)

    def ours(v, s, a, c, *b):
        return laplex.matmat(v, s, s, a, b[0] if b else None, c, plan=plan, scan=scan)

    def dense(v, s, a, c, *b):
        k = laplex.dense_matrix(s, s, a, b[0] if b else None, c)
        dt = v.dtype if jnp.iscomplexobj(v) else k.dtype  # the complex one of the two
        return k.astype(dt) @ v.astype(dt)

    args = tuple(jnp.asarray(z) for z in (v, s, a, c)) + bb
    got = jax.vjp(ours, *args)[1](jnp.asarray(w))
    ref = jax.vjp(dense, *args)[1](jnp.asarray(w))
    return got, ref, lambda: str(jax.make_jaxpr(lambda *z: jax.vjp(ours, *z)[1](w))(*args))


@pytest.mark.parametrize(("presorted", "cols", "cx"), [(True, 1, True), (False, 2, False)])
def test_matvec_vjp_with_a_phase_runs_the_phased_grad_kernels(presorted, cols, cx):
    s, a, b, c, v, w, plan, scan = _heads(presorted, cols)
    v = v if cx else v.real
    got, ref, jaxpr = _vjp_both(v, s, a, b, c, w, plan, scan)
    for name, g, r in zip(("v", "s", "a", "c", "b"), got, ref, strict=True):
        assert g.dtype == r.dtype, name
        assert _err(g, r) < 1e-12, (name, _err(g, r))
    text = jaxpr()
    assert "name=laplex_phgrad_apply" in text
    # every Pallas call is one of the phased kernels (none of PallasScan's)
    assert text.count("pallas_call") == text.count("name=laplex_phased_") + text.count(
        "name=laplex_phgrad_"
    )


@pytest.mark.slow  # eight compilations of two heads' kernels in interpret mode
@pytest.mark.parametrize("presorted", [False, True])
@pytest.mark.parametrize("cols", [1, 2])
@pytest.mark.parametrize("cx", [False, True])
def test_matvec_vjp_with_a_phase_all_layouts(presorted, cols, cx):
    s, a, b, c, v, w, plan, scan = _heads(presorted, cols)
    v = v if cx else v.real
    got, ref, _ = _vjp_both(v, s, a, b, c, w, plan, scan)
    for name, g, r in zip(("v", "s", "a", "c", "b"), got, ref, strict=True):
        assert _err(g, r) < 1e-12, (name, _err(g, r))


@pytest.mark.slow  # two heads' kernels compiled in interpret mode: 10-15 s
def test_matvec_vjp_complex_v_real_kernel_and_fresh_plan():
    # a complex v with the real kernel (b None) takes the phased kernels with phase 0; no
    # plan: the forward sorts afresh and the backward reuses that plan
    s, a, _, c, v, w, _, scan = _heads(False, 1)
    got, ref, jaxpr = _vjp_both(v, s, a, None, c, w, None, scan)
    for name, g, r in zip(("v", "s", "a", "c"), got, ref, strict=True):
        assert _err(g, r) < 1e-12, (name, _err(g, r))
    assert "name=laplex_phgrad_apply" in jaxpr()


def test_phased_grad_jit_equals_eager_and_vmap_equals_loop():
    rng = np.random.default_rng(6)
    s = jnp.asarray(np.sort(rng.uniform(0, 9, 40)))
    xs = jnp.asarray(rng.standard_normal((2, 40)) + 1j * rng.standard_normal((2, 40)))
    w = jnp.asarray(rng.standard_normal(40) + 1j * rng.standard_normal(40))

    def f(x):
        return pallas_sym_grad_phased(x, w, s, 0.5, 1.5, 1.0, **SMALL)

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
@pytest.mark.parametrize("cx", [False, True])
def test_phased_grad_kernels_lower_for_gpu_and_tpu_without_a_device(target, platform, call, cx):
    """Both phased gradient kernels lower to the platform's Pallas custom call (Triton on
    GPU, Mosaic on TPU) from a CPU-only host, for real and complex `x`."""
    n = 1 << 14
    spec = jax.ShapeDtypeStruct((n,), jnp.complex64 if cx else jnp.float32)
    w_spec = jax.ShapeDtypeStruct((n,), jnp.complex64)
    s_spec = jax.ShapeDtypeStruct((n,), jnp.float32)
    scalar = jax.ShapeDtypeStruct((), jnp.float32)

    def f(x, w, s, a, b, c):
        return pallas_sym_grad_phased(x, w, s, a, b, c, target=target)

    exp = export.export(
        jax.jit(f),
        platforms=[platform],
        disabled_checks=[export.DisabledSafetyCheck.custom_call(call)],
    )(spec, w_spec, s_spec, scalar, scalar, scalar)
    assert exp.mlir_module().count(call) == 2


@pytest.mark.parametrize("lam", [0.7, 0.7 + 1.9j])
def test_chunk_carries_equal_direct_sums_over_earlier_and_later_chunks(lam):
    # the carry scan over chunks (real or complex decay) vs direct sums over the elements of
    # all earlier / later chunks, with tie runs crossing and covering whole chunks
    rng = np.random.default_rng(4)
    size, nb = 8, 7
    s = np.sort(np.concatenate([np.round(rng.uniform(0, 6, 40)), np.full(16, 7.0)]))
    x, w = (rng.standard_normal(nb * size) for _ in range(2))
    dt = np.complex128 if isinstance(lam, complex) else np.float64
    sc, xc, wc = (z.reshape(nb, size) for z in (s, x, w))
    first, last = sc[:, 0], sc[:, -1]

    def e(d):
        return np.exp(-lam * d)

    sums = [
        [np.sum(e(last[k] - sc[k]) * xc[k]) for k in range(nb)],
        [np.sum((last[k] - sc[k]) * e(last[k] - sc[k]) * xc[k]) for k in range(nb)],
        [np.sum(e(sc[k] - first[k]) * xc[k]) for k in range(nb)],
        [np.sum((sc[k] - first[k]) * e(sc[k] - first[k]) * xc[k]) for k in range(nb)],
        [np.sum(e(last[k] - sc[k]) * wc[k]) for k in range(nb)],
        [np.sum(e(sc[k] - first[k]) * wc[k]) for k in range(nb)],
        [np.sum(wc[k][sc[k] == last[k]]) for k in range(nb)],
        [np.sum(xc[k][sc[k] == first[k]]) for k in range(nb)],
    ]
    got = chunk_carries(
        jnp.asarray(first),
        jnp.asarray(last),
        jnp.asarray(lam, dt),
        *(jnp.asarray(np.asarray(z, dt)) for z in sums),
    )
    ref = np.zeros((8, nb), dt)
    for k in range(nb):
        left, right = slice(0, k * size), slice((k + 1) * size, None)
        if k > 0:
            d = last[k - 1] - s[left]
            ref[0, k] = np.sum(e(d) * x[left])
            ref[1, k] = np.sum(d * e(d) * x[left])
            ref[4, k] = np.sum(e(d) * w[left])
            ref[6, k] = np.sum(w[left][s[left] == last[k - 1]])
        if k < nb - 1:
            d = s[right] - first[k + 1]
            ref[2, k] = np.sum(e(d) * x[right])
            ref[3, k] = np.sum(d * e(d) * x[right])
            ref[5, k] = np.sum(e(d) * w[right])
            ref[7, k] = np.sum(x[right][s[right] == first[k + 1]])
    for i, g in enumerate(got):
        np.testing.assert_allclose(np.asarray(g), ref[i], rtol=1e-12, atol=1e-12, err_msg=str(i))
