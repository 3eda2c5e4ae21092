"""stereo.census_transform and landmark_3d_error at the boundary (issue #59: declared in
the public-API fuzz tables, they passed NaN/inf through: a NaN pixel compares as "not
darker" and gave a plausible census signature, a NaN landmark a NaN error; an empty
image was a padding error naming nothing)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
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


# ---- issue #59: every public function of stereo declared in the fuzz tables -----------
# Before these checks: a NaN camera parameter, pixel, point or disparity gave NaN rays,
# points, normals or losses silently; sizes of 10**9 (image sides, rendered pairs,
# batches, trace steps, refinement iterations, training steps, lookup radii, upsampling
# factors) were allocated or looped over (hang or out of memory); `load_motorcycle`
# took `scale=True` and returned empty images for a scale beyond the image;
# `write_face_shards({})` raised StopIteration; `init_raft(None, ...)` and
# `raft_loss` with a None image raised AttributeErrors naming nothing.

HUGE = 10**9


def _rig(focal=100.0, baseline=60.0):
    return st.StereoRig(
        jnp.asarray(focal), jnp.asarray(1.5), jnp.asarray(2.0), jnp.asarray(baseline)
    )


def _ball(p):
    return jnp.linalg.norm(p - jnp.array([0.0, 0.0, 10.0])) - 2.0


_O = np.zeros((2, 3))
_D = np.array([[0.0, 0.0, 1.0], [0.0, 0.0, 1.0]])
_PTS = np.array([[0.0, 0.0, 400.0], [10.0, 5.0, 500.0]])
_IMG = np.zeros((1, 4, 4, 3), np.float32)


def _nan(x, i=0):
    y = np.array(x, np.float64)
    y.reshape(-1)[i] = np.nan
    return y


def _scene():
    return st.sample_face_scene(60.0, 500.0, key=jax.random.key(0))


def _model():
    return st.RAFTStereo(
        feature_dim=8, hidden_dim=8, context_dim=8, n_levels=2, radius=1, downsample=2
    )


CASES = [
    ("camera_rays NaN focal", lambda: st.camera_rays(_rig(np.nan), 3, 4), "rig.focal"),
    ("camera_rays baseline 0", lambda: st.camera_rays(_rig(baseline=0.0), 3, 4), "rig.baseline"),
    ("camera_rays huge", lambda: st.camera_rays(_rig(), HUGE, HUGE), "height, width: needs"),
    ("camera_rays not a rig", lambda: st.camera_rays(None, 3, 4), "rig: expected a StereoRig"),
    ("project NaN", lambda: st.project_points(_rig(), _nan(_PTS)), "points: expected finite"),
    ("project z=0", lambda: st.project_points(_rig(), _PTS * [1, 1, 0]), r"points\[..., 2\]"),
    (
        "backproject NaN depth",
        lambda: st.backproject(_rig(), np.ones(3), np.ones(3), _nan(np.ones(3), 1)),
        "depth: expected finite",
    ),
    (
        "backproject shapes",
        lambda: st.backproject(_rig(), np.ones(3), np.ones(2), np.ones(3)),
        "v: expected shape",
    ),
    (
        "sphere_trace huge n_steps",
        lambda: st.sphere_trace(_ball, _O, _D, t_max=20.0, n_steps=HUGE),
        "n_steps: expected at most",
    ),
    (
        "sphere_trace NaN origin",
        lambda: st.sphere_trace(_ball, _nan(_O), _D, t_max=20.0),
        "origins: expected finite",
    ),
    (
        "sphere_trace NaN t_max",
        lambda: st.sphere_trace(_ball, _O, _D, t_max=np.nan),
        "t_max: expected a finite",
    ),
    ("sdf_normals NaN", lambda: st.sdf_normals(_ball, _nan(_PTS)), "points: expected finite"),
    ("face_sdf not a scene", lambda: st.face_sdf(np.zeros(3), None), "s: expected a FaceScene"),
    ("face_landmarks not a scene", lambda: st.face_landmarks({}), "s: expected a FaceScene"),
    (
        "sample_face_scene NaN",
        lambda: st.sample_face_scene(np.nan, 500.0, key=jax.random.key(0)),
        "baseline: expected a finite",
    ),
    (
        "sample_face_scene distance < 0",
        lambda: st.sample_face_scene(60.0, -5.0, key=jax.random.key(0)),
        "distance: expected values in",
    ),
    ("rig_configurations empty", lambda: st.rig_configurations(8, baselines=()), "baselines"),
    (
        "rig_configurations zoom < 0",
        lambda: st.rig_configurations(8, zooms=(-1.0,)),
        "zooms: expected values in",
    ),
    ("render_pair not a scene", lambda: st.render_pair(None, _rig(), 2, 2), "s: expected a"),
    ("render_pair huge image", lambda: st.render_pair(_scene(), _rig(), HUGE, 4), "height, w"),
    (
        "render_pair huge n_steps",
        lambda: st.render_pair(_scene(), _rig(), 2, 2, n_steps=HUGE),
        "n_steps: expected at most",
    ),
    (
        "render_dataset huge n_pairs",
        lambda: st.render_dataset(HUGE, 4, 4, key=jax.random.key(0)),
        "n_pairs: needs about",
    ),
    (
        "render_dataset huge batch",
        lambda: st.render_dataset(1, 4, 4, key=jax.random.key(0), batch=HUGE),
        "batch: needs about",
    ),
    (
        "render_dataset huge height",
        lambda: st.render_dataset(1, HUGE, 4, key=jax.random.key(0)),
        "height, width: needs about",
    ),
    (
        "render_dataset huge n_steps",
        lambda: st.render_dataset(1, 4, 4, key=jax.random.key(0), n_steps=HUGE),
        "n_steps: expected at most",
    ),
    (
        "render_dataset NaN configs",
        lambda: st.render_dataset(1, 4, 4, key=jax.random.key(0), configs=[[np.nan, 60, 500]]),
        "configs: expected finite",
    ),
    (
        "write_face_shards empty dict",
        lambda: st.write_face_shards("unused", {}),
        "data: expected at least one array",
    ),
    (
        "write_face_shards lengths",
        lambda: st.write_face_shards("unused", {"left": np.ones((2, 3)), "depth": np.ones(3)}),
        r"data\['left'\]=2, data\['depth'\]=3",
    ),
    (
        "write_face_shards None",
        lambda: st.write_face_shards("unused", {"left": None}),
        r"data\['left'\]: expected an array",
    ),
    ("load_motorcycle bool", lambda: st.load_motorcycle(True), "scale: expected a positive"),
    ("load_motorcycle huge", lambda: st.load_motorcycle(HUGE), "scale: expected at most"),
    (
        "init_raft not a model",
        lambda: st.init_raft(None, 4, 4, key=jax.random.key(0)),
        "model: expected a RAFTStereo",
    ),
    (
        "init_raft indivisible",
        lambda: st.init_raft(_model(), 5, 4, key=jax.random.key(0)),
        "height, width: expected multiples",
    ),
    (
        "raft_loss None image",
        lambda: st.raft_loss(
            _model(), {}, None, _IMG, np.zeros((1, 4, 4)), np.ones((1, 4, 4), bool), n_iters=1
        ),
        "left: expected an array",
    ),
    (
        "raft_loss NaN supervised disparity",
        lambda: st.raft_loss(
            _model(), {}, _IMG, _IMG, _nan(np.zeros((1, 4, 4))), np.ones((1, 4, 4), bool), n_iters=1
        ),
        "disparity: expected finite values where it is used",
    ),
    (
        "raft_loss huge n_iters",
        lambda: st.raft_loss(
            _model(), {}, _IMG, _IMG, np.zeros((1, 4, 4)), np.ones((1, 4, 4), bool), n_iters=HUGE
        ),
        "n_iters: expected at most",
    ),
    ("raft_optimizer NaN rate", lambda: st.raft_optimizer(np.nan), "learning_rate"),
    ("raft_optimizer decay < 0", lambda: st.raft_optimizer(1e-3, -1.0), "weight_decay"),
    (
        "raft_predictor huge n_iters",
        lambda: st.raft_predictor(_model(), {}, n_iters=HUGE),
        "n_iters: expected at most",
    ),
    (
        "train_raft huge steps",
        lambda: st.train_raft(
            _model(), _IMG, _IMG, np.zeros((1, 4, 4)), key=jax.random.key(0), steps=HUGE
        ),
        "steps: expected at most",
    ),
    (
        "train_raft huge batch",
        lambda: st.train_raft(
            _model(), _IMG, _IMG, np.zeros((1, 4, 4)), key=jax.random.key(0), batch_size=HUGE
        ),
        "batch_size: needs about",
    ),
    (
        "convex_upsample NaN",
        lambda: st.convex_upsample(_nan(np.ones((2, 2))), np.zeros((2, 2, 36)), 2),
        "disparity: expected finite",
    ),
    (
        "convex_upsample None",
        lambda: st.convex_upsample(None, np.zeros((2, 2, 36)), 2),
        "disparity: expected an array",
    ),
    (
        "convex_upsample huge factor",
        lambda: st.convex_upsample(np.ones((2, 2)), np.zeros((2, 2, 36)), HUGE),
        "factor: needs about",
    ),
    (
        "correlation_pyramid NaN",
        lambda: st.correlation_pyramid(_nan(np.ones((2, 3, 4))), 2),
        "corr: expected finite",
    ),
    (
        "correlation_pyramid huge levels",
        lambda: st.correlation_pyramid(np.ones((2, 3, 4)), HUGE),
        "n_levels: expected 2",
    ),
    (
        "lookup_pyramid huge radius",
        lambda: st.lookup_pyramid([np.ones((2, 3, 4))], np.ones((2, 3)), HUGE),
        "radius: needs about",
    ),
    (
        "lookup_pyramid NaN disparity",
        lambda: st.lookup_pyramid([np.ones((2, 3, 4))], _nan(np.ones((2, 3))), 1),
        "disparity: expected finite",
    ),
    (
        "lookup_pyramid not a list",
        lambda: st.lookup_pyramid(np.ones((2, 3, 4)), np.ones((2, 3)), 1),
        "pyramid: expected a non-empty list",
    ),
]


@pytest.mark.parametrize(("fn", "match"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_bad_stereo_inputs_are_refused_naming_the_argument(fn, match):
    with pytest.raises(ValueError, match=match):
        fn()


def test_valid_calls_still_work_after_the_checks():
    rig = st.StereoRig.centred(100.0, 60.0, 3, 4)
    o, d = st.camera_rays(rig, 3, 4)
    assert o.shape == d.shape == (12, 3)
    px = st.project_points(rig, _PTS)
    back = st.backproject(rig, px[:, 0], px[:, 2], _PTS[:, 2])
    np.testing.assert_allclose(back, _PTS, rtol=1e-5)
    assert st.load_motorcycle(np.int64(16))[0].ndim == 2
    assert st.lookup_pyramid([np.ones((2, 3, 4))], np.ones((2, 3)), 0).shape == (2, 3, 1)
    assert st.rig_configurations(8, baselines=[40.0], distances=[300.0], zooms=[1.0]).shape == (
        1,
        3,
    )


def test_write_face_shards_keeps_nan_depth_and_dtypes(tmp_path):
    depth = np.full((3, 2, 2), np.nan)
    mask = np.zeros((3, 2, 2), bool)
    st.write_face_shards(tmp_path, {"depth": depth, "mask": mask}, shard_size=2)
    back = st.FaceStereoDataset(tmp_path).arrays()
    assert back["mask"].dtype == bool
    assert np.isnan(back["depth"]).all()
