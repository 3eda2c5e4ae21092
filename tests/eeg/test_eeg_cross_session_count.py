"""eeg_cross_session's "for most models" (issue #54 item 7): the count of models is read
from per-model paired t intervals over the folds with Holm's correction over the models
(lower end) and the Bonferroni level (upper end), never a count of point means."""

import numpy as np
import pytest
from scipy import stats

from experiments._harness import at_least
from experiments.eeg import cross_session

FOLDS = 5


def _diffs(t_stat, sign=1.0):
    """Per-fold differences with mean `sign * t_stat * sd / sqrt(FOLDS)`, sd 1."""
    z = np.array([-1.5, -0.5, 0.0, 0.5, 1.5])
    z = z / z.std(ddof=1)
    return sign * t_stat / np.sqrt(FOLDS) + z


def _count(diffs, level=0.9):
    a = {f"m{i}": 0.6 + d for i, d in enumerate(diffs)}
    b = {f"m{i}": np.full(FOLDS, 0.6) for i in range(len(diffs))}
    return cross_session.models_count(a, b, level)


def test_clear_effects_give_an_exact_count():
    est = _count([_diffs(20)] * 3 + [_diffs(20, -1)])
    assert (est.value, est.low, est.high) == (3, 3, 3)
    assert est.has_interval
    assert est.n == 4


def test_holm_corrects_over_the_models():
    # t = 2.8 on 4 df: one-sided p ~ 0.024 < 0.05 for each model alone, but above Holm's
    # first step 0.05 / 4: a count of point means (or of unadjusted tests) says 4 of 4
    assert stats.t.sf(2.8, FOLDS - 1) < 0.05 < 4 * stats.t.sf(2.8, FOLDS - 1)
    est = _count([_diffs(2.8)] * 4)
    assert est.value == 4
    assert est.low == 0
    assert est.high == 4
    claim = at_least(est, 3, null="no more than half", claim="most", paper="-")
    assert claim.verdict == "inconclusive"
    # a single strong model is rejected first, then the others are tested at 0.05 / 3
    est = _count([_diffs(50)] + [_diffs(2.8)] * 3)
    assert est.low == 1


def test_most_models_fails_when_most_intervals_lie_below_zero():
    est = _count([_diffs(20, -1)] * 3 + [_diffs(20)])
    assert est.high == 1
    claim = at_least(est, 3, null="no more than half", claim="most", paper="-")
    assert claim.verdict == "fails"


def test_refuses_mismatched_models():
    with pytest.raises(ValueError, match="a, b"):
        cross_session.models_count({"x": np.ones(3)}, {"y": np.ones(3)}, 0.9)
