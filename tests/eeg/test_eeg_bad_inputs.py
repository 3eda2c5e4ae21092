"""eeg.epoch refuses a bool length or step (the contract fuzz of issue #59: `True` was a
TypeError from inside jnp.arange as length and a step of 1 as step)."""

from __future__ import annotations

import numpy as np
import pytest

import jaxlab.eeg as eeg


def test_epoch_refuses_bool_sizes():
    x = np.arange(20.0).reshape(2, 10)
    ep = eeg.epoch(x, 4, 3)
    assert ep.shape == (3, 2, 4)  # starts 0, 3, 6: (10 - 4) // 3 + 1 epochs
    np.testing.assert_array_equal(ep[1], x[:, 3:7])
    for kw in ({"length": True, "step": 3}, {"length": 4, "step": True}):
        with pytest.raises(ValueError, match=f"{next(k for k, v in kw.items() if v is True)}: "):
            eeg.epoch(x, **kw)


def test_fold_ci_refuses_complex_scores():
    mean, low, high = eeg.fold_ci([0.6, 0.8, 0.7])
    assert mean == pytest.approx(0.7)
    assert low < mean < high
    with pytest.raises(ValueError, match="scores: expected real"):
        eeg.fold_ci(np.array([0.6, 0.8, 0.7]) + 1j)
