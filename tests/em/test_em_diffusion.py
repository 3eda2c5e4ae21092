"""P11 partial-diffusion refiner: schedules, closed-form q(x_t | x_0), DDIM refinement."""

import functools

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

from jaxlab import Driver, em

F64 = jnp.float64


@pytest.mark.parametrize("kind", ["linear", "cosine"])
@pytest.mark.parametrize("T", [10, 100, 1000])
def test_alpha_bar_is_product_of_one_minus_beta(kind, T):
    s = em.make_schedule(kind, T, dtype=F64)
    betas, ab = np.asarray(s.betas), np.asarray(s.alpha_bars)
    assert betas.shape == (T,)
    assert ab.shape == (T + 1,)
    assert s.num_steps == T
    assert ab[0] == 1.0
    prod = 1.0
    for t in range(1, T + 1):
        prod *= 1.0 - betas[t - 1]
        np.testing.assert_allclose(ab[t], prod, rtol=1e-12)
    assert np.all(betas > 0)
    assert np.all(betas < 1)
    assert np.all(np.diff(ab) < 0)
    assert ab[-1] < 1e-3  # t = T is (almost) pure noise


def test_linear_schedule_at_1000_steps_is_the_ddpm_one():
    s = em.linear_schedule(1000, dtype=F64)
    np.testing.assert_allclose(np.asarray(s.betas), np.linspace(1e-4, 0.02, 1000), rtol=1e-12)


@pytest.mark.parametrize("kind", ["linear", "cosine"])
def test_q_sample_matches_closed_form_moments(kind, getkey):
    s = em.make_schedule(kind, 50, dtype=F64)
    x0 = jnp.asarray([[-1.5, 0.0, 0.7, 2.0]], F64)
    n = 40000
    for t in (0, 1, 10, 30, 50):
        noise = jax.random.normal(getkey(), (n, 4), F64)
        xt = np.asarray(jax.vmap(functools.partial(em.q_sample, s, x0[0], t))(noise))
        ab = float(s.alpha_bars[t])
        se = np.sqrt((1 - ab) / n)
        np.testing.assert_allclose(xt.mean(0), np.sqrt(ab) * np.asarray(x0[0]), atol=5 * se + 1e-12)
        np.testing.assert_allclose(xt.var(0), 1 - ab, atol=5 * (1 - ab) * np.sqrt(2 / n) + 1e-12)
    # per-sample steps broadcast over the trailing axes
    t = jnp.asarray([0, 50])
    e = jax.random.normal(getkey(), (2, 3, 3), F64)
    x = jnp.ones((2, 3, 3), F64)
    out = em.q_sample(s, x, t, e)
    np.testing.assert_array_equal(out[0], x[0])
    ab = s.alpha_bars[50]
    np.testing.assert_allclose(out[1], jnp.sqrt(ab) * x[1] + jnp.sqrt(1 - ab) * e[1], rtol=1e-12)


class _OracleDenoiser(nn.Module):
    """Predicts the exact noise that separates x_t from the clean target `cond`."""

    T: int

    @nn.compact
    def __call__(self, x_t, t, cond):
        ab = em.make_schedule("cosine", self.T, dtype=x_t.dtype).alpha_bars[t]
        ab = ab[:, None, None, None]
        return (x_t - jnp.sqrt(ab) * cond) / jnp.sqrt(1 - ab)


@pytest.mark.parametrize("t0", [1, 7, 20, 40])
def test_ddim_refinement_with_exact_noise_recovers_target(t0, getkey):
    T = 40
    s = em.make_schedule("cosine", T, dtype=F64)
    z = jax.random.normal(getkey(), (2, 6, 6, 3), F64)
    out = em.refine_embedding(_OracleDenoiser(T), {}, s, z, t0=t0, n_steps=4, key=getkey())
    np.testing.assert_allclose(np.asarray(out), np.asarray(z), atol=1e-8)


def test_refiner_with_t0_zero_is_identity(getkey):
    T = 20
    den = em.Denoiser(T, 8, residual=False)
    z = jax.random.normal(getkey(), (2, 8, 8, 3), jnp.float32)
    params = em.init_params(den, z, jnp.ones((2,), jnp.int32), z, key=getkey())
    s = em.linear_schedule(T)
    out = em.refine_embedding(den, params, s, z, t0=0, n_steps=5, key=getkey())
    np.testing.assert_array_equal(np.asarray(out), np.asarray(z))
    # any t0 > 0 changes it (noise is injected), and the shape is kept, also unbatched
    moved = jax.jit(lambda z, k: em.refine_embedding(den, params, s, z, t0=5, n_steps=5, key=k))(
        z[0], getkey()
    )
    assert moved.shape == z[0].shape
    assert not np.allclose(moved, z[0])


def test_refine_timesteps():
    assert em.refine_timesteps(30, 5) == (30, 24, 18, 12, 6, 0)
    assert em.refine_timesteps(3, 5) == (3, 2, 1, 0)
    assert em.refine_timesteps(0, 5) == (0,)
    for t0, n in [(100, 7), (13, 4)]:
        ts = em.refine_timesteps(t0, n)
        assert ts[0] == t0
        assert ts[-1] == 0
        assert len(ts) == n + 1
        assert np.all(np.diff(ts) < 0)


def test_bad_refiner_inputs_raise(getkey):
    T = 10
    den = em.Denoiser(T, 4)
    z = jnp.zeros((1, 4, 4, 3), jnp.float32)
    params = em.init_params(den, z, jnp.ones((1,), jnp.int32), z, key=getkey())
    s = em.linear_schedule(T)
    for t0 in (-1, T + 1, 2.5, True):
        with pytest.raises(ValueError, match="t0"):
            em.refine_embedding(den, params, s, z, t0=t0, key=getkey())
    with pytest.raises(ValueError, match="n_steps"):
        em.refine_embedding(den, params, s, z, t0=3, n_steps=0, key=getkey())
    with pytest.raises(ValueError, match="embedding"):
        em.refine_embedding(den, params, s, z[0, 0], t0=3, key=getkey())
    with pytest.raises(ValueError, match="t"):
        em.q_sample(s, z, T + 1, z)
    with pytest.raises(ValueError, match="t"):
        em.q_sample(s, z, 1.5, z)
    with pytest.raises(ValueError, match="noise"):
        em.q_sample(s, z, 1, z[0])
    with pytest.raises(ValueError, match="kind"):
        em.make_schedule("quadratic", 10)
    with pytest.raises(ValueError, match="num_steps"):
        em.linear_schedule(0)
    with pytest.raises(ValueError, match="image"):
        em.structure_embedding(jnp.zeros((3,), jnp.float32))
    with pytest.raises(ValueError, match="x_t"):
        den.apply(
            params,
            jnp.zeros((1, 5, 4, 3), jnp.float32),
            jnp.ones((1,), jnp.int32),
            jnp.zeros((1, 5, 4, 3), jnp.float32),
        )


def test_structure_embedding_marks_a_dark_membrane():
    img = np.full((24, 24), 0.8)
    img[:, 11:13] = 0.2  # a dark vertical membrane
    emb = np.asarray(em.structure_embedding(jnp.asarray(img, F64)))
    assert emb.shape == (24, 24, 3)
    np.testing.assert_allclose(emb.mean((0, 1)), 0.0, atol=1e-10)
    np.testing.assert_allclose(emb.std((0, 1)), 1.0, atol=1e-3)
    ridge = emb[..., 1].mean(0)
    assert set(np.argsort(ridge)[-2:]) == {11, 12}  # ridge response peaks on the membrane
    grad = emb[..., 2].mean(0)
    assert grad[10] > grad[5]
    assert grad[13] > grad[18]  # edges of the membrane
    # batched input = per-image embedding
    both = np.asarray(em.structure_embedding(jnp.stack([jnp.asarray(img), jnp.asarray(img.T)])))
    np.testing.assert_allclose(both[0], emb, atol=1e-12)
    np.testing.assert_allclose(both[1], emb.transpose(1, 0, 2), atol=1e-12)


def test_denoiser_shapes_and_training_decreases_loss(getkey):
    T = 20
    den = em.Denoiser(T, 8)
    hr = jax.random.uniform(getkey(), (16, 8, 8), jnp.float32)
    target = em.structure_embedding(hr)
    cond = target + 0.3 * jax.random.normal(getkey(), target.shape, jnp.float32)
    params = em.init_params(den, cond[:1], jnp.ones((1,), jnp.int32), cond[:1], key=getkey())
    t = jnp.asarray([1, 5, 20])
    x_t = jax.random.normal(getkey(), cond[:3].shape, jnp.float32)
    eps = jax.jit(den.apply)(params, x_t, t, cond[:3])
    assert eps.shape == (3, 8, 8, 3)
    # zero-initialised output: the residual denoiser's clean estimate is the condition
    ab = em.linear_schedule(T).alpha_bars[t][:, None, None, None]
    np.testing.assert_allclose(
        eps, (x_t - jnp.sqrt(ab) * cond[:3]) / jnp.sqrt(1 - ab), rtol=1e-5, atol=1e-5
    )
    plain = em.Denoiser(T, 8, residual=False)
    np.testing.assert_array_equal(jax.jit(plain.apply)(params, x_t, t, cond[:3]), 0.0)
    # hence an untrained refiner returns the SR embedding from any t0
    s = em.linear_schedule(T)
    for t0 in (3, T):
        out = em.refine_embedding(den, params, s, cond[:2], t0=t0, n_steps=4, key=getkey())
        np.testing.assert_allclose(out, cond[:2], atol=2e-3)
    objective = em.DenoiserObjective(den)
    data = {"cond": cond, "target": target}
    _, hist = em.fit(
        objective,
        params,
        data,
        key=getkey(),
        steps=80,
        batch_size=8,
        optimizer=optax.adam(3e-3),
        driver=Driver(chunk=40),
    )
    losses = hist.losses
    assert np.all(np.isfinite(losses))
    assert losses[-20:].mean() < 0.85 * losses[:20].mean()
