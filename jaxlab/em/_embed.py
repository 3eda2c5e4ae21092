"""Embedding spaces of the partial-diffusion refiner (P11): learned or hand-made.

P11's refiner starts from a partially noised "SR embedding" and denoises it towards
the "HR embedding": features of the super-resolved and of the real high-resolution
image in one feature space, which then guide the segmentation decoder. In the paper
these are the learned features of the network. Two strategies give that space:

- `LearnedEmbedding` (default): an `Embedder` head on the joint model's shared
  U-Net encoder, applied to an HR-sized image, `E(image) = head(encoder(image))`,
  standardised per image and channel (zero mean, unit variance over the pixels: the
  scale the diffusion schedule assumes). It is trained with the joint model (the
  segmentation loss flows through the prior it produces into the head and the shared
  encoder); the refiner's condition E(SR) and target E(HR) come from the same frozen
  copy of it (see `jaxlab.em.embed_images`).
- `StructureEmbedding`: the hand-made, parameter-free `structure_embedding`
  (standardised intensity, ridge and gradient magnitude); an ablation.

A strategy is passed to `jaxlab.em.JointSRSeg(embedding=...)`; it builds the head
(`head`) and applies it (`embed`).
"""

from __future__ import annotations

import abc
import dataclasses
from typing import Any

import flax.linen as nn
import jax
import jax.numpy as jnp

from jaxlab._core import check_positive_int

from ._diffusion import _standardise, structure_embedding
from ._unet import UNetDecoder

__all__ = ["AbstractEmbedding", "LearnedEmbedding", "StructureEmbedding", "Embedder"]


class Embedder(nn.Module):
    """Learned embedding head on U-Net encoder features (P11's SR / HR embedding).

    U-Net decoder over the encoder's feature maps of an image, a 1x1 convolution to
    `channels`, each channel standardised per image over the pixels.

    **Arguments (call):** the encoder's list of feature maps of an image `(B, H, W)`
    (level 0 at `(B, H, W, features[0])`).

    **Returns:** the embedding `(B, H, W, channels)`, per image and channel of zero
    mean and unit variance (up to the 1e-6 regulariser).
    """

    channels: int = 4
    features: tuple[int, ...] = (16, 32)
    param_dtype: Any = jnp.float32

    @nn.compact
    def __call__(self, skips):
        dt = self.param_dtype
        h = UNetDecoder(self.features, dt)(skips)
        e = nn.Conv(self.channels, (1, 1), dtype=dt, param_dtype=dt)(h)
        return _standardise(e, axes=(-3, -2))


class AbstractEmbedding(abc.ABC):
    """Strategy for the refiner's embedding space (a hashable, frozen object).

    `channels`: embedding channels C_e; `head(features, param_dtype)`: the flax module
    the strategy needs beside the shared encoder (None if none); `embed(image, encoder,
    head)`: the embedding `(B, H, W, C_e)` of images `(B, H, W)`.
    """

    @property
    @abc.abstractmethod
    def channels(self) -> int:
        """Embedding channels C_e."""

    @abc.abstractmethod
    def head(self, features: tuple[int, ...], param_dtype: Any) -> nn.Module | None:
        """The module this strategy adds to the joint model (None: no parameters)."""

    @abc.abstractmethod
    def embed(self, image: jax.Array, encoder: nn.Module, head: nn.Module | None) -> jax.Array:
        """Embedding `(B, H, W, C_e)` of `image` `(B, H, W)` (bound modules of the model)."""


@dataclasses.dataclass(frozen=True)
class LearnedEmbedding(AbstractEmbedding):
    """Learned features (P11): `Embedder(channels)` on the joint model's shared encoder.

    **Arguments:** `channels` embedding channels C_e (default 4).
    """

    channels: int = 4  # type: ignore[assignment]  # a field in place of the abstract property

    def __post_init__(self):
        check_positive_int("channels", self.channels)

    def head(self, features: tuple[int, ...], param_dtype: Any) -> nn.Module | None:
        """An `Embedder` of `channels` channels over encoder widths `features`."""
        return Embedder(self.channels, tuple(features), param_dtype)

    def embed(self, image: jax.Array, encoder: nn.Module, head: nn.Module | None) -> jax.Array:
        """`head(encoder(image[..., None]))`: `(B, H, W)` -> `(B, H, W, channels)`."""
        if head is None:
            raise ValueError("head: LearnedEmbedding needs its Embedder head, received None")
        return head(encoder(image[..., None]))


@dataclasses.dataclass(frozen=True)
class StructureEmbedding(AbstractEmbedding):
    """Hand-made embedding `structure_embedding(image, sigma=sigma)` (3 channels; no
    parameters): the ablation of the learned embedding.

    **Arguments:** `sigma` Gaussian smoothing (pixels) before the ridge and gradient maps.
    """

    sigma: float = 1.0

    @property
    def channels(self) -> int:
        """Embedding channels C_e (3: intensity, ridge, gradient magnitude)."""
        return 3

    def head(self, features: tuple[int, ...], param_dtype: Any) -> nn.Module | None:
        """None: the hand-made embedding has no parameters."""
        del features, param_dtype
        return None

    def embed(self, image: jax.Array, encoder: nn.Module, head: nn.Module | None) -> jax.Array:
        """`structure_embedding(image)` (`encoder` and `head` unused)."""
        del encoder, head
        return structure_embedding(image, sigma=self.sigma).astype(image.dtype)
