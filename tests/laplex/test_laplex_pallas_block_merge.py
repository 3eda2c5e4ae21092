"""`PallasBlockScan` for M targets and N sources (`t` not `s`): the symmetric reduce-then-scan
kernels, real and phased (a phase b or a complex v), on each head's merged sequence of
targets and sources (value and gradient), in Pallas interpret mode, against the float64
dense matrix, autodiff through it and finite differences; ties across and within `t` and
`s`, targets outside the sources' range, presorted and shuffled anchors; the merged
positions against a NumPy stable merge."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import export

from jaxlab import laplex
from jaxlab._kernels.laplex import PallasBlockScan
from jaxlab.laplex._plan import merged_positions

from .test_laplex_pallas_block import SMALL

SCAN = PallasBlockScan(**SMALL)


def _some_by_default(cases, keep):
    """Every case under `-m slow`; only the indices in `keep` also in the default suite
    (each case compiles its own interpret-mode kernels: seconds apiece)."""
    return [
        c if i in keep else pytest.param(*c, marks=pytest.mark.slow) for i, c in enumerate(cases)
    ]


_SHAPES_KINDS = [
    (m, n, kind)
    for kind in ["uniform", "grid", "outside", "runs"]
    for m, n in [(9, 45), (45, 9), (1, 40), (37, 1)]
]
# one case per shape and per kind by default (the diagonal of shapes x kinds)
_DIAGONAL = {0, 5, 10, 15}


def _anchors(rng, h, m, n, kind):
    """(t, s): `grid` ties across and within t and s; `outside` puts targets beyond both
    ends of the sources' range; `runs` long tie runs shared by t and s."""
    t, s = rng.uniform(-3, 3, (h, m)), rng.uniform(-3, 3, (h, n))
    if kind == "grid":
        t, s = np.round(t), np.round(s)
    if kind == "outside":
        t = np.where(rng.random((h, m)) < 0.5, t - 4.5, t + 4.5)
    if kind == "runs":
        vals = np.array([-1.0, 0.5, 2.0])
        t, s = vals[rng.integers(0, 3, (h, m))], vals[rng.integers(0, 3, (h, n))]
    return t, s


def _dense(t, s, a, c):
    """float64 NumPy oracle: sum_h c_h exp(-a_h |t_h[i] - s_h[j]|)."""
    d = np.abs(np.asarray(t, np.float64)[:, :, None] - np.asarray(s, np.float64)[:, None, :])
    return np.einsum(
        "h,hij->ij", np.asarray(c, np.float64), np.exp(-np.asarray(a)[:, None, None] * d)
    )


def _rel(got, ref):
    got, ref = np.asarray(got, np.float64), np.asarray(ref, np.float64)
    return float(np.max(np.abs(got - ref)) / max(np.max(np.abs(ref)), 1e-300))


def _names(fn, *args):
    jaxpr = str(jax.make_jaxpr(fn)(*args))
    return jaxpr, jaxpr.count("pallas_call")


@pytest.mark.parametrize("presorted", [False, True])
@pytest.mark.parametrize("kind", ["uniform", "grid", "runs"])
def test_merged_positions_are_a_stable_merge(presorted, kind):
    rng = np.random.default_rng(7)
    t, s = _anchors(rng, 2, 13, 29, kind)
    if presorted:
        s = np.sort(s, axis=1)
    plan = laplex.make_plan(t, s)
    for h in range(2):
        q_t, q_s = (np.asarray(q) for q in merged_positions(plan, h))
        assert np.array_equal(np.sort(np.concatenate([q_t, q_s])), np.arange(13 + 29))
        # NumPy oracle: sort by value, tied sources before targets, each set stably
        vals = np.concatenate([s[h], t[h]])
        kind_key = np.concatenate([np.zeros(29), np.ones(13)])
        order = np.lexsort((np.arange(42), kind_key, vals))
        want = np.empty(42, np.int64)
        want[order] = np.arange(42)
        np.testing.assert_array_equal(q_s, want[:29])
        np.testing.assert_array_equal(q_t, want[29:])


@pytest.mark.parametrize(("m", "n", "kind"), _some_by_default(_SHAPES_KINDS, _DIAGONAL))
def test_value_matches_dense_float64(m, n, kind):
    rng = np.random.default_rng(m * n)
    t, s = _anchors(rng, 2, m, n, kind)
    a, c = np.array([1e-3, 0.7]), rng.standard_normal(2)
    v = rng.standard_normal((n, 2))
    y = laplex.matmat(v, t, s, a, None, c, scan=SCAN)
    assert y.shape == (m, 2)
    assert y.dtype == jnp.float64
    assert _rel(y, _dense(t, s, a, c) @ v) < 1e-12


def test_value_runs_the_block_kernels_only():
    rng = np.random.default_rng(1)
    t, s = _anchors(rng, 2, 9, 20, "grid")
    a, c = np.array([0.3, 2.0]), rng.standard_normal(2)
    v = rng.standard_normal((20, 2))
    plan = laplex.make_plan(t, s)
    jaxpr, calls = _names(lambda v: laplex.matmat(v, t, s, a, None, c, plan=plan, scan=SCAN), v)
    # two heads, each two pallas_calls (ends, apply) batched over the columns
    assert jaxpr.count("name=laplex_chunk_apply") == 2
    assert calls == jaxpr.count("name=laplex_chunk_")


def test_decays_far_apart_stay_exact():
    # a large decay: most entries underflow; compare against the dense matrix absolutely
    rng = np.random.default_rng(2)
    t, s = _anchors(rng, 1, 30, 50, "uniform")
    v = rng.standard_normal(50)
    for lam in (1e-3, 1e3):
        y = laplex.matvec(v, t, s, np.array([lam]), None, np.array([1.1]), scan=SCAN)
        ref = _dense(t, s, [lam], [1.1]) @ v
        assert float(np.max(np.abs(np.asarray(y) - ref))) < 1e-12 * max(1.0, np.max(np.abs(ref)))


@pytest.mark.parametrize("kind", ["uniform", "grid"])
def test_value_float32_within_1e_5(kind):
    rng = np.random.default_rng(3)
    t, s = (z.astype(np.float32) for z in _anchors(rng, 2, 70, 150, kind))
    a, c = np.float32([0.7, 0.2]), np.float32([0.9, -0.4])
    v = rng.standard_normal(150).astype(np.float32)
    y = laplex.matvec(v, t, s, a, None, c, scan=SCAN)
    assert y.dtype == jnp.float32
    assert _rel(y, _dense(t, s, a, c) @ v.astype(np.float64)) < 1e-5


def _dense_loss(v, t, s, a, c, w):
    return jnp.sum(w * (laplex.dense_matrix(t, s, a, None, c) @ v))


def _ours_loss(v, t, s, a, c, w, plan):
    return jnp.sum(w * laplex.matmat(v, t, s, a, None, c, plan=plan, scan=SCAN))


# one compilation per shape (interpret mode compiles slowly); data and plan are traced
_ours_grads = jax.jit(jax.grad(_ours_loss, (0, 1, 2, 3, 4)))
_dense_grads = jax.jit(jax.grad(_dense_loss, (0, 1, 2, 3, 4)))


@pytest.mark.parametrize(
    ("h", "m", "n", "cols", "kind", "presorted"),
    _some_by_default(
        [
            (2, 9, 45, 2, "grid", False),
            (2, 9, 45, 2, "runs", True),
            (2, 9, 45, 2, "uniform", False),
            (2, 45, 9, 2, "grid", True),
            (2, 45, 9, 2, "outside", False),
            (2, 45, 9, 2, "runs", False),
            (1, 37, 1, 1, "outside", True),
            (1, 37, 1, 1, "grid", True),
        ],
        {0, 1, 4, 7},
    ),
)
def test_gradients_match_dense_autodiff(h, m, n, cols, kind, presorted):
    """v, t, s, decay and weight cotangents (heads and columns summed) with JAX's tie
    convention (d|x|/dx = 1 at 0) equal autodiff of the float64 dense matrix."""
    rng = np.random.default_rng(m + 3 * n + len(kind))
    t, s = _anchors(rng, h, m, n, kind)
    if presorted:
        t, s = np.sort(t, axis=1), np.sort(s, axis=1)
    a, c = rng.uniform(0.2, 2.0, h), rng.standard_normal(h)
    v, w = rng.standard_normal((n, cols)), rng.standard_normal((m, cols))
    args = tuple(jnp.asarray(z) for z in (v, t, s, a, c, w))
    plan = laplex.make_plan(t, s)
    assert bool(jnp.all(plan.presorted_s == 1)) == (presorted or n == 1)
    got = _ours_grads(*args, plan)
    ref = _dense_grads(*args)
    for name, g, r in zip("vtsac", got, ref, strict=True):
        assert g.shape == r.shape, name
        assert _rel(g, r) < 1e-12, (name, _rel(g, r))


def test_gradient_runs_the_block_kernels_only():
    rng = np.random.default_rng(4)
    t, s = _anchors(rng, 2, 11, 19, "grid")
    a, c = rng.uniform(0.2, 2.0, 2), rng.standard_normal(2)
    v, w = rng.standard_normal(19), rng.standard_normal(11)
    plan = laplex.make_plan(t, s)

    def loss(v, t, s, a, c):
        return jnp.sum(w * laplex.matvec(v, t, s, a, None, c, plan=plan, scan=SCAN))

    jaxpr, calls = _names(jax.grad(loss, (0, 1, 2, 3, 4)), v, t, s, a, c)
    assert jaxpr.count("name=laplex_grad_apply") == 2
    assert calls == jaxpr.count("name=laplex_chunk_") + jaxpr.count("name=laplex_grad_")


def test_gradients_match_finite_differences():
    rng = np.random.default_rng(5)
    m, n = 1, 26  # one target
    t, s = np.array([[0.4]]), rng.uniform(-3, 3, (1, n))
    a, c = np.array([0.6]), np.array([1.1])
    v, w = rng.standard_normal(n), rng.standard_normal(m)

    def loss(v, t, s, a, c):
        return float(w @ (_dense(t, s, a, c) @ v))

    def ours(v, t, s, a, c):
        return jnp.sum(w * laplex.matvec(v, t, s, a, None, c, scan=SCAN))

    got = jax.grad(ours, (0, 1, 2, 3, 4))(v, t, s, a, c)
    eps = 1e-6
    for k, (x, g) in enumerate(zip((v, t, s, a, c), got, strict=True)):
        idx = (0,) if x.ndim == 1 else (0, min(5, x.shape[1] - 1))
        e = np.zeros_like(x)
        e[idx] = eps
        plus, minus = list((v, t, s, a, c)), list((v, t, s, a, c))
        plus[k], minus[k] = x + e, x - e
        fd = (loss(*plus) - loss(*minus)) / (2 * eps)
        np.testing.assert_allclose(float(g[idx]), fd, rtol=1e-6, atol=1e-9)


def test_gradients_float32_within_1e_5():
    rng = np.random.default_rng(6)
    t, s = (z.astype(np.float32) for z in _anchors(rng, 1, 60, 130, "grid"))
    a, c = np.float32([0.7]), np.float32([0.9])
    v, w = rng.standard_normal(130).astype(np.float32), rng.standard_normal(60).astype(np.float32)
    plan = laplex.make_plan(t, s)
    got = _ours_grads(v[:, None], t, s, a, c, w[:, None], plan)
    ref = _dense_grads(*(jnp.asarray(z, jnp.float64) for z in (v[:, None], t, s, a, c, w[:, None])))
    for name, g, r in zip("vtsac", got, ref, strict=True):
        assert g.dtype == jnp.float32
        assert _rel(g, r) < 1e-5, (name, _rel(g, r))


def _batch_problem():
    rng = np.random.default_rng(8)
    t, s = _anchors(rng, 1, 12, 21, "grid")
    a, c = rng.uniform(0.2, 2.0, 1), rng.standard_normal(1)
    plan = laplex.make_plan(t, s)

    def f(v):
        return laplex.matvec(v, t, s, a, None, c, plan=plan, scan=SCAN)

    return f, jnp.asarray(rng.standard_normal((3, 21)))


def test_jit_equals_eager_and_vmap_equals_loop():
    f, vs = _batch_problem()
    jf = jax.jit(f)
    np.testing.assert_allclose(jf(vs[0]), f(vs[0]), rtol=1e-14, atol=1e-14)
    batched = jax.jit(jax.vmap(f))(vs)
    for i in range(3):
        np.testing.assert_allclose(batched[i], jf(vs[i]), rtol=1e-13, atol=1e-13)


def test_vmap_of_the_gradient_equals_loop():
    f, vs = _batch_problem()

    def g(v):
        return jax.grad(lambda v: jnp.sum(jnp.sin(f(v))))(v)

    jg = jax.jit(g)
    grads = jax.jit(jax.vmap(g))(vs)
    for i in range(3):
        np.testing.assert_allclose(grads[i], jg(vs[i]), rtol=1e-13, atol=1e-13)


@pytest.mark.parametrize("phased", [False, True])
@pytest.mark.parametrize(
    ("target", "platform", "call"),
    [("gpu", "cuda", "__gpu$xla.gpu.triton"), ("tpu", "tpu", "tpu_custom_call")],
)
def test_merged_value_and_gradient_lower_for_gpu_and_tpu_without_a_device(
    target, platform, call, phased
):
    """The whole M != N value and gradient through `matvec` (plan given: merged positions,
    scatters, gathers and the four kernels; `phased`: a phase b, the phased kernels)
    lower to the platform's Pallas custom call from a CPU-only host; compiling them needs
    the device."""
    scan = PallasBlockScan(target=target)
    m, n = 1 << 11, 1 << 12
    f32, i32 = jnp.float32, jnp.int32

    def spec(*shape, dtype=f32):
        return jax.ShapeDtypeStruct(shape, dtype)

    def f(v, t, s, a, c, w, plan):
        def loss(v, t, s, a, b, c):
            y = laplex.matvec(
                v, t, s, a, b if phased else None, c, plan=plan, scan=scan, traced_checks=False
            )
            return jnp.sum(w * jnp.real(y))

        return jax.value_and_grad(loss, (0, 1, 2, 3, 4, 5))(v, t, s, a, 0.5 * a, c)

    ints = (spec(1, n, dtype=i32), spec(1, m, dtype=i32))
    plan = laplex.LaplexPlan(*ints, *ints[::-1], spec(1, dtype=i32))
    exp = export.export(
        jax.jit(f),
        platforms=[platform],
        disabled_checks=[export.DisabledSafetyCheck.custom_call(call)],
    )(spec(n), spec(1, m), spec(1, n), spec(1), spec(1), spec(m), plan)
    # value: ends + apply; gradient: grad ends + grad apply
    assert exp.mlir_module().count(call) == 4


def test_merged_sequence_longer_than_int32_is_refused():
    # the merged positions are int32 like the plan: M + N >= 2**31 is refused (shapes only)
    m, n = 2**30, 2**30
    f32 = jnp.float32

    def f(v, t, s):
        return laplex.matvec(v, t, s, jnp.ones(1, f32), None, jnp.ones(1, f32), scan=SCAN)

    spec = jax.ShapeDtypeStruct
    with pytest.raises(ValueError, match=r"M \+ N < 2\*\*31"):
        jax.eval_shape(f, spec((n,), f32), spec((1, m), f32), spec((1, n), f32))


# --- the phased (complex) M != N operator: a phase b, or a complex v, with t not s ---


def _dense_ph(t, s, a, b, c):
    """float64 NumPy oracle: sum_h c_h exp(-(a_h + i b_h) |t_h[i] - s_h[j]|)."""
    d = np.abs(np.asarray(t, np.float64)[:, :, None] - np.asarray(s, np.float64)[:, None, :])
    lam = (np.asarray(a, np.float64) + 1j * np.asarray(b, np.float64))[:, None, None]
    return np.einsum("h,hij->ij", np.asarray(c, np.float64), np.exp(-lam * d))


def _crel(got, ref):
    """Error relative to the largest reference entry, real or complex."""
    got, ref = np.asarray(got), np.asarray(ref)
    return float(np.max(np.abs(got - ref)) / max(np.max(np.abs(ref)), 1e-300))


def _values(rng, n, cols, cx):
    v = rng.standard_normal((n, cols))
    return v + 1j * rng.standard_normal((n, cols)) if cx else v


@pytest.mark.parametrize(("m", "n", "kind"), _some_by_default(_SHAPES_KINDS, {1, 6, 11, 12}))
def test_phased_value_matches_dense_float64(m, n, kind):
    rng = np.random.default_rng(m * n + 1)
    t, s = _anchors(rng, 2, m, n, kind)
    a, b, c = np.array([1e-3, 0.7]), np.array([0.4, -2.5]), rng.standard_normal(2)
    for cx in (False, True):
        v = _values(rng, n, 2, cx)
        y = laplex.matmat(v, t, s, a, b, c, scan=SCAN)
        assert y.shape == (m, 2)
        assert y.dtype == jnp.complex128
        assert _crel(y, _dense_ph(t, s, a, b, c) @ v) < 1e-12


def test_complex_v_with_the_real_kernel_matches_dense():
    # no phase, complex v: the phased kernels with b = 0
    rng = np.random.default_rng(12)
    t, s = _anchors(rng, 2, 20, 33, "grid")
    a, c = np.array([0.3, 1.5]), rng.standard_normal(2)
    v = _values(rng, 33, 1, True)[:, 0]
    y = laplex.matvec(v, t, s, a, None, c, scan=SCAN)
    assert y.dtype == jnp.complex128
    assert _crel(y, _dense(t, s, a, c) @ v) < 1e-12


def test_phased_value_runs_the_block_kernels_only():
    rng = np.random.default_rng(13)
    t, s = _anchors(rng, 2, 9, 20, "grid")
    a, b, c = np.array([0.3, 2.0]), np.array([1.0, -0.5]), rng.standard_normal(2)
    v = rng.standard_normal((20, 2))
    plan = laplex.make_plan(t, s)
    jaxpr, calls = _names(lambda v: laplex.matmat(v, t, s, a, b, c, plan=plan, scan=SCAN), v)
    # two heads, each one real-column pass (a real v: its imaginary pass is skipped)
    assert jaxpr.count("name=laplex_phased_apply") == 2
    assert calls == jaxpr.count("name=laplex_phased_")


@pytest.mark.parametrize("kind", ["uniform", "grid"])
def test_phased_value_float32_within_1e_5(kind):
    rng = np.random.default_rng(14)
    t, s = (z.astype(np.float32) for z in _anchors(rng, 2, 70, 150, kind))
    a, b, c = np.float32([0.7, 0.2]), np.float32([1.3, -0.6]), np.float32([0.9, -0.4])
    v = (rng.standard_normal(150) + 1j * rng.standard_normal(150)).astype(np.complex64)
    y = laplex.matvec(v, t, s, a, b, c, scan=SCAN)
    assert y.dtype == jnp.complex64
    ref = _dense_ph(t, s, a, b, c) @ v.astype(np.complex128)
    assert _crel(y, ref) < 1e-5


def _dense_loss_ph(v, t, s, a, b, c, w):
    k = laplex.dense_matrix(t, s, a, b, c)
    return jnp.real(jnp.sum(w * (k @ v.astype(k.dtype))))


def _ours_loss_ph(v, t, s, a, b, c, w, plan):
    return jnp.real(jnp.sum(w * laplex.matmat(v, t, s, a, b, c, plan=plan, scan=SCAN)))


_ours_grads_ph = jax.jit(jax.grad(_ours_loss_ph, (0, 1, 2, 3, 4, 5)))
_dense_grads_ph = jax.jit(jax.grad(_dense_loss_ph, (0, 1, 2, 3, 4, 5)))


def _phased_case(seed, h, m, n, cols, kind, presorted, cx, dtype=np.float64):
    rng = np.random.default_rng(seed)
    t, s = _anchors(rng, h, m, n, kind)
    if presorted:
        t, s = np.sort(t, axis=1), np.sort(s, axis=1)
    a, b, c = rng.uniform(0.2, 2.0, h), rng.uniform(-3, 3, h), rng.standard_normal(h)
    v = _values(rng, n, cols, cx)
    w = rng.standard_normal((m, cols)) + 1j * rng.standard_normal((m, cols))
    cd = np.complex64 if dtype == np.float32 else np.complex128
    v = v.astype(cd if cx else dtype)
    t, s, a, b, c = (z.astype(dtype) for z in (t, s, a, b, c))
    return v, t, s, a, b, c, w.astype(cd)


@pytest.mark.parametrize(
    ("h", "m", "n", "cols", "kind", "presorted", "cx"),
    _some_by_default(
        [
            (2, 9, 45, 2, "grid", False, True),
            (2, 9, 45, 1, "runs", True, False),
            (2, 9, 45, 2, "uniform", False, False),
            (2, 45, 9, 2, "grid", True, False),
            (2, 45, 9, 1, "outside", False, True),
            (2, 45, 9, 2, "runs", False, True),
            (1, 1, 37, 1, "grid", False, True),
            (1, 37, 1, 1, "grid", True, True),
            (1, 70, 90, 1, "runs", False, True),  # tie runs (~53) cover whole 32-anchor chunks
        ],
        {0, 3, 8},
    ),
)
def test_phased_gradients_match_dense_autodiff(h, m, n, cols, kind, presorted, cx):
    """v (real or complex), t, s, a, b, c cotangents of Re(sum(w y)) with JAX's complex and
    tie conventions equal autodiff of the float64 dense matrix; ties within and across t
    and s (grid, runs), M = 1, M > N, presorted and shuffled anchors."""
    v, t, s, a, b, c, w = _phased_case(m + 3 * n + len(kind), h, m, n, cols, kind, presorted, cx)
    args = tuple(jnp.asarray(z) for z in (v, t, s, a, b, c, w))
    plan = laplex.make_plan(t, s)
    got = _ours_grads_ph(*args, plan)
    ref = _dense_grads_ph(*args)
    for name, g, r in zip("vtsabc", got, ref, strict=True):
        assert g.shape == r.shape, name
        assert g.dtype == r.dtype, name
        assert _crel(g, r) < 1e-10, (name, _crel(g, r))


def test_phased_gradients_float32_within_1e_5():
    v, t, s, a, b, c, w = _phased_case(15, 1, 60, 130, 1, "grid", False, True, np.float32)
    plan = laplex.make_plan(t, s)
    got = _ours_grads_ph(v, t, s, a, b, c, w, plan)
    wide = (jnp.complex128, *(jnp.float64,) * 5, jnp.complex128)
    ref = _dense_grads_ph(
        *(jnp.asarray(z, d) for z, d in zip((v, t, s, a, b, c, w), wide, strict=True))
    )
    for name, g, r in zip("vtsabc", got, ref, strict=True):
        assert g.dtype == (jnp.complex64 if name == "v" else jnp.float32), name
        assert _crel(g, r) < 1e-5, (name, _crel(g, r))


def test_phased_gradients_match_finite_differences():
    rng = np.random.default_rng(16)
    n = 26
    t, s = np.array([[0.4, -1.1, 2.0]]), rng.uniform(-3, 3, (1, n))
    a, b, c = np.array([0.6]), np.array([1.7]), np.array([1.1])
    v = rng.standard_normal(n) + 1j * rng.standard_normal(n)
    w = rng.standard_normal(3) + 1j * rng.standard_normal(3)

    def loss(v, t, s, a, b, c):  # Re(sum(w y)): its gradient is the VJP at w
        return float(np.real(w @ (_dense_ph(t, s, a, b, c) @ v)))

    def ours(v, t, s, a, b, c):
        return jnp.real(jnp.sum(w * laplex.matvec(v, t, s, a, b, c, scan=SCAN)))

    got = jax.grad(ours, (0, 1, 2, 3, 4, 5))(v, t, s, a, b, c)
    eps = 1e-6
    args = (v, t, s, a, b, c)
    for k in range(1, 6):
        x = args[k]
        idx = (0,) if x.ndim == 1 else (0, 1)
        e = np.zeros_like(x)
        e[idx] = eps
        plus, minus = list(args), list(args)
        plus[k], minus[k] = x + e, x - e
        fd = (loss(*plus) - loss(*minus)) / (2 * eps)
        np.testing.assert_allclose(float(got[k][idx]), fd, rtol=1e-6, atol=1e-9)
    # v's real and imaginary parts: jax.grad of a real loss is d/dRe - i d/dIm
    for unit, part in ((1.0, np.real), (1j, lambda z: -np.imag(z))):
        up, down = v.copy(), v.copy()
        up[5] += unit * eps
        down[5] -= unit * eps
        fd = (loss(up, t, s, a, b, c) - loss(down, t, s, a, b, c)) / (2 * eps)
        np.testing.assert_allclose(float(part(got[0][5])), fd, rtol=1e-6, atol=1e-9)


def test_phased_jit_equals_eager_value_and_gradient():
    v, t, s, a, b, c, w = _phased_case(17, 1, 6, 10, 1, "grid", False, True)  # one chunk
    plan = laplex.make_plan(t, s)

    def f(v, t, s, a, b, c):
        return laplex.matvec(v[:, 0], t, s, a, b, c, plan=plan, scan=SCAN)

    np.testing.assert_allclose(jax.jit(f)(v, t, s, a, b, c), f(v, t, s, a, b, c), rtol=1e-14)
    eager = jax.grad(_ours_loss_ph, (0, 1, 2, 3, 4, 5))(v, t, s, a, b, c, w, plan)
    for g, e in zip(_ours_grads_ph(v, t, s, a, b, c, w, plan), eager, strict=True):
        np.testing.assert_allclose(g, e, rtol=1e-13, atol=1e-14)


def test_phased_gradient_runs_the_block_kernels_only():
    v, t, s, a, b, c, w = _phased_case(18, 2, 11, 19, 1, "grid", False, True)
    plan = laplex.make_plan(t, s)
    jaxpr, calls = _names(
        lambda *z: jax.grad(_ours_loss_ph, (0, 1, 2, 3, 4, 5))(*z, w, plan), v, t, s, a, b, c
    )
    assert jaxpr.count("name=laplex_phgrad_apply") == 2
    assert calls == jaxpr.count("name=laplex_phased_") + jaxpr.count("name=laplex_phgrad_")
