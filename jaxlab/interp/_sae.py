"""Sparse autoencoders as equinox modules: TopK, ReLU (+ L1) and BatchTopK.

All three share one parameterisation (SAELens' convention):

    z     = act((x - b_dec) @ W_enc + b_enc)          (d_sae,)
    x_hat = z @ W_dec + b_dec                          (d_in,)

with unit-norm decoder rows (the dictionary atoms), the encoder initialised as the
decoder's transpose and the pre-encoder bias `b_dec` set to the mean of a sample of
activations. Every method is unbatched ((d_in,) in, (d_in,) out); `jax.vmap` them.

Papers: Bricken et al. 2023 ("Towards Monosemanticity", ReLU + L1, resampling);
Gao et al. 2024 ("Scaling and evaluating sparse autoencoders", TopK, aux-k);
Bussmann et al. 2024 ("BatchTopK Sparse Autoencoders").
"""

from __future__ import annotations

import equinox as eqx
import jax
import jax.numpy as jnp
from jaxtyping import Array, Float, PRNGKeyArray

from .._core import check_array, check_finite, check_instance, check_positive_int

__all__ = ["AbstractSAE", "TopKSAE", "ReLUSAE", "BatchTopKSAE", "normalize_decoder"]


def _init_weights(d_in: int, d_sae: int, key, b_dec, dtype):
    d_in = check_positive_int("d_in", d_in)
    d_sae = check_positive_int("d_sae", d_sae)
    w_dec = jax.random.normal(key, (d_sae, d_in), dtype)
    w_dec = w_dec / jnp.linalg.norm(w_dec, axis=1, keepdims=True)
    if b_dec is None:
        b_dec = jnp.zeros((d_in,), dtype)
    else:
        b_dec = jnp.asarray(b_dec)
        if b_dec.ndim == 2:  # a sample of activations: its mean
            check_array("b_dec", b_dec, shape=(None, d_in))
            if b_dec.shape[0] == 0:
                raise ValueError("b_dec: expected a non-empty sample, received 0 rows")
            b_dec = jnp.mean(b_dec, axis=0)
        check_array("b_dec", b_dec, shape=(d_in,), dtype=jnp.floating)
        check_finite("b_dec", b_dec)
        b_dec = b_dec.astype(dtype)
    return w_dec.T, jnp.zeros((d_sae,), dtype), w_dec, b_dec


class AbstractSAE(eqx.Module):
    """A sparse autoencoder `x -> z -> x_hat` (subclasses differ in the activation).

    **Attributes:**

    - `W_enc`: (d_in, d_sae) encoder.
    - `b_enc`: (d_sae,) encoder bias.
    - `W_dec`: (d_sae, d_in) decoder; its rows are the unit-norm dictionary atoms.
    - `b_dec`: (d_in,) pre-encoder / decoder bias.
    """

    W_enc: eqx.AbstractVar[Float[Array, "d_in d_sae"]]
    b_enc: eqx.AbstractVar[Float[Array, " d_sae"]]
    W_dec: eqx.AbstractVar[Float[Array, "d_sae d_in"]]
    b_dec: eqx.AbstractVar[Float[Array, " d_in"]]

    @property
    def d_in(self) -> int:
        return self.W_dec.shape[1]

    @property
    def d_sae(self) -> int:
        return self.W_dec.shape[0]

    def pre_activation(self, x: Float[Array, " d_in"]) -> Float[Array, " d_sae"]:
        """Encoder pre-activations `(x - b_dec) @ W_enc + b_enc` (x cast to the SAE's dtype)."""
        return (jnp.asarray(x).astype(self.W_enc.dtype) - self.b_dec) @ self.W_enc + self.b_enc

    def activation(self, pre: Float[Array, " d_sae"]) -> Float[Array, " d_sae"]:
        """The sparsifying non-linearity applied to the pre-activations."""
        raise NotImplementedError

    def encode(self, x: Float[Array, " d_in"]) -> Float[Array, " d_sae"]:
        """Latent code z (d_sae,) of one activation vector x (d_in,)."""
        return self.activation(self.pre_activation(x))

    def decode(self, z: Float[Array, " d_sae"]) -> Float[Array, " d_in"]:
        """Reconstruction `z @ W_dec + b_dec` (d_in,) of a code z (d_sae,)."""
        return jnp.asarray(z).astype(self.W_dec.dtype) @ self.W_dec + self.b_dec

    def __call__(self, x: Float[Array, " d_in"]) -> Float[Array, " d_in"]:
        """Reconstruction of x (d_in,)."""
        return self.decode(self.encode(x))


def _topk_relu(pre: Float[Array, " n"], k: int) -> Float[Array, " n"]:
    vals, idx = jax.lax.top_k(pre, k)
    return jnp.zeros_like(pre).at[idx].set(jax.nn.relu(vals))


class TopKSAE(AbstractSAE):
    """TopK sparse autoencoder: keep the k largest pre-activations (then ReLU).

    Gao et al. 2024. Train it with `SAEStep` (the aux-k loss revives dead latents).
    """

    W_enc: Float[Array, "d_in d_sae"]
    b_enc: Float[Array, " d_sae"]
    W_dec: Float[Array, "d_sae d_in"]
    b_dec: Float[Array, " d_in"]
    k: int = eqx.field(static=True)

    def __init__(
        self, d_in: int, d_sae: int, k: int, *, key: PRNGKeyArray, b_dec=None, dtype=jnp.float32
    ):
        """**Arguments:**

        - `d_in`: width of the activations.
        - `d_sae`: number of latents.
        - `k`: active latents per token, 1 <= k <= d_sae.
        - `key`: PRNG key of the decoder initialisation.
        - `b_dec`: (d_in,) pre-encoder bias, or an (n, d_in) sample whose mean it is.
        - `dtype`: parameter dtype.
        """
        k = check_positive_int("k", k)
        if k > d_sae:
            raise ValueError(f"k: expected 1 <= k <= d_sae={d_sae}, received {k}")
        self.W_enc, self.b_enc, self.W_dec, self.b_dec = _init_weights(
            d_in, d_sae, key, b_dec, dtype
        )
        self.k = k

    def activation(self, pre):
        return _topk_relu(pre, self.k)

    def with_k(self, k: int) -> TopKSAE:
        """The same weights with another number of active latents at inference."""
        new = TopKSAE(self.d_in, self.d_sae, k, key=jax.random.key(0), dtype=self.W_dec.dtype)
        return eqx.tree_at(
            lambda s: (s.W_enc, s.b_enc, s.W_dec, s.b_dec),
            new,
            (self.W_enc, self.b_enc, self.W_dec, self.b_dec),
        )


class ReLUSAE(AbstractSAE):
    """ReLU sparse autoencoder (sparsity from an L1 penalty in training).

    Bricken et al. 2023; train it with `SAEStep(l1_coefficient=..., resample_every=...)`.
    """

    W_enc: Float[Array, "d_in d_sae"]
    b_enc: Float[Array, " d_sae"]
    W_dec: Float[Array, "d_sae d_in"]
    b_dec: Float[Array, " d_in"]

    def __init__(self, d_in: int, d_sae: int, *, key: PRNGKeyArray, b_dec=None, dtype=jnp.float32):
        """**Arguments:** as `TopKSAE`, without `k`."""
        self.W_enc, self.b_enc, self.W_dec, self.b_dec = _init_weights(
            d_in, d_sae, key, b_dec, dtype
        )

    def activation(self, pre):
        return jax.nn.relu(pre)


class BatchTopKSAE(AbstractSAE):
    """BatchTopK sparse autoencoder (Bussmann et al. 2024).

    In training (`SAEStep`) the batch of B tokens keeps its B*k largest ReLU
    pre-activations jointly, so tokens get a variable number of latents with mean k;
    at inference a latent fires where its pre-activation exceeds `threshold`, the
    running mean (over training batches) of the smallest activation kept.

    **Attributes:** those of `AbstractSAE`, plus `threshold` () and static `k`.
    """

    W_enc: Float[Array, "d_in d_sae"]
    b_enc: Float[Array, " d_sae"]
    W_dec: Float[Array, "d_sae d_in"]
    b_dec: Float[Array, " d_in"]
    threshold: Float[Array, ""]
    k: int = eqx.field(static=True)

    def __init__(
        self, d_in: int, d_sae: int, k: int, *, key: PRNGKeyArray, b_dec=None, dtype=jnp.float32
    ):
        """**Arguments:** as `TopKSAE` (`k` is the mean number of active latents)."""
        k = check_positive_int("k", k)
        if k > d_sae:
            raise ValueError(f"k: expected 1 <= k <= d_sae={d_sae}, received {k}")
        self.W_enc, self.b_enc, self.W_dec, self.b_dec = _init_weights(
            d_in, d_sae, key, b_dec, dtype
        )
        self.threshold = jnp.zeros((), dtype)
        self.k = k

    def activation(self, pre):
        return jnp.where(pre > self.threshold, jax.nn.relu(pre), jnp.zeros_like(pre))

    def batch_activation(self, pre: Float[Array, "B d_sae"]) -> Float[Array, "B d_sae"]:
        """Training-time codes of a batch: its B*k largest ReLU pre-activations."""
        flat = jax.nn.relu(pre).reshape(-1)
        return _topk_relu(flat, self.k * pre.shape[0]).reshape(pre.shape)


def normalize_decoder(sae: AbstractSAE) -> AbstractSAE:
    """The same SAE with each decoder row rescaled to unit L2 norm (`sae` an
    `AbstractSAE`; anything else is refused naming it)."""
    check_instance("sae", sae, AbstractSAE)
    norm = jnp.linalg.norm(sae.W_dec, axis=1, keepdims=True)
    w = sae.W_dec / jnp.maximum(norm, jnp.finfo(sae.W_dec.dtype).tiny)
    return eqx.tree_at(lambda s: s.W_dec, sae, w)
