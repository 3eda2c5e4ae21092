"""`SAEStep`: one training step of a sparse autoencoder, for `jaxlab.run_steps`.

The step draws a batch of `batch_size` rows (with replacement) from its `data`
buffer, takes an optimiser step on the reconstruction loss plus the
architecture's sparsity/auxiliary term, removes the gradient component parallel
to each decoder row, renormalises the decoder rows, and updates the per-latent
"steps since fired" counters that define dead latents.

Losses (per token, averaged over the batch):

- all: `mse = ||x - x_hat||^2` (sum over d_in);
- `TopKSAE` / `BatchTopKSAE`: + `aux_coefficient * min(n_dead / k_aux, 1) * ||e - e_hat||^2`,
  the aux-k loss of Gao et al. 2024: `e = stop_gradient(x - x_hat)`, `e_hat` the decoder
  (without bias) applied to the top-`k_aux` pre-activations among dead latents;
- `ReLUSAE`: + `l1_coefficient * sum_i |z_i|` (decoder rows are unit norm), with
  dead-latent resampling every `resample_every` steps (Bricken et al. 2023): each
  dead latent's decoder row becomes a batch input (minus b_dec) drawn with probability
  proportional to its squared reconstruction error, its encoder column that direction
  times 0.2 x the mean alive encoder norm, its bias 0, and its optimiser moments 0.
"""

from __future__ import annotations

import equinox as eqx
import jax
import jax.numpy as jnp
import optax
from jaxtyping import Array, Float, Int, PyTree

from .._core import AbstractStep, check_array, check_finite, check_positive_int, optimizer_update
from ._sae import AbstractSAE, BatchTopKSAE, ReLUSAE, TopKSAE, _topk_relu, normalize_decoder

__all__ = ["SAEState", "SAEStep"]


class SAEState(eqx.Module):
    """Training state of `SAEStep`.

    **Attributes:**

    - `sae`: the current autoencoder.
    - `opt_state`: optimiser state of (W_enc, b_enc, W_dec, b_dec).
    - `steps_since_fired`: (d_sae,) int32, steps since each latent last fired in a batch.
    - `step`: () int32, steps taken.
    """

    sae: AbstractSAE
    opt_state: PyTree
    steps_since_fired: Int[Array, " d_sae"]
    step: Int[Array, ""]


def _params(sae):
    return (sae.W_enc, sae.b_enc, sae.W_dec, sae.b_dec)


def _with_params(sae, params):
    return eqx.tree_at(lambda s: (s.W_enc, s.b_enc, s.W_dec, s.b_dec), sae, params)


class SAEStep(AbstractStep):
    """One optimiser step of a `TopKSAE`, `BatchTopKSAE` or `ReLUSAE` on a data buffer.

    **Arguments (fields):**

    - `data`: (N, d_in) float activations the batches are drawn from (a shuffled buffer of
      an activation store, or a whole in-memory array).
    - `optimizer`: an optax transformation (e.g. `optax.adam(2e-4)`).
    - `batch_size`: tokens per step.
    - `dead_window`: a latent that has not fired for this many steps is dead.
    - `aux_coefficient`: weight of the aux-k loss (TopK/BatchTopK; 0 disables it;
      Gao et al. use 1/32).
    - `aux_k`: latents in the aux-k reconstruction (default d_in // 2, capped at d_sae).
    - `l1_coefficient`: L1 weight (ReLU).
    - `resample_every`: resample dead latents every this many steps (ReLU; 0: never).
    - `threshold_momentum`: EMA momentum of BatchTopK's inference threshold.

    `init(sae, key) -> SAEState`; `step(state, key) -> (SAEState, aux)` with aux keys
    "loss", "mse", "l0", "aux_loss" (0 while no latent is dead: the term is skipped), "l1",
    "dead_frac" (scalars).
    """

    data: Float[Array, "N d_in"]
    optimizer: optax.GradientTransformation = eqx.field(static=True)
    batch_size: int = eqx.field(static=True, default=4096)
    dead_window: int = eqx.field(static=True, default=1000)
    aux_coefficient: float = eqx.field(static=True, default=1.0 / 32)
    aux_k: int | None = eqx.field(static=True, default=None)
    l1_coefficient: float = eqx.field(static=True, default=5.0)
    resample_every: int = eqx.field(static=True, default=0)
    threshold_momentum: float = eqx.field(static=True, default=0.99)

    def __check_init__(self):
        check_array("data", self.data, ndim=2, dtype=jnp.floating)
        if self.data.shape[0] == 0:
            raise ValueError("data: expected at least one row of activations, received 0")
        check_positive_int("batch_size", self.batch_size)
        check_positive_int("dead_window", self.dead_window)
        if self.aux_k is not None:
            check_positive_int("aux_k", self.aux_k)
        for name in ("aux_coefficient", "l1_coefficient"):
            v = getattr(self, name)
            if not v >= 0:
                raise ValueError(f"{name}: expected a number >= 0, received {v!r}")
        if (
            isinstance(self.resample_every, bool)
            or not isinstance(self.resample_every, int)
            or self.resample_every < 0
        ):
            raise ValueError(
                f"resample_every: expected an int >= 0, received {self.resample_every!r}"
            )
        if not 0 <= self.threshold_momentum < 1:
            raise ValueError(
                f"threshold_momentum: expected a number in [0, 1), received "
                f"{self.threshold_momentum!r}"
            )

    def _k_aux(self, sae):
        return min(self.aux_k if self.aux_k is not None else max(sae.d_in // 2, 1), sae.d_sae)

    def init(self, model: AbstractSAE, key=None) -> SAEState:
        """Initial state for training `model` (an SAE whose d_in matches `data`)."""
        if not isinstance(model, AbstractSAE):
            raise ValueError(
                f"model: expected a TopKSAE, BatchTopKSAE or ReLUSAE, received "
                f"{type(model).__name__}"
            )
        if self.data.shape[1] != model.d_in:
            raise ValueError(
                f"data: expected width d_in={model.d_in} of the SAE, received "
                f"shape {self.data.shape}"
            )
        if self.aux_k is not None and self.aux_k > model.d_sae:
            raise ValueError(f"aux_k: expected <= d_sae={model.d_sae}, received {self.aux_k}")
        check_finite("data", self.data)
        opt_state = self.optimizer.init(_params(model))
        return SAEState(
            model, opt_state, jnp.zeros((model.d_sae,), jnp.int32), jnp.zeros((), jnp.int32)
        )

    def _loss(self, params, sae, x, dead):
        sae = _with_params(sae, params)
        pre = jax.vmap(sae.pre_activation)(x)
        if isinstance(sae, BatchTopKSAE):
            z = sae.batch_activation(pre)
        else:
            z = jax.vmap(sae.activation)(pre)
        x_hat = z @ sae.W_dec + sae.b_dec[None]
        mse = jnp.mean(jnp.sum((x_hat - x) ** 2, axis=-1))
        zero = jnp.zeros((), x.dtype)
        aux_loss, l1 = zero, zero
        loss = mse
        if isinstance(sae, TopKSAE | BatchTopKSAE) and self.aux_coefficient > 0:
            k_aux = self._k_aux(sae)
            n_dead = jnp.sum(dead).astype(x.dtype)
            e = jax.lax.stop_gradient(x - x_hat)
            low = jnp.asarray(jnp.finfo(pre.dtype).min, pre.dtype)

            def aux_mse(pre, W_dec):
                z_aux = jax.vmap(lambda p: _topk_relu(jnp.where(dead, p, low), k_aux))(pre)
                return jnp.mean(jnp.sum((z_aux @ W_dec - e) ** 2, axis=-1))

            # with no dead latent the aux-k term is 0 (scale 0): skip its matmuls at run time
            aux_loss = jax.lax.cond(
                n_dead > 0, aux_mse, lambda *_: jnp.zeros((), x.dtype), pre, sae.W_dec
            )
            scale = jnp.minimum(n_dead / k_aux, jnp.ones((), x.dtype))
            loss = loss + jnp.asarray(self.aux_coefficient, x.dtype) * scale * aux_loss
        if isinstance(sae, ReLUSAE):
            l1 = jnp.mean(jnp.sum(jnp.abs(z), axis=-1))
            loss = loss + jnp.asarray(self.l1_coefficient, x.dtype) * l1
        return loss, (z, x_hat, mse, aux_loss, l1)

    def step(self, state: SAEState, key) -> tuple[SAEState, dict[str, Array]]:
        """One optimiser step on a batch drawn from `data` with `key`."""
        kb, kr = jax.random.split(key)
        idx = jax.random.randint(kb, (self.batch_size,), 0, self.data.shape[0])
        x = self.data[idx].astype(state.sae.W_dec.dtype)
        sae = state.sae
        dead = state.steps_since_fired >= self.dead_window
        params = _params(sae)
        (loss, (z, x_hat, mse, aux_loss, l1)), grads = jax.value_and_grad(self._loss, has_aux=True)(
            params, sae, x, dead
        )
        g_enc, g_benc, g_dec, g_bdec = grads
        # only the norm-preserving part of the decoder gradient (rows are re-projected anyway)
        g_dec = g_dec - jnp.sum(g_dec * sae.W_dec, axis=1, keepdims=True) * sae.W_dec
        grads = (g_enc, g_benc, g_dec, g_bdec)
        updates, opt_state = optimizer_update(self.optimizer, grads, state.opt_state, params)
        sae = normalize_decoder(_with_params(sae, optax.apply_updates(params, updates)))
        fired = jnp.any(z > 0, axis=0)
        since = jnp.where(fired, 0, state.steps_since_fired + 1).astype(jnp.int32)
        if isinstance(sae, BatchTopKSAE):
            inf = jnp.asarray(jnp.inf, z.dtype)
            low = jnp.min(jnp.where(z > 0, z, inf))
            low = jnp.where(jnp.isfinite(low), low, sae.threshold)
            m = jnp.where(state.step == 0, 0.0, self.threshold_momentum).astype(z.dtype)
            sae = eqx.tree_at(lambda s: s.threshold, sae, m * sae.threshold + (1 - m) * low)
        if isinstance(sae, ReLUSAE) and self.resample_every > 0:
            due = (state.step + 1) % self.resample_every == 0
            sae, opt_state, since = jax.lax.cond(
                due,
                lambda a: self._resample(*a),
                lambda a: a[3:],
                (kr, x, x_hat, sae, opt_state, since),
            )
        aux = {
            "loss": loss,
            "mse": mse,
            "l0": jnp.mean(jnp.sum(z > 0, axis=-1).astype(x.dtype)),
            "aux_loss": aux_loss,
            "l1": l1,
            "dead_frac": jnp.mean((since >= self.dead_window).astype(x.dtype)),
        }
        return SAEState(sae, opt_state, since, state.step + 1), aux

    def _resample(self, key, x, x_hat, sae, opt_state, since):
        dead = since >= self.dead_window
        err = jnp.sum((x - x_hat) ** 2, axis=-1)
        logits = jnp.log(jnp.maximum(err, jnp.finfo(err.dtype).tiny))
        pick = jax.random.categorical(key, logits, shape=(sae.d_sae,))
        v = x[pick] - sae.b_dec[None]
        v = v / jnp.maximum(jnp.linalg.norm(v, axis=1, keepdims=True), 1e-12)
        enc_norm = jnp.linalg.norm(sae.W_enc, axis=0)
        n_alive = jnp.sum(~dead).astype(v.dtype)
        one = jnp.ones((), v.dtype)
        mean_alive = jnp.where(
            n_alive > 0, jnp.sum(jnp.where(dead, 0, enc_norm)) / jnp.maximum(n_alive, one), one
        )
        w_dec = jnp.where(dead[:, None], v, sae.W_dec)
        w_enc = jnp.where(dead[None, :], (0.2 * mean_alive * v).T, sae.W_enc)
        b_enc = jnp.where(dead, jnp.zeros((), sae.b_enc.dtype), sae.b_enc)
        sae = _with_params(sae, (w_enc, b_enc, w_dec, sae.b_dec))
        keep = (~dead).astype(v.dtype)
        masks = (keep[None, :], keep, keep[:, None], jnp.ones_like(sae.b_dec))
        opt_state = optax.tree_map_params(
            self.optimizer, lambda s, m: s * m.astype(s.dtype), opt_state, masks
        )
        return sae, opt_state, jnp.where(dead, 0, since).astype(jnp.int32)
