"""P11 models: U-Net / SR / segmentation shapes, pixel shuffle, gradients, training loop."""

import itertools

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

from jaxlab import Driver, em
from jaxlab._core import Checkpointer, StepLoop

F64 = jnp.float64


def _toy_batch(key, n, size, factor, dtype=jnp.float32):
    hr = jax.random.uniform(key, (n, size, size), dtype)
    lr = hr.reshape(n, size // factor, factor, size // factor, factor).mean((2, 4))
    return {"lr": lr, "hr": hr, "boundary": (hr > 0.7).astype(dtype)}


@pytest.mark.parametrize("factor", [2, 4])
def test_shapes_for_x2_and_x4(factor, getkey):
    lr = jax.random.uniform(getkey(), (3, 8, 12), jnp.float32)
    hr_shape = (3, 8 * factor, 12 * factor)
    joint = em.JointSRSeg(factor, (4, 8))
    params = em.init_params(joint, lr, key=getkey())
    apply = jax.jit(joint.apply)
    out = apply(params, lr)
    assert out.sr.shape == hr_shape
    assert out.boundary_logits.shape == hr_shape
    assert out.embedding.shape == hr_shape + (4,)  # LearnedEmbedding's default channels
    assert out.sr.dtype == jnp.float32
    # unbatched input gives the unbatched output
    single = apply(params, lr[1])
    np.testing.assert_allclose(single.sr, out.sr[1], rtol=1e-5, atol=1e-6)
    # an explicit prior replaces the default one and changes only the segmentation
    prior = jax.random.normal(getkey(), hr_shape + (4,), jnp.float32)
    guided = apply(params, lr, prior)
    np.testing.assert_array_equal(guided.sr, out.sr)
    assert not np.allclose(guided.boundary_logits, out.boundary_logits)
    with pytest.raises(ValueError, match="prior"):
        apply(params, lr, prior[:, :-1])
    sr_net = em.SRNet(factor, (4, 8))
    assert jax.jit(sr_net.apply)(em.init_params(sr_net, lr, key=getkey()), lr).shape == hr_shape


def test_segnet_and_encoder_shapes(getkey):
    hr_shape = (3, 16, 24)
    seg = em.SegNet((4, 8, 16))
    img = jnp.zeros(hr_shape, jnp.float32)
    assert jax.jit(seg.apply)(em.init_params(seg, img, key=getkey()), img).shape == hr_shape
    enc = em.UNetEncoder((4, 8, 16))
    skips = jax.jit(enc.apply)(em.init_params(enc, img[..., None], key=getkey()), img[..., None])
    assert [s.shape for s in skips] == [
        (3, 16 // 2**i, 24 // 2**i, f) for i, f in enumerate((4, 8, 16))
    ]


def test_jit_equals_eager_and_vmap_equals_loop(getkey):
    lr = jax.random.uniform(getkey(), (2, 8, 8), jnp.float32)
    sr_net = em.SRNet(2, (2, 4))
    p = em.init_params(sr_net, lr, key=getkey())
    batched = jax.jit(sr_net.apply)(p, lr)
    np.testing.assert_allclose(batched, sr_net.apply(p, lr), rtol=1e-5, atol=1e-6)
    vm = jax.jit(jax.vmap(lambda x: sr_net.apply(p, x)))(lr)
    np.testing.assert_allclose(vm, batched, rtol=1e-5, atol=1e-6)


def test_init_params_is_deterministic_per_key(getkey, tree_allclose):
    net = em.SRNet(2, (2, 4))
    lr = jnp.zeros((1, 8, 8), jnp.float32)
    key = getkey()
    p = em.init_params(net, lr, key=key)
    assert tree_allclose(p, em.init_params(net, lr, key=key), rtol=0, atol=0)
    assert not tree_allclose(p, em.init_params(net, lr, key=getkey()))
    shapes = jax.tree_util.tree_map(jnp.shape, jax.eval_shape(net.init, key, lr))
    assert jax.tree_util.tree_map(jnp.shape, p) == shapes


def _shuffle_loop_oracle(x, r):
    b, h, w, cr = x.shape
    c = cr // (r * r)
    out = np.zeros((b, h * r, w * r, c), x.dtype)
    for bi, hi, wi, ci, i, j in itertools.product(
        range(b), range(h), range(w), range(c), range(r), range(r)
    ):
        out[bi, hi * r + i, wi * r + j, ci] = x[bi, hi, wi, ci * r * r + i * r + j]
    return out


@pytest.mark.parametrize("r", [2, 3, 4])
def test_pixel_shuffle_matches_index_oracle_and_inverts(r):
    x = np.random.default_rng(r).normal(size=(2, 3, 4, 2 * r * r))
    y = em.pixel_shuffle(jnp.asarray(x), r)
    np.testing.assert_array_equal(np.asarray(y), _shuffle_loop_oracle(x, r))
    np.testing.assert_array_equal(np.asarray(em.pixel_unshuffle(y, r)), x)
    z = np.random.default_rng(0).normal(size=(3 * r, 2 * r, 5))
    np.testing.assert_array_equal(
        np.asarray(em.pixel_shuffle(em.pixel_unshuffle(jnp.asarray(z), r), r)), z
    )


def _flat(tree):
    return jnp.concatenate([jnp.ravel(v) for v in jax.tree_util.tree_leaves(tree)])


@pytest.mark.parametrize("factor", [2, pytest.param(4, marks=pytest.mark.slow)])
def test_joint_loss_gradient_matches_finite_differences(factor, getkey):
    batch = _toy_batch(getkey(), 2, 8 * factor, factor, F64)
    # a fixed prior: the default one embeds the SR image with its gradient stopped, so
    # finite differences of the loss would see a dependence the gradient deliberately ignores
    # (LearnedEmbedding's default 4 channels)
    batch["prior"] = jax.random.normal(getkey(), batch["hr"].shape + (4,), F64)
    model = em.JointSRSeg(factor, (3, 4), param_dtype=F64)
    params = em.init_params(model, batch["lr"], key=getkey())
    objective = em.JointObjective(model, seg_weight=0.7, norm="l2")
    key = getkey()
    value_and_grad = jax.jit(jax.value_and_grad(objective))  # one compilation serves both
    g = _flat(value_and_grad(params, batch, key)[1])
    assert g.dtype == F64
    assert bool(jnp.all(jnp.isfinite(g)))
    assert float(jnp.linalg.norm(g)) > 0
    leaves, tree = jax.tree_util.tree_flatten(params)
    dirs = [
        jax.random.normal(k, v.shape, F64)
        for k, v in zip(jax.random.split(getkey(), len(leaves)), leaves, strict=True)
    ]
    direction = jax.tree_util.tree_unflatten(tree, dirs)

    def at(s):
        shifted = jax.tree_util.tree_map(lambda p, d: p + s * d, params, direction)
        return value_and_grad(shifted, batch, key)[0]

    h = jnp.asarray(1e-5, F64)
    fd = (at(h) - at(-h)) / (2 * h)
    analytic = jnp.vdot(g, _flat(direction))
    np.testing.assert_allclose(float(analytic), float(fd), rtol=1e-6)


def test_balanced_bce_matches_numpy():
    rng = np.random.default_rng(0)
    logits = rng.normal(size=(4, 6))
    t = (rng.uniform(size=(4, 6)) > 0.7).astype(np.float64)
    p = 1 / (1 + np.exp(-logits))
    want = 0.5 * np.mean(-np.log(p[t == 1])) + 0.5 * np.mean(-np.log(1 - p[t == 0]))
    got = em.balanced_bce(jnp.asarray(logits), jnp.asarray(t))
    np.testing.assert_allclose(float(got), want, rtol=1e-12)
    d = jnp.asarray(logits - t)
    np.testing.assert_allclose(
        float(em.reconstruction_loss(d, jnp.zeros_like(d), "l1")),
        np.mean(np.abs(logits - t)),
        rtol=1e-12,
    )


def test_training_decreases_loss(getkey):
    batch = _toy_batch(getkey(), 16, 16, 2)
    model = em.SegNet((4, 8))
    params = em.init_params(model, batch["hr"][:1], key=getkey())
    objective = em.SegObjective(model)
    batch = {"image": batch["hr"], "boundary": batch["boundary"]}
    before = float(objective(params, batch, getkey()))
    params, hist = em.fit(
        objective,
        params,
        batch,
        key=getkey(),
        steps=60,
        batch_size=4,
        optimizer=optax.adam(1e-2),
        driver=Driver(chunk=30),
    )
    losses = hist.losses
    after = float(objective(params, batch, getkey()))
    assert losses.shape == (60,)
    assert np.all(np.isfinite(losses))
    assert after < 0.9 * before
    assert losses[-10:].mean() < losses[:10].mean()


def test_objective_step_passes_the_shared_step_checks(tmp_path, getkey):
    from tests.step_checks import check_step

    batch = _toy_batch(getkey(), 6, 8, 2)
    model = em.SRNet(2, (2, 4))
    params0 = em.init_params(model, batch["lr"][:1], key=getkey())
    step = em.ObjectiveStep(em.SRObjective(model), batch, optimizer=optax.adam(1e-2), batch_size=2)
    check_step(
        step,
        step.init(params0, getkey()),
        key=getkey(),
        steps=4,
        tmp_path=tmp_path,
        loop=StepLoop(),
    )


def test_fit_resumes_from_a_checkpointer(tmp_path, getkey, tree_allclose):
    batch = _toy_batch(getkey(), 6, 8, 2)
    model = em.SRNet(2, (2, 4))
    params0 = em.init_params(model, batch["lr"][:1], key=getkey())
    objective = em.SRObjective(model)
    kw = dict(key=getkey(), steps=6, batch_size=2, optimizer=optax.adam(1e-2))
    full, full_hist = em.fit(objective, params0, batch, driver=Driver(chunk=2), **kw)
    full_losses = full_hist.losses
    ckpt = Driver(chunk=2, checkpointer=Checkpointer(tmp_path / "sr.eqx", every=2, resume=True))
    done, _ = em.fit(objective, params0, batch, driver=ckpt, **kw)
    # a finished run resumes to the same result without training
    again, hist = em.fit(objective, params0, batch, driver=ckpt, **kw)
    losses = hist.losses
    assert tree_allclose(done, full, rtol=0, atol=0)
    assert tree_allclose(again, full, rtol=0, atol=0)
    np.testing.assert_array_equal(losses, full_losses)


def test_bad_inputs_raise(getkey):
    lr = jnp.zeros((1, 8, 8), jnp.float32)
    for factor in (3, 1, 8):
        with pytest.raises(ValueError, match="factor"):
            em.JointSRSeg(factor, (4, 8)).init(getkey(), lr)
        with pytest.raises(ValueError, match="factor"):
            em.SRNet(factor, (4, 8)).init(getkey(), lr)
    with pytest.raises(ValueError, match="lr"):
        em.JointSRSeg(2, (4, 8)).init(getkey(), jnp.zeros((1, 7, 8), jnp.float32))
    with pytest.raises(ValueError, match="lr"):
        em.SRNet(4, (4, 8, 16)).init(getkey(), jnp.zeros((1, 6, 8), jnp.float32))
    with pytest.raises(ValueError, match="image"):
        em.SegNet((4, 8)).init(getkey(), jnp.zeros((1, 9, 9), jnp.float32))
    with pytest.raises(ValueError, match="x"):
        em.pixel_shuffle(jnp.zeros((2, 2, 6)), 2)
    with pytest.raises(ValueError, match="x"):
        em.pixel_unshuffle(jnp.zeros((3, 4, 1)), 2)
    with pytest.raises(ValueError, match="factor"):
        em.pixel_shuffle(jnp.zeros((2, 2, 4)), 0)
    params = {"params": {}}
    with pytest.raises(ValueError, match="norm"):
        em.reconstruction_loss(lr, lr, "huber")
    with pytest.raises(ValueError, match="data"):
        em.fit(
            em.SRObjective(em.SRNet(2, (4, 8))),
            params,
            {"lr": lr, "hr": jnp.zeros((2, 16, 16))},
            key=getkey(),
            steps=1,
        )
    with pytest.raises(ValueError, match="steps"):
        em.fit(em.SRObjective(em.SRNet(2, (4, 8))), params, {"lr": lr}, key=getkey(), steps=0)
