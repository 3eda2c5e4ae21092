"""Probes against scikit-learn, dense formulas and a planted linear signal."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from sklearn.linear_model import LogisticRegression, Ridge

import jaxlab.interp as ip


def _data(key, n=200, d=8, noise=0.5):
    kx, kw, ke = jax.random.split(key, 3)
    x = jax.random.normal(kx, (n, d), jnp.float64)
    w = jax.random.normal(kw, (d,), jnp.float64)
    y = x @ w + 0.3 + noise * jax.random.normal(ke, (n,), jnp.float64)
    return x, y, w


@pytest.mark.parametrize("multi", [False, True])
def test_ridge_equals_sklearn(getkey, multi):
    x, y, _ = _data(getkey())
    if multi:
        y = jnp.stack([y, -2 * y + x[:, 0]], axis=1)
    for alpha in (0.1, 10.0):
        probe = ip.fit_ridge(x, y, penalty=alpha)
        ref = Ridge(alpha=alpha).fit(np.asarray(x), np.asarray(y))
        np.testing.assert_allclose(probe.coef, ref.coef_.T, rtol=1e-5, atol=1e-8)
        np.testing.assert_allclose(probe.intercept, ref.intercept_, rtol=1e-5, atol=1e-8)


def test_ridge_weights_equal_sklearn_sample_weight_and_subset(getkey):
    x, y, _ = _data(getkey())
    mask = np.asarray(jax.random.bernoulli(getkey(), 0.6, (x.shape[0],)))
    probe = ip.fit_ridge(x, y, penalty=3.0, weights=mask)
    ref = Ridge(alpha=3.0).fit(np.asarray(x)[mask], np.asarray(y)[mask])
    np.testing.assert_allclose(probe.coef, ref.coef_, rtol=1e-5, atol=1e-8)
    np.testing.assert_allclose(probe.intercept, ref.intercept_, rtol=1e-5, atol=1e-8)


def test_ridge_gcv_equals_dense_hat_matrix(getkey):
    x, y, _ = _data(getkey(), n=60, d=10, noise=2.0)
    pens = jnp.asarray([0.01, 0.3, 3.0, 30.0, 300.0])
    probe, scores = ip.ridge_gcv(x, y, penalties=pens)
    xn, yn = np.asarray(x), np.asarray(y)
    n, d = xn.shape
    xt = np.hstack([np.ones((n, 1)), xn])
    ref = []
    for p in np.asarray(pens):
        reg = np.diag(np.r_[0.0, np.full(d, p)])
        hat = xt @ np.linalg.solve(xt.T @ xt + reg, xt.T)
        ref.append(n * np.sum((yn - hat @ yn) ** 2) / (n - np.trace(hat)) ** 2)
    np.testing.assert_allclose(scores, ref, rtol=1e-7)
    assert float(probe.penalty) == float(pens[int(np.argmin(ref))])


def test_ridge_kfold_equals_brute_force(getkey):
    x, y, _ = _data(getkey(), n=90, d=6, noise=1.0)
    folds = ip.group_kfold(jnp.arange(90) // 3, 3, key=getkey())
    pens = [0.1, 10.0, 1000.0]
    probe, scores = ip.ridge_kfold(x, y, folds=folds, penalties=pens)
    xn, yn, fn = np.asarray(x), np.asarray(y), np.asarray(folds)
    ref = [
        np.mean(
            [
                np.mean(
                    (
                        Ridge(alpha=p).fit(xn[fn != f], yn[fn != f]).predict(xn[fn == f])
                        - yn[fn == f]
                    )
                    ** 2
                )
                for f in range(3)
            ]
        )
        for p in pens
    ]
    np.testing.assert_allclose(scores, ref, rtol=1e-6)
    assert float(probe.penalty) == pens[int(np.argmin(ref))]


def test_planted_linear_signal(getkey):
    # y = x @ w + noise: the probe recovers w's direction, held-out R^2 near
    # var(signal) / (var(signal) + var(noise)) = |w|^2 / (|w|^2 + s^2) for x ~ N(0, I).
    x, y, w = _data(getkey(), n=4000, d=16, noise=1.0)
    train = jnp.arange(4000) < 3000
    probe, _ = ip.ridge_gcv(x, y, weights=train)
    cos = float(probe.coef @ w / (jnp.linalg.norm(probe.coef) * jnp.linalg.norm(w)))
    assert cos > 0.99
    r2 = float(ip.r2_score(y, jax.vmap(probe)(x), weights=~train))
    analytic = float(w @ w / (w @ w + 1.0))
    assert abs(r2 - analytic) < 0.03


@pytest.mark.parametrize("n_classes", [2, 3])
def test_logistic_equals_sklearn(getkey, n_classes):
    n, d = 150, 5
    x = jax.random.normal(getkey(), (n, d), jnp.float64)
    w = jax.random.normal(getkey(), (d, n_classes), jnp.float64)
    labels = jax.random.categorical(getkey(), 2 * (x @ w), axis=1)
    penalty = 0.05
    probe = ip.fit_logistic(x, labels, n_classes=n_classes, penalty=penalty)
    ref = LogisticRegression(C=1 / (penalty * n), tol=1e-12, max_iter=10_000).fit(
        np.asarray(x), np.asarray(labels)
    )
    if n_classes == 2:
        np.testing.assert_allclose(probe.coef[:, 0], ref.coef_[0], atol=1e-5)
        np.testing.assert_allclose(probe.intercept[0], ref.intercept_[0], atol=1e-5)
    else:
        np.testing.assert_allclose(probe.coef, ref.coef_.T, atol=1e-5)
        b = ref.intercept_ - ref.intercept_.mean()
        np.testing.assert_allclose(probe.intercept, b, atol=1e-5)
    np.testing.assert_allclose(
        jax.vmap(probe.proba)(x), ref.predict_proba(np.asarray(x)), atol=1e-5
    )


def test_logistic_objective_stationary(getkey):
    # gradient of the stated objective vanishes at the fit (independent of sklearn)
    x = jax.random.normal(getkey(), (80, 4), jnp.float64)
    labels = (x[:, 0] + 0.5 * jax.random.normal(getkey(), (80,), jnp.float64) > 0).astype(jnp.int32)
    probe = ip.fit_logistic(x, labels, n_classes=2, penalty=0.1)

    def obj(W, b):
        z = x @ W[:, 0] + b[0]
        return jnp.mean(jnp.logaddexp(0.0, z) - labels.astype(z.dtype) * z) + 0.05 * jnp.sum(W**2)

    gW, gb = jax.grad(obj, argnums=(0, 1))(probe.coef, probe.intercept)
    assert float(jnp.max(jnp.abs(gW))) < 1e-9
    assert float(jnp.max(jnp.abs(gb))) < 1e-9


def test_probe_sweep_equals_per_layer_fits(getkey):
    L, n, d = 3, 120, 6
    acts = jax.random.normal(getkey(), (L, n, d), jnp.float64)
    y = acts[1] @ jnp.arange(1.0, d + 1) + 0.1 * jax.random.normal(getkey(), (n,), jnp.float64)
    train = jnp.arange(n) % 4 != 0
    out = ip.probe_sweep(acts, y, train=train, kind="ridge")
    for layer in range(L):
        probe, _ = ip.ridge_gcv(acts[layer], y, weights=train)
        pred = jax.vmap(probe)(acts[layer])
        np.testing.assert_allclose(out["prediction"][layer], pred, rtol=1e-9, atol=1e-9)
        np.testing.assert_allclose(
            out["r2"][layer], ip.r2_score(y, pred, weights=~train), rtol=1e-9
        )
    assert int(jnp.argmax(out["r2"])) == 1
    assert float(out["r2"][1]) > 0.99

    labels = (acts[2, :, 0] > 0).astype(jnp.int32)
    lo = ip.probe_sweep(acts, labels, train=train, kind="logistic", penalties=[0.01])
    for layer in range(L):
        probe = ip.fit_logistic(acts[layer], labels, n_classes=2, penalty=0.01, weights=train)
        np.testing.assert_allclose(lo["coef"][layer], probe.coef, rtol=1e-7, atol=1e-9)
    assert float(lo["accuracy"][2]) > 0.95 > float(jnp.max(lo["accuracy"][:2]))


def test_ridge_jit_equals_eager(getkey):
    x, y, _ = _data(getkey(), n=50, d=4)
    eager = ip.fit_ridge(x, y, penalty=1.0)
    jitted = jax.jit(lambda a, b: ip.fit_ridge(a, b, penalty=1.0))(x, y)
    np.testing.assert_allclose(eager.coef, jitted.coef, rtol=1e-12)


def test_probe_bad_inputs(getkey):
    x, y, _ = _data(getkey(), n=20, d=3)
    with pytest.raises(ValueError, match="y"):
        ip.fit_ridge(x, y[:10], penalty=1.0)
    with pytest.raises(ValueError, match="penalties"):
        ip.ridge_gcv(x, y, penalties=[-1.0])
    with pytest.raises(ValueError, match="labels"):
        ip.fit_logistic(x, jnp.full((20,), 3), n_classes=2, penalty=1.0)
    with pytest.raises(ValueError, match="train"):
        ip.probe_sweep(x[None], y, train=jnp.ones(20, bool))
    with pytest.raises(ValueError, match="acts"):
        ip.probe_sweep(x, y, train=jnp.arange(20) < 10)


def test_logistic_step_passes_shared_step_checks(getkey, tmp_path):
    from tests.step_checks import check_step

    x = jax.random.normal(getkey(), (2, 40, 3), jnp.float64)
    labels = (x[0, :, 0] > 0).astype(jnp.int32)
    step = ip.LogisticStep(x, labels, jnp.ones(40, jnp.float64), jnp.asarray(0.1), 2)
    check_step(step, step.init(), key=getkey(), steps=6, tmp_path=tmp_path)


@pytest.mark.slow
def test_probe_sweep_over_a_store_equals_arrays(getkey, tmp_path):
    import jaxlab.lm as lm
    from tests.lm.lm_reference import tiny_llama

    model = lm.Transformer.random(tiny_llama(), key=getkey())
    texts = [list(map(int, jax.random.randint(getkey(), (10,), 0, 61))) for _ in range(12)]
    store = lm.collect(model, None, texts, layers=[0, 2], path=tmp_path / "s")
    y = jnp.asarray(store.tokens % 2, jnp.float32)
    train = jnp.asarray(store.text_index % 3 != 0)
    out = ip.probe_sweep(store, y, train=train)
    acts = jnp.stack([jnp.asarray(store.array(layer=i)) for i in (0, 2)])
    ref = ip.probe_sweep(acts, y, train=train)
    np.testing.assert_array_equal(out["r2"], ref["r2"])
