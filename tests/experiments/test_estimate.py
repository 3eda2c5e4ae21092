"""The protocol's estimators (`experiments._harness._estimate`) against scipy.stats and
hand-written oracles, and the coverage of their intervals on simulated data."""

import itertools
import math

import numpy as np
import pytest
from scipy import stats

from experiments._harness import (
    MAX_RESAMPLES,
    Estimate,
    bootstrap,
    paired_bootstrap,
    paired_t,
    permutation_test,
    spearman,
    t_mean,
    welch_t,
    wilson,
)

REPS = 400
# a 95% interval covers in Binomial(REPS, 0.95) of REPS data sets: accept 3 SD around 0.95
TOL = 3 * math.sqrt(0.95 * 0.05 / REPS)


def _covers(pairs):
    return float(np.mean([lo <= truth <= hi for (lo, hi), truth in pairs]))


# ---------------------------------------------------------------- Estimate


def test_estimate_validates_its_fields():
    Estimate(1.0, 0.5, 2.0, 0.95, "t", 3)
    with pytest.raises(ValueError, match="level"):
        Estimate(1.0, 0.5, 2.0, 1.5, "t", 3)
    with pytest.raises(ValueError, match="n:"):
        Estimate(1.0, 0.5, 2.0, 0.95, "t", 0)
    with pytest.raises(ValueError, match="low <= high"):
        Estimate(1.0, 2.0, 0.5, 0.95, "percentile bootstrap", 3)
    with pytest.raises(ValueError, match="low <= value <= high"):
        Estimate(3.0, 0.5, 2.0, 0.95, "t", 3)
    # a percentile bootstrap interval may exclude the value; NaN means "not computable"
    Estimate(3.0, 0.5, 2.0, 0.95, "percentile bootstrap", 3)
    Estimate(float("nan"), float("nan"), float("nan"), 0.95, "t", 3)
    p = Estimate.point(0.25, n=4)
    assert (p.low, p.high, p.level, p.has_interval) == (0.25, 0.25, 1.0, False)
    with pytest.raises(ValueError, match="point value"):
        Estimate(1.0, 0.5, 2.0, 1.0, "t", 3)


def test_estimate_formats_and_flattens():
    e = Estimate(0.1234, 0.1, 0.15, 0.95, "t", 5)
    assert f"{e:.3f}" == "0.123 [0.100, 0.150]"
    assert e.flat("acc") == {"acc": 0.1234, "acc_lo": 0.1, "acc_hi": 0.15, "acc_n": 5}
    assert Estimate(float("nan"), 0, 1, 0.9, "t", 2).as_dict()["value"] is None


# ---------------------------------------------------------------- bootstrap


def _percentile_oracle(samples, statistic, level, reps, seed):
    """Percentile bootstrap written out: resample row indices, take the quantiles."""
    rng = np.random.default_rng(seed)
    n = samples[0].size
    idx = rng.integers(0, n, (reps, n))
    boot = statistic(*(s[idx] for s in samples), axis=-1)
    return np.quantile(boot, [(1 - level) / 2, (1 + level) / 2])


@pytest.mark.parametrize("method", ["percentile", "bca"])
def test_bootstrap_equals_scipy_with_the_same_generator(method):
    x = np.random.default_rng(0).exponential(size=25)
    ours = bootstrap(x, np.median, seed=7, method=method, level=0.9, n_resamples=999)
    ref = stats.bootstrap(
        (x,),
        np.median,
        n_resamples=999,
        confidence_level=0.9,
        method={"percentile": "percentile", "bca": "BCa"}[method],
        rng=np.random.default_rng(7),
    ).confidence_interval
    assert ours.value == np.median(x)
    np.testing.assert_allclose([ours.low, ours.high], [ref.low, ref.high], rtol=1e-12)
    assert (ours.level, ours.n) == (0.9, 25)
    assert ours.method == ("percentile bootstrap" if method == "percentile" else "BCa bootstrap")


def test_percentile_bootstrap_agrees_with_a_written_out_one():
    x = np.random.default_rng(1).normal(size=30)
    ours = bootstrap(x, seed=2, n_resamples=40_000)
    ref = _percentile_oracle((x,), np.mean, 0.95, 40_000, seed=99)  # independent draws
    np.testing.assert_allclose([ours.low, ours.high], ref, atol=0.01)


def test_bca_agrees_with_a_written_out_one():
    """BCa (Efron 1987) written out: bias z0 from the bootstrap distribution, acceleration
    from the jackknife; on skewed data it moves the percentile interval to the right."""
    x = np.random.default_rng(3).exponential(size=30)
    reps, level = 40_000, 0.95
    rng = np.random.default_rng(5)
    boot = x[rng.integers(0, x.size, (reps, x.size))].mean(1)
    z0 = stats.norm.ppf(np.mean(boot < x.mean()))
    jack = np.array([np.delete(x, i).mean() for i in range(x.size)])
    d = jack.mean() - jack
    acc = np.sum(d**3) / (6 * np.sum(d**2) ** 1.5)
    z = stats.norm.ppf([(1 - level) / 2, (1 + level) / 2])
    q = stats.norm.cdf(z0 + (z0 + z) / (1 - acc * (z0 + z)))
    ref = np.quantile(boot, q)
    ours = bootstrap(x, seed=6, method="bca", n_resamples=40_000)
    np.testing.assert_allclose([ours.low, ours.high], ref, atol=0.01)
    pct = bootstrap(x, seed=6, n_resamples=40_000)
    assert ours.high > pct.high + 0.01  # not silently the percentile interval


def test_paired_bootstrap_is_the_bootstrap_of_the_difference():
    rng = np.random.default_rng(4)
    shared = rng.normal(size=40)  # item effect both measurements share
    a, b = shared + 0.3 + 0.1 * rng.normal(size=40), shared + 0.1 * rng.normal(size=40)
    ours = paired_bootstrap(a, b, seed=1, n_resamples=20_000)
    ref = _percentile_oracle(
        (a, b), lambda x, y, axis: x.mean(axis) - y.mean(axis), 0.95, 20_000, 8
    )
    np.testing.assert_allclose([ours.low, ours.high], ref, atol=0.005)
    assert ours.value == pytest.approx(a.mean() - b.mean())
    assert ours.method == "paired percentile bootstrap"
    # pairing matters: the unpaired spread (item effect sd 1) would be ~10x wider
    assert ours.high - ours.low < 0.1


def test_bootstrap_refuses_bad_input_before_allocating():
    x = np.ones(10)
    with pytest.raises(ValueError, match="MAX_RESAMPLES"):
        bootstrap(x, seed=0, n_resamples=MAX_RESAMPLES + 1)
    with pytest.raises(ValueError, match="MAX_RESAMPLES"):  # checked before any array of 10^15
        bootstrap(np.zeros(10**6), seed=0, n_resamples=10**9)
    with pytest.raises(ValueError, match="seed"):
        bootstrap(x, seed=-1)
    with pytest.raises(ValueError, match="method"):
        bootstrap(x, seed=0, method="basic")
    with pytest.raises(ValueError, match="one length"):
        bootstrap((x, np.ones(9)), lambda a, b, axis: a.mean(axis), seed=0)
    with pytest.raises(ValueError, match="finite"):
        bootstrap(np.array([1.0, np.nan]), seed=0)


def test_bootstrap_is_reproducible_and_seeded():
    x = np.random.default_rng(0).normal(size=20)
    assert bootstrap(x, seed=3) == bootstrap(x, seed=3)
    assert bootstrap(x, seed=3) != bootstrap(x, seed=4)
    assert bootstrap(x, seed=np.random.default_rng(3)) == bootstrap(x, seed=3)


@pytest.mark.parametrize("method", ["percentile", "bca"])
def test_bootstrap_intervals_cover_at_their_level(method):
    rng = np.random.default_rng(10)
    pairs = [
        ((e.low, e.high), 1.0)
        for e in (
            bootstrap(rng.normal(1.0, 1.0, 40), seed=rng, method=method, n_resamples=400)
            for _ in range(REPS)
        )
    ]
    # the percentile/BCa intervals undercover slightly at n = 40 (~94%)
    assert abs(_covers(pairs) - 0.95) <= TOL + 0.01


# ---------------------------------------------------------------- t intervals


def test_t_mean_matches_scipy():
    x = np.random.default_rng(0).normal(0.3, 1.0, 6)
    ours = t_mean(x, 0.9)
    ref = stats.ttest_1samp(x, 0.0).confidence_interval(0.9)
    np.testing.assert_allclose([ours.low, ours.high], [ref.low, ref.high], rtol=1e-12)
    half = stats.t.ppf(0.95, 5) * x.std(ddof=1) / np.sqrt(6)  # the t quantile, not 2 SE
    assert ours.high - ours.value == pytest.approx(half)
    assert (ours.method, ours.n) == ("t", 6)


def test_paired_t_matches_ttest_rel():
    rng = np.random.default_rng(1)
    a, b = rng.normal(size=8), rng.normal(size=8)
    ours = paired_t(a, b, 0.95)
    ref = stats.ttest_rel(a, b).confidence_interval(0.95)
    np.testing.assert_allclose([ours.low, ours.high], [ref.low, ref.high], rtol=1e-12)


def test_welch_t_matches_ttest_ind():
    rng = np.random.default_rng(2)
    a, b = rng.normal(0, 1, 5), rng.normal(0.5, 3, 9)
    ours = welch_t(a, b, 0.9)
    ref = stats.ttest_ind(a, b, equal_var=False).confidence_interval(0.9)
    np.testing.assert_allclose([ours.low, ours.high], [ref.low, ref.high], rtol=1e-10)
    assert ours.value == pytest.approx(a.mean() - b.mean())
    assert welch_t([1.0, 1.0], [0.0, 0.0]).low == 1.0  # zero spread: a zero-width interval


def test_t_intervals_cover_at_their_level():
    rng = np.random.default_rng(3)
    one = [((e.low, e.high), 0.5) for e in (t_mean(rng.normal(0.5, 2, 4)) for _ in range(REPS))]
    welch = [
        ((e.low, e.high), -1.0)
        for e in (welch_t(rng.normal(0, 1, 4), rng.normal(1, 3, 6)) for _ in range(REPS))
    ]
    assert abs(_covers(one) - 0.95) <= TOL
    assert abs(_covers(welch) - 0.95) <= TOL + 0.01  # Welch's df is an approximation


# ---------------------------------------------------------------- Wilson


def test_wilson_matches_binomtest_and_the_formula():
    ours = wilson(7, 20, 0.95)
    ref = stats.binomtest(7, 20).proportion_ci(0.95, method="wilson")
    np.testing.assert_allclose([ours.low, ours.high], [ref.low, ref.high], rtol=1e-12)
    z, p, n = stats.norm.ppf(0.975), 7 / 20, 20
    centre = (p + z**2 / (2 * n)) / (1 + z**2 / n)
    half = z / (1 + z**2 / n) * np.sqrt(p * (1 - p) / n + z**2 / (4 * n**2))
    np.testing.assert_allclose([ours.low, ours.high], [centre - half, centre + half], rtol=1e-10)
    assert (ours.value, ours.n, ours.method) == (0.35, 20, "Wilson")
    assert wilson(0, 10).low == 0.0
    assert wilson(10, 10).high == pytest.approx(1.0)
    with pytest.raises(ValueError, match="successes"):
        wilson(11, 10)


def test_wilson_covers_at_its_level():
    rng = np.random.default_rng(4)
    pairs = [
        ((e.low, e.high), 0.3) for e in (wilson(rng.binomial(60, 0.3), 60) for _ in range(REPS))
    ]
    assert abs(_covers(pairs) - 0.95) <= TOL + 0.01  # discrete: coverage oscillates with p


# ---------------------------------------------------------------- Spearman


def test_spearman_fisher_matches_spearmanr_and_the_formula():
    rng = np.random.default_rng(5)
    x = rng.normal(size=30)
    y = x + rng.normal(size=30)
    ours = spearman(x, y, 0.9)
    r = stats.spearmanr(x, y).statistic
    se = np.sqrt(1.06 / 27)
    lo, hi = np.tanh(np.arctanh(r) + np.array([-1, 1]) * stats.norm.ppf(0.95) * se)
    np.testing.assert_allclose([ours.value, ours.low, ours.high], [r, lo, hi], rtol=1e-12)
    assert ours.method == "Fisher z (Fieller SE)"


def test_spearman_bootstrap_value_is_spearmanr():
    rng = np.random.default_rng(6)
    x = rng.normal(size=25)
    y = np.round(x + rng.normal(size=25))  # ties: average ranks
    ours = spearman(x, y, method="bootstrap", seed=0, n_resamples=500)
    assert ours.value == pytest.approx(stats.spearmanr(x, y).statistic, rel=1e-12)
    assert ours.low < ours.value < ours.high


def test_spearman_intervals_cover_at_their_level():
    rng = np.random.default_rng(7)
    rho = 0.5  # Spearman's rho of a bivariate normal with Pearson correlation r
    r = 2 * np.sin(np.pi * rho / 6)
    cov = [[1, r], [r, 1]]
    pairs = []
    for _ in range(REPS):
        xy = rng.multivariate_normal([0, 0], cov, 40)
        e = spearman(xy[:, 0], xy[:, 1])
        pairs.append(((e.low, e.high), rho))
    assert abs(_covers(pairs) - 0.95) <= TOL


# ---------------------------------------------------------------- permutation test


def test_paired_permutation_is_the_exact_sign_flip_test():
    rng = np.random.default_rng(8)
    a, b = rng.normal(0.5, 1, 9), rng.normal(0, 1, 9)
    d = a - b
    flips = np.array(list(itertools.product([1, -1], repeat=d.size)))
    null = (flips * d).mean(1)
    p_hand = np.mean(np.abs(null) >= abs(d.mean()) - 1e-12)
    ours = permutation_test(a, b, paired=True, seed=0)
    assert ours.pvalue == pytest.approx(p_hand, rel=1e-12)
    assert ours.n_resamples == 0
    assert "exact" in ours.method
    ref = stats.permutation_test(
        (a, b),
        lambda x, y, axis: x.mean(axis) - y.mean(axis),
        permutation_type="samples",
        n_resamples=np.inf,
    )
    assert ours.pvalue == pytest.approx(ref.pvalue, rel=1e-12)
    greater = permutation_test(a, b, paired=True, seed=0, alternative="greater")
    assert greater.pvalue == pytest.approx(np.mean(null >= d.mean() - 1e-12), rel=1e-12)


def test_two_sample_permutation_is_exact_when_small():
    a, b = np.array([1.2, 3.4, 2.2, 5.0, 4.1]), np.array([0.3, 1.1, 2.0, 0.7])
    pooled = np.concatenate([a, b])
    obs = a.mean() - b.mean()
    null = []
    for idx in itertools.combinations(range(9), 5):
        m = np.zeros(9, bool)
        m[list(idx)] = True
        null.append(pooled[m].mean() - pooled[~m].mean())
    null = np.asarray(null)
    # two-sided: twice the smaller one-sided p-value (this null is not symmetric)
    p_hand = 2 * min(np.mean(null >= obs - 1e-12), np.mean(null <= obs + 1e-12))
    ours = permutation_test(a, b, paired=False, seed=0)
    assert ours.pvalue == pytest.approx(p_hand, rel=1e-12)
    assert "126 arrangements" in ours.method


def test_permutation_monte_carlo_when_large():
    rng = np.random.default_rng(9)
    a, b = rng.normal(size=30), rng.normal(size=30)
    ours = permutation_test(a, b, paired=True, seed=1, n_resamples=5000)
    assert ours.n_resamples == 5000
    assert "Monte Carlo" in ours.method
    exact_p = stats.ttest_rel(a, b).pvalue  # large-sample agreement with the paired t test
    assert ours.pvalue == pytest.approx(exact_p, abs=0.05)
    with pytest.raises(ValueError, match="MAX_RESAMPLES"):
        permutation_test(a, b, paired=True, seed=1, n_resamples=10**7)


def test_permutation_test_size_under_the_null():
    rng = np.random.default_rng(11)
    p = [
        permutation_test(rng.normal(size=8), rng.normal(size=8), paired=True, seed=0).pvalue
        for _ in range(REPS)
    ]
    rate = np.mean(np.asarray(p) <= 0.05)
    assert abs(rate - 0.05) <= 3 * math.sqrt(0.05 * 0.95 / REPS)


def test_single_marks_one_measurement_without_interval():
    s = Estimate.single(0.25, method="one timing run")
    assert (s.low, s.high, s.level, s.has_interval, s.is_single) == (0.25, 0.25, 1.0, False, True)
    assert s.as_dict()["single"] is True
    assert not Estimate.point(0.25).is_single
    assert "single" not in Estimate.point(0.25).as_dict()
    assert Estimate.single(2.0, method="slope of one fit", n=3).n == 3
    with pytest.raises(ValueError, match="method"):
        Estimate.single(0.25, method="")
    with pytest.raises(ValueError, match="is_single"):
        Estimate(0.5, 0.25, 0.75, 0.95, "t", 6, is_single=True)


def test_loglog_slope_fits_the_median_times_and_bootstraps_the_rounds():
    from experiments._harness import loglog_slope

    sizes = np.array([1e3, 1e4, 1e5])
    rng = np.random.default_rng(0)
    rounds = [list(1e-6 * n**1.2 * np.exp(rng.normal(0, 0.05, 7))) for n in sizes]
    est = loglog_slope(sizes, rounds, seed=1, level=0.9)
    med = [np.median(r) for r in rounds]
    assert est.value == pytest.approx(np.polyfit(np.log(sizes), np.log(med), 1)[0])
    assert est.has_interval
    assert est.low < 1.2 < est.high
    assert est.high - est.low < 0.2
    assert (est.n, est.level) == (7, 0.9)
    assert "log-log slope (3 sizes)" in est.method
    with pytest.raises(ValueError, match="sizes"):
        loglog_slope([1e3, 1e3], rounds[:2], seed=1)
    with pytest.raises(ValueError, match="rounds"):
        loglog_slope(sizes, rounds[:2], seed=1)
    with pytest.raises(ValueError, match="rounds"):
        loglog_slope(sizes, [r[:3] for r in rounds[:2]] + [rounds[2]], seed=1)
