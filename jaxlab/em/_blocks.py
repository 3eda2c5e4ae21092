"""Building blocks shared by the U-Nets and the diffusion denoiser of `jaxlab.em` (P11).

The pixel shuffle (sub-pixel convolution, Shi et al. 2016) and its inverse, and the
two-convolution block with an optional per-sample bias. Channels-last feature maps
`(..., H, W, C)`.
"""

from __future__ import annotations

from typing import Any

import flax.linen as nn
import jax
import jax.numpy as jnp

from jaxlab._core import as_array, check_positive_int

__all__ = ["pixel_shuffle", "pixel_unshuffle"]


def pixel_shuffle(x: jax.Array, factor: int) -> jax.Array:
    """Rearrange channels into space (sub-pixel convolution, Shi et al. 2016).

    **Arguments:** `x` `(..., H, W, C * factor**2)`; `factor` a positive int.

    **Returns:** `(..., H * factor, W * factor, C)` with
    `out[..., h * r + i, w * r + j, c] = x[..., h, w, c * r * r + i * r + j]`
    (the PyTorch `PixelShuffle` channel order, written channels-last).

    **Raises:** `ValueError` naming `x` (not an array of rank >= 3, empty, NaN/inf, a
    channel count not divisible by `factor**2`) or `factor`.
    """
    r = check_positive_int("factor", factor)
    x = as_array("x", x, finite=True, nonempty=True)
    if x.ndim < 3:
        raise ValueError(f"x: expected (..., H, W, C), received shape {x.shape}")
    *lead, h, w, cr = x.shape
    if cr % (r * r):
        raise ValueError(f"x: channel count {cr} is not divisible by factor**2 = {r * r}")
    c = cr // (r * r)
    y = x.reshape(*lead, h, w, c, r, r)
    n = len(lead)
    y = jnp.moveaxis(y, (n, n + 1, n + 2, n + 3, n + 4), (n, n + 2, n + 4, n + 1, n + 3))
    return y.reshape(*lead, h * r, w * r, c)


def pixel_unshuffle(x: jax.Array, factor: int) -> jax.Array:
    """Inverse of `pixel_shuffle`: `(..., H * r, W * r, C)` -> `(..., H, W, C * r**2)`.

    **Raises:** `ValueError` naming `x` (as `pixel_shuffle`; H, W not divisible by
    `factor`) or `factor`."""
    r = check_positive_int("factor", factor)
    x = as_array("x", x, finite=True, nonempty=True)
    if x.ndim < 3:
        raise ValueError(f"x: expected (..., H, W, C), received shape {x.shape}")
    *lead, hr, wr, c = x.shape
    if hr % r or wr % r:
        raise ValueError(f"x: spatial shape {(hr, wr)} is not divisible by factor {r}")
    n = len(lead)
    y = x.reshape(*lead, hr // r, r, wr // r, r, c)
    y = jnp.moveaxis(y, (n, n + 2, n + 4, n + 1, n + 3), (n, n + 1, n + 2, n + 3, n + 4))
    return y.reshape(*lead, hr // r, wr // r, c * r * r)


class _ConvBlock(nn.Module):
    """Two 3x3 convolutions with SiLU; an optional per-sample bias (time embedding)."""

    features: int
    param_dtype: Any = jnp.float32

    @nn.compact
    def __call__(self, x, bias=None):
        dt = self.param_dtype
        x = nn.silu(nn.Conv(self.features, (3, 3), dtype=dt, param_dtype=dt)(x))
        if bias is not None:
            x = x + bias
        return nn.silu(nn.Conv(self.features, (3, 3), dtype=dt, param_dtype=dt)(x))
