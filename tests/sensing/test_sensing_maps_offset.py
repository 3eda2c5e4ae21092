"""sensing_maps' "not along the flower axis" parts (issue #54): the median offset angle
is read with its percentile bootstrap over the flowers, never as a point value."""

import numpy as np
import pytest

from experiments.sensing import maps


def _parts(offset, seed=0):
    return maps.off_axis_parts(offset, 10.0, seed=seed, n_boot=1000, claim="offset", paper="-")


def test_median_angle_has_a_bootstrap_interval_over_the_flowers():
    rng = np.random.default_rng(0)
    offset = rng.uniform(40, 140, 48)
    median, parts = _parts(offset)
    assert median.value == pytest.approx(np.median(offset))
    assert median.has_interval
    assert median.low < median.value < median.high
    assert median.n == 48
    assert {c.verdict for c in parts.values()} == {"holds"}
    assert all(c.estimate == median for c in parts.values())


def test_a_median_near_the_axis_is_inconclusive_or_fails():
    rng = np.random.default_rng(1)
    # half the flowers along the axis, half far off it: the median sits at the bar and
    # its interval spans it (a point value would have said "holds")
    offset = np.concatenate([rng.uniform(0, 6, 24), rng.uniform(14, 90, 24)])
    offset[np.argsort(offset)[23:25]] = [9.0, 11.0]
    median, parts = _parts(offset)
    assert median.value == pytest.approx(10.0)
    assert median.low < 10.0 < median.high
    assert parts["not along the axis (low)"].verdict == "inconclusive"
    _, parts = _parts(rng.uniform(0, 5, 48))
    assert parts["not along the axis (low)"].verdict == "fails"
    _, parts = _parts(rng.uniform(175, 180, 48))
    assert parts["not along the axis (high)"].verdict == "fails"
