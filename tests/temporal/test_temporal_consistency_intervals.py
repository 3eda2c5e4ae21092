"""temporal_consistency's claim intervals (issue #54): percentile bootstraps over the
replicate chains of the max relative bias, the RMSE log-log slope (refitted per
resample) and the CI coverage, never point values."""

import numpy as np
import pytest

from experiments.temporal import consistency

THETA0 = np.array([1.5, 0.075, 0.6, 1.5, 1.0])
GRID = (50, 100, 200, 400)


def _simulated(reps, *, seed, bias=(0.0, 0.0, 0.04, 0.0, 0.0), rate=-0.5):
    """Estimates with a known relative bias at the largest T, errors of sd ~ T^rate, and
    coverage indicators of rate 0.95."""
    rng = np.random.default_rng(seed)
    thetas = {}
    for t in GRID:
        sd = 0.5 * (t / GRID[0]) ** rate * THETA0
        shift = np.asarray(bias) * THETA0 * (t == GRID[-1])
        thetas[t] = THETA0 + shift + sd * rng.standard_normal((reps, 5))
    covered = rng.random((reps, 5)) < 0.95
    return thetas, covered


def test_values_are_the_point_statistics_and_intervals_are_not_degenerate():
    thetas, covered = _simulated(64, seed=0)
    est = consistency.replicate_estimates(thetas, THETA0, covered, seed=1, n_boot=500)
    rel = (thetas[GRID[-1]] - THETA0) / THETA0
    assert est["bias"].value == pytest.approx(np.max(np.abs(rel.mean(axis=0))))
    rmse = np.sqrt([np.mean((thetas[t] - THETA0) ** 2, axis=0) for t in GRID])
    slopes = [np.polyfit(np.log(GRID), np.log(rmse[:, i]), 1)[0] for i in range(5)]
    assert est["slope"].value == pytest.approx(np.mean(slopes) + 0.5)
    assert est["coverage"].value == pytest.approx(covered.mean() - 0.95)
    for e in est.values():
        assert e.has_interval
        assert e.low < e.high
        assert e.n == 64
        assert e.method == "percentile bootstrap"


def test_intervals_cover_the_simulated_truth():
    hits = {"bias": 0, "slope": 0, "coverage": 0}
    truth = {"bias": 0.04, "slope": 0.0, "coverage": 0.0}
    runs = 20
    for s in range(runs):
        thetas, covered = _simulated(400, seed=100 + s)
        est = consistency.replicate_estimates(thetas, THETA0, covered, seed=s, n_boot=400)
        for k, e in est.items():
            hits[k] += e.low <= truth[k] <= e.high
    assert all(h >= 15 for h in hits.values()), hits  # nominal 19 of 20


def test_a_wrong_rate_is_excluded():
    thetas, covered = _simulated(400, seed=7, rate=-0.25)
    est = consistency.replicate_estimates(thetas, THETA0, covered, seed=0, n_boot=500)
    assert est["slope"].low > 0.1  # slope -0.25: 0.25 above -0.5


def test_refuses_mismatched_replicates():
    thetas, covered = _simulated(8, seed=0)
    with pytest.raises(ValueError, match="thetas, covered"):
        consistency.replicate_estimates(thetas, THETA0, covered[:5], seed=0, n_boot=10)
    with pytest.raises(ValueError, match="thetas, covered"):
        consistency.replicate_estimates({50: thetas[50]}, THETA0, covered, seed=0, n_boot=10)
