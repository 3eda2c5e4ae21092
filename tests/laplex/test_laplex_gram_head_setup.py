"""laplex_gram / laplex_head pieces: the exact NLL against scipy, the jitted validation
score against it, the face data, and the projection parameter counts."""

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
from scipy.stats import multivariate_normal

from experiments.laplex import gram, head
from jaxlab import laplex


def test_exact_nll_matches_scipy():
    rng = np.random.default_rng(0)
    a = rng.normal(size=(6, 6))
    cov = a @ a.T + 0.5 * np.eye(6)
    ys = rng.normal(size=(4, 6))
    want = -multivariate_normal(np.zeros(6), cov).logpdf(ys) / 6
    np.testing.assert_allclose(gram.exact_nll(cov, ys), want, rtol=1e-10)


def test_validation_score_is_the_exact_nll_of_the_model():
    coords = [jnp.arange(4, dtype=jnp.float32)] * 2
    model = laplex.LaplexGram(coords, 2, key=jax.random.key(0), decay=0.5, noise=0.2)
    step = laplex.GramStep(model, jnp.zeros((1, 16)), optimizer=optax.adam(0.1))
    state = step.init(model, jax.random.key(1))
    ys = jax.random.normal(jax.random.key(2), (3, 16))
    got = float(gram._dense_nll(state, ys, static=step.static))
    want = gram.exact_nll(np.asarray(model.dense(), np.float64), np.asarray(ys)).mean()
    assert got == pytest.approx(want, rel=1e-4)


def test_faces_and_projection_counts():
    faces = gram.load_faces()
    assert faces.shape == (100, 25, 25)
    assert faces.min() >= 0
    assert faces.max() <= 1
    key = jax.random.key(0)
    assert head.trainable(head.Fixed(16, 8, key=key)) == 0
    assert head.trainable(head.LowRank(16, 8, 2, key=key)) == 2 * (16 + 8) + 8
    assert head.trainable(head.Dense(16, 8, key=key)) == 16 * 8 + 8
    lap = laplex.LaplexLinear(16, 8, 2, key=key)
    assert head.trainable(lap) == 2 * (16 + 8 + 2) + 8
    x = jax.random.normal(key, (5, 16), jnp.float32)
    np.testing.assert_allclose(
        head.LowRank(16, 8, 2, key=key).batch(x),
        x @ (head.LowRank(16, 8, 2, key=key).u @ head.LowRank(16, 8, 2, key=key).v).T,
        rtol=1e-5,
        atol=1e-5,
    )


def test_crops_are_standardised_and_balanced():
    cfg = head.Config(side=8, train_per_class=3, test_per_class=2)
    x_tr, y_tr, x_te, y_te = head.crops(cfg, jax.random.key(0))
    assert x_tr.shape == (3 * len(head.IMAGES), 64)
    assert x_te.shape == (2 * len(head.IMAGES), 64)
    np.testing.assert_array_equal(np.bincount(np.asarray(y_tr)), 3)
    np.testing.assert_allclose(np.asarray(x_tr).mean(1), 0, atol=1e-4)
    np.testing.assert_allclose(np.asarray(x_tr).std(1), 1, atol=1e-2)
