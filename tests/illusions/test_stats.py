"""phi, soft attribution tables, expected answers and intervals vs numpy/scipy oracles."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import scipy.stats

import jaxlab.illusions as il


def test_phi_equals_pearson_of_binary_variables(getkey):
    k1, k2 = jax.random.split(getkey())
    g = np.asarray(jax.random.bernoulli(k1, 0.35, (200,)))
    d = np.asarray(jax.random.bernoulli(k2, 0.6, (200,))) ^ (g & (np.arange(200) % 3 == 0))
    table = il.contingency_table(g, d)
    # rows (majority, minority) x columns (desirable, undesirable): phi = corr(g, not d)
    expected = np.corrcoef(g.astype(float), (~d).astype(float))[0, 1]
    assert float(il.phi_coefficient(table)) == pytest.approx(expected, abs=1e-12)
    # scipy's chi-square: phi^2 = chi2 / n (no continuity correction)
    chi2 = scipy.stats.chi2_contingency(table, correction=False)[0]
    assert float(il.phi_coefficient(table)) ** 2 == pytest.approx(chi2 / 200, rel=1e-10)


def test_hand_computed_tables():
    # [[a, b], [c, d]] = [[10, 5], [2, 8]]: (80 - 10) / sqrt(15 * 10 * 12 * 13)
    t = jnp.asarray([[10.0, 5.0], [2.0, 8.0]])
    assert float(il.phi_coefficient(t)) == pytest.approx(70 / np.sqrt(15 * 10 * 12 * 13))
    assert float(il.phi_coefficient(jnp.asarray([[3.0, 0.0], [0.0, 5.0]]))) == pytest.approx(1)
    # the human attribution table quoted in HUMAN_BASELINES (H&G 1976 Exp. 1)
    hg = jnp.asarray([[17.52, 5.79], [9.48, 6.21]])
    assert float(il.phi_coefficient(hg)) == pytest.approx(
        il.human_baseline("hg_phi_attribution").value, rel=1e-6
    )
    assert float(jax.jit(il.phi_coefficient)(t)) == pytest.approx(float(il.phi_coefficient(t)))


def test_soft_attribution_table():
    p = jnp.asarray([0.9, 0.2, 0.5, 1.0])
    d = jnp.asarray([False, True, True, False])
    t = np.asarray(il.attribution_table(p, d))
    np.testing.assert_allclose(t, [[0.5 + 0.8, 0.1 + 0.0], [0.2 + 0.5, 0.9 + 1.0]])
    # hard 0/1 attributions give the contingency table
    g = np.array([1, 0, 0, 1, 1, 0], bool)
    dd = np.array([0, 1, 1, 0, 1, 1], bool)
    np.testing.assert_allclose(
        il.attribution_table(g.astype(np.float64), dd), il.contingency_table(g, dd)
    )


def test_uniform_random_answerer_shows_no_illusion(getkey):
    # a "model" answering uniformly at random: phi ~ 0 within its interval over orders
    phis = []
    for o in range(24):
        s = il.make_stimuli(key=jax.random.fold_in(getkey(), o))
        p = jax.random.uniform(jax.random.fold_in(getkey(), 100 + o), (39,), jnp.float64)
        phis.append(float(il.attribution_phi(p, jnp.asarray(s.desirable))))
    m, lo, hi = il.mean_ci(np.array(phis))
    assert lo < 0 < hi
    # a biased answerer (undesirable -> minority) is detected
    s = il.make_stimuli(key=getkey())
    p = np.where(s.desirable, 0.3, 0.6)
    assert float(il.attribution_phi(p, jnp.asarray(s.desirable))) > 0.25


def test_expected_answer_frequency_bias_and_interval():
    ll = np.log(np.array([0.1, 0.2, 0.7]))
    assert float(il.expected_answer(ll + 3.0, np.array([0.0, 1.0, 2.0]))) == pytest.approx(1.6)
    np.testing.assert_allclose(il.option_probabilities(ll), [0.1, 0.2, 0.7], rtol=1e-12)
    b = il.frequency_bias(jnp.asarray([8.0, 6.0]), jnp.asarray([8.0, 4.0]))
    np.testing.assert_allclose(b["error"], [0.0, 2.0])
    assert float(b["minority_excess"]) == pytest.approx(0.5)
    v = np.array([0.1, 0.3, 0.2, 0.4])
    m, lo, hi = il.mean_ci(v)
    ref = scipy.stats.t.interval(0.95, 3, loc=v.mean(), scale=scipy.stats.sem(v))
    assert (m, lo, hi) == pytest.approx((v.mean(), *ref))


def test_stats_bad_input():
    with pytest.raises(ValueError, match="table"):
        il.phi_coefficient(jnp.ones((2, 3)))
    with pytest.raises(ValueError, match="table"):
        il.phi_coefficient(jnp.asarray([[1.0, 0.0], [1.0, 0.0]]))
    with pytest.raises(ValueError, match="table"):
        il.phi_coefficient(jnp.asarray([[1.0, -1.0], [1.0, 2.0]]))
    with pytest.raises(ValueError, match="p_minority"):
        il.attribution_table(jnp.asarray([0.5, 1.5]), jnp.asarray([True, False]))
    with pytest.raises(ValueError, match="desirable"):
        il.attribution_table(jnp.asarray([0.5, 0.5]), jnp.asarray([True]))
    with pytest.raises(ValueError, match="loglik"):
        il.option_probabilities(jnp.asarray([0.0, jnp.nan]))
    with pytest.raises(ValueError, match="values"):
        il.expected_answer(jnp.zeros(3), jnp.zeros(2))
    with pytest.raises(ValueError, match="true_counts"):
        il.frequency_bias(jnp.ones(2), jnp.asarray([0.0, 4.0]))
    with pytest.raises(ValueError, match="values"):
        il.mean_ci(np.array([1.0]))
