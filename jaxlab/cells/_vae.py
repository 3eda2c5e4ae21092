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

from jaxlab._core import (
    Driver,
    as_array,
    check_ids,
    check_lengths,
    check_memory,
    check_positive_int,
    check_steps,
    run_steps,
)

from ._model_step import AbstractModelStep

__all__ = ["NBVAE", "NBVAEStep", "nb_log_likelihood", "train_nbvae"]


def nb_log_likelihood(x, mean, theta):
    """log NB(x; mean, inverse dispersion theta), elementwise.

    **Arguments:** `x` counts >= 0, `mean` >= 0, `theta` > 0, all finite, of shapes
    that broadcast together. Anything else raises a `ValueError` naming the argument
    (value checks on concrete inputs; under `jit` only shapes and dtypes are checked).
    Leading batch axes of any rank are valid (elementwise), and a fractional `x` is
    accepted: the `gammaln` form is the continuous extension of the NB density (e.g.
    for size-factor-scaled counts).
    """
    x = as_array("x", x, dtype=jnp.floating, finite=True, low=0.0)
    mean = as_array("mean", mean, dtype=jnp.floating, finite=True, low=0.0)
    theta = as_array("theta", theta, dtype=jnp.floating, finite=True, low=0.0, low_inclusive=False)
    try:
        np.broadcast_shapes(x.shape, mean.shape, theta.shape)
    except ValueError as e:
        raise ValueError(
            f"x, mean, theta: expected shapes that broadcast, received {x.shape}, "
            f"{mean.shape}, {theta.shape}"
        ) from e
    log_theta_mu = jnp.log(theta + mean)
    return (
        theta * (jnp.log(theta) - log_theta_mu)
        + x * (jnp.log(mean + 1e-8) - log_theta_mu)
        + gammaln(x + theta)
        - gammaln(theta)
        - gammaln(x + 1)
    )


class NBVAE(eqx.Module):
    """scVI-like negative-binomial VAE (Lopez et al. 2018), the baseline of P5.

    **Arguments:** `n_genes`, `n_batches` (the one-hot batch covariate's width),
    `latent_dim` (10), `width` (128) of the one-hidden-layer encoder and decoder MLPs;
    `key` (keyword-only).

    `encode(x, b)` gives the posterior mean and log-variance `(latent_dim,)` each of one
    cell's counts `x` `(G,)` and batch one-hot `b`; `elbo(x, b, key=...)` its evidence
    lower bound (one reparameterised sample). The embedding is the mean.

    All four sizes are positive integers (else a `ValueError` naming the argument).
    """

    encoder: eqx.nn.MLP
    decoder: eqx.nn.MLP
    log_theta: Float[Array, " G"]
    latent_dim: int = eqx.field(static=True)

    def __init__(
        self,
        n_genes: int,
        n_batches: int,
        latent_dim: int = 10,
        width: int = 128,
        *,
        key: jax.Array,
    ):
        n_genes = check_positive_int("n_genes", n_genes)
        n_batches = check_positive_int("n_batches", n_batches)
        latent_dim = check_positive_int("latent_dim", latent_dim)
        width = check_positive_int("width", width)
        n_params = width * (2 * n_genes + 2 * n_batches + 3 * latent_dim)
        check_memory("n_genes, n_batches, latent_dim, width", 8.0 * 4 * n_params)  # + Adam
        k1, k2 = jax.random.split(key)
        self.encoder = eqx.nn.MLP(
            n_genes + n_batches, 2 * latent_dim, width, 1, activation=jax.nn.relu, key=k1
        )
        self.decoder = eqx.nn.MLP(
            latent_dim + n_batches, n_genes, width, 1, activation=jax.nn.relu, key=k2
        )
        self.log_theta = jnp.zeros(n_genes)
        self.latent_dim = latent_dim

    def encode(self, x, b):
        out = self.encoder(jnp.concatenate([jnp.log1p(x), b]))
        return out[: self.latent_dim], out[self.latent_dim :]

    def elbo(self, x, b, *, key):
        mu, logvar = self.encode(x, b)
        z = mu + jnp.exp(0.5 * logvar) * jax.random.normal(key, mu.shape, mu.dtype)
        rho = jax.nn.softmax(self.decoder(jnp.concatenate([z, b])))
        mean = jnp.sum(x) * rho
        rec = jnp.sum(nb_log_likelihood(x, mean, jnp.exp(self.log_theta)))
        kl = 0.5 * jnp.sum(jnp.exp(logvar) + mu**2 - 1 - logvar)
        return rec - kl


class NBVAEStep(AbstractModelStep):
    """One ELBO step of an `NBVAE`: a minibatch of cells (drawn without replacement),
    the negative mean ELBO with one reparameterised sample per cell, one optimiser update.

    State: `(params, opt_state)` with `params = eqx.filter(model, eqx.is_array)`;
    `combine(params)` gives the model back. Aux: `loss` (the negative ELBO per cell).

    **Arguments:**

    - `model`: an `NBVAE` whose structure the step trains.
    - `counts`: `(N, G)` raw counts (finite, >= 0; G the model's genes);
      `batch_onehot`: `(N, B)` one-hot batch labels (B the model's batches). Other
      shapes or values raise a `ValueError` naming the argument.
    - `optimizer`: an optax transformation (`train_nbvae`: Adam, lr 1e-3).
    - `batch_size`: cells per step (at most N).

    Paper: scVI (Lopez et al., 2018), the P5 baseline.
    """

    counts: Float[Array, "N G"]
    batch_onehot: Float[Array, "N B"]
    structure: NBVAE = eqx.field(static=True)
    optimizer: optax.GradientTransformation = eqx.field(static=True)
    batch_size: int = eqx.field(static=True)

    def __init__(
        self,
        model: NBVAE,
        counts,
        batch_onehot,
        *,
        optimizer: optax.GradientTransformation,
        batch_size: int = 128,
    ):
        dt = jnp.result_type(float)  # the parameters' dtype
        g = model.log_theta.shape[0]
        b = int(model.encoder.in_size) - g
        sizes: dict[str, int] = {}
        counts = as_array(
            "counts", counts, shape=("N", g), sizes=sizes, nonempty=True, finite=True, low=0.0
        )
        onehot = as_array(
            "batch_onehot", batch_onehot, shape=("N", b), sizes=sizes, finite=True, low=0.0
        )
        self.counts = jnp.asarray(counts, dt)
        self.batch_onehot = jnp.asarray(onehot, dt)
        self.structure = eqx.filter(model, eqx.is_array, inverse=True)
        self.optimizer = optimizer
        self.batch_size = min(check_positive_int("batch_size", batch_size), self.counts.shape[0])

    def loss(self, model: NBVAE, key: jax.Array):
        ki, ke = jax.random.split(key)
        idx = jax.random.choice(ki, self.counts.shape[0], (self.batch_size,), replace=False)
        keys = jax.random.split(ke, self.batch_size)
        elbo = jax.vmap(lambda xx, bb, kk: model.elbo(xx, bb, key=kk))(
            self.counts[idx], self.batch_onehot[idx], keys
        )
        return -jnp.mean(elbo), {}


def train_nbvae(
    counts: np.ndarray,
    batch: np.ndarray | None = None,
    *,
    key: jax.Array,
    steps: int = 1500,
    batch_size: int = 128,
    latent_dim: int = 10,
    optimizer: optax.GradientTransformation | None = None,
    driver: Driver | None = None,
) -> tuple[NBVAE, np.ndarray]:
    """Train an `NBVAE` (`NBVAEStep`) on counts (cells x genes) with integer batch labels.

    **Arguments:** `counts` `(N, G)` finite, >= 0, N and G >= 1 (fractional counts are
    accepted: the NB likelihood's `gammaln` continuous extension, as `nb_log_likelihood`);
    `batch` `(N,)` integer
    labels in [0, N) (None: one batch; the one-hot width is the largest label + 1);
    `key` (keyword-only: model from its first split, step `i` from `fold_in(second, i)`);
    `steps`, `batch_size`, `latent_dim` positive integers (`steps` at most
    `jaxlab.MAX_RUN_STEPS` = 10**7); `optimizer` (default `optax.adam(1e-3)`);
    `driver`: a `jaxlab.Driver` (chunk, checkpointer, progress).

    **Returns:** `(model, embedding)`, the embedding `(N, latent_dim)` the posterior means
    (an exception to the `(model, History)` convention: the embedding is what every
    caller uses; the step is public, `NBVAEStep`, for the training curve).
    Other values raise a `ValueError` naming the argument.
    """
    check_steps("steps", steps)
    check_positive_int("latent_dim", latent_dim)
    counts = np.asarray(as_array("counts", counts, ndim=2, nonempty=True, finite=True, low=0.0))
    n, g = counts.shape
    if batch is None:
        codes = np.zeros(n, dtype=np.int64)
    else:
        codes = check_ids("batch", batch, n, what="batch labels")
        if codes.ndim != 1:
            raise ValueError(f"batch: expected (N,) labels, received shape {codes.shape}")
        check_lengths(counts=counts, batch=codes)
    n_b = int(codes.max()) + 1
    km, kt = jax.random.split(key)
    model = NBVAE(g, n_b, latent_dim, key=km)
    if optimizer is None:
        optimizer = optax.adam(1e-3)
    step = NBVAEStep(model, counts, np.eye(n_b)[codes], optimizer=optimizer, batch_size=batch_size)
    (params, _), _ = run_steps(
        step,
        step.init(model, kt),
        key=kt,
        steps=steps,
        driver=driver,
    )
    model = step.combine(params)
    emb = jax.vmap(lambda xx, bb: model.encode(xx, bb)[0])(step.counts, step.batch_onehot)
    return model, np.array(emb)  # a writable copy (jax-backed arrays are read-only)
