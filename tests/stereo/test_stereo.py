import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxlab import stereo


def _census_numpy(img, window=5):
    r = window // 2
    pad = np.pad(img, r, mode="edge")
    h, w = img.shape
    out = np.zeros((h, w), np.uint64)
    bit = 0
    for dy in range(-r, r + 1):
        for dx in range(-r, r + 1):
            if dy == 0 and dx == 0:
                continue
            out |= (pad[r + dy : r + dy + h, r + dx : r + dx + w] < img).astype(np.uint64) << bit
            bit += 1
    return out


def test_census_and_cost_volume_match_bruteforce(getkey):
    left = np.asarray(jax.random.uniform(getkey(), (9, 14)))
    right = np.asarray(jax.random.uniform(getkey(), (9, 14)))
    cl, cr = _census_numpy(left), _census_numpy(right)
    np.testing.assert_array_equal(np.asarray(stereo.census_transform(jnp.asarray(left))), cl)
    vol = np.asarray(stereo.census_cost_volume(jnp.asarray(left), jnp.asarray(right), 5))
    for y in range(9):
        for x in range(14):
            for d in range(5):
                want = 24 if x - d < 0 else bin(int(cl[y, x]) ^ int(cr[y, x - d])).count("1")
                assert vol[y, x, d] == want


def _plane_pair(key, d, h=24, w=48):
    texture = np.asarray(jax.random.uniform(key, (h, w + d)))
    left = texture[:, :w]  # left(x) = T(x)
    right = texture[:, d : d + w]  # right(x - d) = T(x - d + d) = left(x)
    return jnp.asarray(left), jnp.asarray(right)


@pytest.mark.parametrize("d", [3, 7])
def test_sgm_recovers_fronto_parallel_plane_exactly(getkey, d):
    left, right = _plane_pair(getkey(), d)
    cost = stereo.census_cost_volume(left, right, 12)
    disp = stereo.sgm_disparity(cost, 8.0, 32.0, subpixel=False)
    inner = np.asarray(disp)[3:-3, d + 3 : -3]  # away from borders / occluded strip
    np.testing.assert_array_equal(inner, float(d))
    # Sub-pixel refinement fits a parabola to unequal neighbours: within half a pixel.
    sub = np.asarray(stereo.sgm_disparity(cost, 8.0, 32.0))[3:-3, d + 3 : -3]
    np.testing.assert_allclose(sub, float(d), atol=0.5)
    bm = np.asarray(stereo.block_matching(cost))[3:-3, d + 3 : -3]
    np.testing.assert_array_equal(bm, float(d))


def _path_reference(cost, p1, p2, dy, dx):
    """Literal SGM recursion along direction (dy, dx), pixel by pixel (numpy)."""
    h, w, n = cost.shape
    out = np.zeros_like(cost)
    ys = range(h) if dy >= 0 else range(h - 1, -1, -1)
    xs = list(range(w)) if dx >= 0 else list(range(w - 1, -1, -1))
    for y in ys:
        for x in xs:
            py, px = y - dy, x - dx
            if not (0 <= py < h and 0 <= px < w):
                out[y, x] = cost[y, x]
                continue
            prev = out[py, px]
            m = prev.min()
            for d in range(n):
                cands = [prev[d], m + p2]
                if d > 0:
                    cands.append(prev[d - 1] + p1)
                if d < n - 1:
                    cands.append(prev[d + 1] + p1)
                out[y, x, d] = cost[y, x, d] + min(cands) - m
    return out


def test_sgm_aggregation_equals_literal_recursion(getkey):
    cost = np.asarray(jax.random.uniform(getkey(), (6, 7, 4))) * 10
    dirs = [(1, 0), (-1, 0), (0, 1), (0, -1), (1, 1), (1, -1), (-1, 1), (-1, -1)]
    want = sum(_path_reference(cost, 2.0, 5.0, dy, dx) for dy, dx in dirs)
    got = stereo.sgm_aggregate(jnp.asarray(cost), 2.0, 5.0, paths=8)
    np.testing.assert_allclose(np.asarray(got), want, rtol=1e-12)
    want4 = sum(_path_reference(cost, 2.0, 5.0, dy, dx) for dy, dx in dirs[:4])
    np.testing.assert_allclose(
        np.asarray(stereo.sgm_aggregate(jnp.asarray(cost), 2.0, 5.0, 4)), want4, rtol=1e-12
    )
    jitted = jax.jit(lambda c: stereo.sgm_aggregate(c, 2.0, 5.0))(jnp.asarray(cost))
    np.testing.assert_allclose(np.asarray(jitted), want, rtol=1e-12)


def test_subpixel_parabola_vertex():
    d = np.arange(8, dtype=float)
    agg = jnp.asarray(((d - 3.3) ** 2)[None, None, :])
    assert float(stereo.subpixel_argmin(agg)[0, 0]) == pytest.approx(3.3, abs=1e-12)


def test_metrics_hand_made():
    gt = jnp.asarray([[1.0, 2.0], [3.0, jnp.inf]])
    pred = jnp.asarray([[1.5, 2.0], [6.0, 9.0]])
    assert float(stereo.epe(pred, gt)) == pytest.approx((0.5 + 0 + 3) / 3)
    assert float(stereo.bad_pixel_rate(pred, gt, 2.0)) == pytest.approx(1 / 3)
    depth_gt = jnp.asarray([100.0, 200.0, 400.0])
    depth_pred = jnp.asarray([101.0, 260.0, 400.5])
    assert float(stereo.inlier_ratio(depth_pred, depth_gt, 2.0)) == pytest.approx(2 / 3)
    assert float(stereo.delta1(depth_pred, depth_gt)) == pytest.approx(2 / 3)  # 260/200 > 1.25
    assert float(stereo.rmse(depth_pred, depth_gt)) == pytest.approx(np.sqrt((1 + 3600 + 0.25) / 3))
    pts = jnp.zeros((2, 3))
    assert float(stereo.landmark_3d_error(pts.at[0, 0].set(3.0).at[1, 2].set(4.0), pts)) == 3.5


def test_disparity_depth_round_trip(getkey):
    disp = 1 + 50 * jax.random.uniform(getkey(), (10,))
    z = stereo.disparity_to_depth(disp, 700.0, 63.0)
    np.testing.assert_allclose(
        np.asarray(stereo.depth_to_disparity(z, 700.0, 63.0)), np.asarray(disp), rtol=1e-12
    )
    assert bool(jnp.isinf(stereo.disparity_to_depth(jnp.asarray(0.0), 700.0, 63.0)))


def test_middlebury_pair_loads():
    left, right, disp = stereo.load_motorcycle(4)
    assert left.shape == right.shape == disp.shape == (125, 185)
    valid = np.isfinite(disp)
    assert 0.6 < valid.mean() < 1.0
    assert 1.0 < disp[valid].min() < disp[valid].max() < 16


def test_bad_inputs():
    img = jnp.zeros((8, 8))
    with pytest.raises(ValueError, match="right: expected shape"):
        stereo.census_cost_volume(img, jnp.zeros((8, 9)), 4)
    with pytest.raises(ValueError, match="n_disp: expected at most the image width"):
        stereo.census_cost_volume(img, img, 20)
    with pytest.raises(ValueError, match="window: expected 3 or 5"):
        stereo.census_transform(img, 7)
    with pytest.raises(ValueError, match="p1, p2: expected 0 <= p1 <= p2"):
        stereo.sgm_aggregate(jnp.zeros((4, 4, 3)), 5.0, 1.0)
    with pytest.raises(ValueError, match="mask: expected at least one valid pixel"):
        stereo.epe(jnp.zeros(3), jnp.full(3, jnp.inf))
    with pytest.raises(ValueError, match="scale: expected a positive integer"):
        stereo.load_motorcycle(0)
