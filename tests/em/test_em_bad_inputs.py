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
