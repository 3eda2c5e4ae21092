"""The C++ SGM aggregation (`kernels/stereo/stereo_sgm.cc`) against the literal per-pixel
recursion (numpy) and bit for bit against the JAX path, on small volumes; its derivatives
are the JAX path's, checked against finite differences."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxlab import stereo
from jaxlab._kernels.stereo import sgm_aggregate_cpu, sgm_disparity_cpu, sgm_kernel_available

from .test_stereo import _path_reference

DIRS = [(1, 0), (-1, 0), (0, 1), (0, -1), (1, 1), (1, -1), (-1, 1), (-1, -1)]


def test_sgm_kernel_builds():
    assert sgm_kernel_available()  # the CI machine has a C++ compiler


needs_kernel = pytest.mark.skipif(not sgm_kernel_available(), reason="no C++ compiler")


def _literal(cost, p1, p2, paths):
    dirs = DIRS if paths == 8 else DIRS[:4]
    return sum(_path_reference(cost, p1, p2, dy, dx) for dy, dx in dirs)


# odd and even heights (the two-thread split of rows), single row / column / disparity
SHAPES = [(6, 7, 4), (7, 5, 3), (1, 6, 4), (5, 1, 3), (4, 5, 1), (9, 8, 2)]


@needs_kernel
@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("paths", [4, 8])
def test_kernel_equals_literal_recursion(getkey, shape, threads, paths):
    cost = np.asarray(jax.random.uniform(getkey(), shape, jnp.float64)) * 10
    got = sgm_aggregate_cpu(jnp.asarray(cost), p1=2.0, p2=5.0, paths=paths, threads=threads)
    np.testing.assert_allclose(np.asarray(got), _literal(cost, 2.0, 5.0, paths), rtol=1e-12)


@needs_kernel
@pytest.mark.parametrize("dtype", [jnp.float32, jnp.float64])
@pytest.mark.parametrize("paths", [4, 8])
def test_kernel_one_thread_is_bit_identical_to_the_jax_path(getkey, dtype, paths):
    cost = jax.random.uniform(getkey(), (11, 13, 9), dtype) * 7
    want = stereo.sgm_aggregate(cost, 1.5, 6.25, paths, impl="jax")
    got = sgm_aggregate_cpu(cost, p1=1.5, p2=6.25, paths=paths, threads=1)
    assert got.dtype == want.dtype
    np.testing.assert_array_equal(np.asarray(got), np.asarray(want))


def _census_volume(key, h, w, n):
    k1, k2 = jax.random.split(key)
    left = jax.random.uniform(k1, (h, w), jnp.float32)
    right = jax.random.uniform(k2, (h, w), jnp.float32)
    return stereo.census_cost_volume(left, right, n)


@needs_kernel
@pytest.mark.parametrize("shape", [(13, 17, 6), (8, 9, 5)])
def test_kernel_two_threads_on_integer_costs_is_bit_identical(getkey, shape):
    cost = _census_volume(getkey(), *shape)
    want = np.asarray(stereo.sgm_aggregate(cost, 8.0, 32.0, impl="jax"))
    for threads in (0, 1, 2):
        got = sgm_aggregate_cpu(cost, p1=8.0, p2=32.0, threads=threads)
        np.testing.assert_array_equal(np.asarray(got), want)


@needs_kernel
def test_kernel_two_threads_on_float_costs_to_rounding(getkey):
    cost = jax.random.uniform(getkey(), (10, 12, 7), jnp.float32) * 9
    want = np.asarray(stereo.sgm_aggregate(cost, 2.0, 5.0, impl="jax"))
    got = np.asarray(sgm_aggregate_cpu(cost, p1=2.0, p2=5.0, threads=2))
    np.testing.assert_allclose(got, want, rtol=2e-6)


@needs_kernel
def test_auto_uses_the_kernel_and_batches_under_vmap_and_jit(getkey):
    cost = _census_volume(getkey(), 9, 11, 5)
    batch = jnp.stack([cost, cost[::-1], 24.0 - cost])

    def agg(impl):
        return jax.jit(jax.vmap(lambda c: stereo.sgm_aggregate(c, 8.0, 32.0, impl=impl)))

    np.testing.assert_array_equal(np.asarray(agg("cpu")(batch)), np.asarray(agg("jax")(batch)))
    hlo = jax.jit(lambda c: stereo.sgm_aggregate(c, 8.0, 32.0)).lower(cost).as_text()
    assert "jaxlab_stereo_sgm_f32" in hlo
    hlo_jax = jax.jit(lambda c: stereo.sgm_aggregate(c, 8.0, 32.0, impl="jax")).lower(cost)
    assert "jaxlab_stereo_sgm" not in hlo_jax.as_text()


@needs_kernel
@pytest.mark.parametrize("subpixel", [True, False])
@pytest.mark.parametrize("integer", [True, False])
def test_disparity_in_the_kernel_equals_the_jax_path(getkey, subpixel, integer):
    """The fused argmin / sub-pixel of the kernel (int16 recursion on integer costs, float
    otherwise) against `subpixel_argmin` of the JAX path's volume."""
    cost = _census_volume(getkey(), 12, 23, 7)
    if not integer:
        cost = cost + jax.random.uniform(getkey(), cost.shape, jnp.float32)
    ref = jax.jit(lambda c: stereo.sgm_disparity(c, 8.0, 32.0, subpixel=subpixel, impl="jax"))
    want = np.asarray(ref(cost))
    for threads in (1, 2):
        got = sgm_disparity_cpu(cost, p1=8.0, p2=32.0, subpixel=subpixel, threads=threads)
        if integer or threads == 1:
            np.testing.assert_array_equal(np.asarray(got), want)
        else:  # two threads: float sums may differ in the last bits
            np.testing.assert_allclose(np.asarray(got), want, rtol=0, atol=1e-4)
    got = stereo.sgm_disparity(cost, 8.0, 32.0, subpixel=subpixel)
    if integer:
        np.testing.assert_array_equal(np.asarray(got), want)


@needs_kernel
def test_derivatives_are_the_jax_paths_and_match_finite_differences(getkey):
    cost = jax.random.uniform(getkey(), (4, 5, 3), jnp.float64) * 10
    w = jax.random.normal(getkey(), cost.shape, jnp.float64)
    v = jax.random.normal(getkey(), cost.shape, jnp.float64)

    def loss(c):
        return jnp.sum(w * stereo.sgm_aggregate(c, 2.0, 5.0, impl="cpu"))

    g = jax.jit(jax.grad(loss))(cost)
    t = jax.jit(lambda c, v: jax.jvp(loss, (c,), (v,))[1])(cost, v)
    eps = 1e-6  # piecewise linear: central differences are exact away from kinks
    fd = (loss(cost + eps * v) - loss(cost - eps * v)) / (2 * eps)
    np.testing.assert_allclose(float(t), float(fd), rtol=1e-7)
    np.testing.assert_allclose(float(jnp.vdot(g, v)), float(fd), rtol=1e-7)
    # the disparity kernel's tangent is the JAX path's sub-pixel tangent
    disp = jax.jit(lambda c, v: jax.jvp(lambda c: stereo.sgm_disparity(c, 2.0, 5.0), (c,), (v,)))
    d, dt = disp(cost, v)
    fd_d = (
        stereo.sgm_disparity(cost + eps * v, 2.0, 5.0)
        - stereo.sgm_disparity(cost - eps * v, 2.0, 5.0)
    ) / (2 * eps)
    np.testing.assert_allclose(np.asarray(dt), np.asarray(fd_d), rtol=1e-6, atol=1e-8)
    assert np.any(np.asarray(dt) != 0)


@needs_kernel
def test_bad_inputs():
    cost = jnp.zeros((4, 4, 3), jnp.float32)
    with pytest.raises(ValueError, match="impl: expected 'auto', 'cpu' or 'jax'"):
        stereo.sgm_aggregate(cost, impl="gpu")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="impl: 'cpu' needs"):
        stereo.sgm_aggregate(cost.astype(jnp.float16), impl="cpu")
    with pytest.raises(ValueError, match="threads: expected 0, 1 or 2"):
        sgm_aggregate_cpu(cost, p1=1.0, p2=2.0, threads=3)
    with pytest.raises(ValueError, match="cost: expected float32 or float64"):
        sgm_aggregate_cpu(cost.astype(jnp.float16), p1=1.0, p2=2.0)
    with pytest.raises(ValueError, match="cost: expected shape"):
        sgm_aggregate_cpu(cost[0], p1=1.0, p2=2.0)
