"""Token complexity, triad selection rules and reliability laws against analytic values
and planted synthetic data."""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxlab import cslm

BUDGETS = (16, 32, 64, 128, 256)


def test_min_budget_interpolates_in_log_one_plus_budget():
    acc = np.array([0.1, 0.3, 0.5, 0.9, 0.95])
    # p = 0.7 lies halfway between 64 (0.5) and 128 (0.9): halfway in log(1 + B)
    mid = math.sqrt(65 * 129) - 1
    assert float(cslm.min_budget(acc, BUDGETS, 0.7)) == pytest.approx(mid)
    assert float(cslm.min_budget(acc, BUDGETS, 0.5)) == pytest.approx(64.0)
    assert float(cslm.min_budget(acc, BUDGETS, 0.05)) == 16.0
    assert math.isinf(float(cslm.min_budget(acc, BUDGETS, 0.99)))
    # first crossing, not the last, for a non-monotone curve
    assert float(cslm.min_budget([0.0, 0.8, 0.2, 0.9, 1.0], BUDGETS, 0.8)) == pytest.approx(32.0)
    batched = jax.vmap(lambda a: cslm.min_budget(a, BUDGETS, 0.7))(jnp.stack([acc, acc[::-1]]))
    assert float(batched[0]) == pytest.approx(mid)
    # budget 0 (no reasoning) sits on the same axis: reached there -> 0; halfway from 0 to
    # 15 in log(1 + B) is 3
    assert float(cslm.min_budget([0.6, 0.7], (0, 15), 0.5)) == 0.0
    assert float(cslm.min_budget([0.2, 0.8], (0, 15), 0.5)) == pytest.approx(3.0)
    assert float(batched[1]) == 16.0


def _planted_correct(key, bstar, budgets, items):
    """Items solved at budget B with probability 1 - 2^(-B / B*): accuracy 0.5 at B*."""
    b = np.asarray(budgets, np.float64)
    prob = 1.0 - 2.0 ** (-b / bstar)
    # one latent difficulty per item makes correctness monotone in B (as a truncation is)
    u = np.asarray(jax.random.uniform(key, (items, 1)), np.float64)
    return u < prob[None, :], prob


def test_min_budget_ci_covers_planted_value(getkey):
    budgets = tuple(int(round(2 ** (k / 2))) for k in range(4, 25))
    correct, _ = _planted_correct(getkey(), 100.0, budgets, 2000)
    est = cslm.min_budget_ci(correct, budgets, 0.5, key=getkey(), n_boot=200)
    assert est.low <= 100.0 <= est.high
    assert est.value == pytest.approx(100.0, rel=0.08)
    assert est.finite_fraction == 1.0
    assert est.sd > 0


PLANTED = {
    "n": lambda n: n,
    "n log n": lambda n: n * np.log(n),
    "n^2": lambda n: n**2,
    "2^n": lambda n: 2.0**n,
}


@pytest.mark.parametrize("growth", sorted(PLANTED))
def test_fit_growth_recovers_planted_curves(growth, getkey):
    n = np.arange(2.0, 13.0)
    clean = 5.0 + 20.0 * PLANTED[growth](n)
    sigma = 0.03 * clean + 1.0
    noise = np.asarray(jax.random.normal(getkey(), n.shape), np.float64)
    fit = cslm.fit_growth(n, clean + sigma * noise, sigma=sigma)
    assert fit.selected == growth, dict(zip(fit.classes, fit.weights.round(3), strict=True))
    assert fit.confidence > 0.9
    assert fit.weights.sum() == pytest.approx(1.0)
    a, b = fit.params[fit.classes.index(growth)]
    assert b == pytest.approx(20.0, rel=0.15)
    np.testing.assert_allclose(fit.predict(n), a + b * PLANTED[growth](n))


def test_fit_growth_from_noisy_synthetic_accuracies(getkey):
    """End to end: accuracies of items -> bootstrap B*(n) -> growth class."""
    budgets = tuple(int(round(2 ** (k / 3))) for k in range(6, 42))
    sizes = np.arange(2, 10)
    for growth, scale in (("n", 12.0), ("n^2", 3.0)):
        bstar, sd = [], []
        for n in sizes:
            correct, _ = _planted_correct(
                getkey(), 10.0 + scale * PLANTED[growth](n), budgets, 2000
            )
            est = cslm.min_budget_ci(correct, budgets, 0.5, key=getkey(), n_boot=100)
            bstar.append(est.value)
            sd.append(est.sd)
        fit = cslm.fit_growth(sizes, bstar, sigma=sd)
        assert fit.selected == growth, dict(zip(fit.classes, fit.weights.round(3), strict=True))


def test_fit_growth_constant_and_unknown_scale():
    n = np.arange(1.0, 9.0)
    y = 30.0 + np.array([0.5, -0.3, 0.2, -0.4, 0.1, 0.3, -0.2, -0.1])
    fit = cslm.fit_growth(n, y)
    assert fit.selected == "constant"
    assert fit.params[0, 0] == pytest.approx(y.mean())
    # decreasing data: every growth class clamps its slope at 0
    fit = cslm.fit_growth(n, 100.0 - 5.0 * n)
    assert np.all(fit.params[:, 1] == 0.0)


def test_best_of_k_oracle_verifier_is_one_minus_one_minus_p_to_the_k(getkey):
    items, samples = 40000, 8
    for p in (0.1, 0.35):
        correct = jax.random.bernoulli(getkey(), p, (items, samples))
        oracle = correct.astype(jnp.float32)  # the programmatic verifier's 1/0
        random_scores = jax.random.uniform(getkey(), (items, samples))
        for k in (1, 2, 4, 8):
            analytic = 1.0 - (1.0 - p) ** k
            se = math.sqrt(analytic * (1 - analytic) / items)
            acc = float(jnp.mean(cslm.best_of_k(correct, oracle, k)))
            assert abs(acc - analytic) < 4.5 * se + 1e-12, (p, k, acc, analytic)
            # an uninformative verifier is no better than one sample
            rnd = float(jnp.mean(cslm.best_of_k(correct, random_scores, k)))
            assert abs(rnd - p) < 4.5 * math.sqrt(p * (1 - p) / items)


def test_majority_vote_matches_binomial_formula(getkey):
    items, p = 40000, 0.6
    correct = np.asarray(jax.random.bernoulli(getkey(), p, (items, 5)))
    answers = [[42 if c else 41 for c in row] for row in correct]  # one wrong answer
    ids = cslm.answer_ids(answers)
    for k in (1, 3, 5):
        analytic = sum(
            math.comb(k, j) * p**j * (1 - p) ** (k - j) for j in range(k // 2 + 1, k + 1)
        )
        acc = float(jnp.mean(cslm.majority_vote(ids, correct, k)))
        assert abs(acc - analytic) < 4.5 * math.sqrt(analytic * (1 - analytic) / items)


def test_majority_vote_ties_and_unparsed():
    ids = cslm.answer_ids([[None, 7, 8, 8], [None, None, None, None], [3, 4, 4, 3]])
    assert ids.tolist() == [[-1, 0, 1, 1], [-1, -1, -1, -1], [0, 1, 1, 0]]
    correct = np.array([[False, False, True, True], [False] * 4, [True, False, False, True]])
    assert cslm.majority_vote(ids, correct, 4).tolist() == [True, False, True]
    assert cslm.majority_vote(ids, correct, 1).tolist() == [False, False, True]


def test_accuracy_at_tokens_and_precision_recall():
    acc = cslm.accuracy_at_tokens([100, 200, 400], [0.2, 0.5, 0.4], [50, 150, 250, 1000])
    np.testing.assert_allclose(acc, [np.nan, 0.2, 0.5, 0.5])
    precision, recall = cslm.verifier_precision_recall([1, 1, 0, 0, 1], [1, 0, 1, 0, 1])
    assert precision == pytest.approx(2 / 3)
    assert recall == pytest.approx(2 / 3)


def test_step_error_recovers_planted_epsilon(getkey):
    steps = np.array([1, 2, 4, 8, 16, 32])
    fit = cslm.fit_step_error(steps, 0.97**steps)
    assert fit.epsilon == pytest.approx(0.03, rel=1e-3)
    assert fit.r2 == pytest.approx(1.0)
    items = 400
    acc = np.asarray(jax.random.binomial(getkey(), items, 0.95**steps), np.float64) / items
    noisy = cslm.fit_step_error(steps, acc, items=np.full(6, items))
    assert noisy.epsilon == pytest.approx(0.05, abs=0.01)
    assert noisy.r2 > 0.95
    # a flat curve is not an exponential decay: R^2 far below 1
    flat = cslm.fit_step_error(steps, np.array([0.9, 0.1, 0.9, 0.1, 0.9, 0.1]))
    assert flat.r2 < 0.5


def _ece_reference(conf, correct, bins):
    total = 0.0
    for b in range(bins):
        lo, hi = b / bins, (b + 1) / bins
        m = (conf > lo) & (conf <= hi) if b else (conf >= lo) & (conf <= hi)
        if m.any():
            total += m.sum() / conf.size * abs(correct[m].mean() - conf[m].mean())
    return total


def test_expected_calibration_error(getkey):
    conf = np.asarray(jax.random.uniform(getkey(), (20000,)), np.float64)
    calibrated = np.asarray(jax.random.uniform(getkey(), (20000,)), np.float64) < conf
    ece = float(cslm.expected_calibration_error(conf, calibrated, bins=10))
    assert ece == pytest.approx(_ece_reference(conf, calibrated, 10), abs=1e-12)
    assert ece < 0.02
    over = np.ones(1000)
    right = np.arange(1000) < 700
    assert float(cslm.expected_calibration_error(over, right)) == pytest.approx(0.3)
    choice, c = cslm.option_confidence(np.log(np.array([[0.2, 0.5, 0.3], [0.9, 0.05, 0.05]])))
    assert choice.tolist() == [1, 0]
    np.testing.assert_allclose(c, [0.5, 0.9], rtol=1e-6)


def test_bad_input(getkey):
    with pytest.raises(ValueError, match="^budgets:"):
        cslm.min_budget([0.1, 0.2], (-1, 4), 0.5)
    with pytest.raises(ValueError, match="^budgets:"):
        cslm.min_budget([0.1, 0.2], (8, 4), 0.5)
    with pytest.raises(ValueError, match="^budgets:"):
        cslm.check_budgets([])
    with pytest.raises(ValueError, match="^p:"):
        cslm.min_budget([0.1, 0.2], (4, 8), 0.0)
    with pytest.raises(ValueError, match="^correct:"):
        cslm.min_budget_ci(np.zeros((0, 2)), (4, 8), 0.5, key=getkey())
    with pytest.raises(ValueError, match="^y:"):
        cslm.fit_growth([1, 2, 3], [1.0, np.inf, 3.0])
    with pytest.raises(ValueError, match="^k:"):
        cslm.best_of_k(np.ones((2, 3), bool), np.ones((2, 3)), 4)
    with pytest.raises(ValueError, match="^k:"):
        cslm.best_of_k(np.ones((2, 3), bool), np.ones((2, 3)), 0)
    with pytest.raises(ValueError, match="^answers:"):
        cslm.answer_ids([])
    with pytest.raises(ValueError, match="^steps:"):
        cslm.fit_step_error([0, 0], [1.0, 1.0])
    with pytest.raises(ValueError, match="^accuracy:"):
        cslm.fit_step_error([1, 2], [1.5, 0.2])
    with pytest.raises(ValueError, match="^bins:"):
        cslm.expected_calibration_error([0.5], [1], bins=0)
    with pytest.raises(ValueError, match="^confidence"):
        cslm.expected_calibration_error([], [])
