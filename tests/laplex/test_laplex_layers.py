"""LaplexLinear and LaplexGram vs dense oracles; CG / SLQ vs dense linear algebra."""

from __future__ import annotations

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxlab import laplex


def test_linear_matches_dense_weight_and_grads(getkey):
    layer = laplex.LaplexLinear(9, 4, 3, phased=True, key=getkey(), dtype=jnp.float64)
    x = jax.random.normal(getkey(), (9,), jnp.float64)
    np.testing.assert_allclose(layer(x), layer.weight() @ x + layer.bias, rtol=1e-12, atol=1e-12)
    assert layer.num_params() == 3 * (9 + 4 + 3) + 4

    def loss(model, dense):
        y = (model.weight() @ x + model.bias) if dense else model(x)
        return jnp.sum(jnp.sin(y))

    g = jax.jit(jax.grad(loss), static_argnums=1)(layer, False)
    r = jax.jit(jax.grad(loss), static_argnums=1)(layer, True)
    for a, b in zip(jax.tree.leaves(g), jax.tree.leaves(r), strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-10, atol=1e-12)


def test_linear_vmap_equals_loop_and_routing(getkey):
    layer = laplex.LaplexLinear(6, 5, 2, key=getkey())
    xs = jax.random.normal(getkey(), (3, 6), jnp.float32)
    batched = jax.vmap(layer)(xs)
    np.testing.assert_allclose(layer.batch(xs), batched, rtol=1e-5, atol=1e-6)
    for i in range(3):
        np.testing.assert_allclose(batched[i], layer(xs[i]), rtol=1e-5, atol=1e-6)
    r = layer.routing()
    assert r.shape == (5, 6)
    np.testing.assert_allclose(jnp.sum(r, axis=1), np.ones(5), rtol=1e-5)
    assert bool(jnp.all(r >= 0))


def test_linear_bad_input(getkey):
    layer = laplex.LaplexLinear(6, 5, 2, key=getkey())
    with pytest.raises(ValueError, match="^x:"):
        layer(jnp.ones(7, jnp.float32))
    with pytest.raises(ValueError, match="^heads:"):
        laplex.LaplexLinear(6, 5, 0, key=getkey())


def _gram(getkey, shape, heads=2):
    coords = [jnp.arange(n, dtype=jnp.float64) for n in shape]
    g = laplex.LaplexGram(coords, heads, key=getkey(), decay=0.7, noise=0.3, dtype=jnp.float64)
    # move the anchors off the grid (learned warps may also reorder and tie them)
    moved = tuple(u + 0.5 * jax.random.normal(getkey(), u.shape, jnp.float64) for u in g.anchors)
    return eqx.tree_at(lambda m: m.anchors, g, moved)


@pytest.mark.parametrize("shape", [(13,), (4, 5)])
def test_gram_matvec_matches_dense_and_is_psd(getkey, shape):
    g = _gram(getkey, shape)
    v = jax.random.normal(getkey(), (g.size,), jnp.float64)
    dense = np.asarray(g.dense())
    np.testing.assert_allclose(g.matvec(v), dense @ np.asarray(v), rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(dense, dense.T, atol=1e-14)
    assert np.linalg.eigvalsh(dense).min() > 0.3 - 1e-10  # kernel PSD + noise 0.3


def test_cg_lanczos_slq_against_dense(getkey):
    g = _gram(getkey, (4, 5))
    dense = np.asarray(g.dense())
    y = jax.random.normal(getkey(), (g.size,), jnp.float64)
    x, _ = jax.jit(lambda b: laplex.conjugate_gradient(g.matvec, b, tol=1e-12))(y)
    np.testing.assert_allclose(x, np.linalg.solve(dense, y), rtol=1e-8, atol=1e-10)
    # Lanczos with N steps is exact: sqrt applied to z equals the dense square root
    evals, evecs = np.linalg.eigh(dense)
    sq = (evecs * np.sqrt(evals)) @ evecs.T
    z = jax.random.normal(getkey(), (g.size,), jnp.float64)
    np.testing.assert_allclose(
        laplex.lanczos_sqrt_apply(g.matvec, z, steps=g.size), sq @ z, rtol=1e-6, atol=1e-8
    )
    # SLQ: unbiased over probes; exact quadrature with N nodes -> error from probes only
    est = laplex.slq_logdet(
        g.matvec, g.size, key=getkey(), probes=256, steps=g.size, dtype=jnp.float64
    )
    exact = np.linalg.slogdet(dense)[1]
    assert abs(float(est) - exact) < 0.05 * abs(exact) + 0.5


def test_gaussian_nll_value_and_gradient(getkey):
    g = _gram(getkey, (4, 5))
    y = jax.random.normal(getkey(), (g.size,), jnp.float64)

    def exact(model):
        cov = model.dense()
        return 0.5 * (
            y @ jnp.linalg.solve(cov, y) + jnp.linalg.slogdet(cov)[1] + g.size * jnp.log(2 * jnp.pi)
        )

    key = getkey()
    ours_v, ours_g = jax.jit(
        jax.value_and_grad(
            lambda m: m.neg_log_likelihood(y, key=key, probes=512, lanczos_steps=g.size)
        )
    )(g)
    ref_v, ref_g = jax.value_and_grad(exact)(g)
    assert abs(float(ours_v) - float(ref_v)) < 0.02 * abs(float(ref_v))
    # the quadratic part of the gradient is exact; the log-det part is a Hutchinson
    # estimate with 512 probes -> a few percent
    for a, b in zip(jax.tree.leaves(ours_g), jax.tree.leaves(ref_g), strict=True):
        err = np.linalg.norm(np.asarray(a) - np.asarray(b)) / np.linalg.norm(np.asarray(b))
        assert err < 0.1


def test_gram_bad_input(getkey):
    with pytest.raises(ValueError, match=r"^coords\[0\]:"):
        laplex.LaplexGram(jnp.array([0.0, jnp.nan]), key=getkey())
    with pytest.raises(ValueError, match="^heads:"):
        laplex.LaplexGram(jnp.arange(3.0), 0, key=getkey())
    with pytest.raises(ValueError, match="^decay:"):
        laplex.LaplexGram(jnp.arange(3.0), key=getkey(), decay=-1.0)
    g = laplex.LaplexGram(jnp.arange(3.0), key=getkey())
    with pytest.raises(ValueError, match="^v:"):
        g.matvec(jnp.ones(4, jnp.float32))
