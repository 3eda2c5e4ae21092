"""SAE metrics against NumPy formulas; the PCA baseline; feature inspection."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from sklearn.metrics import mutual_info_score

import jaxlab.interp as ip


def test_sae_metrics_equal_numpy_formulas(getkey):
    sae = ip.TopKSAE(8, 32, 3, key=getkey())
    x = jax.random.normal(getkey(), (301, 8), jnp.float32) * 2 + 1
    m = ip.sae_metrics(sae, x, chunk=64)  # 301 is not a multiple of the chunk
    xn = np.asarray(x, np.float64)
    z = np.asarray(jax.vmap(sae.encode)(x), np.float64)
    xh = np.asarray(jax.vmap(sae)(x), np.float64)
    assert float(m["l0"]) == pytest.approx(np.mean((z != 0).sum(1)), rel=1e-6)
    # current SAELens (decoderesearch/SAELens sae_lens/evals.py at 191d44e,
    # get_sparsity_and_variance_metrics): mse appends the per-token resid_sum_of_squares
    # (x - x_hat).pow(2).sum(dim=-1) and averages over tokens
    assert float(m["mse"]) == pytest.approx(np.mean(((xn - xh) ** 2).sum(1)), rel=1e-5)
    ev = 1 - ((xn - xh) ** 2).sum() / ((xn - xn.mean(0)) ** 2).sum()
    assert float(m["explained_variance"]) == pytest.approx(ev, rel=1e-5)
    # ... and ExplainedVarianceCalculator.compute: 1 - E||x - x_hat||^2 / (E||x||^2 -
    # ||E x||^2), from its running sums
    total_variance = (xn**2).sum() / len(xn) - ((xn.sum(0) / len(xn)) ** 2).sum()
    ev_saelens = 1 - ((xn - xh) ** 2).sum() / len(xn) / total_variance
    assert float(m["explained_variance"]) == pytest.approx(ev_saelens, rel=1e-5)
    cos = np.mean((xn * xh).sum(1) / np.linalg.norm(xn, axis=1) / np.linalg.norm(xh, axis=1))
    assert float(m["cosine_similarity"]) == pytest.approx(cos, rel=1e-5)
    ratio = np.mean(np.linalg.norm(xh, axis=1) / np.linalg.norm(xn, axis=1))
    assert float(m["l2_ratio"]) == pytest.approx(ratio, rel=1e-5)
    dens = (z != 0).mean(0)
    np.testing.assert_allclose(m["feature_density"], dens, rtol=1e-6)
    assert float(m["dead_fraction"]) == pytest.approx(np.mean(dens == 0))
    counts, edges = ip.density_histogram(m["feature_density"], bins=10)
    assert counts.sum() == 32
    assert edges[0] == -10.0


def test_topk_pca_baseline(getkey):
    x = jax.random.normal(getkey(), (200, 6), jnp.float64) @ jax.random.normal(
        getkey(), (6, 6), jnp.float64
    )
    full = ip.TopKPCA(x, 6)
    np.testing.assert_allclose(jax.vmap(full)(x), x, rtol=1e-9, atol=1e-9)
    two = ip.TopKPCA(x, 2)
    xn = np.asarray(x)
    mean = xn.mean(0)
    _, vecs = np.linalg.eigh(np.cov(xn.T))
    coef = (xn - mean) @ vecs
    keep = np.argsort(-np.abs(coef), axis=1)[:, :2]
    sparse = np.zeros_like(coef)
    np.put_along_axis(sparse, keep, np.take_along_axis(coef, keep, 1), 1)
    np.testing.assert_allclose(jax.vmap(two)(x), sparse @ vecs.T + mean, rtol=1e-7, atol=1e-9)
    assert float(ip.sae_metrics(two, x)["l0"]) == 2.0
    with pytest.raises(ValueError, match="k"):
        ip.TopKPCA(x, 7)


def test_sae_metrics_bad_inputs(getkey):
    sae = ip.TopKSAE(8, 16, 2, key=getkey())
    with pytest.raises(ValueError, match="x"):
        ip.sae_metrics(sae, jnp.zeros((4, 9), jnp.float32))
    with pytest.raises(ValueError, match="x"):
        ip.sae_metrics(sae, jnp.zeros((0, 8), jnp.float32))


def test_top_activating_contexts_equal_brute_force(getkey):
    n = 50
    a = jax.random.normal(getkey(), (n,), jnp.float32)
    toks = jnp.arange(n, dtype=jnp.int32) + 100
    seq = jnp.arange(n) // 7
    out = ip.top_activating_contexts(a, toks, seq, k=4, window=2)
    an, sn = np.asarray(a), np.asarray(seq)
    top = np.argsort(-an)[:4]
    np.testing.assert_array_equal(out["index"], top)
    for r, i in enumerate(top):
        for c, o in enumerate(range(-2, 3)):
            j = i + o
            ok = 0 <= j < n and sn[j] == sn[i]
            assert int(out["tokens"][r, c]) == (100 + j if ok else -1)
            assert float(out["activations"][r, c]) == (float(an[j]) if ok else 0.0)


def test_feature_label_association_equals_references(getkey):
    n = 300
    labels = jax.random.randint(getkey(), (n,), 0, 3)
    acts = jnp.stack(
        [
            labels.astype(jnp.float64) - 1 + 0.5 * jax.random.normal(getkey(), (n,), jnp.float64),
            jax.random.normal(getkey(), (n,), jnp.float64),
            jnp.zeros(n),
        ],
        axis=1,
    )
    out = ip.feature_label_association(acts, labels)
    an, ln = np.asarray(acts), np.asarray(labels)
    for j in range(2):
        assert float(out["correlation"][j]) == pytest.approx(np.corrcoef(an[:, j], ln)[0, 1])
        assert float(out["mutual_information"][j]) == pytest.approx(
            mutual_info_score(an[:, j] > 0, ln), abs=1e-12
        )
    assert float(out["correlation"][2]) == 0.0
    assert float(out["mutual_information"][2]) == 0.0
    assert float(out["mutual_information"][0]) > 5 * float(out["mutual_information"][1])
