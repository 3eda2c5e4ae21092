"""cslm refuses complex scores and accuracies with a ValueError naming the argument (found
by the contract fuzz of issue #59: a TypeError/ValueError from inside jnp before)."""

from __future__ import annotations

import numpy as np
import pytest

import jaxlab.cslm as cslm


def test_complex_scores_and_accuracies_are_refused():
    correct = np.array([[True, False], [False, True]])
    scores = np.array([[0.1, 0.9], [0.8, 0.2]])
    # by hand: item 0 picks sample 1 (wrong), item 1 picks sample 0 (wrong)
    assert cslm.best_of_k(correct, scores, k=2).tolist() == [False, False]
    with pytest.raises(ValueError, match="scores: expected real values"):
        cslm.best_of_k(correct, scores + 1j, k=2)
    acc = np.array([0.2, 0.6, 0.9])
    assert np.isfinite(float(cslm.min_budget(acc, (8, 16, 32), 0.5)))
    with pytest.raises(ValueError, match="accuracy: expected real values"):
        cslm.min_budget(acc + 1j, (8, 16, 32), 0.5)
