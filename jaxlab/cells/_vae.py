"""An scVI-like VAE baseline in JAX: negative-binomial likelihood, batch-conditioned.

Encoder q(z | log1p x, batch) = N(mu, diag sigma^2); decoder gives gene
proportions rho = softmax(f(z, batch)); counts x_g ~ NB(mean = l * rho_g,
inverse dispersion theta_g), with l the observed library size and theta learned
per gene (Lopez et al., 2018). The embedding is mu.
"""

from __future__ import annotations

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import optax
from jax.scipy.special import gammaln
from jaxtyping import Array, Float
from tqdm.auto import tqdm

from jaxlab._core import check_positive_int, optimizer_update

__all__ = ["NBVAE", "nb_log_likelihood", "train_nbvae"]


def nb_log_likelihood(x, mean, theta):
    """log NB(x; mean, inverse dispersion theta), elementwise."""
    log_theta_mu = jnp.log(theta + mean)
    return (theta * (jnp.log(theta) - log_theta_mu) + x * (jnp.log(mean + 1e-8) - log_theta_mu)
            + gammaln(x + theta) - gammaln(theta) - gammaln(x + 1))


class NBVAE(eqx.Module):
    encoder: eqx.nn.MLP
    decoder: eqx.nn.MLP
    log_theta: Float[Array, " G"]
    latent_dim: int = eqx.field(static=True)

    def __init__(self, n_genes: int, n_batches: int, latent_dim: int = 10, width: int = 128,
                 *, key: jax.Array):
        k1, k2 = jax.random.split(key)
        self.encoder = eqx.nn.MLP(n_genes + n_batches, 2 * latent_dim, width, 1,
                                  activation=jax.nn.relu, key=k1)
        self.decoder = eqx.nn.MLP(latent_dim + n_batches, n_genes, width, 1,
                                  activation=jax.nn.relu, key=k2)
        self.log_theta = jnp.zeros(n_genes)
        self.latent_dim = latent_dim

    def encode(self, x, b):
        out = self.encoder(jnp.concatenate([jnp.log1p(x), b]))
        return out[: self.latent_dim], out[self.latent_dim:]

    def elbo(self, x, b, *, key):
        mu, logvar = self.encode(x, b)
        z = mu + jnp.exp(0.5 * logvar) * jax.random.normal(key, mu.shape, mu.dtype)
        rho = jax.nn.softmax(self.decoder(jnp.concatenate([z, b])))
        mean = jnp.sum(x) * rho
        rec = jnp.sum(nb_log_likelihood(x, mean, jnp.exp(self.log_theta)))
        kl = 0.5 * jnp.sum(jnp.exp(logvar) + mu**2 - 1 - logvar)
        return rec - kl


def train_nbvae(counts: np.ndarray, batch: np.ndarray | None = None, *, key: jax.Array,
                steps: int = 1500, batch_size: int = 128, learning_rate: float = 1e-3,
                latent_dim: int = 10, progress: bool = True) -> tuple[NBVAE, np.ndarray]:
    """Train on counts (cells x genes) with integer batch labels; returns (model, embedding)."""
    check_positive_int("steps", steps)
    n, g = counts.shape
    codes = np.zeros(n, dtype=np.int64) if batch is None else np.asarray(batch)
    n_b = int(codes.max()) + 1
    dt = jnp.result_type(float)  # the parameters' dtype
    onehot = jnp.asarray(np.eye(n_b)[codes], dtype=dt)
    x = jnp.asarray(counts, dtype=dt)
    km, kt = jax.random.split(key)
    model = NBVAE(g, n_b, latent_dim, key=km)
    opt = optax.adam(learning_rate)
    state = opt.init(eqx.filter(model, eqx.is_array))
    bsz = min(batch_size, n)

    @eqx.filter_jit
    def step(model, state, k):
        ki, ke = jax.random.split(k)
        idx = jax.random.choice(ki, n, (bsz,), replace=False)

        def loss(m):
            keys = jax.random.split(ke, bsz)
            return -jnp.mean(jax.vmap(lambda xx, bb, kk: m.elbo(xx, bb, key=kk))(
                x[idx], onehot[idx], keys))

        val, grads = eqx.filter_value_and_grad(loss)(model)
        upd, state = optimizer_update(opt, grads, state, eqx.filter(model, eqx.is_array))
        return eqx.apply_updates(model, upd), state, val

    for i in tqdm(range(steps), desc="cells: NB-VAE", disable=not progress):
        model, state, _ = step(model, state, jax.random.fold_in(kt, i))
    emb = jax.vmap(lambda xx, bb: model.encode(xx, bb)[0])(x, onehot)
    return model, np.array(emb)  # a writable copy (jax-backed arrays are read-only)
