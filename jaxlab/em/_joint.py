"""The P11 joint model: one shared encoder, SR and segmentation decoders, learned embedding.

One U-Net encoder reads the LR image; the SR decoder turns its features into the HR
image; the segmentation decoder turns the same features into HR boundary logits,
guided by a structural prior at HR. The prior is the SR embedding E(SR) of the
model's embedding strategy (by default learned features: an `Embedder` head on the
same shared encoder, applied to the SR image), or one passed in (the partial-diffusion
refinement of E(SR)). Training both decoders through the shared encoder makes
segmentation an auxiliary task for SR, as in P11 (joint EM super-resolution and
neuron segmentation).
"""

from __future__ import annotations

from typing import Any, NamedTuple

import flax.linen as nn
import jax
import jax.numpy as jnp

from jaxlab._core import short_repr

from ._degrade import _check_factor
from ._embed import AbstractEmbedding, LearnedEmbedding
from ._unet import SegDecoder, SRDecoder, UNetEncoder, _batched, _check_image

__all__ = ["JointSRSeg", "JointOutput"]


class JointOutput(NamedTuple):
    """Outputs of `JointSRSeg`: SR image `(B, H, W)`, SR embedding E(SR) `(B, H, W, C_e)`
    (the model's embedding of its SR image) and boundary logits `(B, H, W)`."""

    __repr__ = short_repr  # arrays as dtype[shape], long sequences cut

    sr: jax.Array
    embedding: jax.Array
    boundary_logits: jax.Array


class JointSRSeg(nn.Module):
    """P11 joint model: one shared encoder on the LR image, an SR decoder and a
    segmentation decoder producing HR boundary logits guided by a structural prior.

    The default prior is the SR embedding E(SR) of the `embedding` strategy, computed
    from the SR image with its gradient stopped (the segmentation loss does not push
    the SR image; the tasks couple through the shared encoder). With the default
    `LearnedEmbedding`, E = `Embedder` head on the same shared encoder applied to the
    HR-sized image, so the segmentation loss trains the head and the encoder through
    the prior; with `StructureEmbedding`, E is the hand-made `structure_embedding`.
    Pass `prior=` to use another prior, e.g. the partial-diffusion refinement of E(SR)
    (`jaxlab.em.refine_embedding`). `model.apply(params, images, method="embed")` is
    E of any HR-sized images (see `jaxlab.em.embed_images` for the frozen version).

    **Fields:** `factor` (2 or 4), `features` U-Net widths per level, `embedding` an
    `AbstractEmbedding` (default `LearnedEmbedding()`), `param_dtype`.

    **Arguments (call):** `lr` `(B, h, w)` (or `(h, w)`), `prior` `(B, H, W, C_e)` or None.

    **Returns:** `JointOutput(sr, embedding, boundary_logits)` at `H = h * factor`.

    Paper: P11 (joint EM super-resolution and segmentation with a partial-diffusion refiner).
    """

    factor: int = 2
    features: tuple[int, ...] = (16, 32)
    embedding: AbstractEmbedding = LearnedEmbedding()
    param_dtype: Any = jnp.float32

    def setup(self):
        dt = self.param_dtype
        if not isinstance(self.embedding, AbstractEmbedding):
            raise ValueError(
                f"embedding: expected an AbstractEmbedding, received {type(self.embedding)}"
            )
        self.encoder = UNetEncoder(self.features, dt)
        self.sr_decoder = SRDecoder(self.factor, self.features, dt)
        self.seg_decoder = SegDecoder(self.factor, self.features, dt)
        self.embedder = self.embedding.head(tuple(self.features), dt)

    def embed(self, image):
        """E(image): the embedding `(B, H, W, C_e)` of HR-sized images `(B, H, W)` (or
        `(H, W)` -> `(H, W, C_e)`), H and W multiples of `2 ** (len(features) - 1)`."""
        _check_image("image", image, 2 ** (len(self.features) - 1))
        x, single = _batched(image, self.param_dtype)
        e = self.embedding.embed(x, self.encoder, self.embedder)
        return e[0] if single else e

    def __call__(self, lr, prior=None):
        _check_factor(self.factor)
        _check_image("lr", lr, 2 ** (len(self.features) - 1))
        dt = self.param_dtype
        x, single = _batched(lr, dt)
        skips = self.encoder(x[..., None])
        sr = self.sr_decoder(skips, x)
        emb = self.embedding.embed(jax.lax.stop_gradient(sr), self.encoder, self.embedder)
        if prior is None:
            prior = emb
        else:
            prior = jnp.asarray(prior, dt)
            if prior.ndim == 3:
                prior = prior[None]
            if prior.shape != emb.shape:
                raise ValueError(f"prior: expected shape {emb.shape}, received {prior.shape}")
        logits = self.seg_decoder(skips, prior)
        if single:
            return JointOutput(sr[0], emb[0], logits[0])
        return JointOutput(sr, emb, logits)
