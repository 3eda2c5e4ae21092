"""Multimodal variational model with a product-of-experts posterior over flower latents.

Each modality m has an encoder that maps one (observation, action) pair to a
diagonal Gaussian expert over the latent z, and a decoder that predicts the
observation's mean from (z, action) with fixed Gaussian noise `sigma_m`. The
posterior given any set of probes is the product of the N(0, I) prior and the
experts of the probes that were made (masked), in closed form:

    precision = 1 + sum_k prec_k,   mean = (sum_k prec_k * mu_k) / precision.

Paper: P4 (multimodal predictive coding of uncertainty-reduction maps).
"""

from __future__ import annotations

import equinox as eqx
import jax
import jax.core
import jax.numpy as jnp
from jaxtyping import Array, Float

from jaxlab._core import as_array, check_instance, check_positive_int

from ._flower import ACTION_DIM, MECHANO_DIM, VISUAL_DIM

__all__ = ["GaussianExpert", "product_of_experts", "MultimodalVAE", "elbo"]

MODALITIES = ("visual", "mechano")


class GaussianExpert(eqx.Module):
    """A diagonal Gaussian factor over z, as mean and precision."""

    mean: Float[Array, "... latent"]
    precision: Float[Array, "... latent"]


def product_of_experts(
    experts: GaussianExpert, mask: Float[Array, " K"] | None = None
) -> GaussianExpert:
    """Combine K stacked experts (leading axis) with the N(0, I) prior.

    `experts.mean`, `experts.precision` `(K, L)` finite (precisions >= 0); `mask[k]` in
    [0, 1] weights expert k (0 drops it). Returns the posterior expert (closed form).
    """
    check_instance("experts", experts, GaussianExpert)
    sizes: dict[str, int] = {}
    kw = {"dtype": jnp.floating, "finite": True, "sizes": sizes}
    mean = as_array("experts.mean", experts.mean, shape=("K", "L"), **kw)
    prec = as_array("experts.precision", experts.precision, shape=("K", "L"), low=0.0, **kw)
    if mask is not None:
        mask = as_array("mask", mask, shape=("K",), sizes=sizes, finite=True, low=0.0, high=1.0)
        prec = prec * mask[:, None].astype(prec.dtype)
    total = 1.0 + jnp.sum(prec, axis=0)
    mean = jnp.sum(prec * mean, axis=0) / total
    return GaussianExpert(mean=mean, precision=total)


class _Encoder(eqx.Module):
    net: eqx.nn.MLP

    def __call__(self, obs: Float[Array, " O"], action: Float[Array, 3]) -> GaussianExpert:
        out = self.net(jnp.concatenate([obs, action]))
        mean, raw = jnp.split(out, 2)
        # softplus keeps precisions positive; an uninformative probe can reach ~0.
        return GaussianExpert(mean=mean, precision=jax.nn.softplus(raw))


class MultimodalVAE(eqx.Module):
    """Per-modality encoders (experts) and decoders over a shared flower latent."""

    encoders: dict[str, _Encoder]
    decoders: dict[str, eqx.nn.MLP]
    latent_dim: int = eqx.field(static=True)
    sigma: dict[str, float] = eqx.field(static=True)

    def __init__(
        self,
        latent_dim: int = 6,
        width: int = 64,
        depth: int = 2,
        sigma: tuple[float, float] = (0.05, 0.05),
        *,
        key: jax.Array,
    ):
        dims = {"visual": VISUAL_DIM, "mechano": MECHANO_DIM}
        keys = jax.random.split(key, 4)
        self.latent_dim = latent_dim
        self.sigma = {"visual": float(sigma[0]), "mechano": float(sigma[1])}
        self.encoders = {
            m: _Encoder(
                eqx.nn.MLP(
                    dims[m] + ACTION_DIM,
                    2 * latent_dim,
                    width,
                    depth,
                    activation=jax.nn.gelu,
                    key=keys[i],
                )
            )
            for i, m in enumerate(MODALITIES)
        }
        self.decoders = {
            m: eqx.nn.MLP(
                latent_dim + ACTION_DIM,
                dims[m],
                width,
                depth,
                activation=jax.nn.gelu,
                key=keys[2 + i],
            )
            for i, m in enumerate(MODALITIES)
        }

    def experts(
        self,
        visual: Float[Array, "K 9"],
        mechano: Float[Array, "K 6"],
        actions: Float[Array, "K 3"],
    ) -> GaussianExpert:
        """2K experts (visual then mechanosensory) for K probes."""
        ev = jax.vmap(self.encoders["visual"])(visual, actions)
        em = jax.vmap(self.encoders["mechano"])(mechano, actions)
        return jax.tree_util.tree_map(lambda a, b: jnp.concatenate([a, b]), ev, em)

    def posterior(
        self,
        visual: Float[Array, "K 9"],
        mechano: Float[Array, "K 6"],
        actions: Float[Array, "K 3"],
        mask: Float[Array, " K"] | None = None,
    ) -> GaussianExpert:
        """q(z | probes) as a product of experts; `mask[k] = 0` ignores probe k."""
        k = actions.shape[0]
        mask = jnp.ones((k,), visual.dtype) if mask is None else mask
        return product_of_experts(
            self.experts(visual, mechano, actions), jnp.concatenate([mask, mask])
        )

    def decode(self, modality: str, z: Float[Array, " L"], action: Float[Array, 3]):
        """Predicted mean observation of `modality` for a probe at `action`."""
        return self.decoders[modality](jnp.concatenate([z, action]))


def _gauss_logpdf(x, mean, sigma):
    return -0.5 * jnp.sum(((x - mean) / sigma) ** 2 + jnp.log(2 * jnp.pi * sigma**2))


def elbo(
    model: MultimodalVAE,
    visual: Float[Array, "K 9"],
    mechano: Float[Array, "K 6"],
    actions: Float[Array, "K 3"],
    *,
    key: jax.Array,
    n_context: int | None = None,
) -> Float[Array, ""]:
    """Evidence lower bound for one flower's K probes (one reparameterised sample).

    With `n_context`, the posterior uses only the first `n_context` probes and the
    reconstruction scores all K — the model learns to predict unseen probes, which
    is what the information maps need.

    **Arguments:** `visual (K, 9)`, `mechano (K, 6)`, `actions (K, 3)` finite;
    `n_context` None (every probe) or a positive integer (a traced one inside `vmap`).
    """
    sizes: dict[str, int] = {}
    kw = {"dtype": jnp.floating, "finite": True, "nonempty": True, "sizes": sizes}
    visual = as_array("visual", visual, shape=("K", VISUAL_DIM), **kw)
    mechano = as_array("mechano", mechano, shape=("K", MECHANO_DIM), **kw)
    actions = as_array("actions", actions, shape=("K", ACTION_DIM), **kw)
    if n_context is not None and not isinstance(n_context, jax.core.Tracer):
        check_positive_int("n_context", n_context)
    k = actions.shape[0]
    mask = None if n_context is None else (jnp.arange(k) < n_context).astype(visual.dtype)
    q = model.posterior(visual, mechano, actions, mask)
    std = 1 / jnp.sqrt(q.precision)
    z = q.mean + std * jax.random.normal(key, q.mean.shape, q.mean.dtype)
    rec = 0.0
    for m, obs in (("visual", visual), ("mechano", mechano)):
        pred = jax.vmap(lambda a, m=m: model.decode(m, z, a))(actions)
        rec = rec + _gauss_logpdf(obs, pred, model.sigma[m])
    kl = 0.5 * jnp.sum(std**2 + q.mean**2 - 1 - 2 * jnp.log(std))
    return rec - kl
