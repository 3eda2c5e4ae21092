import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxlab import biophys as bp


def test_point_source_matches_analytic_formula(getkey):
    src = jax.random.uniform(getkey(), (5, 3), minval=-50.0, maxval=50.0)
    el = jax.random.uniform(getkey(), (7, 3), minval=-50.0, maxval=50.0)
    cur = jax.random.normal(getkey(), (4, 5))
    phi = bp.point_source_potential(src, cur, el, sigma=0.3)
    s, e, c = np.asarray(src), np.asarray(el), np.asarray(cur)
    expect = np.zeros((4, 7))
    for t in range(4):
        for j in range(7):
            for m in range(5):
                r = np.sqrt(((e[j] - s[m]) ** 2).sum())
                expect[t, j] += c[t, m] / (4 * np.pi * 0.3 * r) * 1000.0
    np.testing.assert_allclose(phi, expect, rtol=1e-9)


def test_point_source_minimum_distance():
    g = bp.point_source_gain(jnp.zeros((1, 3)), jnp.asarray([[0.0, 0.0, 0.5]]), r_min=2.0)
    np.testing.assert_allclose(g, 1000.0 / (4 * np.pi * 0.3 * 2.0), rtol=1e-12)


@pytest.mark.parametrize(
    "el", [[30.0, 10.0, 5.0], [0.0, 120.0, 0.0], [2.0, -40.0, 1.0], [5.0, 50.0, 0.0]]
)
def test_line_source_equals_integrated_point_sources(el):
    start, end = np.array([0.0, 0.0, 0.0]), np.array([0.0, 100.0, 0.0])
    n = 20000
    mids = start + (np.arange(n)[:, None] + 0.5) / n * (end - start)
    el = np.asarray([el])
    dense = bp.point_source_gain(jnp.asarray(mids), jnp.asarray(el), r_min=1e-9).sum() / n
    line = bp.line_source_gain(
        jnp.asarray(start[None]), jnp.asarray(end[None]), jnp.asarray(el), r_min=1e-9
    )
    np.testing.assert_allclose(line[0, 0], dense, rtol=2e-4)


def test_line_source_far_field_is_point_source():
    g_line = bp.line_source_gain(
        jnp.asarray([[0.0, 0.0, 0.0]]),
        jnp.asarray([[0.0, 10.0, 0.0]]),
        jnp.asarray([[5000.0, 5.0, 0.0]]),
    )
    g_pt = bp.point_source_gain(jnp.asarray([[0.0, 5.0, 0.0]]), jnp.asarray([[5000.0, 5.0, 0.0]]))
    np.testing.assert_allclose(g_line, g_pt, rtol=1e-5)


def test_conductor_jit_equals_eager_and_grad_matches_fd(getkey):
    el = jax.random.uniform(getkey(), (6, 3), minval=-40.0, maxval=40.0)
    start = jnp.asarray([1.0, 2.0, 20.0])

    def f(s):
        end = s + jnp.asarray([0.0, 80.0, 5.0])
        return jnp.sum(bp.line_source_gain(s[None], end[None], el) ** 2)

    np.testing.assert_allclose(jax.jit(f)(start), f(start), rtol=1e-12)
    g = jax.grad(f)(start)
    eps = 1e-5
    fd = np.array(
        [(f(start.at[i].add(eps)) - f(start.at[i].add(-eps))) / (2 * eps) for i in range(3)]
    )
    np.testing.assert_allclose(g, fd, rtol=1e-6, atol=1e-9)


def test_conductor_bad_inputs():
    pts = jnp.zeros((2, 3))
    el = jnp.ones((4, 3))
    with pytest.raises(ValueError, match="sigma"):
        bp.point_source_gain(pts, el, sigma=-0.3)
    with pytest.raises(ValueError, match="sources"):
        bp.point_source_gain(pts.at[0, 0].set(jnp.nan), el)
    with pytest.raises(ValueError, match="ends"):
        bp.line_source_gain(pts, jnp.ones((3, 3)), el)
    with pytest.raises(ValueError, match="electrodes"):
        bp.point_source_gain(pts, jnp.ones((4, 2)))
    with pytest.raises(ValueError, match="currents"):
        bp.point_source_potential(pts, jnp.ones((10, 3)), el)
