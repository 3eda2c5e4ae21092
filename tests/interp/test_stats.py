"""Weighted metrics vs sklearn/scipy, bootstrap CIs and grouped splits."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy.stats import spearmanr
from sklearn.metrics import accuracy_score, r2_score, roc_auc_score

import jaxlab.interp as ip


def _scores(key, n=60):
    k1, k2 = jax.random.split(key)
    y = (jax.random.uniform(k1, (n,)) < 0.4).astype(jnp.int32)
    # rounded scores: ties on purpose
    s = jnp.round(y.astype(jnp.float64) + jax.random.normal(k2, (n,), jnp.float64), 1)
    return y, s


def test_metrics_equal_references(getkey):
    y, s = _scores(getkey())
    yn, sn = np.asarray(y), np.asarray(s)
    assert float(ip.auroc(y, s)) == pytest.approx(roc_auc_score(yn, sn), abs=1e-12)
    assert float(ip.spearman(s, y.astype(jnp.float64) + s**2)) == pytest.approx(
        spearmanr(sn, yn + sn**2).statistic, abs=1e-12
    )
    assert float(ip.r2_score(y.astype(jnp.float64), s)) == pytest.approx(r2_score(yn, sn))
    pred = (s > 0.5).astype(jnp.int32)
    assert float(ip.accuracy(y, pred)) == pytest.approx(accuracy_score(yn, np.asarray(pred)))


def test_integer_weights_equal_replicated_rows(getkey):
    y, s = _scores(getkey(), n=40)
    w = jax.random.randint(getkey(), (40,), 0, 4)
    rep = np.repeat(np.arange(40), np.asarray(w))
    yn, sn = np.asarray(y)[rep], np.asarray(s)[rep]
    wf = w.astype(jnp.float64)
    assert float(ip.auroc(y, s, weights=wf)) == pytest.approx(roc_auc_score(yn, sn), abs=1e-12)
    assert float(ip.spearman(s, y.astype(jnp.float64), weights=wf)) == pytest.approx(
        spearmanr(sn, yn).statistic, abs=1e-12
    )
    assert float(ip.r2_score(y.astype(jnp.float64), s, weights=wf)) == pytest.approx(
        r2_score(yn, sn)
    )


def test_bootstrap_ci_covers_and_groups_widen(getkey):
    # 40 prompts x 10 tokens sharing a prompt effect: resampling tokens as if independent
    # gives too narrow an interval; resampling prompts (groups) gives a wider one
    g = jnp.repeat(jnp.arange(40), 10)
    effect = jax.random.normal(getkey(), (40,), jnp.float64)[g]
    y = effect + 0.3 * jax.random.normal(getkey(), (400,), jnp.float64)
    pred = 0.9 * y + 0.3 * jax.random.normal(getkey(), (400,), jnp.float64)
    est, lo, hi = ip.bootstrap_ci(ip.r2_score, y, pred, key=getkey(), n_resamples=300)
    _, glo, ghi = ip.bootstrap_ci(ip.r2_score, y, pred, key=getkey(), n_resamples=300, groups=g)
    assert lo < est < hi
    assert ghi - glo > hi - lo
    # held-out rows only: the estimate equals the metric on those rows
    test = (jnp.arange(400) >= 300).astype(jnp.float64)
    est_t, _, _ = ip.bootstrap_ci(ip.r2_score, y, pred, key=getkey(), n_resamples=10, weights=test)
    assert float(est_t) == pytest.approx(r2_score(np.asarray(y)[300:], np.asarray(pred)[300:]))


def test_bootstrap_ci_draws_as_before_and_compiles_once_over_subsets(getkey):
    """The resampled groups are those of `choice(k, n_groups, (n_draw,), p)` (the bootstrap
    drew exactly that before it compiled once per n_draw), and subsets with different
    numbers of groups to draw share one compile (lengthprobe_decodable's per-family CIs
    compiled 19 times)."""
    from jaxlab.interp._stats import _resampled

    g = jnp.repeat(jnp.arange(12), 3)
    y = jax.random.normal(getkey(), (36,))
    p = y + jax.random.normal(getkey(), (36,))
    key = getkey()
    compiled = _resampled._cache_size()
    for n_sub in (12, 7, 4):
        w = (g < n_sub).astype(jnp.float32)
        est, lo, hi = ip.bootstrap_ci(
            ip.spearman, y, p, key=key, n_resamples=50, groups=g, weights=w
        )
        present = (jnp.arange(12) < n_sub).astype(jnp.float32)
        pr = present / n_sub

        def one(k, w=w, pr=pr, n_sub=n_sub):
            draw = jax.random.choice(k, 12, (n_sub,), p=pr)
            counts = jnp.zeros((12,), jnp.float32).at[draw].add(1)
            return ip.spearman(y, p, weights=w * counts[g])

        ref = jax.vmap(one)(jax.random.split(key, 50))
        rlo, rhi = jnp.nanquantile(ref, jnp.asarray([0.025, 0.975], ref.dtype))
        np.testing.assert_allclose([lo, hi], [rlo, rhi], rtol=1e-6)
        assert float(est) == pytest.approx(float(ip.spearman(y, p, weights=w)))
    assert _resampled._cache_size() == compiled + 1


def test_group_split_and_kfold(getkey):
    groups = jnp.repeat(jnp.arange(12), 5)
    train = ip.group_split(groups, key=getkey(), test_fraction=0.25)
    for gid in range(12):
        rows = np.asarray(train)[np.asarray(groups) == gid]
        assert rows.all() or not rows.any()
    assert int((~train).sum()) == 15
    folds = ip.group_kfold(groups, 4, key=getkey())
    for gid in range(12):
        assert len(np.unique(np.asarray(folds)[np.asarray(groups) == gid])) == 1
    assert sorted(np.bincount(np.asarray(folds)).tolist()) == [15, 15, 15, 15]


def test_stats_bad_inputs(getkey):
    with pytest.raises(ValueError, match="groups"):
        ip.group_split(jnp.zeros(5, jnp.int32), key=getkey())
    with pytest.raises(ValueError, match="n_folds"):
        ip.group_kfold(jnp.arange(3), 5, key=getkey())
    with pytest.raises(ValueError, match="level"):
        ip.bootstrap_ci(ip.r2_score, jnp.ones(3), jnp.ones(3), key=getkey(), level=1.5)
    with pytest.raises(ValueError, match=r"arrays\[1\]"):
        ip.bootstrap_ci(ip.r2_score, jnp.ones(3), jnp.ones(4), key=getkey())
