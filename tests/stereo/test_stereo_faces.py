import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxlab import stereo


def _analytic_sphere_t(o, d, c, r):
    oc = o - c
    b = np.sum(d * oc, -1)
    disc = b**2 - (np.sum(oc * oc, -1) - r**2)
    return -b - np.sqrt(np.maximum(disc, 0)), disc


@pytest.mark.parametrize("right", [False, True])
def test_sphere_depth_matches_analytic(right):
    rig = stereo.StereoRig.centred(40.0, 30.0, 20, 24)
    c, r = np.array([10.0, -5.0, 120.0]), 25.0
    sdf = lambda p: jnp.linalg.norm(p - jnp.asarray(c)) - r  # noqa: E731
    o, d = stereo.camera_rays(rig, 20, 24, right=right)
    t, hit = stereo.sphere_trace(sdf, o, d, t_max=400.0, n_steps=200, eps=1e-7)
    t_ref, disc = _analytic_sphere_t(np.asarray(o), np.asarray(d), c, r)
    clear = np.abs(disc) > 20.0  # away from the silhouette (grazing rays)
    np.testing.assert_array_equal(np.asarray(hit)[clear], (disc > 0)[clear])
    inside = clear & (disc > 0)
    assert inside.sum() > 50
    depth = np.asarray(o + t[:, None] * d)[:, 2]
    want = (np.asarray(o) + t_ref[:, None] * np.asarray(d))[:, 2]
    np.testing.assert_allclose(depth[inside], want[inside], atol=1e-5)
    n = np.asarray(stereo.sdf_normals(sdf, o + t[:, None] * d))[inside]
    p = (np.asarray(o) + t_ref[:, None] * np.asarray(d))[inside]
    np.testing.assert_allclose(n, (p - c) / r, atol=1e-5)
    t_jit, _ = jax.jit(
        lambda o, d: stereo.sphere_trace(sdf, o, d, t_max=400.0, n_steps=200, eps=1e-7)
    )(o, d)
    np.testing.assert_allclose(np.asarray(t_jit), np.asarray(t), rtol=1e-12)


def test_plane_depth_is_exact_in_both_views():
    rig = stereo.StereoRig.centred(50.0, 60.0, 12, 16)
    sdf = lambda p: 300.0 - p[2]  # noqa: E731  wall z = 300, rays travel +z
    for right in (False, True):
        o, d = stereo.camera_rays(rig, 12, 16, right=right)
        t, hit = stereo.sphere_trace(sdf, o, d, t_max=1000.0, eps=1e-11)
        assert bool(jnp.all(hit))
        np.testing.assert_allclose(np.asarray(o + t[:, None] * d)[:, 2], 300.0, atol=1e-9)


def test_projection_backprojection_and_disparity(getkey):
    rig = stereo.StereoRig.centred(120.0, 65.0, 30, 40)
    pts = jnp.asarray(np.random.default_rng(0).uniform([-50, -40, 300], [50, 40, 700], (7, 3)))
    px = np.asarray(stereo.project_points(rig, pts))
    P = np.asarray(pts)
    np.testing.assert_allclose(px[:, 0], 120.0 * P[:, 0] / P[:, 2] + 19.5, rtol=1e-12)
    np.testing.assert_allclose(px[:, 1], 120.0 * (P[:, 0] - 65.0) / P[:, 2] + 19.5, rtol=1e-12)
    np.testing.assert_allclose(px[:, 2], 120.0 * P[:, 1] / P[:, 2] + 14.5, rtol=1e-12)
    np.testing.assert_allclose(px[:, 0] - px[:, 1], 120.0 * 65.0 / P[:, 2], rtol=1e-12)
    back = stereo.backproject(rig, px[:, 0], px[:, 2], P[:, 2])
    np.testing.assert_allclose(np.asarray(back), P, rtol=1e-12)


def test_face_pair_landmarks_on_surface_and_projected(getkey):
    h, w = 18, 24
    cfg = stereo.rig_configurations(w)[4]
    rig = stereo.StereoRig.centred(float(cfg[0]), float(cfg[1]), h, w)
    scene = stereo.sample_face_scene(cfg[1], cfg[2], key=getkey())
    out = jax.jit(lambda s: stereo.render_pair(s, rig, h, w, n_steps=64))(scene)
    lm = np.asarray(out["landmarks_3d"])
    assert lm.shape == (len(stereo.LANDMARK_NAMES), 3)
    # landmarks lie on the scene surface
    sd = np.asarray(jax.vmap(lambda p: stereo.face_sdf(p, scene))(jnp.asarray(lm)))
    np.testing.assert_allclose(sd, 0.0, atol=1e-2)
    # and project with the pinhole model of the rig (independent numpy formula)
    f, cx, cy, b = np.asarray(out["camera"])
    px = np.asarray(out["landmarks_px"])
    np.testing.assert_allclose(px[:, 0], f * lm[:, 0] / lm[:, 2] + cx, rtol=1e-9)
    np.testing.assert_allclose(px[:, 1], f * (lm[:, 0] - b) / lm[:, 2] + cx, rtol=1e-9)
    np.testing.assert_allclose(px[:, 2], f * lm[:, 1] / lm[:, 2] + cy, rtol=1e-9)
    # pupils and nose tip are visible and in front of the wall; IPD is anatomical
    vis = np.asarray(out["landmarks_visible"])
    assert vis[[0, 1, 6]].all()
    assert 50 < np.linalg.norm(lm[0] - lm[1]) < 75
    depth, mask = np.asarray(out["depth"]), np.asarray(out["mask"])
    assert mask.any()
    assert (~mask).any()
    assert np.nanmax(depth[mask]) < float(scene.wall_z) - 1
    np.testing.assert_allclose(depth[~mask & np.isfinite(depth)], float(scene.wall_z), atol=1e-2)
    disp = np.asarray(out["disparity"])
    np.testing.assert_allclose(disp[mask], f * b / depth[mask], rtol=1e-9)
    for k in ("left", "right"):
        img = np.asarray(out[k])
        assert img.shape == (h, w, 3)
        assert img.min() >= 0
        assert img.max() <= 1
        assert img.std() > 0.02


@pytest.mark.slow  # two compilations of the face renderer (~30-70 s on 2 cores)
def test_dataset_vmap_equals_single_and_shards_round_trip(getkey, tmp_path):
    key = getkey()
    h, w = 10, 12
    data = stereo.render_dataset(3, h, w, key=key, batch=2, n_steps=40)
    cfgs = stereo.rig_configurations(w)
    k1 = jax.random.split(key, 3)[1]
    c = cfgs[1]
    rig = stereo.StereoRig.centred(float(c[0]), float(c[1]), h, w)
    single = jax.jit(
        lambda k: stereo.render_pair(
            stereo.sample_face_scene(c[1], c[2], key=k), rig, h, w, n_steps=40
        )
    )(k1)
    for name in ("left", "right", "landmarks_3d", "camera"):
        np.testing.assert_allclose(data[name][1], np.asarray(single[name]), rtol=1e-6, atol=1e-6)
    np.testing.assert_array_equal(data["mask"][1], np.asarray(single["mask"]))
    np.testing.assert_array_equal(data["config"], [0, 1, 2])
    stereo.write_face_shards(tmp_path / "set", data, shard_size=2, configs=cfgs)
    ds = stereo.FaceStereoDataset(tmp_path / "set")
    assert len(ds) == 3
    assert len(ds.index["shards"]) == 2
    for i in range(3):
        for k, v in ds[i].items():
            np.testing.assert_array_equal(v, data[k][i])
    allv = ds.arrays()
    np.testing.assert_array_equal(allv["depth"], data["depth"])


def test_face_bad_inputs(tmp_path):
    with pytest.raises(ValueError, match="focal, baseline: expected positive"):
        stereo.StereoRig.centred(-1.0, 60.0, 8, 8)
    with pytest.raises(ValueError, match="n_pairs"):
        stereo.render_dataset(0, 8, 8, key=jax.random.key(0))
    with pytest.raises(ValueError, match="configs: expected shape"):
        stereo.render_dataset(2, 8, 8, key=jax.random.key(0), configs=jnp.ones((3, 2)))
    with pytest.raises(ValueError, match="directions: expected shape"):
        stereo.sphere_trace(lambda p: p[2], jnp.zeros((4, 3)), jnp.zeros((5, 3)), t_max=1.0)
    with pytest.raises(ValueError, match="directory: expected a face shard set"):
        stereo.FaceStereoDataset(tmp_path)


def test_shards_round_trip_without_rendering(getkey, tmp_path):
    rng = np.random.default_rng(1)
    data = {
        "left": rng.uniform(size=(5, 4, 6, 3)),
        "depth": rng.uniform(size=(5, 4, 6)),
        "mask": rng.uniform(size=(5, 4, 6)) > 0.5,
        "config": np.arange(5),
    }
    stereo.write_face_shards(tmp_path / "s", data, shard_size=2)
    ds = stereo.FaceStereoDataset(tmp_path / "s")
    assert len(ds) == 5
    assert [e["count"] for e in ds.index["shards"]] == [2, 2, 1]
    assert ds.index["landmark_names"] == list(stereo.LANDMARK_NAMES)
    for i in (0, 3, 4, -1):
        for k in data:
            np.testing.assert_array_equal(ds[i][k], data[k][i])
    for k, v in ds.arrays().items():
        np.testing.assert_array_equal(v, data[k])
    with pytest.raises(IndexError):
        ds[5]
    with pytest.raises(ValueError, match="same leading length"):
        stereo.write_face_shards(tmp_path / "t", {"a": np.zeros(3), "b": np.zeros(4)})


def test_faces_set_statistics_equal_the_pooled_metrics():
    """stereo_faces bootstraps its two claims over the pairs from per-pair sums: on the
    whole set, the statistics equal those of jaxlab.stereo's pooled metrics (the oracle:
    the metrics on all pairs at once, then the spread ratio and the ranking pairs)."""
    from experiments.stereo import faces
    from experiments.stereo._setup import METHODS

    rng = np.random.default_rng(3)
    n, h, w = 5, 6, 7
    gt = rng.uniform(400.0, 600.0, (n, h, w))
    gt[0, 0, :3] = np.nan  # no ground truth there
    mask = rng.uniform(size=(n, h, w)) < 0.7
    vis = rng.uniform(size=(n, 4)) < 0.8
    vis[:, 0] = True
    sums, pooled = {}, {}
    for i, meth in enumerate(METHODS):
        z = gt + rng.normal(0.0, 2.0 + 3.0 * i, gt.shape)
        z = np.where(np.isfinite(z), z, 500.0)
        lm_err = rng.uniform(0.0, 5.0 + i, (n, 4))
        sums[meth] = faces._pair_sums(z, gt, mask, lm_err, vis)
        pooled[meth] = {
            "delta1": float(stereo.delta1(z, gt, mask)),
            "rmse": float(stereo.rmse(z, gt, mask)),
            "ir5": float(stereo.inlier_ratio(z, gt, 5.0, mask)),
            "l3de": float(lm_err[vis].mean()),
        }
    keys = [(m, k) for m in METHODS for k in sums[m]]
    got = faces._set_statistics(keys, tuple(sums[m][k] for m, k in keys))
    for m in METHODS:
        for k in pooled[m]:
            np.testing.assert_allclose(
                faces._pooled({(m, c): sums[m][c] for c in sums[m]}, m, k),
                pooled[m][k],
                rtol=1e-12,
            )
    spread = {
        k: max(pooled[m][k] for m in METHODS) - min(pooled[m][k] for m in METHODS)
        for k in ("delta1", "ir5")
    }
    np.testing.assert_allclose(got["ratio"], spread["delta1"] / spread["ir5"], rtol=1e-12)

    def reversed_pair(a, b):  # some pair of methods strictly the other way round
        sign = {"delta1": 1, "ir5": 1, "rmse": -1, "l3de": -1}
        return any(
            sign[a] * (pooled[x][a] - pooled[y][a]) * sign[b] * (pooled[x][b] - pooled[y][b]) < 0
            for x in METHODS
            for y in METHODS
        )

    want = sum(
        [
            reversed_pair("rmse", "ir5"),
            reversed_pair("delta1", "ir5"),
            reversed_pair("rmse", "l3de"),
        ]
    )
    assert got["disagreements"] == want
    # vectorised over resamples (the bootstrap's batch axis): each row its own set
    idx = np.stack([np.arange(n), rng.integers(0, n, n)])
    batch = faces._set_statistics(keys, tuple(sums[m][k][idx] for m, k in keys))
    single = faces._set_statistics(keys, tuple(sums[m][k][idx[1]] for m, k in keys))
    assert batch["disagreements"].shape == (2,)
    assert batch["disagreements"][0] == got["disagreements"]
    np.testing.assert_allclose(batch["ratio"][1], single["ratio"], rtol=1e-12)
