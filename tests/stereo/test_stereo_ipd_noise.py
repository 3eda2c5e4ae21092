"""stereo_ipd's pupil-detector noise model: the calibration, the noise, the 10 x crossing."""

import jax
import numpy as np
import pytest

from experiments.stereo import _setup as S
from experiments.stereo import ipd


def test_detector_sigma_reproduces_the_detection_rate():
    sigma = S.detector_sigma(0.825, 0.05)
    assert sigma == pytest.approx(0.0229, abs=5e-4)
    # Monte Carlo: both eyes' radial errors within 0.05 IOD on 82.5% of faces
    err = np.random.default_rng(0).normal(0, sigma, (200_000, 2, 2))
    worst = np.linalg.norm(err, axis=-1).max(-1)
    assert np.mean(worst <= 0.05) == pytest.approx(0.825, abs=0.005)
    with pytest.raises(ValueError, match="rate"):
        S.detector_sigma(1.0)


def test_noisy_landmark_px_scales_with_the_interocular_distance():
    n, k = 4000, 3
    px = np.zeros((n, k, 3))
    iod = np.linspace(20.0, 60.0, n)
    px[:, 1, 0] = iod  # pupil 1 is iod pixels right of pupil 0
    px[:, :, 1] = 7.0  # u_right
    out = S.noisy_landmark_px(px, 0.02, key=jax.random.key(0))
    np.testing.assert_array_equal(out[:, :, 1], 7.0)
    z = (out - px)[..., [0, 2]] / (0.02 * iod[:, None, None])
    assert z.std() == pytest.approx(1.0, abs=0.02)
    assert abs(z.mean()) < 0.02
    np.testing.assert_array_equal(S.noisy_landmark_px(px, 0.0, key=jax.random.key(1)), px)


def test_landmarks_from_given_pixels_equal_the_default():
    rng = np.random.default_rng(0)
    data = {
        "landmarks_3d": np.zeros((2, 3, 3)),
        "landmarks_px": rng.uniform(5, 20, (2, 3, 3)),
        "camera": np.array([[100.0, 12.0, 12.0, 60.0]] * 2),
    }
    disp = rng.uniform(10, 20, (2, 24, 24))
    np.testing.assert_array_equal(
        S.landmarks_from_disparity(disp, data),
        S.landmarks_from_disparity(disp, data, data["landmarks_px"]),
    )
    # a constant disparity d: depth f B / d at every pixel
    lm = S.landmarks_from_disparity(np.full((2, 24, 24), 15.0), data)
    np.testing.assert_allclose(lm[..., 2], 100.0 * 60.0 / 15.0)


def test_crossing_interpolates_on_the_sweep():
    assert ipd._crossing([0.0, 0.01, 0.02], [1.0, 3.0, 7.0], 5.0) == pytest.approx(0.015)
    assert ipd._crossing([0.0, 0.01], [6.0, 7.0], 5.0) == 0.0
    assert ipd._crossing([0.0, 0.01], [1.0, 2.0], 5.0) == float("inf")


def test_mean_ci_is_the_bootstrap_of_the_mean_and_nan_for_a_lost_face():
    from scipy import stats

    from experiments._harness import at_least

    err = np.random.default_rng(3).gamma(2.0, 3.0, 40)
    e = ipd._mean_ci(err, seed=1, n_resamples=2000)
    assert e.value == pytest.approx(err.mean())
    ref = stats.bootstrap((err,), np.mean, n_resamples=2000, method="percentile", rng=1)
    assert [e.low, e.high] == pytest.approx(
        [ref.confidence_interval.low, ref.confidence_interval.high], rel=1e-12
    )
    # a face whose error is not finite: no interval, the claim untestable (not "fails")
    lost = ipd._mean_ci(np.append(err, np.nan), seed=1, n_resamples=200)
    c = at_least(lost, 5.0, null="10 x the 0.5 mm bar", claim="c", paper="p")
    assert np.isnan(lost.value)
    assert c.verdict == "untestable"
