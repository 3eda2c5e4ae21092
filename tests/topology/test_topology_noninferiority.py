"""The P18 experiments' non-inferiority tests (the protocol's `welch_t` / `paired_t` and
`noninferior`) against scipy's one-sided t-test bounds."""

import numpy as np
import pytest
from scipy import stats

from experiments._harness import noninferior, paired_t, welch_t

KW = {"claim": "HOPSE non-inferior", "paper": "matches HOMP"}


def test_welch_upper_bound_matches_scipy():
    rng = np.random.default_rng(0)
    a, b = rng.normal(1.3, 0.08, 4), rng.normal(1.1, 0.05, 4)  # RMSE per seed
    ref = stats.ttest_ind(a, b, equal_var=False, alternative="less").confidence_interval(0.95)
    # the one-sided 95% bound is the upper end of the two-sided 90% interval
    diff = welch_t(a, b, level=2 * 0.95 - 1)
    assert diff.high == pytest.approx(ref.high, rel=1e-10)

    def verdict(margin):
        return noninferior(diff, "HOPSE", "HOMP", margin, higher_is_better=False, **KW).verdict

    lo = stats.ttest_ind(a, b, equal_var=False, alternative="greater").confidence_interval(0.95)
    want = "holds" if ref.high < 0.1 else "fails" if lo.low >= 0.1 else "inconclusive"
    assert verdict(0.1) == want
    # a margin above the bound makes it hold; below the whole interval it fails
    assert verdict(diff.high + 1e-6) == "holds"
    assert verdict(diff.high - 1e-6) == "inconclusive"
    assert verdict(diff.low - 1e-6) == "fails"


def test_paired_lower_bound_matches_scipy():
    rng = np.random.default_rng(1)
    hopse, homp = rng.uniform(0.7, 0.9, 10), rng.uniform(0.7, 0.9, 10)  # per-fold accuracy
    d = hopse - homp
    ref = stats.ttest_1samp(d, 0.0, alternative="greater").confidence_interval(0.95)
    diff = paired_t(hopse, homp, level=0.9)
    assert diff.low == pytest.approx(ref.low, rel=1e-10)
    c = noninferior(diff, "HOPSE", "HOMP", 0.05, **KW)
    assert c.holds == (ref.low > -0.05)
    assert c.alpha == pytest.approx(0.05)


def test_random_splits_partition_the_pool():
    """The regression experiments' splits: each a disjoint train/val/test partition of the
    requested sizes (the rest unused), different from split to split, one seed one set."""
    from experiments.topology._setup import random_splits

    part = random_splits(50, (30, 8, 10), 12, seed=3)
    assert part.shape == (12, 50)
    for row in part:
        assert [(row == k).sum() for k in (0, 1, 2, -1)] == [30, 8, 10, 2]
    assert len({row.tobytes() for row in part}) == 12
    np.testing.assert_array_equal(part, random_splits(50, (30, 8, 10), 12, seed=3))
    with pytest.raises(ValueError, match="sizes"):
        random_splits(10, (8, 2, 1), 2, seed=0)
