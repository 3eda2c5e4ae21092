"""P11 refiner embedding: the learned Embedder on the shared encoder (and the hand-made
ablation), checked against explicit compositions of the parts, NumPy standardisation,
finite differences, and planted changes of the encoder's weights."""

import dataclasses

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxlab import em

F64 = jnp.float64
FEATURES = (3, 4)


def _net(factor=2, embedding=None, dtype=jnp.float32):
    embedding = em.LearnedEmbedding(3) if embedding is None else embedding
    return em.JointSRSeg(factor, FEATURES, embedding, param_dtype=dtype)


def _perturb(params, part, scale, key):
    """`params` with every leaf of params["params"][part] moved by scale * N(0, 1)."""
    sub = params["params"][part]
    leaves, tree = jax.tree_util.tree_flatten(sub)
    keys = jax.random.split(key, len(leaves))
    moved = [
        v + scale * jax.random.normal(k, v.shape, v.dtype)
        for v, k in zip(leaves, keys, strict=True)
    ]
    return {"params": {**params["params"], part: jax.tree_util.tree_unflatten(tree, moved)}}


def _composed_embedding(params, channels, features, image):
    """Oracle: the encoder, the head's U-Net decoder and its 1x1 convolution applied apart
    with the model's weights, then the per-image, per-channel standardisation in NumPy."""
    enc = em.UNetEncoder(features).apply({"params": params["params"]["encoder"]}, image[..., None])
    head = params["params"]["embedder"]
    h = em.UNetDecoder(features).apply({"params": head["UNetDecoder_0"]}, enc)
    r = np.asarray(nn.Conv(channels, (1, 1)).apply({"params": head["Conv_0"]}, h), np.float64)
    mean = r.mean(axis=(1, 2), keepdims=True)
    return (r - mean) / np.sqrt(r.var(axis=(1, 2), keepdims=True) + 1e-6)


def test_learned_embedding_is_the_head_on_the_shared_encoder(getkey):
    net = _net()
    lr = jax.random.uniform(getkey(), (2, 6, 8), jnp.float32)
    params = em.init_params(net, lr, key=getkey())
    assert set(params["params"]) == {"encoder", "sr_decoder", "seg_decoder", "embedder"}
    img = jax.random.uniform(getkey(), (2, 12, 16), jnp.float32)
    got = jax.jit(lambda p, x: net.apply(p, x, method="embed"))(params, img)
    assert got.shape == (2, 12, 16, 3)
    # the encoder (the same weights the LR path uses) and the head, applied apart
    want = _composed_embedding(params, 3, FEATURES, img)
    np.testing.assert_allclose(np.asarray(got), want, rtol=1e-4, atol=1e-4)
    # standardised per image and channel
    np.testing.assert_allclose(np.asarray(got).mean(axis=(1, 2)), 0.0, atol=1e-5)
    # (unit up to the 1e-6 regulariser: the tiny head's raw variance is ~1e-4)
    np.testing.assert_allclose(np.asarray(got).std(axis=(1, 2)), 1.0, atol=1e-2)
    # the joint model's SR embedding is E of its SR image
    out = jax.jit(net.apply)(params, lr)
    e_sr = jax.jit(lambda p, x: net.apply(p, x, method="embed"))(params, out.sr)
    np.testing.assert_allclose(out.embedding, e_sr, rtol=1e-5, atol=1e-5)


def test_structure_embedding_strategy_is_the_hand_made_one(getkey):
    net = _net(embedding=em.StructureEmbedding())
    lr = jax.random.uniform(getkey(), (2, 6, 8), jnp.float32)
    params = em.init_params(net, lr, key=getkey())
    assert "embedder" not in params["params"]  # no parameters
    out = jax.jit(net.apply)(params, lr)
    assert out.embedding.shape == out.sr.shape + (3,)
    np.testing.assert_allclose(out.embedding, em.structure_embedding(out.sr), atol=1e-6)


def test_embed_jit_equals_eager_and_vmap_equals_loop(getkey):
    net = _net()
    img = jax.random.uniform(getkey(), (3, 8, 8), jnp.float32)
    params = em.init_params(net, img[:1, ::2, ::2], key=getkey())

    def embed(x):
        return net.apply(params, x, method="embed")

    eager = embed(img)
    np.testing.assert_allclose(jax.jit(embed)(img), eager, rtol=1e-5, atol=1e-5)
    vm = jax.jit(jax.vmap(embed))(img)  # unbatched (H, W) per call
    loop = np.stack([np.asarray(embed(x)) for x in img])
    np.testing.assert_allclose(vm, loop, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(vm, eager, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(em.embed_images(net, params, img, batch=2), eager, atol=1e-5)


def test_embed_gradient_matches_finite_differences(getkey):
    net = _net(dtype=F64)
    img = jax.random.uniform(getkey(), (2, 8, 8), F64)
    params = em.init_params(net, img[:, ::2, ::2], key=getkey())
    w = jax.random.normal(getkey(), (2, 8, 8, 3), F64)

    def loss(p, x):
        return jnp.sum(w * net.apply(p, x, method="embed"))

    grad_fn = jax.jit(jax.grad(loss, argnums=(0, 1)))
    gp, gx = grad_fn(params, img)
    dp = jax.tree_util.tree_map(lambda v: jax.random.normal(getkey(), v.shape, F64), params)
    dx = jax.random.normal(getkey(), img.shape, F64)
    f = jax.jit(loss)
    h = 1e-5

    def at(s):
        return f(jax.tree_util.tree_map(lambda p, d: p + s * d, params, dp), img + s * dx)

    fd = (at(h) - at(-h)) / (2 * h)
    flat = jax.tree_util.tree_leaves(jax.tree_util.tree_map(jnp.vdot, gp, dp))
    analytic = sum(flat) + jnp.vdot(gx, dx)
    assert abs(float(analytic)) > 1e-3
    np.testing.assert_allclose(float(analytic), float(fd), rtol=1e-6)


def test_frozen_embedding_passes_no_gradient(getkey):
    net = _net(dtype=F64)
    lr = jax.random.uniform(getkey(), (2, 4, 4), F64)
    params = em.init_params(net, lr, key=getkey())
    img = jax.random.uniform(getkey(), (2, 8, 8), F64)
    w = jax.random.normal(getkey(), (2, 8, 8, 3), F64)

    def norm(tree):
        return sum(float(jnp.sum(jnp.abs(v))) for v in jax.tree_util.tree_leaves(tree))

    live = jax.grad(lambda p: jnp.sum(w * net.apply(p, img, method="embed")))(params)
    frozen = jax.grad(lambda p: jnp.sum(w * em.embed_images(net, p, img)))(params)
    assert norm(live["params"]["encoder"]) > 0
    assert norm(live["params"]["embedder"]) > 0
    assert norm(frozen) == 0.0
    # seg loss with the default prior: trains the embedder and the shared encoder through
    # E(SR), never the SR decoder (the SR image enters E with its gradient stopped)
    boundary = (img > 0.6).astype(F64)

    def seg_loss(p, prior=None):
        return em.balanced_bce(net.apply(p, lr, prior).boundary_logits, boundary)

    g = jax.grad(seg_loss)(params)
    assert norm(g["params"]["embedder"]) > 0
    assert norm(g["params"]["encoder"]) > 0
    assert norm(g["params"]["sr_decoder"]) == 0.0
    # with a refined prior passed in, the embedder is not used: no gradient reaches it
    prior = jax.random.normal(getkey(), (2, 8, 8, 3), F64)
    g = jax.grad(seg_loss)(params, prior)
    assert norm(g["params"]["embedder"]) == 0.0
    assert norm(g["params"]["encoder"]) > 0


TINY = em.MethodsConfig(
    features=(2, 4),
    seg_features=(2, 4),
    denoiser_features=4,
    steps=2,
    finetune_steps=2,
    denoiser_steps=2,
    batch_size=2,
    num_timesteps=10,
    t0=3,
    refine_steps=2,
    chunk=2,
    embedding=em.LearnedEmbedding(2),
)


def _tiny_data(key, n=4, size=16, factor=2):
    s = em.generate_em_dataset("cremi_like", n, size, key=key)
    lr = jax.vmap(lambda im: em.degrade(im, factor, key=key, noise_sigma=0.0))(s.image)
    bic = jax.vmap(lambda x: em.upsample_bicubic(x, factor))(lr)
    return s.image, lr, bic, s.boundaries


@pytest.mark.slow  # trains two tiny pipelines (~35 s near idle)
def test_refiner_receives_the_learned_embedding_of_the_frozen_base_model(getkey):
    hr, lr, bic, boundary = _tiny_data(getkey())
    tr = em.train_methods(
        hr, lr, bic, boundary, 2, TINY, key=getkey(), methods=("joint_diffusion",)
    )
    base = tr.params["joint_base"]
    # fine-tuning moved the encoder; the refiner's embedder is the frozen base model
    enc = [
        np.concatenate([np.ravel(v) for v in jax.tree_util.tree_leaves(p["params"]["encoder"])])
        for p in (base, tr.params["joint_diffusion"])
    ]
    assert not np.allclose(*enc)

    def prior(trained):  # t0 = 0: the refiner returns its input unchanged
        return np.asarray(
            em.predict_method(trained, lr, bic, "joint_diffusion", key=getkey(), t0=0).prior
        )

    # oracle: the base model's E(SR), composed by hand from its encoder and Embedder head
    want = _composed_embedding(base, 2, (2, 4), tr.joint_net.apply(base, lr).sr)
    got = prior(tr)
    assert got.shape == hr.shape + (2,)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)
    # planted: new encoder weights (or new head weights) in the base model change the input
    for part in ("encoder", "embedder"):
        moved = dataclasses.replace(
            tr, params={**tr.params, "joint_base": _perturb(base, part, 0.3, getkey())}
        )
        assert np.abs(prior(moved) - got).max() > 1e-2
    # ...and weights of the fine-tuned model do not (the embedder is frozen)
    moved = dataclasses.replace(
        tr,
        params={
            **tr.params,
            "joint_diffusion": _perturb(tr.params["joint_diffusion"], "encoder", 0.3, getkey()),
        },
    )
    np.testing.assert_array_equal(prior(moved), got)
    # the hand-made ablation feeds the refiner structure_embedding(SR) instead
    c = dataclasses.replace(TINY, embedding=em.StructureEmbedding())
    ts = em.train_methods(hr, lr, bic, boundary, 2, c, key=getkey(), methods=("joint_diffusion",))
    sr = ts.joint_net.apply(ts.params["joint_base"], lr).sr
    np.testing.assert_allclose(
        np.asarray(em.predict_method(ts, lr, bic, "joint_diffusion", key=getkey(), t0=0).prior),
        np.asarray(em.structure_embedding(sr)),
        atol=1e-5,
    )


def test_bad_embedding_inputs_raise(getkey):
    with pytest.raises(ValueError, match="channels"):
        em.LearnedEmbedding(0)
    lr = jnp.zeros((1, 4, 4), jnp.float32)
    with pytest.raises(ValueError, match="embedding"):
        em.JointSRSeg(2, FEATURES, "learned").init(getkey(), lr)  # type: ignore[arg-type]
    net = _net()
    params = em.init_params(net, lr, key=getkey())
    with pytest.raises(ValueError, match="image"):
        net.apply(params, jnp.zeros((1, 7, 8), jnp.float32), method="embed")
    with pytest.raises(ValueError, match="prior"):
        net.apply(params, lr, jnp.zeros((1, 8, 8, 2), jnp.float32))


def test_frozen_forward_passes_compile_once_per_model_configuration(getkey):
    """Regression: `embed_images` (and the other frozen forward passes of `train_methods` /
    `predict_method`) closed over the parameters in a fresh `jax.jit(lambda ...)` per call,
    so every call (each seed, setting and t0 of the em experiments) compiled again. The
    parameters are arguments now and equal models share one compiled function."""
    from jaxlab.em import _methods

    img = jax.random.uniform(getkey(), (3, 12, 16), jnp.float32)
    lr = img[:, ::2, ::2]
    p1 = em.init_params(_net(), lr, key=getkey())
    p2 = em.init_params(_net(), lr, key=getkey())  # an equal model built again: one init
    before = _methods._apply._cache_size()
    e1 = em.embed_images(_net(), p1, img)
    e2 = em.embed_images(_net(), p2, img)
    assert _methods._apply._cache_size() == before + 1
    want = jax.jit(lambda p, x: _net().apply(p, x, method="embed"))(p2, img)
    np.testing.assert_allclose(np.asarray(e2), np.asarray(want), rtol=1e-5, atol=1e-5)
    assert not np.allclose(np.asarray(e1), np.asarray(e2))
