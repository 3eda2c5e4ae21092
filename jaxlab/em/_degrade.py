"""Low-resolution EM acquisition model: anti-alias blur, area downsampling, noise (P11).

The super-resolution task of P11 maps a low-resolution EM image back to the
high-resolution one. `degrade` simulates the low-resolution acquisition
(Gaussian point-spread blur, integration over `factor x factor` pixel blocks,
additive read noise) and `upsample_bicubic` is the classical baseline inverse.
Pixel centres follow the half-pixel convention of `jax.image.resize`, so low-res
pixel `i` covers high-res pixels `[f i, f i + f)` in both functions.

Paper: P11 (joint EM super-resolution and neuron segmentation; degradations x2 / x4).
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
from jaxtyping import Array, Float, PRNGKeyArray

from jaxlab._core import as_array, check_real

__all__ = ["SUPPORTED_FACTORS", "gaussian_blur", "degrade", "upsample_bicubic"]

SUPPORTED_FACTORS = (2, 4)
"""Down/up-sampling factors of the P11 degradation settings."""


def _check_factor(factor) -> int:
    if isinstance(factor, bool) or not isinstance(factor, int) or factor not in SUPPORTED_FACTORS:
        raise ValueError(f"factor: expected one of {SUPPORTED_FACTORS}, received {factor!r}")
    return int(factor)


def _check_image(name: str, image) -> Array:
    return as_array(name, image, ndim=2, dtype=jnp.floating, finite=True, nonempty=True)


def _gaussian_kernel(sigma: float) -> Array:
    radius = max(1, math.ceil(3.0 * sigma))
    x = jnp.arange(-radius, radius + 1, dtype=jnp.float32)
    k = jnp.exp(-0.5 * (x / jnp.float32(sigma)) ** 2)
    return k / jnp.sum(k)


def gaussian_blur(image: Float[Array, "H W"], sigma: float) -> Float[Array, "H W"]:
    """Separable Gaussian blur with reflect padding (a constant image stays constant).

    **Arguments:**

    - `image`: float array `[H, W]`.
    - `sigma`: standard deviation in pixels (static Python float); `0` returns the input.

    **Returns:** blurred float32 array `[H, W]`.
    """
    sigma = check_real("sigma", sigma, low=0.0)
    image = _check_image("image", image).astype(jnp.float32)
    if sigma == 0.0:
        return image
    k = _gaussian_kernel(sigma)
    r = (k.shape[0] - 1) // 2
    # reflect padding needs the image to be wider than the kernel radius; `edge` is the
    # fallback for tiny images (both keep constants exact).
    mode = "reflect" if min(image.shape) > r else "edge"
    padded = jnp.pad(image, ((r, r), (r, r)), mode=mode)
    rows = jax.vmap(lambda row: jnp.convolve(row, k, mode="valid"))(padded)
    return jax.vmap(lambda col: jnp.convolve(col, k, mode="valid"), in_axes=1, out_axes=1)(rows)


def degrade(
    image: Float[Array, "S S"],
    factor: int,
    *,
    key: PRNGKeyArray,
    blur_sigma: float | None = None,
    noise_sigma: float = 0.01,
) -> Float[Array, "S/f S/f"]:
    """Simulate a low-resolution acquisition of a high-resolution EM image.

    Gaussian anti-alias blur (sigma `blur_sigma`, default `factor / 2`), area
    downsampling (mean over `factor x factor` blocks), additive Gaussian noise of
    std `noise_sigma`, clipped to `[0, 1]`. jit- and vmap-able (with `factor`,
    `blur_sigma`, `noise_sigma` static).

    **Arguments:**

    - `image`: float array `[H, W]` in `[0, 1]`; `H` and `W` divisible by `factor`.
    - `factor`: downsampling factor, 2 or 4.
    - `key`: PRNG key for the noise.
    - `blur_sigma`: anti-alias blur std in high-res pixels (`None` -> `factor / 2`).
    - `noise_sigma`: noise std (`0` -> no noise).

    **Returns:** float32 array `[H / factor, W / factor]` in `[0, 1]`.

    Paper: P11 (x2 and x4 degradation settings).
    """
    factor = _check_factor(factor)
    image = _check_image("image", image)
    h, w = image.shape
    if h % factor or w % factor:
        raise ValueError(f"image: shape {tuple(image.shape)} is not divisible by factor {factor}")
    sigma = factor / 2.0 if blur_sigma is None else check_real("blur_sigma", blur_sigma, low=0.0)
    noise_sigma = check_real("noise_sigma", noise_sigma, low=0.0)
    blurred = gaussian_blur(image, sigma)
    low = blurred.reshape(h // factor, factor, w // factor, factor).mean(axis=(1, 3))
    noise = jax.random.normal(key, low.shape, jnp.float32) * jnp.float32(noise_sigma)
    return jnp.clip(low + noise, 0.0, 1.0)


def upsample_bicubic(low: Float[Array, "s s"], factor: int) -> Float[Array, "s*f s*f"]:
    """Bicubic upsampling (`jax.image.resize`, method "cubic"), clipped to `[0, 1]`.

    **Arguments:**

    - `low`: float array `[h, w]`.
    - `factor`: upsampling factor, 2 or 4.

    **Returns:** float32 array `[h * factor, w * factor]`.

    Paper: P11 (bicubic baseline).
    """
    factor = _check_factor(factor)
    low = _check_image("low", low)
    h, w = low.shape
    up = jax.image.resize(jnp.asarray(low, jnp.float32), (h * factor, w * factor), "cubic")
    return jnp.clip(up, 0.0, 1.0)
