"""em's pixel (un)shuffle and relabel_connected at the boundary (issue #59: declared in
the public-API fuzz tables, they met None/lists with an AttributeError, passed NaN/inf
and empty arrays through, and an empty image was a NumPy error naming nothing)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxlab.em as em


@pytest.mark.parametrize("fn", [em.pixel_shuffle, em.pixel_unshuffle])
def test_pixel_shuffle_checks_x(fn):
    x = np.arange(32.0).reshape(2, 2, 8)
    assert fn(x.tolist(), 2).shape == fn(x, 2).shape  # a list converts (was AttributeError)
    bad = x.copy()
    bad[1, 0, 3] = np.inf
    with pytest.raises(ValueError, match="x: expected finite"):
        fn(bad, 2)  # was passed through
    with pytest.raises(ValueError, match="x: expected an array"):
        fn(None, 2)
    with pytest.raises(ValueError, match="x: expected a non-empty"):
        fn(x[:0], 2)


def test_pixel_unshuffle_inverts_shuffle():
    x = np.random.default_rng(0).standard_normal((3, 4, 4, 8))
    np.testing.assert_allclose(em.pixel_unshuffle(em.pixel_shuffle(x, 2), 2), x)


def test_relabel_connected_of_an_empty_image_is_empty():
    out = em.relabel_connected(np.zeros((0, 5), dtype=np.int64))
    assert out.shape == (0, 5)  # was a "zero-size array" ValueError naming nothing
    assert out.dtype == np.int32
    np.testing.assert_array_equal(em.relabel_connected([[1, 2], [1, 1]]), [[1, 2], [1, 1]])
    with pytest.raises(ValueError, match="labels: "):
        em.relabel_connected(np.ones((2, 2)))


# ---- the public-API fuzz of issue #59 (em table, second round): each case below was
# silent garbage or a confusing error before its fix


def _cells():
    lab = np.ones((16, 16), np.int64)
    lab[:8, 8:], lab[8:, :8], lab[8:, 8:] = 2, 3, 4
    return lab


def test_cremi_score_takes_real_numbers_only():
    assert em.cremi_score(0.2, 0.5, 0.3) == pytest.approx(np.sqrt(0.2 * 0.8))
    with pytest.raises(ValueError, match="^arand"):  # float(None): a TypeError
        em.cremi_score(None, 0.5, 0.3)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="^voi_split"):  # a (1, 1) array was accepted
        em.cremi_score(0.2, np.array([[0.5]]), 0.3)  # type: ignore[arg-type]


def test_diffusion_helpers_check_steps_and_arrays():
    sched = em.linear_schedule(8)
    x0, noise = np.zeros((2, 4, 4)), np.ones((2, 4, 4))
    with pytest.raises(ValueError, match="^x0"):  # AttributeError: no .shape
        em.q_sample(sched, None, np.array([0, 1]), noise)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="^noise"):  # NaN x_t silently
        em.q_sample(sched, x0, np.array([0, 1]), np.full((2, 4, 4), np.nan))
    with pytest.raises(ValueError, match="^t"):  # a broadcasting error naming nothing
        em.q_sample(sched, x0, np.array([[[0, 1]]]), noise)
    with pytest.raises(ValueError, match="^num_steps: needs about"):  # allocated 8 GB first
        em.linear_schedule(10**12)
    with pytest.raises(ValueError, match="^n_steps"):  # n_steps=0 was accepted
        em.refine_timesteps(8, 0)
    with pytest.raises(ValueError, match="^t0"):  # a negative start step was accepted
        em.refine_timesteps(-1, 2)
    with pytest.raises(ValueError, match="^image"):  # NaN embedding silently
        em.structure_embedding(np.full((6, 6), np.nan))


def test_reconstruction_loss_checks_both_images():
    pred = np.zeros((4, 4))
    with pytest.raises(ValueError, match="^pred"):  # AttributeError / TypeError
        em.reconstruction_loss(None, pred)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="^target"):  # a NaN loss
        em.reconstruction_loss(pred, np.full((4, 4), np.nan))
    with pytest.raises(ValueError, match="^target"):  # broadcast silently
        em.reconstruction_loss(pred, np.zeros((1, 1, 4, 4)))


def test_generator_and_segmenter_settings_are_checked():
    key = jax.random.key(0)
    with pytest.raises(ValueError, match="^size: needs about"):  # allocated first
        em.tessellate("cremi_like", 10**6, key=key)
    with pytest.raises(ValueError, match="^n: needs about"):  # 10**9 keys allocated first
        em.generate_em_dataset("cremi_like", 10**9, 16, key=key)
    with pytest.raises(ValueError, match="^labels"):  # "zero-size array to reduction"
        em.render_em("cremi_like", np.zeros((0, 16), np.int64), key=key)
    with pytest.raises(ValueError, match="^noise_sigma"):  # float(None): a TypeError
        em.degrade(np.zeros((8, 8)), 2, key=key, noise_sigma=None)  # type: ignore[arg-type]
    prob = np.asarray(em.label_boundaries(_cells()), float)
    with pytest.raises(ValueError, match="^boundary_prob"):  # a probability > 1 accepted
        em.segment_watershed(prob * 2)
    with pytest.raises(ValueError, match="^boundary_prob"):  # an empty map was segmented
        em.segment_watershed(prob[:0])
    with pytest.raises(ValueError, match="^threshold"):  # float(None): a TypeError
        em.segment_watershed(prob, threshold=None)  # type: ignore[arg-type]


def test_refine_embedding_checks_the_embedding():
    key = jax.random.key(0)
    den = em.Denoiser(8, 4, param_dtype=jnp.float64)
    z = jnp.zeros((1, 4, 4, 2))
    params = em.init_params(den, z, jnp.ones((1,), jnp.int32), z, key=key)
    sched = em.linear_schedule(8, dtype=jnp.float64)
    with pytest.raises(ValueError, match="^embedding: expected finite"):  # a NaN refinement
        em.refine_embedding(den, params, sched, z.at[0, 0, 0, 0].set(jnp.nan), t0=4, key=key)
    with pytest.raises(ValueError, match="^embedding: shape"):  # flax ScopeParamShapeError
        em.refine_embedding(den, params, sched, jnp.zeros((1, 4, 4, 3)), t0=4, key=key)


def test_reconstruction_loss_refuses_a_complex_target():
    with pytest.raises(ValueError, match="^target: expected real"):  # the cast dropped 1j
        em.reconstruction_loss(np.zeros((2, 2)), np.zeros((2, 2)) + 1j)


# ---- the public-API fuzz of issue #59 (em table, third round: the training and method
# functions): each case below was silent garbage, a confusing error or unbounded before


def _tiny_seg(key):
    seg = em.SegNet((2,))
    return seg, em.init_params(seg, np.zeros((1, 4, 4)), key=key)


def test_init_params_checks_the_example_inputs():
    key = jax.random.key(0)
    seg = em.SegNet((2,))
    with pytest.raises(ValueError, match="^image: expected finite"):  # accepted
        em.init_params(seg, np.full((1, 4, 4), np.nan), key=key)
    with pytest.raises(ValueError, match="^image: expected an array"):  # a jit TypeError
        em.init_params(seg, "abc", key=key)


def test_fit_checks_data_steps_and_batch_size():
    key = jax.random.key(0)
    seg, params = _tiny_seg(key)
    image, boundary = np.zeros((2, 4, 4)), np.ones((2, 4, 4))
    obj = em.SegObjective(seg)

    def fit(image=image, boundary=boundary, **kw):
        kw = {"steps": 1, "batch_size": 2} | kw
        return em.fit(obj, params, {"image": image, "boundary": boundary}, key=key, **kw)

    with pytest.raises(ValueError, match=r"^data\['image'\]: expected finite"):  # NaN losses
        fit(image=np.full((2, 4, 4), np.nan))
    with pytest.raises(ValueError, match=r"^data\['boundary'\]: expected an array"):  # TypeError
        fit(boundary=None)
    with pytest.raises(ValueError, match=r"^data\['boundary'\]: expected values in"):  # trained
        fit(boundary=np.full((2, 4, 4), 1.5))
    with pytest.raises(ValueError, match=r"^data\['boundary'\]: expected shape"):  # "targets"
        fit(boundary=np.ones((2, 4, 3)))
    with pytest.raises(ValueError, match="^data: expected the keys"):  # a KeyError in the step
        em.fit(obj, params, {"image": image}, key=key, steps=1)
    with pytest.raises(ValueError, match="^steps: expected at most 1000000"):  # never ended
        fit(steps=10**9)
    with pytest.raises(ValueError, match="^batch_size: needs about"):  # allocated first
        fit(batch_size=10**12)
    assert np.isfinite(fit()[1].losses).all()


def test_methods_config_bounds_its_step_counts():
    with pytest.raises(ValueError, match="^steps: expected at most"):  # accepted: no end
        em.MethodsConfig(steps=10**9)
    with pytest.raises(ValueError, match="^denoiser_steps: expected a positive"):
        em.MethodsConfig(denoiser_steps=0)
    with pytest.raises(ValueError, match="^t0: expected an integer >= 0"):
        em.MethodsConfig(t0=-1)


def test_train_methods_checks_the_images_before_training():
    key = jax.random.key(0)
    hr = np.zeros((2, 4, 4))
    lr, config = hr[:, ::2, ::2], em.MethodsConfig(features=(2,), seg_features=(2,), steps=1)

    def train(**kw):
        args = {"hr": hr, "lr": lr, "bicubic": hr, "boundary": hr} | kw
        return em.train_methods(**args, factor=2, config=config, key=key, methods=("bicubic",))

    with pytest.raises(ValueError, match="^boundary: expected values in"):  # trained on it
        train(boundary=np.full((2, 4, 4), 1.5))
    with pytest.raises(ValueError, match="^lr: expected 2 times smaller"):  # unused: accepted
        train(lr=hr)
    with pytest.raises(ValueError, match="^hr: expected finite"):  # unused: accepted
        train(hr=np.full((2, 4, 4), np.nan))
    with pytest.raises(ValueError, match="^config: expected a MethodsConfig"):  # AttributeError
        em.train_methods(hr, lr, hr, hr, 2, None, key=key)  # type: ignore[arg-type]
    trained = train()
    with pytest.raises(ValueError, match="^lr: expected an array"):  # unused: accepted
        em.predict_method(trained, None, hr, "bicubic", key=key)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="^bicubic: expected finite"):  # NaN probabilities
        em.predict_method(trained, lr, np.full((2, 4, 4), np.nan), "bicubic", key=key)
    with pytest.raises(ValueError, match="^trained: expected a TrainedMethods"):  # AttributeError
        em.predict_method(None, lr, hr, "bicubic", key=key)  # type: ignore[arg-type]
    out = em.predict_method(trained, lr, hr, "bicubic", key=key)
    assert out.prob.shape == hr.shape
    assert np.isfinite(out.prob).all()


def test_embed_images_and_refine_dataset_check_their_arrays():
    key = jax.random.key(0)
    net = em.JointSRSeg(2, (2,), em.LearnedEmbedding(2))
    params = em.init_params(net, np.zeros((1, 2, 2)), key=key)
    with pytest.raises(ValueError, match="^images: expected finite"):  # a NaN embedding
        em.embed_images(net, params, np.full((1, 4, 4), np.nan))
    with pytest.raises(ValueError, match="^images: expected an array"):  # a TypeError
        em.embed_images(net, params, None)  # type: ignore[arg-type]
    den = em.Denoiser(8, 4, param_dtype=jnp.float64)
    z = jnp.zeros((1, 4, 4, 2))
    dparams = em.init_params(den, z, jnp.ones((1,), jnp.int32), z, key=key)
    sched = em.linear_schedule(8, dtype=jnp.float64)

    def refine(cond=z, **kw):
        kw = {"t0": 4, "n_steps": 2} | kw
        return em.refine_dataset(den, dparams, sched, cond, key=key, **kw)

    with pytest.raises(ValueError, match="^batch: expected a positive"):  # range() arg 3
        refine(batch=0)
    with pytest.raises(ValueError, match="^t0: expected an integer"):  # int(2.5) = 2 silently
        refine(t0=2.5)
    with pytest.raises(ValueError, match="^cond: expected finite"):  # named "embedding"
        refine(cond=z.at[0, 0, 0, 0].set(jnp.nan))
    with pytest.raises(ValueError, match="^cond: shape"):  # named "embedding"
        refine(cond=jnp.zeros((1, 4, 4, 3)))
