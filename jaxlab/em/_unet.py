"""Shared-encoder U-Nets for joint EM super-resolution and boundary segmentation (P11).

One U-Net encoder reads the low-resolution (LR) image; an SR decoder turns its
features into the high-resolution (HR) image with a pixel shuffle (sub-pixel
convolution, Shi et al. 2016); a segmentation decoder turns the same features into
HR boundary logits, optionally guided by a structural prior (the SR embedding,
or the partial-diffusion refinement of it; see `jaxlab.em.refine_embedding`).
The joint model built from these parts is `jaxlab.em.JointSRSeg`; the SR-only and
segmentation-only baselines are `SRNet` and `SegNet`.

Images are `(B, H, W)` float arrays (a leading batch axis is optional);
feature maps are channels-last `(B, H, W, C)`.
"""

from __future__ import annotations

from typing import Any

import flax.linen as nn
import jax
import jax.numpy as jnp

from ._blocks import _ConvBlock, pixel_shuffle
from ._degrade import _check_factor

__all__ = [
    "UNetEncoder",
    "UNetDecoder",
    "SRDecoder",
    "SegDecoder",
    "SRNet",
    "SegNet",
]


def _check_image(name: str, x: Any, multiple: int) -> None:
    if not hasattr(x, "shape") or x.ndim not in (2, 3):
        raise ValueError(
            f"{name}: expected an (H, W) or (B, H, W) image, received "
            f"{getattr(x, 'shape', type(x).__name__)}"
        )
    h, w = x.shape[-2:]
    if h % multiple or w % multiple or h < multiple or w < multiple:
        raise ValueError(
            f"{name}: spatial shape {(h, w)} must be a positive multiple of "
            f"{multiple} (2 ** (levels - 1))"
        )


class UNetEncoder(nn.Module):
    """U-Net encoder: a conv block per level, strided-conv downsampling between levels.

    **Arguments (call):** `x` `(B, H, W, C_in)` with H, W multiples of `2**(L-1)`.

    **Returns:** the list of `L` feature maps, level `l` of shape
    `(B, H / 2**l, W / 2**l, features[l])`; the last one is the bottleneck.
    """

    features: tuple[int, ...] = (16, 32)
    param_dtype: Any = jnp.float32

    @nn.compact
    def __call__(self, x):
        dt = self.param_dtype
        skips = []
        h = x
        for i, f in enumerate(self.features):
            if i > 0:
                h = nn.silu(nn.Conv(f, (3, 3), strides=2, dtype=dt, param_dtype=dt)(h))
            h = _ConvBlock(f, dt)(h)
            skips.append(h)
        return skips


class UNetDecoder(nn.Module):
    """U-Net decoder: learned 2x upsampling (1x1 conv + pixel shuffle), skip concat, block.

    **Arguments (call):** the encoder's list of feature maps.

    **Returns:** `(B, H, W, features[0])` at the encoder's input resolution.
    """

    features: tuple[int, ...] = (16, 32)
    param_dtype: Any = jnp.float32

    @nn.compact
    def __call__(self, skips):
        dt = self.param_dtype
        h = skips[-1]
        for f, s in zip(reversed(self.features[:-1]), reversed(skips[:-1]), strict=True):
            h = pixel_shuffle(nn.Conv(4 * f, (1, 1), dtype=dt, param_dtype=dt)(h), 2)
            h = _ConvBlock(f, dt)(jnp.concatenate([h, s], axis=-1))
        return h


class SRDecoder(nn.Module):
    """Super-resolution head: U-Net decoder -> conv -> pixel shuffle x`factor` -> residual.

    The residual is added to the bicubic upsampling of the LR input (global skip).

    **Arguments (call):** encoder features; `lr` `(B, h, w)`.

    **Returns:** the SR image `(B, h * factor, w * factor)`.
    """

    factor: int = 2
    features: tuple[int, ...] = (16, 32)
    param_dtype: Any = jnp.float32

    @nn.compact
    def __call__(self, skips, lr):
        dt, f0, r = self.param_dtype, self.features[0], self.factor
        h = UNetDecoder(self.features, dt)(skips)
        h = pixel_shuffle(nn.Conv(f0 * r * r, (3, 3), dtype=dt, param_dtype=dt)(h), r)
        h = nn.silu(nn.Conv(f0, (3, 3), dtype=dt, param_dtype=dt)(h))
        res = nn.Conv(1, (3, 3), dtype=dt, param_dtype=dt)(h)[..., 0]
        b, hh, ww = lr.shape
        base = jax.image.resize(lr, (b, hh * r, ww * r), method="cubic")
        return base + res


class SegDecoder(nn.Module):
    """Boundary head: U-Net decoder -> (pixel shuffle x`factor`) -> concat prior -> logits.

    **Arguments (call):** encoder features; optional `prior` `(B, H, W, C_p)` at the
    output resolution (the structural prior of P11).

    **Returns:** boundary logits `(B, H, W)` at `factor` times the encoder resolution.
    """

    factor: int = 1
    features: tuple[int, ...] = (16, 32)
    param_dtype: Any = jnp.float32

    @nn.compact
    def __call__(self, skips, prior=None):
        dt, f0, r = self.param_dtype, self.features[0], self.factor
        h = UNetDecoder(self.features, dt)(skips)
        if r > 1:
            h = pixel_shuffle(nn.Conv(f0 * r * r, (3, 3), dtype=dt, param_dtype=dt)(h), r)
        if prior is not None:
            h = jnp.concatenate([h, jnp.asarray(prior, dt)], axis=-1)
        h = _ConvBlock(f0, dt)(h)
        return nn.Conv(1, (1, 1), dtype=dt, param_dtype=dt)(h)[..., 0]


def _batched(x, dt):
    x = jnp.asarray(x, dt)
    return (x[None], True) if x.ndim == 2 else (x, False)


class SRNet(nn.Module):
    """SR-only baseline: encoder + SR decoder. `(B, h, w)` LR -> `(B, h*f, w*f)` SR."""

    factor: int = 2
    features: tuple[int, ...] = (16, 32)
    param_dtype: Any = jnp.float32

    @nn.compact
    def __call__(self, lr):
        _check_factor(self.factor)
        _check_image("lr", lr, 2 ** (len(self.features) - 1))
        x, single = _batched(lr, self.param_dtype)
        skips = UNetEncoder(self.features, self.param_dtype, name="encoder")(x[..., None])
        sr = SRDecoder(self.factor, self.features, self.param_dtype, name="sr_decoder")(skips, x)
        return sr[0] if single else sr


class SegNet(nn.Module):
    """Segmentation-only baseline: U-Net on an HR image -> boundary logits, same shape."""

    features: tuple[int, ...] = (16, 32, 64)
    param_dtype: Any = jnp.float32

    @nn.compact
    def __call__(self, image):
        _check_image("image", image, 2 ** (len(self.features) - 1))
        x, single = _batched(image, self.param_dtype)
        skips = UNetEncoder(self.features, self.param_dtype, name="encoder")(x[..., None])
        logits = SegDecoder(1, self.features, self.param_dtype, name="seg_decoder")(skips)
        return logits[0] if single else logits
