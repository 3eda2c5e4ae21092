"""`ImageEncoder`: image features for routers, from a small convolutional autoencoder.

A router that sees the image should not see what any pool member answered; its image
features come from an encoder trained without labels: a convolutional autoencoder on the
train images (the bottleneck is the feature). Trained by `ImageEncoderFitStep` /
`fit_image_encoder` through `jaxlab.run_steps`; `encode_images` maps many images.
"""

from __future__ import annotations

from typing import Any

import equinox as eqx
import jax
import jax.numpy as jnp
import optax
from jaxtyping import Array, Float

from jaxlab._core import (
    AbstractStep,
    Driver,
    StepLoop,
    as_array,
    check_positive_int,
    driver_for,
)

from ._train import descend, fit_params, init_params
from ._vqa import VQAView, _check_image_batch, _image_values

__all__ = ["ImageEncoder", "ImageEncoderFitStep", "fit_image_encoder", "encode_images"]


class ImageEncoder(eqx.Module):
    """A convolutional autoencoder whose bottleneck is a (D,) feature of an image.

    The input is the image at 32x32 colour (`VQAView(32)`: 2x2 block means), centred by its
    per-channel mean and scaled by 4 (the shape, not the near-uniform background, carries
    the signal). Encoder: three 3x3 stride-2 convolutions (8, 16, 16 channels, leaky ReLU)
    to 4x4, flattened, a linear map to `feature_dim`. Decoder: a linear map back to
    16x4x4 and three 4x4 stride-2 transposed convolutions to the 3x32x32 centred image.
    Trained on mean squared reconstruction error (`fit_image_encoder`).

    **Arguments:** `feature_dim` D; `image_size` (64 for easy-VQA); `key` (keyword-only).

    `encode(image)`: `image` (image_size, image_size, 3) uint8 or float in [0, 1] -> (D,)
    float32. `model(image)`: the reconstruction (3, 32, 32) of the centred image.
    """

    view: VQAView = eqx.field(static=True)
    encoder: tuple[eqx.nn.Conv2d, ...]
    to_feature: eqx.nn.Linear
    from_feature: eqx.nn.Linear
    decoder: tuple[eqx.nn.ConvTranspose2d, ...]

    def __init__(self, feature_dim: int = 16, *, image_size: int = 64, key: jax.Array):
        feature_dim = check_positive_int("feature_dim", feature_dim)
        image_size = check_positive_int("image_size", image_size)
        if image_size % 32:
            raise ValueError(f"image_size: expected a multiple of 32, received {image_size}")
        self.view = VQAView(32, image_size=image_size)
        k = jax.random.split(key, 8)
        f32 = jnp.float32
        chans = (3, 8, 16, 16)
        self.encoder = tuple(
            eqx.nn.Conv2d(a, b, 3, stride=2, padding=1, dtype=f32, key=k[i])
            for i, (a, b) in enumerate(zip(chans[:-1], chans[1:], strict=True))
        )
        self.to_feature = eqx.nn.Linear(16 * 4 * 4, feature_dim, dtype=f32, key=k[3])
        self.from_feature = eqx.nn.Linear(feature_dim, 16 * 4 * 4, dtype=f32, key=k[4])
        back = chans[::-1]
        self.decoder = tuple(
            eqx.nn.ConvTranspose2d(a, b, 4, stride=2, padding=1, dtype=f32, key=k[5 + i])
            for i, (a, b) in enumerate(zip(back[:-1], back[1:], strict=True))
        )

    def target(self, image) -> Float[Array, "c h w"]:
        """The centred, scaled 32x32 image the autoencoder reconstructs."""
        x = jnp.moveaxis(self.view.apply(image), -1, 0)
        return 4.0 * (x - jnp.mean(x, axis=(1, 2), keepdims=True))

    def encode(self, image) -> Float[Array, " D"]:
        """The (D,) bottleneck feature of one image."""
        x = self.target(image)
        for conv in self.encoder:
            x = jax.nn.leaky_relu(conv(x), 0.1)
        return self.to_feature(x.reshape(-1))

    def __call__(self, image) -> Float[Array, "c h w"]:
        x = self.from_feature(self.encode(image)).reshape(16, 4, 4)
        for i, deconv in enumerate(self.decoder):
            x = deconv(x)
            if i < len(self.decoder) - 1:
                x = jax.nn.leaky_relu(x, 0.1)
        return x


class ImageEncoderFitStep(AbstractStep):
    """One optimiser step of mean squared reconstruction error on `batch_size` random
    images (drawn with replacement from the step's key).

    **Arguments:** `images` (I, H, W, 3) uint8; `static` (the encoder's non-array part);
    `optimizer` (optax); `batch_size`. Aux: `loss`.
    """

    images: Array
    static: Any = eqx.field(static=True)
    optimizer: optax.GradientTransformation = eqx.field(static=True)
    batch_size: int = eqx.field(static=True)

    def init(self, model, key):
        del key
        return init_params(self.optimizer, model)

    def step(self, state, key):
        idx = jax.random.randint(key, (self.batch_size,), 0, self.images.shape[0])
        imgs = self.images[idx]

        def loss_fn(enc):
            err = jax.vmap(enc)(imgs) - jax.vmap(enc.target)(imgs)
            return jnp.mean(err**2)

        state, loss, _ = descend(self.static, self.optimizer, state, loss_fn)
        return state, {"loss": loss}


def _check_images(images, size):
    images = _image_values(as_array("images", images, ndim=4, nonempty=True))
    if tuple(images.shape[1:]) != (size, size, 3):
        raise ValueError(
            f"images: expected shape (I, {size}, {size}, 3), received {tuple(images.shape)}"
        )
    return images


def fit_image_encoder(
    encoder: ImageEncoder,
    images,
    *,
    key: jax.Array,
    steps: int = 1000,
    batch_size: int = 32,
    optimizer: optax.GradientTransformation | None = None,
    driver: Driver | None = None,
):
    """Train `encoder` to reconstruct `images` with `ImageEncoderFitStep` and `run_steps`.

    **Arguments:** `encoder`; `images` (I, H, W, 3) uint8; `key` (minibatches); `steps`;
    `batch_size`; `optimizer` (default `optax.adam(3e-3)`); `driver` a `jaxlab.Driver`
    (chunk, 50 here when left at the default; checkpointer; progress; `StepLoop()` unless
    it names a loop).

    **Returns:** `(trained_encoder, history)`.
    """
    if not isinstance(encoder, ImageEncoder):
        raise ValueError(f"encoder: expected an ImageEncoder, received {type(encoder).__name__}")
    images = _check_images(images, encoder.view.image_size)
    static = eqx.partition(encoder, eqx.is_inexact_array)[1]
    step = ImageEncoderFitStep(
        images=images,
        static=static,
        optimizer=optax.adam(3e-3) if optimizer is None else optimizer,
        batch_size=_check_image_batch(batch_size, images),
    )
    return fit_params(
        step,
        encoder,
        key=key,
        steps=steps,
        driver=driver_for(driver, chunk=50, loop=StepLoop()),
    )


@eqx.filter_jit
def _encode_all(encoder, images, batch_size):
    return jax.lax.map(encoder.encode, images, batch_size=batch_size)


def encode_images(encoder: ImageEncoder, images, *, batch_size: int = 256) -> jax.Array:
    """The `ImageEncoder` features of many images, `batch_size` at a time.

    **Arguments:** `encoder`; `images` (I, H, W, 3) uint8 or float in [0, 1]; `batch_size`.

    **Returns:** (I, D) float32 features.
    """
    if not isinstance(encoder, ImageEncoder):
        raise ValueError(f"encoder: expected an ImageEncoder, received {type(encoder).__name__}")
    images = _check_images(images, encoder.view.image_size)
    return _encode_all(encoder, images, check_positive_int("batch_size", batch_size))
