"""Probes, baselines, transfer and metrics against planted signals, sklearn and SciPy."""

from __future__ import annotations

import jax
import numpy as np
import pytest
import scipy.stats
from sklearn.linear_model import Ridge
from sklearn.metrics import mean_absolute_error, r2_score

from jaxlab import lengthprobe as lp


def _planted(seed=0, n_prompts=60, d=16, noise=0.3):
    """A synthetic "model": each generated position's state holds log1p(remaining) along a
    fixed direction, plus Gaussian noise; totals vary widely across prompts."""
    rng = np.random.default_rng(seed)
    u = rng.normal(size=d)
    u /= np.linalg.norm(u)
    totals = rng.integers(2, 80, n_prompts)
    groups = np.concatenate([np.full(t, i) for i, t in enumerate(totals)])
    pos = np.concatenate([np.arange(t) for t in totals])
    rem = np.concatenate([np.arange(t)[::-1] for t in totals])
    y = np.log1p(rem)
    x = y[:, None] * u[None] + noise * rng.normal(size=(y.shape[0], d))
    return x.astype(np.float32), y, groups, pos, rem


def test_probe_recovers_planted_remaining_length_and_position_only_does_not():
    x, y, groups, pos, rem = _planted()
    junk = np.random.default_rng(1).normal(size=x.shape).astype(np.float32)
    out = lp.cross_fit(np.stack([junk, x]), y, groups=groups, key=jax.random.key(0))
    assert np.all(out["layer"] == 1)  # GCV on training rows picks the informative layer
    probe_rho = scipy.stats.spearmanr(y, out["prediction"]).statistic
    base = lp.position_only(y, pos, np.ones_like(y, bool))
    base_rho = scipy.stats.spearmanr(y, base).statistic
    assert probe_rho > 0.9
    assert probe_rho > base_rho + 0.1
    # the out-of-fold prediction of fold 0 is sklearn's Ridge at the same penalty
    from jaxlab import interp

    test = out["fold"] == 0
    pens = tuple(10.0 ** np.arange(-2, 6))  # cross_fit's default penalties
    res = interp.probe_sweep(np.stack([junk, x]), y.astype(np.float32), train=~test, penalties=pens)
    alpha = float(res["penalty"][1])
    sk = Ridge(alpha=alpha).fit(x[~test].astype(np.float64), y[~test]).predict(x[test])
    np.testing.assert_allclose(out["prediction"][test], sk, rtol=2e-3, atol=2e-3)


def test_position_only_is_the_mean_at_each_position():
    y = np.array([3.0, 2.0, 1.0, 5.0, 4.0, 7.0])
    pos = np.array([0, 1, 2, 0, 1, 0])
    train = np.array([True, True, True, True, True, False])
    got = lp.position_only(y, pos, train)
    np.testing.assert_allclose(got, [4.0, 3.0, 1.0, 4.0, 3.0, 4.0])
    # per family, and a position past the family's longest training row
    fam = np.array([0, 0, 0, 1, 1, 1])
    got = lp.position_only(y, np.array([0, 1, 2, 0, 1, 3]), train, families=fam)
    np.testing.assert_allclose(got, [3.0, 2.0, 1.0, 5.0, 4.0, 4.0])


def test_prompt_baselines():
    y = np.array([1.0, 2.0, 3.0, 10.0, 11.0])
    fam = np.array([0, 0, 0, 1, 1])
    train = np.array([True, True, False, True, True])
    np.testing.assert_allclose(lp.family_mean(y, fam, train), [1.5, 1.5, 1.5, 10.5, 10.5])
    plen = np.array([1.0, 2.0, 3.0, 4.0, 5.0])
    want = np.polyval(np.polyfit(plen[train], y[train], 1), plen)
    np.testing.assert_allclose(lp.prompt_length_fit(y, plen, train), want, rtol=1e-8)
    prompts = [[1, 2], [2, 2, 3], [3], [4, 4, 4, 1], [4, 5]]
    f = lp.bow_features(prompts, train, max_features=3)
    assert f.shape == (5, 3)
    np.testing.assert_allclose(f[3], np.log1p([1, 0, 3]))  # vocabulary 1, 2, 4 (df 2 each)
    pred = lp.bag_of_words(y, prompts, train, max_features=3)
    assert pred.shape == (5,)
    assert np.all(np.isfinite(pred))


def test_transfer_matrix_of_identical_families_is_its_diagonal():
    x, y, groups, pos, _ = _planted(n_prompts=20)
    n = y.shape[0]
    train = np.asarray(groups % 2 == 0)
    xx = np.concatenate([x, x])
    yy = np.concatenate([y, y])
    fam = np.concatenate([np.zeros(n, int), np.ones(n, int)])
    m = lp.transfer_matrix(xx, yy, families=fam, train=np.concatenate([train, train]))
    np.testing.assert_allclose(m, np.full((2, 2), m[0, 0]), rtol=1e-6)
    assert m[0, 0] > 0.8
    # directional transfer: identical source and target groups give the same rows back
    out = lp.directional_transfer(
        xx,
        yy,
        np.concatenate([pos, pos]),
        source=fam == 0,
        target=fam == 1,
        train=np.concatenate([train, train]),
    )
    np.testing.assert_allclose(out["probe"], out["probe"])
    assert out["rows"].min() >= n
    assert out["probe"].shape == out["baseline"].shape


def test_length_metrics_match_sklearn_and_scipy():
    rng = np.random.default_rng(0)
    y = rng.integers(0, 100, 40).astype(float)
    p = y + rng.normal(0, 10, 40)
    m = lp.length_metrics(y, p, key=jax.random.key(0), n_resamples=200)
    assert m["mae"] == pytest.approx(mean_absolute_error(y, p), rel=1e-5)
    assert m["nmae"] == pytest.approx(mean_absolute_error(y, p) / y.mean(), rel=1e-5)
    assert m["r2"] == pytest.approx(r2_score(np.log1p(y), np.log1p(np.maximum(p, 0))), rel=1e-4)
    assert m["spearman"] == pytest.approx(scipy.stats.spearmanr(y, p).statistic, rel=1e-5)
    for k in ("mae", "nmae", "r2", "spearman"):
        assert m[f"{k}_low"] <= m[k] <= m[f"{k}_high"]
    # a mask evaluates a subset; a prediction constant on it has Spearman 0, not NaN
    mask = np.arange(40) < 25
    sub = lp.length_metrics(
        y, np.where(mask, 5.0, p), key=jax.random.key(0), mask=mask, n_resamples=200
    )
    assert sub["spearman"] == 0.0
    assert sub["mae"] == pytest.approx(mean_absolute_error(y[mask], np.full(25, 5.0)), rel=1e-5)


def test_probe_bad_input():
    x, y, groups, pos, _ = _planted(n_prompts=10)
    with pytest.raises(ValueError, match="y"):
        lp.cross_fit(x, y[:-1], groups=groups, key=jax.random.key(0))
    with pytest.raises(ValueError, match="groups"):
        lp.cross_fit(x, y, groups=groups[:-1], key=jax.random.key(0))
    with pytest.raises(ValueError, match="acts"):
        lp.cross_fit(x[0], y, groups=groups, key=jax.random.key(0))
    with pytest.raises(ValueError, match="y_pred"):
        lp.length_metrics(np.ones(4), np.ones(3), key=jax.random.key(0))
    with pytest.raises(ValueError, match="mask"):
        lp.length_metrics(np.ones(4), np.ones(4), key=jax.random.key(0), mask=np.eye(4)[0] > 0)
    with pytest.raises(ValueError, match="y_true"):
        lp.length_metrics(-np.ones(4), np.ones(4), key=jax.random.key(0))
    with pytest.raises(ValueError, match="train"):
        lp.position_only(y, pos, np.zeros_like(y, bool))
    with pytest.raises(ValueError, match="positions"):
        lp.position_only(y, -pos - 1, np.ones_like(y, bool))


def test_token_counts_of_wild_log_predictions_stay_finite():
    """lengthprobe_decodable reads log1p predictions back as tokens: an out-of-fold ridge
    fitted on fewer rows than dimensions predicted +-600 (overflowing float32 expm1); sane
    predictions are unchanged, wild ones are read as at most 10x the token budget."""
    from experiments.lengthprobe import _setup

    p = np.array([-600.0, 0.0, 2.5, 5.0, 643.0], np.float32)
    with np.errstate(over="raise"):
        t = _setup.to_tokens(p, 48)
    assert np.all(np.isfinite(t))
    np.testing.assert_array_equal(t[:4], np.expm1(p[:4]))
    assert t[4] == pytest.approx(480, rel=1e-5)
