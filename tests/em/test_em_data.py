"""Synthetic EM generator and degradations (P11): oracles from scipy / scikit-image."""

from __future__ import annotations

import dataclasses
import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import scipy.ndimage as ndi
from skimage.segmentation import find_boundaries

from jaxlab.em import (
    REGIMES,
    EMRegime,
    EMSample,
    degrade,
    gaussian_blur,
    generate_em,
    generate_em_dataset,
    render_em,
    tessellate,
    upsample_bicubic,
)

SIZE = 64
FOUR = np.array([[0, 1, 0], [1, 1, 1], [0, 1, 0]], bool)


def _crossing(labels: np.ndarray) -> np.ndarray:
    """Independent oracle: pixels with a 4-neighbour of another label (scikit-image)."""
    return find_boundaries(labels, connectivity=1, mode="thick")


@pytest.mark.parametrize("name", sorted(REGIMES))
def test_generator_labels_consistent_with_boundaries(name, getkey):
    regime = REGIMES[name]
    sample = generate_em(name, SIZE, key=getkey())
    assert isinstance(sample, EMSample)
    image, labels, bnd = (np.asarray(a) for a in sample)
    assert image.shape == labels.shape == bnd.shape == (SIZE, SIZE)
    assert image.dtype == np.float32
    assert bnd.dtype == np.float32
    assert labels.dtype == np.int32
    assert image.min() >= 0.0
    assert image.max() <= 1.0
    assert set(np.unique(bnd)) <= {0.0, 1.0}
    assert labels.min() == 1
    ids = np.unique(labels)
    assert len(ids) >= 3
    for i in ids:  # every instance is one 4-connected piece
        _, n_pieces = ndi.label(labels == i, structure=FOUR)
        assert n_pieces == 1, f"instance {i} has {n_pieces} pieces"
    crossing = _crossing(labels)
    on = bnd > 0
    # every instance change is a boundary ...
    assert np.all(on[crossing])
    # ... and boundaries are instance changes dilated to at most the max membrane thickness
    t_max = regime.membrane_thickness * (1 + 2 * regime.thickness_variation)
    dist = ndi.distance_transform_edt(~crossing)
    assert np.all(dist[on] <= t_max / 2.0 - 1.0 + 1e-6)
    assert not np.any(on[dist > t_max / 2.0])  # cell interiors carry no boundary
    # membranes are dark: the boundary pixels are darker than the cell interiors
    assert image[on].mean() < image[~on].mean() - 0.05


def test_generator_is_deterministic_per_key(getkey):
    key = getkey()
    a = generate_em("cremi_like", SIZE, key=key)
    b = generate_em("cremi_like", SIZE, key=key)
    c = generate_em("cremi_like", SIZE, key=getkey())
    for x, y in zip(a, b, strict=True):
        np.testing.assert_array_equal(np.asarray(x), np.asarray(y))
    assert not np.array_equal(np.asarray(a.image), np.asarray(c.image))


def test_dataset_vmap_equals_loop(getkey):
    key = getkey()
    data = generate_em_dataset("cremi_like", 3, SIZE, key=key)
    assert data.image.shape == (3, SIZE, SIZE)
    assert data.labels.shape == (3, SIZE, SIZE)
    for i, k in enumerate(jax.random.split(key, 3)):
        one = generate_em("cremi_like", SIZE, key=k)
        np.testing.assert_array_equal(np.asarray(data.labels[i]), np.asarray(one.labels))
        np.testing.assert_array_equal(np.asarray(data.boundaries[i]), np.asarray(one.boundaries))
        np.testing.assert_allclose(np.asarray(data.image[i]), np.asarray(one.image), atol=1e-6)


def test_render_and_tessellate_jit_vmap(getkey):
    keys = jax.random.split(getkey(), 2)
    raw = jax.vmap(lambda k: tessellate("cremi_like", SIZE, key=k))(keys)
    for i in range(2):
        np.testing.assert_array_equal(
            np.asarray(raw[i]), np.asarray(tessellate("cremi_like", SIZE, key=keys[i]))
        )
    labels = jnp.asarray(generate_em("cremi_like", SIZE, key=keys[0]).labels)
    rk = jax.random.split(getkey(), 2)
    batched = jax.jit(jax.vmap(lambda k: render_em("cremi_like", labels, key=k)))(rk)
    for i in range(2):
        one = render_em("cremi_like", labels, key=rk[i])
        np.testing.assert_allclose(np.asarray(batched.image[i]), np.asarray(one.image), atol=1e-6)
        np.testing.assert_array_equal(np.asarray(batched.boundaries[i]), np.asarray(one.boundaries))


def test_fully_jitted_path_is_consistent(getkey):
    @jax.jit
    def sample(key):
        k1, k2 = jax.random.split(key)
        return render_em("dense", tessellate("dense", SIZE, key=k1), key=k2)

    out = jax.vmap(sample)(jax.random.split(getkey(), 2))
    for labels, bnd in zip(np.asarray(out.labels), np.asarray(out.boundaries), strict=True):
        assert labels.min() >= 1
        assert np.all(bnd[_crossing(labels)] == 1.0)


def test_regimes_differ_in_density(getkey):
    keys = [getkey() for _ in range(4)]
    counts = {
        name: np.mean(
            [len(np.unique(np.asarray(generate_em(name, SIZE, key=k).labels))) for k in keys]
        )
        for name in ("noisy", "cremi_like", "dense")
    }
    # expected counts scale with the density (cells per 1000 px^2): 1.5, 2, 4.5
    assert counts["dense"] > 1.6 * counts["cremi_like"]
    assert counts["cremi_like"] > counts["noisy"]
    for name, c in counts.items():
        expected = REGIMES[name].density * SIZE**2 / 1000.0
        assert 0.5 * expected < c < 2.0 * expected, (name, c, expected)


def test_regimes_differ_in_noise(getkey):
    labels = jnp.asarray(generate_em("cremi_like", SIZE, key=getkey()).labels)
    key = getkey()
    stds = {}
    for name in ("cremi_like", "noisy"):
        regime = REGIMES[name]
        clean = render_em(dataclasses.replace(regime, noise_sigma=0.0), labels, key=key).image
        noisy = render_em(regime, labels, key=key).image
        resid = np.asarray(noisy) - np.asarray(clean)
        mid = (np.asarray(clean) > 0.15) & (np.asarray(clean) < 0.85)  # away from clipping
        # signal-dependent std sigma * sqrt(I / 0.5), I the noiseless image
        expected = regime.noise_sigma * np.sqrt(np.asarray(clean)[mid] / 0.5)
        ratio = resid[mid].std() / np.sqrt(np.mean(expected**2))
        assert 0.85 < ratio < 1.15, (name, ratio)
        stds[name] = resid[mid].std()
    assert stds["noisy"] > 2.0 * stds["cremi_like"]


def test_generator_bad_inputs(getkey):
    key = getkey()
    with pytest.raises(ValueError, match="regime"):
        generate_em("no_such_regime", SIZE, key=key)
    with pytest.raises(ValueError, match="regime"):
        generate_em({"density": 2.0}, SIZE, key=key)
    with pytest.raises(ValueError, match="size"):
        generate_em("cremi_like", 8, key=key)
    with pytest.raises(ValueError, match="size"):
        generate_em("cremi_like", 64.0, key=key)
    with pytest.raises(ValueError, match="n"):
        generate_em_dataset("cremi_like", 0, SIZE, key=key)
    with pytest.raises(ValueError, match="EMRegime.density"):
        EMRegime(density=-1.0)
    with pytest.raises(ValueError, match="EMRegime.membrane_contrast"):
        EMRegime(membrane_contrast=math.nan)
    with pytest.raises(ValueError, match="EMRegime.noise_sigma"):
        EMRegime(noise_sigma="high")
    with pytest.raises(ValueError, match="labels"):
        render_em("cremi_like", jnp.zeros((SIZE, SIZE), jnp.int32), key=key)
    with pytest.raises(ValueError, match="labels"):
        render_em("cremi_like", jnp.ones((SIZE, SIZE), jnp.float32), key=key)


# ---------------------------------------------------------------- degradations


@pytest.mark.parametrize("factor", [2, 4])
def test_degrade_upsample_shapes(factor, getkey):
    image = jnp.asarray(np.random.default_rng(0).random((SIZE, SIZE)), jnp.float32)
    low = degrade(image, factor, key=getkey())
    assert low.shape == (SIZE // factor, SIZE // factor)
    assert low.dtype == jnp.float32
    assert float(low.min()) >= 0.0
    assert float(low.max()) <= 1.0
    up = upsample_bicubic(low, factor)
    assert up.shape == (SIZE, SIZE)
    assert up.dtype == jnp.float32
    assert float(up.min()) >= 0.0
    assert float(up.max()) <= 1.0


@pytest.mark.parametrize("factor", [2, 4])
def test_degrade_constant_image(factor, getkey):
    const = jnp.full((256, 256), 0.4, jnp.float32)
    exact = degrade(const, factor, key=getkey(), noise_sigma=0.0)
    np.testing.assert_allclose(np.asarray(exact), 0.4, atol=1e-6)
    noisy = np.asarray(degrade(const, factor, key=getkey(), noise_sigma=0.05), np.float64)
    n = noisy.size
    assert abs(noisy.mean() - 0.4) < 4 * 0.05 / math.sqrt(n)
    # sample std of n Gaussians: relative standard error ~ 1 / sqrt(2 n)
    assert abs(noisy.std() / 0.05 - 1.0) < 4 / math.sqrt(2 * n)


def test_degrade_is_blur_then_block_mean(getkey):
    rng = np.random.default_rng(1)
    image = rng.random((32, 32)).astype(np.float32)
    # no blur: the block mean
    low = degrade(jnp.asarray(image), 4, key=getkey(), blur_sigma=0.0, noise_sigma=0.0)
    np.testing.assert_allclose(
        np.asarray(low), image.reshape(8, 4, 8, 4).mean(axis=(1, 3)), atol=1e-6
    )
    # default blur sigma = factor / 2, compared with scipy's Gaussian filter (mirror padding)
    low = degrade(jnp.asarray(image), 2, key=getkey(), noise_sigma=0.0)
    ref = ndi.gaussian_filter(image.astype(np.float64), 1.0, mode="mirror", truncate=3.0)
    np.testing.assert_allclose(
        np.asarray(low), ref.reshape(16, 2, 16, 2).mean(axis=(1, 3)), atol=1e-5
    )


@pytest.mark.parametrize("sigma", [0.7, 2.0])
def test_gaussian_blur_matches_scipy(sigma):
    image = np.random.default_rng(2).random((20, 24))
    ours = gaussian_blur(jnp.asarray(image, jnp.float32), sigma)
    radius = math.ceil(3 * sigma)
    ref = ndi.gaussian_filter(image, sigma, mode="mirror", truncate=radius / sigma)
    np.testing.assert_allclose(np.asarray(ours), ref, atol=1e-5)


def test_degrade_jit_vmap_equals_loop(getkey):
    images = jnp.asarray(np.random.default_rng(3).random((3, 32, 32)), jnp.float32)
    keys = jax.random.split(getkey(), 3)
    batched = jax.jit(jax.vmap(lambda im, k: degrade(im, 2, key=k)))(images, keys)
    for i in range(3):
        np.testing.assert_allclose(
            np.asarray(batched[i]), np.asarray(degrade(images[i], 2, key=keys[i])), atol=1e-6
        )


@pytest.mark.parametrize("factor", [2, 4])
def test_bicubic_recovers_smooth_image(factor, getkey):
    y, x = np.mgrid[0:SIZE, 0:SIZE] + 0.5
    smooth = 0.5 + 0.3 * np.sin(2 * np.pi * x / 32) * np.cos(2 * np.pi * y / 40)
    low = degrade(
        jnp.asarray(smooth, jnp.float32), factor, key=getkey(), blur_sigma=0.0, noise_sigma=0.0
    )
    up = np.asarray(upsample_bicubic(low, factor))
    inner = slice(factor * 2, SIZE - factor * 2)  # away from the edge extrapolation
    err = up[inner, inner] - smooth[inner, inner]
    assert np.sqrt(np.mean(err**2)) < (0.005 if factor == 2 else 0.015)
    # and far better than nearest-neighbour upsampling
    nearest = np.repeat(np.repeat(np.asarray(low), factor, 0), factor, 1)
    nn_err = nearest[inner, inner] - smooth[inner, inner]
    assert np.sqrt(np.mean(err**2)) < 0.5 * np.sqrt(np.mean(nn_err**2))


def test_degrade_upsample_bad_inputs(getkey):
    key = getkey()
    image = jnp.zeros((SIZE, SIZE), jnp.float32)
    for bad in (3, 2.0, 0, True):
        with pytest.raises(ValueError, match="factor"):
            degrade(image, bad, key=key)
        with pytest.raises(ValueError, match="factor"):
            upsample_bicubic(image, bad)
    with pytest.raises(ValueError, match="divisible"):
        degrade(jnp.zeros((66, 66), jnp.float32), 4, key=key)
    with pytest.raises(ValueError, match="image"):
        degrade(image.at[3, 3].set(jnp.nan), 2, key=key)
    with pytest.raises(ValueError, match="image"):
        degrade(jnp.zeros((2, SIZE, SIZE), jnp.float32), 2, key=key)
    with pytest.raises(ValueError, match="image"):
        degrade(jnp.zeros((SIZE, SIZE), jnp.int32), 2, key=key)
    with pytest.raises(ValueError, match="noise_sigma"):
        degrade(image, 2, key=key, noise_sigma=-0.1)
    with pytest.raises(ValueError, match="blur_sigma"):
        degrade(image, 2, key=key, blur_sigma=math.inf)
    with pytest.raises(ValueError, match="low"):
        upsample_bicubic(jnp.full((8, 8), jnp.nan, jnp.float32), 2)
