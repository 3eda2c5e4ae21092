"""RAFT-Stereo-lite: correlation volume, pyramid lookup, convex upsampling, gradients,
a real learning test on fronto-parallel planes, checkpoint/resume and bad inputs."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxlab import Driver, stereo
from jaxlab._core import Checkpointer, StepLoop

TINY = {
    "feature_dim": 8,
    "hidden_dim": 8,
    "context_dim": 8,
    "n_levels": 2,
    "radius": 2,
    "downsample": 2,
}


def test_correlation_volume_matches_loop(getkey):
    fl = np.asarray(jax.random.normal(getkey(), (3, 7, 5)))
    fr = np.asarray(jax.random.normal(getkey(), (3, 7, 5)))
    corr = np.asarray(stereo.correlation_volume(jnp.asarray(fl), jnp.asarray(fr)))
    assert corr.shape == (3, 7, 7)
    for y in range(3):
        for x in range(7):
            for d in range(7):
                want = 0.0 if x - d < 0 else float(fl[y, x] @ fr[y, x - d]) / np.sqrt(5)
                np.testing.assert_allclose(corr[y, x, d], want, rtol=1e-12, atol=1e-12)
    # the same volume from a dense einsum over all pairs (x, x')
    full = np.einsum("yxc,yvc->yxv", fl, fr) / np.sqrt(5)
    for d in range(7):
        xs = np.arange(d, 7)
        np.testing.assert_allclose(corr[:, xs, d], full[:, xs, xs - d], rtol=1e-12)


def test_pyramid_lookup_integer_and_interpolated(getkey):
    corr = jax.random.normal(getkey(), (2, 3, 16))
    pyr = stereo.correlation_pyramid(corr, 3)
    assert [p.shape[2] for p in pyr] == [16, 8, 4]
    c = np.asarray(corr)
    np.testing.assert_allclose(np.asarray(pyr[1]), 0.5 * (c[..., 0::2] + c[..., 1::2]))
    np.testing.assert_allclose(np.asarray(pyr[2]), 0.25 * c.reshape(2, 3, 4, 4).sum(-1), rtol=1e-12)
    r = 2
    disp = np.array([[0.0, 4.0, 8.0], [12.0, 16.0, 20.0]])  # integer at every level
    out = np.asarray(stereo.lookup_pyramid(pyr, jnp.asarray(disp), r))
    assert out.shape == (2, 3, 3 * (2 * r + 1))
    for lvl, vol in enumerate(pyr):
        vol = np.asarray(vol)
        for y in range(2):
            for x in range(3):
                for j, o in enumerate(range(-r, r + 1)):
                    i = int(disp[y, x]) // 2**lvl + o
                    want = vol[y, x, i] if 0 <= i < vol.shape[2] else 0.0
                    assert out[y, x, lvl * (2 * r + 1) + j] == pytest.approx(want, abs=1e-12)
    # fractional disparity: linear interpolation between the two neighbouring entries
    frac = np.full((2, 3), 5.3)
    out = np.asarray(stereo.lookup_pyramid(pyr, jnp.asarray(frac), 1))
    v0 = np.asarray(pyr[0])
    np.testing.assert_allclose(out[..., 1], 0.7 * v0[..., 5] + 0.3 * v0[..., 6], rtol=1e-10)
    np.testing.assert_allclose(out[..., 0], 0.7 * v0[..., 4] + 0.3 * v0[..., 5], rtol=1e-10)
    v1 = np.asarray(pyr[1])  # level 1: position 5.3 / 2 = 2.65
    np.testing.assert_allclose(out[..., 4], 0.35 * v1[..., 2] + 0.65 * v1[..., 3], rtol=1e-10)


def test_convex_upsample_matches_loop(getkey):
    h, w, f = 3, 4, 2
    disp = np.asarray(jax.random.uniform(getkey(), (h, w), minval=1.0, maxval=5.0))
    mask = np.asarray(jax.random.normal(getkey(), (h, w, 9 * f * f)))
    up = np.asarray(stereo.convex_upsample(jnp.asarray(disp), jnp.asarray(mask), f))
    pad = np.pad(disp, 1, mode="edge")
    for y in range(h):
        for x in range(w):
            for a in range(f):
                for b in range(f):
                    logits = mask[y, x].reshape(f, f, 9)[a, b]
                    wts = np.exp(logits - logits.max())
                    wts /= wts.sum()
                    nb = pad[y : y + 3, x : x + 3].ravel()
                    assert up[y * f + a, x * f + b] == pytest.approx(f * wts @ nb, rel=1e-10)
    assert up.min() >= f * disp.min() - 1e-12
    assert up.max() <= f * disp.max() + 1e-12


def test_model_shape_and_nonnegative(getkey):
    model = stereo.RAFTStereo(**{**TINY, "downsample": 4})
    params = stereo.init_raft(model, 16, 32, key=getkey())
    left = jax.random.uniform(getkey(), (2, 16, 32, 3), jnp.float32)
    right = jnp.roll(left, -2, axis=2)
    out = jax.jit(model.apply, static_argnums=3)({"params": params}, left, right, 2)
    assert out.shape == (2, 2, 16, 32)
    assert out.dtype == jnp.float32
    assert bool(jnp.all(out >= 0))
    assert bool(jnp.all(jnp.isfinite(out)))
    # LeCun-normal kernels, zero biases
    stem = params["fnet"]["Conv_0"]
    assert stem["kernel"].shape == (7, 7, 3, 32)
    assert not bool(jnp.any(stem["bias"]))
    assert float(stem["kernel"].std()) == pytest.approx(1 / np.sqrt(7 * 7 * 3), rel=0.1)


def test_gradient_matches_finite_differences(getkey):
    # n_iters = 1: the initial disparity is the constant 0, so the stop-gradient RAFT puts
    # on the lookup position does not truncate the derivative and autodiff is exact.
    # Parameters are jittered away from the initialisation, whose zero biases put ReLUs
    # exactly at their kink (the disparity encoder sees the constant 0).
    model = stereo.RAFTStereo(**TINY, dtype=jnp.float64)
    params = stereo.init_raft(model, 8, 12, key=getkey())
    leaves, tree = jax.tree_util.tree_flatten(params)
    keys = jax.random.split(getkey(), len(leaves))
    params = jax.tree_util.tree_unflatten(
        tree,
        [
            x + 0.05 * jax.random.normal(k, x.shape, x.dtype)
            for k, x in zip(keys, leaves, strict=True)
        ],
    )
    # a positive bias on the increment head keeps disparities off the clamp at 0 (where the
    # gradient would be identically zero)
    head = [k for k, v in params["refine"]["update"].items() if v["kernel"].shape[-1] == 1]
    assert len(head) == 1
    params["refine"]["update"][head[0]]["bias"] = jnp.ones((1,), jnp.float64)
    leaves, tree = jax.tree_util.tree_flatten(params)
    left = jax.random.uniform(getkey(), (1, 8, 12, 3), jnp.float64)
    right = jax.random.uniform(getkey(), (1, 8, 12, 3), jnp.float64)
    gt = jax.random.uniform(getkey(), (1, 8, 12), jnp.float64, 0.0, 3.0)
    valid = jnp.ones((1, 8, 12), bool)

    def loss(p):
        return stereo.raft_loss(model, p, left, right, gt, valid, n_iters=1)

    value_and_grad = jax.jit(jax.value_and_grad(loss))  # one compilation serves both
    _, g = value_and_grad(params)
    keys = jax.random.split(getkey(), len(leaves))
    direction = jax.tree_util.tree_unflatten(
        tree, [jax.random.normal(k, x.shape, x.dtype) for k, x in zip(keys, leaves, strict=True)]
    )
    eps = 1e-6
    shift = lambda s: jax.tree.map(lambda p, v: p + s * v, params, direction)  # noqa: E731
    fd = (value_and_grad(shift(eps))[0] - value_and_grad(shift(-eps))[0]) / (2 * eps)
    ad = sum(
        jnp.vdot(a, b) for a, b in zip(jax.tree.leaves(g), jax.tree.leaves(direction), strict=True)
    )
    assert float(jnp.abs(ad)) > 1e-3
    np.testing.assert_allclose(float(ad), float(fd), rtol=1e-5)


def _plane_pairs(key, n, h=16, w=32, disparities=(2, 3, 4, 5)):
    """Textured fronto-parallel planes: left(x) = T(x), right(x - d) = left(x)."""
    lefts, rights, disps = [], [], []
    for i in range(n):
        d = disparities[i % len(disparities)]
        t = np.asarray(jax.random.uniform(jax.random.fold_in(key, i), (h, w + d, 3)))
        t = (t + np.roll(t, 1, 1) + np.roll(t, 1, 0)) / 3.0  # mild smoothing
        lefts.append(t[:, :w])
        rights.append(t[:, d : d + w])
        disps.append(np.full((h, w), float(d)))
    return (
        np.stack(lefts).astype(np.float32),
        np.stack(rights).astype(np.float32),
        np.stack(disps).astype(np.float32),
    )


# The learning and the checkpoint tests train the same model on same-shaped data with the
# same settings, so they share one compiled training step.
PLANE_MODEL = {**TINY, "feature_dim": 16, "hidden_dim": 16}
PLANE_TRAIN = {
    "steps": 120,
    "batch_size": 4,
    "n_iters": 4,
    "optimizer": stereo.raft_optimizer(2e-3, 1e-5, 120),
}


def test_training_on_planes_reduces_epe(getkey):
    left, right, disp = _plane_pairs(getkey(), 16)
    model = stereo.RAFTStereo(**PLANE_MODEL)
    p0 = stereo.init_raft(model, 16, 32, key=getkey())
    tl, tr, td = _plane_pairs(getkey(), 8)

    def test_epe(predict):
        return float(np.mean(np.abs(np.asarray(predict(tl, tr)) - td)))

    params, hist = stereo.train_raft(
        model, left, right, disp, key=getkey(), params=p0, **PLANE_TRAIN
    )
    losses = hist.losses
    # one predictor (one compilation per input rank) for the trained EPE and the check below
    predict = stereo.raft_predictor(model, params, n_iters=4)
    before = test_epe(stereo.raft_predictor(model, p0, n_iters=4))
    after = test_epe(predict)
    assert losses.shape == (120,)
    assert losses[-10:].mean() < 0.5 * losses[:10].mean()
    assert after < 0.25 * before, (before, after)
    assert after < 0.5, (before, after)  # other seeds: 2.3-3.5 -> 0.3
    np.testing.assert_allclose(
        np.asarray(predict(tl[3], tr[3])), np.asarray(predict(tl, tr))[3], rtol=1e-5, atol=1e-5
    )


# The step-check and the resume tests build steps equal to the learning test's (same
# model, optimizer object, settings and data shapes), so all three share one compiled
# update (compiling it is ~25 s of these tests on 2 cores).
def test_raft_step_passes_the_shared_step_checks(getkey, tmp_path):
    from tests.step_checks import check_step

    left, right, disp = _plane_pairs(getkey(), 16)
    model = stereo.RAFTStereo(**PLANE_MODEL)
    kw = {k: PLANE_TRAIN[k] for k in ("optimizer", "batch_size", "n_iters")}
    step = stereo.RaftStep(
        jnp.asarray(left),
        jnp.asarray(right),
        jnp.asarray(disp),
        jnp.asarray(np.isfinite(disp)),
        model,
        **kw,
    )
    check_step(
        step, step.init(None, getkey()), key=getkey(), steps=4, tmp_path=tmp_path, loop=StepLoop()
    )


def test_train_raft_resumes_from_a_checkpointer(getkey, tmp_path, tree_allclose):
    left, right, disp = _plane_pairs(getkey(), 16)
    disp[0, :4] = np.nan  # unknown ground truth is ignored
    model = stereo.RAFTStereo(**PLANE_MODEL)
    kw = {"key": getkey(), **PLANE_TRAIN, "steps": 4}
    full, full_hist = stereo.train_raft(model, left, right, disp, driver=Driver(chunk=2), **kw)
    full_losses = full_hist.losses
    assert full_losses.shape == (4,)
    assert np.all(np.isfinite(full_losses))
    ckpt = Driver(chunk=2, checkpointer=Checkpointer(tmp_path / "raft.eqx", every=2, resume=True))
    stereo.train_raft(model, left, right, disp, driver=ckpt, **kw)
    # a finished run resumes to the same result without training
    again, hist = stereo.train_raft(model, left, right, disp, driver=ckpt, **kw)
    losses = hist.losses
    assert tree_allclose(again, full, rtol=0, atol=0)
    np.testing.assert_array_equal(losses, full_losses)
    assert not tree_allclose(again, stereo.init_raft(model, 16, 32, key=getkey()))


def test_init_does_not_depend_on_the_image_size(tree_allclose):
    # a fuzzed height of 10**9 sized the full correlation volume inside init (#59): the
    # parameters are size-free, so init traces at a capped side and returns the same ones
    model = stereo.RAFTStereo(**TINY)
    key = jax.random.key(3)
    small = stereo.init_raft(model, 8, 16, key=key)
    d = model.downsample
    huge = stereo.init_raft(model, 10**9 * d, 10**9 * d, key=key)
    assert tree_allclose(huge, small, rtol=0, atol=0)
    # the oracle: flax's own shapes at a size above the cap
    side = (stereo.INIT_SIDE_CAP + 2) * d
    x = jnp.zeros((1, side, side, 3), model.dtype)
    want = jax.eval_shape(lambda k: model.init(k, x, x, 1), key)["params"]
    got = jax.tree.map(lambda a: (a.shape, a.dtype), small)
    assert got == jax.tree.map(lambda a: (a.shape, a.dtype), want)


def test_bad_inputs_raise(getkey):
    model = stereo.RAFTStereo(**TINY)
    params = stereo.init_raft(model, 8, 16, key=getkey())
    a = np.zeros((8, 16, 3), np.float32)
    pred = stereo.raft_predictor(model, params, n_iters=2)
    with pytest.raises(ValueError, match="right"):
        pred(a, np.zeros((8, 12, 3), np.float32))
    bad = a.copy()
    bad[0, 0, 0] = np.nan
    with pytest.raises(ValueError, match="left"):
        pred(bad, a)
    with pytest.raises(ValueError, match="right"):
        pred(a, np.where(bad == bad, a, np.inf).astype(np.float32))
    with pytest.raises(ValueError, match="n_iters"):
        stereo.raft_predictor(model, params, n_iters=0)
    with pytest.raises(ValueError, match="n_iters"):
        stereo.raft_disparity(model, params, a, a, n_iters=0)
    with pytest.raises(ValueError, match="left"):
        pred(np.zeros((8, 15, 3), np.float32), np.zeros((8, 15, 3), np.float32))
    batch = np.zeros((2, 8, 16, 3), np.float32)
    with pytest.raises(ValueError, match="n_iters"):
        stereo.train_raft(
            model, batch, batch, np.zeros((2, 8, 16), np.float32), key=getkey(), n_iters=0
        )
    with pytest.raises(ValueError, match="right"):
        stereo.train_raft(
            model, batch, batch[:, :, :8], np.zeros((2, 8, 16), np.float32), key=getkey()
        )
    with pytest.raises(ValueError, match="f_right"):
        stereo.correlation_volume(jnp.zeros((2, 3, 4)), jnp.zeros((2, 4, 4)))
