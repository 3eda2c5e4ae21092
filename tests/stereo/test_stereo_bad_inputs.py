"""stereo.census_transform and landmark_3d_error at the boundary (issue #59: declared in
the public-API fuzz tables, they passed NaN/inf through: a NaN pixel compares as "not
darker" and gave a plausible census signature, a NaN landmark a NaN error; an empty
image was a padding error naming nothing)."""

from __future__ import annotations

import numpy as np
import pytest

import jaxlab.stereo as st


def test_census_transform_refuses_nan_and_empty_images():
    img = np.random.default_rng(0).uniform(size=(6, 7))
    assert st.census_transform(img.tolist()).shape == (6, 7)  # a list converts
    bad = img.copy()
    bad[2, 3] = np.nan
    with pytest.raises(ValueError, match="image: expected finite"):
        st.census_transform(bad)
    with pytest.raises(ValueError, match="image: expected a non-empty"):
        st.census_transform(img[:0])


def test_landmark_3d_error_refuses_nan_landmarks():
    gt = np.zeros((4, 3))
    pred = gt + np.array([0.0, 3.0, 4.0])
    assert float(st.landmark_3d_error(pred, gt)) == pytest.approx(5.0)
    bad = pred.copy()
    bad[1, 2] = np.inf
    with pytest.raises(ValueError, match="pred_points: expected finite"):
        st.landmark_3d_error(bad, gt)
    with pytest.raises(ValueError, match="gt_points: expected finite"):
        st.landmark_3d_error(pred, bad)
    with pytest.raises(ValueError, match="gt_points: expected shape"):
        st.landmark_3d_error(pred, gt[:3])
