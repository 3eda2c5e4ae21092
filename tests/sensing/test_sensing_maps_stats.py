"""sensing_maps' statistics: the inside-corolla mask, the ring-stratified correlation and
the random-peak null of the offset angle (calibrated: p ~ uniform under the null)."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from experiments.sensing import maps
from jaxlab import sensing


def _flower(nectary=(0.2, -0.1), radius=0.8):
    return sensing.Flower(
        curvature=jnp.asarray(0.5),
        radius=jnp.asarray(radius),
        nectary=jnp.asarray(nectary),
        kind=jnp.asarray(0),
        phase=jnp.asarray(0.3),
        contrast=jnp.asarray(0.9),
    )


def test_corolla_interior_equals_a_numpy_reference():
    grid = sensing.action_grid(21)
    f = _flower()
    got = np.asarray(maps.corolla_interior(f, grid, 0.16))
    xy = np.asarray(grid)[:, :2]
    want = np.array(
        [
            np.hypot(x, y) < 0.8 - 0.16 and np.hypot(x - 0.2, y + 0.1) > sensing.TUBE_RADIUS
            for x, y in xy
        ]
    )
    np.testing.assert_array_equal(got, want)
    assert 0 < got.sum() < len(xy)
    # the pattern is non-zero everywhere inside and zero outside the corolla
    pat = np.asarray(jax.jit(jax.vmap(lambda q: sensing.pattern_intensity(f, q)))(grid[:, :2]))
    assert (pat[got] > 0).all()
    assert (pat[np.hypot(*xy.T) > 0.8] == 0).all()


def test_pattern_gradient_matches_finite_differences():
    f = _flower()
    pts = jnp.asarray([[0.4, 0.3, 0.0], [-0.3, 0.1, 0.0]])
    g = np.asarray(maps.pattern_gradient(f, pts))
    h = 1e-3
    pat = jax.jit(jax.vmap(lambda q: sensing.pattern_intensity(f, q)))
    xy = np.asarray(pts)[:, :2]
    dx, dy = np.array([h, 0.0]), np.array([0.0, h])
    gx = (np.asarray(pat(xy + dx)) - np.asarray(pat(xy - dx))) / (2 * h)
    gy = (np.asarray(pat(xy + dy)) - np.asarray(pat(xy - dy))) / (2 * h)
    np.testing.assert_allclose(g, np.hypot(gx, gy), rtol=1e-2)


def test_stratified_corr_is_the_partial_correlation_given_the_strata():
    rng = np.random.default_rng(0)
    n = 300
    strata = rng.integers(0, 5, n)
    mask = rng.uniform(size=n) < 0.8
    z = rng.normal(size=n)
    x = 3.0 * strata + z + rng.normal(size=n)  # strata means differ a lot
    y = -2.0 * strata + z + rng.normal(size=n)
    # oracle: regress both on stratum dummies (least squares), correlate the residuals
    d = np.eye(5)[strata[mask]]
    rx = x[mask] - d @ np.linalg.lstsq(d, x[mask], rcond=None)[0]
    ry = y[mask] - d @ np.linalg.lstsq(d, y[mask], rcond=None)[0]
    want = np.corrcoef(rx, ry)[0, 1]
    got = maps.stratified_corr(x, y, strata, mask)
    assert got == pytest.approx(want, abs=1e-10)
    assert got > 0.3  # the shared z, while the raw correlation is negative
    assert np.corrcoef(x[mask], y[mask])[0, 1] < 0
    assert np.isnan(maps.stratified_corr(x, np.ones(n), strata, mask))


def test_offset_angles():
    nect = np.array([[0.2, 0.0], [0.0, 0.3]])
    peaks = np.array([[0.5, 0.0], [0.3, 0.3]])  # along the axis; perpendicular
    np.testing.assert_allclose(maps.offset_angles(peaks, nect), [0.0, 90.0], atol=0.05)
    np.testing.assert_allclose(
        maps.offset_angles(np.array([[0.0, 0.0]]), nect[:1]), [180.0], atol=0.05
    )


def test_random_peak_null_is_calibrated():
    # the observed peaks themselves drawn as the null says: p must be ~ uniform
    grid = np.asarray(sensing.action_grid(9))
    rng = np.random.default_rng(1)
    ps = []
    for rep in range(200):
        nect = rng.uniform(-0.25, 0.25, (15, 2))
        obs = np.median(maps.offset_angles(grid[rng.integers(0, len(grid), 15), :2], nect))
        _, p, null = maps.random_peak_null(grid, nect, obs, key=jax.random.key(rep), n_null=199)
        assert null.shape == (199,)
        ps.append(p)
    ps = np.asarray(ps)
    assert 0.01 <= np.mean(ps <= 0.05) <= 0.11
    assert 0.35 < np.mean(ps) < 0.65
    # a peak always on the axis beyond the nectary (angle 0) is far from the null
    nect = rng.uniform(-0.25, 0.25, (15, 2))
    centre, p, _ = maps.random_peak_null(grid, nect, 0.0, key=jax.random.key(0), n_null=199)
    assert 60 < centre < 120
    assert p == pytest.approx(1 / 200)


def test_random_peak_null_with_a_mask_draws_only_allowed_points():
    grid = np.asarray(sensing.action_grid(9))
    rng = np.random.default_rng(2)
    nect = rng.uniform(-0.25, 0.25, (6, 2))
    # one allowed point per flower: every null draw is the median of those points' angles
    one = rng.integers(0, len(grid), 6)
    mask = np.zeros((6, len(grid)), bool)
    mask[np.arange(6), one] = True
    want = np.median(maps.offset_angles(grid[one, :2], nect))
    _, _, null = maps.random_peak_null(
        grid, nect, 90.0, key=jax.random.key(3), n_null=50, mask=mask
    )
    np.testing.assert_allclose(null, want)
    # calibration with per-flower masks: observed drawn from the masked null
    ps = []
    for rep in range(100):
        m = rng.uniform(size=(15, len(grid))) < 0.4
        nc = rng.uniform(-0.25, 0.25, (15, 2))
        pick = [rng.choice(np.flatnonzero(row)) for row in m]
        obs = np.median(maps.offset_angles(grid[pick, :2], nc))
        ps.append(
            maps.random_peak_null(grid, nc, obs, key=jax.random.key(rep), n_null=199, mask=m)[1]
        )
    assert 0.0 <= np.mean(np.asarray(ps) <= 0.05) <= 0.12
    assert 0.35 < np.mean(ps) < 0.65
    with pytest.raises(ValueError, match="mask"):
        maps.random_peak_null(grid, nect, 90.0, key=jax.random.key(0), mask=np.zeros_like(mask))
