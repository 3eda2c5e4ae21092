"""The interval and residualisation helpers of the claims against scipy / numpy lstsq."""

import numpy as np
import pytest
from scipy import stats

from experiments._harness import residualize, t_interval


def test_t_interval_matches_scipy():
    x = np.random.default_rng(0).normal(0.3, 1.0, 7)
    mean, lo, hi = t_interval(x, level=0.9)
    ref = stats.t.interval(0.9, x.size - 1, loc=x.mean(), scale=stats.sem(x))
    np.testing.assert_allclose([mean, lo, hi], [x.mean(), *ref], rtol=1e-12)


def test_t_interval_covers_at_its_level():
    # 95% intervals of N(0, 1) samples of size 3 cover 0 about 95% of the time
    rng = np.random.default_rng(1)
    cover = [lo <= 0 <= hi for _, lo, hi in (t_interval(rng.normal(size=3)) for _ in range(2000))]
    assert 0.93 < np.mean(cover) < 0.97


@pytest.mark.parametrize("bad", [np.ones(1), np.ones((2, 2)), np.array([0.0, np.nan])])
def test_t_interval_refuses_bad_input(bad):
    with pytest.raises(ValueError, match="x:"):
        t_interval(bad)


def test_residualize_matches_lstsq_on_one_hot_groups():
    rng = np.random.default_rng(2)
    groups = rng.choice(np.array(["B", "T", "NK", "mono"]), 50)
    y = rng.normal(size=50) + (groups == "T") * 3.0
    design = (groups[:, None] == np.unique(groups)[None, :]).astype(float)
    beta, *_ = np.linalg.lstsq(design, y, rcond=None)
    np.testing.assert_allclose(residualize(y, groups), y - design @ beta, atol=1e-12)


def test_residualize_removes_a_group_confound():
    # a score that tracks dose only through group membership loses its correlation
    rng = np.random.default_rng(3)
    groups = rng.integers(0, 3, 300)
    dose = groups + rng.normal(0, 0.1, 300)
    score = 2.0 * groups + rng.normal(size=300)
    assert stats.spearmanr(dose, score).statistic > 0.5
    assert abs(stats.spearmanr(dose, residualize(score, groups)).statistic) < 0.2
