"""Non-inferiority bounds of the P18 experiments against scipy's t-test intervals."""

import numpy as np
import pytest
from scipy import stats

from experiments.topology._setup import noninferiority, welch_df


def test_welch_upper_bound_matches_scipy():
    rng = np.random.default_rng(0)
    a, b = rng.normal(1.3, 0.08, 4), rng.normal(1.1, 0.05, 4)
    n = a.size
    va, vb = a.var(ddof=1) / n, b.var(ddof=1) / n
    diff, se, df = a.mean() - b.mean(), np.sqrt(va + vb), welch_df(va, vb, n)
    ref = stats.ttest_ind(a, b, equal_var=False, alternative="less").confidence_interval(0.95)
    bound, holds = noninferiority(diff, se, df, margin=0.1, level=0.95, higher_is_better=False)
    assert bound == pytest.approx(ref.high, rel=1e-10)
    assert holds == (ref.high < 0.1)
    # a margin above the bound makes it hold, below it fails
    assert noninferiority(diff, se, df, margin=bound + 1e-6, level=0.95, higher_is_better=False)[1]
    assert not noninferiority(
        diff, se, df, margin=bound - 1e-6, level=0.95, higher_is_better=False
    )[1]


def test_paired_lower_bound_matches_scipy():
    rng = np.random.default_rng(1)
    d = rng.normal(0.01, 0.05, 10)  # per-fold accuracy differences
    se = d.std(ddof=1) / np.sqrt(d.size)
    ref = stats.ttest_1samp(d, 0.0, alternative="greater").confidence_interval(0.95)
    bound, holds = noninferiority(
        d.mean(), se, d.size - 1, margin=0.05, level=0.95, higher_is_better=True
    )
    assert bound == pytest.approx(ref.low, rel=1e-10)
    assert holds == (ref.low > -0.05)
