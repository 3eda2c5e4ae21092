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


def test_slq_error_statistic_and_its_bootstrap_over_images():
    """The SLQ row's statistic is the worse model's relative error of the mean NLL, and
    its interval comes from resampling images (each with its own probes), not one value."""
    from experiments._harness import bootstrap

    rng = np.random.default_rng(0)
    exact_g, exact_l = rng.normal(1.0, 0.1, 30), rng.normal(0.8, 0.1, 30)
    slq_g = exact_g + rng.normal(0.01, 0.02, 30)
    slq_l = exact_l + rng.normal(-0.03, 0.02, 30)
    got = gram.slq_max_rel_err(slq_g, exact_g, slq_l, exact_l)
    want = max(
        abs(slq_g.mean() - exact_g.mean()) / exact_g.mean(),
        abs(slq_l.mean() - exact_l.mean()) / exact_l.mean(),
    )
    assert got == pytest.approx(want, rel=1e-12)
    est = bootstrap((slq_g, exact_g, slq_l, exact_l), gram.slq_max_rel_err, seed=0, n_resamples=500)
    assert est.value == pytest.approx(want, rel=1e-12)
    assert est.low < want < est.high
    assert not est.is_single


def test_faces_resample_to_a_larger_side():
    faces = gram.load_faces()
    big = gram.load_faces(50)
    assert big.shape == (100, 50, 50)
    assert big.min() >= 0
    assert big.max() <= 1
    # bilinear at twice the resolution: each 2x2 block averages to about the original pixel
    blocks = big.reshape(100, 25, 2, 25, 2).mean((2, 4))
    assert np.abs(blocks - faces).mean() < 0.03
    with pytest.raises(ValueError, match="side"):
        gram.load_faces(1)


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


def test_digits_split_is_disjoint_and_standardised():
    cfg = head.Config(n_train=50, n_val=20, n_test=30)
    x_tr, y_tr, x_va, y_va, x_te, y_te = head.digits(cfg, jax.random.key(0))
    assert x_tr.shape == (50, 64)
    assert x_va.shape == (20, 64)
    assert x_te.shape == (30, 64)
    assert y_tr.shape == (50,)
    assert set(np.unique(np.asarray(y_tr))) <= set(range(10))
    # no image in two parts
    rows = [{tuple(np.round(np.asarray(r), 5)) for r in x} for x in (x_tr, x_va, x_te)]
    dup = len(rows[0] & rows[2]) + len(rows[1] & rows[2]) + len(rows[0] & rows[1])
    assert dup <= 2  # the digits set holds a few exact duplicate images
    np.testing.assert_allclose(np.asarray(x_tr).mean(0), 0, atol=1e-4)
    assert float(np.asarray(x_tr).std()) == pytest.approx(1, abs=1e-3)
    with pytest.raises(ValueError, match="n_train"):
        head.digits(head.Config(n_train=1500, n_val=300, n_test=300), jax.random.key(0))
