"""The P2 experiments' error metrics: t = 0 exclusion, per-start MSE, bootstrap ratio."""

import types

import jax
import numpy as np
import pytest

from experiments.observers import _setup as C


def _traj(err, ok=None):
    """A batch of fake trajectories with estimation error `err` (B, T, n)."""
    err = np.asarray(err, float)
    ok = np.ones(err.shape[0], bool) if ok is None else np.asarray(ok)
    return types.SimpleNamespace(x=err, x_hat=np.zeros_like(err), ok=ok)


def test_settle_index_never_scores_t0():
    ts = np.linspace(0.0, 10.0, 401)
    assert C.settle_index(ts, 0.0) == 1
    assert C.settle_index(ts, 0.5) == 20
    assert ts[C.settle_index(ts, 0.51)] >= 0.51


def test_t0_sample_dominates_the_whole_horizon_mean_and_is_excluded():
    # initial error 5 at t = 0 (x_hat0 = 0), then a small steady error 0.01
    err = np.full((3, 401, 4), 0.01)
    err[:, 0, 0] = 5.0
    tr = _traj(err)
    whole = C.mse(tr)
    after = C.mse(tr, start=C.settle_index(np.linspace(0, 10, 401), 0.0))
    assert after == pytest.approx(1e-4)
    assert whole == pytest.approx((25.0 + 3 * 1e-4 + 400 * 4 * 1e-4) / (401 * 4))
    assert whole > 100 * after


def test_failed_trajectory_is_inf():
    err = np.full((2, 5, 1), 0.1)
    got = C.per_start_mse(_traj(err, ok=[True, False]), start=1)
    assert got[0] == pytest.approx(0.01)
    assert np.isinf(got[1])
    assert np.isinf(C.mse(_traj(err, ok=[True, False])))


def test_paired_ratio_interval():
    key = jax.random.key(0)
    b = np.random.default_rng(0).uniform(1, 2, 30)
    # an exact multiple: every resample gives the same ratio
    r, lo, hi = C.paired_ratio_interval(0.5 * b, b, key=key, n_boot=200)
    assert r == pytest.approx(0.5)
    assert lo == pytest.approx(0.5)
    assert hi == pytest.approx(0.5)
    # noisy pairs: the interval contains the point and has positive width
    a = b * np.random.default_rng(1).uniform(0.5, 1.5, 30)
    r, lo, hi = C.paired_ratio_interval(a, b, key=key, n_boot=500)
    assert lo < r < hi
    with pytest.raises(ValueError, match="a, b"):
        C.paired_ratio_interval(a, b[:-1], key=key)
