"""eeg_effect_size's growth claim (issue #54): a paired t interval over simulated data
sets of accuracy at the largest effect scale minus at the first, never one data set's
point value."""

import numpy as np
import pytest

from experiments.eeg import effect_size

SCALES = (0.0, 0.5, 1.0, 2.0)


def _acc(growth, noise, reps=4, seed=0):
    rng = np.random.default_rng(seed)
    base = 0.5 + noise * rng.standard_normal(reps)  # data set r's level, shared by scales
    return np.stack([base + growth * s / SCALES[-1] for s in SCALES]) + 0.01 * rng.standard_normal(
        (len(SCALES), reps)
    )


def test_growth_is_a_paired_interval_over_data_sets():
    acc = {"state": _acc(0.25, 0.05), "technique": _acc(0.3, 0.1, seed=1)}
    claims = effect_size.growth_claims(acc, SCALES, 0.05)
    for task, c in claims.items():
        e = c.estimate
        assert e is not None
        assert e.has_interval
        assert e.low < e.high
        assert e.n == 4
        assert e.method == "paired t"
        assert e.value == pytest.approx(np.mean(acc[task][-1] - acc[task][0]))
        assert c.verdict == "holds"


def test_no_growth_or_noisy_growth_does_not_hold():
    flat = effect_size.growth_claims({"state": _acc(0.0, 0.05)}, SCALES, 0.05)["state"]
    assert flat.verdict == "fails"
    rng = np.random.default_rng(3)
    noisy = np.full((len(SCALES), 3), 0.5)
    noisy[-1] = 0.5 + np.array([0.3, -0.1, 0.1]) + 0.01 * rng.standard_normal(3)
    c = effect_size.growth_claims({"state": noisy}, SCALES, 0.05)["state"]
    assert c.verdict == "inconclusive"  # mean growth 0.1 > margin, but the interval spans it


def test_refuses_a_single_data_set_per_scale():
    with pytest.raises(ValueError, match="acc"):
        effect_size.growth_claims({"state": np.full((len(SCALES), 1), 0.5)}, SCALES, 0.05)
    with pytest.raises(ValueError, match="acc"):
        effect_size.growth_claims({"state": np.full((2, 4), 0.5)}, SCALES, 0.05)
