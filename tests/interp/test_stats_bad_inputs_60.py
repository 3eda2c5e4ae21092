"""Issue 60: `auroc` with swapped arguments returned nan and `accuracy` given
probabilities returned 0.0; both are now a ValueError naming the argument. Inside `jit`
(bootstrap_ci) only shapes are checked, so the metrics still trace."""

from __future__ import annotations

import jax
import numpy as np
import pytest
from sklearn.metrics import accuracy_score, roc_auc_score

from jaxlab import interp as ip

Y = np.array([0, 1, 1, 0, 1, 0])
S = np.array([0.1, 0.8, 0.6, 0.3, 0.9, 0.7])


def test_auroc_swapped_arguments():
    assert float(ip.auroc(Y, S)) == pytest.approx(roc_auc_score(Y, S))
    assert float(ip.auroc(Y.astype(float), S)) == pytest.approx(roc_auc_score(Y, S))
    with pytest.raises(ValueError, match=r"y_true: expected binary labels.*swapped"):
        ip.auroc(S, Y)
    with pytest.raises(ValueError, match="y_true: expected both classes"):
        ip.auroc(np.ones(6, int), S)


def test_accuracy_given_probabilities():
    pred = (S > 0.5).astype(int)
    assert float(ip.accuracy(Y, pred)) == pytest.approx(accuracy_score(Y, pred))
    with pytest.raises(ValueError, match=r"y_pred: expected integer labels.*threshold"):
        ip.accuracy(Y, S)


def test_checks_skip_traced_values():
    est, lo, hi = ip.bootstrap_ci(ip.auroc, Y, S, key=jax.random.key(0), n_resamples=50)
    assert 0.0 <= float(lo) <= float(est) <= float(hi) <= 1.0
    assert float(jax.jit(ip.accuracy)(Y, (S > 0.5).astype(int))) == pytest.approx(5 / 6)
