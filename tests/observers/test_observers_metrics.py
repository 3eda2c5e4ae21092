"""The P2 experiments' error metrics: t = 0 exclusion, per-start MSE, the ratio estimate."""

import types
import warnings

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


def test_diverged_but_successful_trajectory_is_inf_without_a_warning():
    # a solve that "succeeded" with errors ~1e200 (observers_x29's LMI-only observer at the
    # smoke tier's size): squaring overflowed outside the errstate and, with warnings as
    # errors, crashed the experiment instead of scoring the start inf
    err = np.full((2, 5, 1), 0.1)
    err[1, 3:] = 1e200
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        got = C.per_start_mse(_traj(err), start=1)
        assert np.isinf(C.mse(_traj(err)))
    assert got[0] == pytest.approx(0.01)
    assert np.isinf(got[1])


def test_ratio_estimate():
    from scipy import stats

    key = jax.random.key(0)
    b = np.random.default_rng(0).uniform(1, 2, 30)
    # an exact multiple: every resample gives the same ratio
    est = C.ratio_estimate(0.5 * b, b, key=key, n_boot=200)
    assert (est.value, est.low, est.high) == pytest.approx((0.5, 0.5, 0.5))
    assert est.n == 30
    assert est.level == 0.95
    # noisy pairs: scipy's paired percentile bootstrap of the ratio of means, same seed
    a = b * np.random.default_rng(1).uniform(0.5, 1.5, 30)
    est = C.ratio_estimate(a, b, key=key, n_boot=500)
    seed = int(jax.random.randint(key, (), 0, 2**31 - 1))
    ref = stats.bootstrap(
        (a, b),
        lambda x, y, axis=-1: x.mean(axis) / y.mean(axis),
        paired=True,
        n_resamples=500,
        method="percentile",
        rng=np.random.default_rng(seed),
    ).confidence_interval
    assert est.value == pytest.approx(a.mean() / b.mean())
    assert (est.low, est.high) == pytest.approx((ref.low, ref.high))
    assert est.low < est.value < est.high
    # a diverged (inf) error of the subject loses the comparison; of the baseline, wins
    a_div = a.copy()
    a_div[:20] = np.inf
    assert C.ratio_estimate(a_div, b, key=key, n_boot=200).low > 1e6
    assert C.ratio_estimate(b, a_div, key=key, n_boot=200).high < 1e-6
    # ... also against a baseline whose finite errors are huge (a near-diverged run)
    assert C.ratio_estimate(a_div, 1e100 * b, key=key, n_boot=200).low > 1
    # the median never interpolates towards a diverged value; sqrt maps every end
    med = C.ratio_estimate(a, b, key=key, n_boot=200, stat=C.median_higher)
    assert med.value == pytest.approx(np.sort(a)[15] / np.sort(b)[15])
    root = C.sqrt_estimate(est)
    assert (root.value, root.low, root.high) == pytest.approx(
        tuple(np.sqrt([est.value, est.low, est.high]))
    )
    with pytest.raises(ValueError, match="a, b"):
        C.ratio_estimate(a, b[:-1], key=key)


def test_disturbance_error_against_a_hand_computation():
    import jax.numpy as jnp

    import jaxlab.observers as O

    # X-29 with 10 % model error: the disturbance relative to the linear model is
    # delta_A x + a sin(w t) (E = I), computed here by hand
    plant = O.x29_longitudinal(0.1)
    rng = np.random.default_rng(0)
    ts = np.linspace(0.0, 2.0, 5)
    x = rng.normal(size=(2, 5, 4))
    d_hat = rng.normal(size=(2, 5, 4))
    traj = types.SimpleNamespace(
        ts=jnp.asarray(ts), x=jnp.asarray(x), x_hat=jnp.asarray(x), d_hat=d_hat, ok=np.ones(2, bool)
    )
    dA = 0.1 * np.asarray(plant.A)
    amp, freq = np.asarray(plant.dist_amp), np.asarray(plant.dist_freq)
    d = np.einsum("ij,btj->bti", dA, x) + amp * np.sin(freq * ts[None, :, None])
    np.testing.assert_allclose(C.true_disturbance(plant, traj), d, rtol=1e-9, atol=1e-12)
    got = C.per_start_disturbance_mse(d, traj, start=1)
    np.testing.assert_allclose(got, ((d - d_hat)[:, 1:] ** 2).mean(axis=(1, 2)))
    # an observer without a disturbance estimate (NaN d_hat) scores inf
    traj.d_hat = np.full_like(d_hat, np.nan)
    assert np.isinf(C.per_start_disturbance_mse(d, traj, start=1)).all()


def test_violation_starts_violate_the_point_only_decrease():
    import dataclasses

    import jax.numpy as jnp

    import jaxlab.observers as O
    from experiments.observers import x29

    plant = O.x29_longitudinal(0.1)
    obs = O.NeuralObserver.from_plant(plant, (3,), epsilon=0.01, key=jax.random.key(0))
    params = O.CertifiedObserver.from_observer(obs)  # random gain, P = I: violations abound
    cfg = dataclasses.replace(x29.QUICK, violation_candidates=64, num_initial=5)
    x0s, xh0s, n_bad, n_sampled = x29._violation_starts(cfg, plant, params, jax.random.key(1))
    assert 5 <= n_bad <= 64
    assert 0 <= n_sampled <= 64
    assert x0s.shape == xh0s.shape == (5, 4)
    # independently: the scaled error eta = ((x0 - x_hat0) / eps, d(0, x0) - 0) and the
    # Lyapunov derivative 2 eta^T P f(eta) with f the nominal scaled error field (P = I)
    A_eps, C_eps, _ = obs.error_model()
    for x0, xh0 in zip(np.asarray(x0s), np.asarray(xh0s), strict=True):
        d0 = 0.1 * np.asarray(plant.A) @ x0
        eta = np.concatenate([(x0 - xh0) / 0.01, d0])
        f = np.asarray(A_eps) @ eta + np.asarray(
            obs.injection(jnp.asarray(np.asarray(C_eps) @ eta))
        )
        assert 2 * eta @ f > 0
