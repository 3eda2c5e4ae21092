"""Training loop shared by HOPSE and HOMP: pure `(init, epoch)` over padded batches.

`Trainer.init(model)` returns a `TrainState` (trainable leaves + optimiser state);
`Trainer.epoch(state, data, targets, weights, key)` runs one shuffled epoch as a
`lax.scan` over mini-batches and is `jit`/`vmap` friendly (e.g. vmap over the
folds of a cross-validation with per-fold `weights`).
"""

from __future__ import annotations

import equinox as eqx
import jax
import jax.numpy as jnp
import optax
from jaxtyping import Array, Float, Int, PRNGKeyArray, PyTree

from jaxlab._core import optimizer_update

from ._arrays import ComplexArrays

__all__ = ["Trainer", "TrainState", "predict", "LOSSES"]

LOSSES = ("cross_entropy", "l1", "mse")


class TrainState(eqx.Module):
    """Trainable parameters, optimiser state and step count."""

    params: PyTree
    opt_state: PyTree
    step: Int[Array, ""]


def _loss_per_graph(loss: str, out: Float[Array, "b o"], y: Array) -> Float[Array, " b"]:
    if loss == "cross_entropy":
        return optax.softmax_cross_entropy_with_integer_labels(out, y.astype(jnp.int32))
    pred = out[:, 0]
    if loss == "l1":
        return jnp.abs(pred - y)
    return (pred - y) ** 2


class Trainer(eqx.Module):
    """Mini-batch trainer (AdamW, gradient clipping) for graph-level targets.

    Arguments:
        static: the model's non-trainable part (`eqx.partition(model, eqx.is_inexact_array)[1]`).
        loss: `"cross_entropy"` (integer class targets), `"l1"` or `"mse"` (regression).
        batch_size: graphs per step (the last incomplete batch of an epoch is dropped).
        learning_rate, weight_decay: AdamW settings.
    """

    static: PyTree = eqx.field(static=True)
    loss: str = eqx.field(static=True)
    batch_size: int = eqx.field(static=True)
    optimizer: optax.GradientTransformation = eqx.field(static=True)

    def __init__(
        self,
        model: eqx.Module,
        *,
        loss: str,
        batch_size: int = 32,
        learning_rate: float = 1e-3,
        weight_decay: float = 0.0,
    ):
        if loss not in LOSSES:
            raise ValueError(f"loss: expected one of {LOSSES}, received {loss!r}")
        if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
            raise ValueError(f"batch_size: expected a positive integer, received {batch_size!r}")
        if not learning_rate > 0:
            raise ValueError(f"learning_rate: expected > 0, received {learning_rate!r}")
        self.static = eqx.partition(model, eqx.is_inexact_array)[1]
        self.loss = loss
        self.batch_size = batch_size
        self.optimizer = optax.chain(
            optax.clip_by_global_norm(1.0), optax.adamw(learning_rate, weight_decay=weight_decay)
        )

    def init(self, model: eqx.Module) -> TrainState:
        params = eqx.filter(model, eqx.is_inexact_array)
        return TrainState(params, self.optimizer.init(params), jnp.zeros((), jnp.int32))

    def model(self, state: TrainState) -> eqx.Module:
        return eqx.combine(state.params, self.static)

    def batch_loss(self, params: PyTree, batch: ComplexArrays, y: Array, w: Array) -> Array:
        model = eqx.combine(params, self.static)
        out = jax.vmap(model)(batch)
        per = _loss_per_graph(self.loss, out, y)
        return jnp.sum(per * w) / jnp.maximum(jnp.sum(w), 1.0)

    def epoch(
        self,
        state: TrainState,
        data: ComplexArrays,
        targets: Array,
        weights: Float[Array, " g"],
        key: PRNGKeyArray,
    ) -> tuple[TrainState, Float[Array, ""]]:
        """One epoch over a stacked data set of `g` complexes.

        Arguments:
            state: from `init`.
            data: stacked `ComplexArrays` (leading axis `g`).
            targets: `[g]` class ids or regression values.
            weights: `[g]` per-graph loss weights (0 excludes a graph, e.g. a CV fold).
            key: shuffling key.

        Returns:
            `(new_state, mean training loss over the epoch's batches)`.
        """
        g = targets.shape[0]
        nb = max(1, g // self.batch_size)
        bs = min(self.batch_size, g)
        perm = jax.random.permutation(key, g)[: nb * bs].reshape(nb, bs)

        def step(st: TrainState, idx):
            batch = jax.tree_util.tree_map(lambda a: a[idx], data)
            value, grads = jax.value_and_grad(self.batch_loss)(
                st.params, batch, targets[idx], weights[idx]
            )
            updates, opt_state = optimizer_update(self.optimizer, grads, st.opt_state, st.params)
            params = eqx.apply_updates(st.params, updates)
            return TrainState(params, opt_state, st.step + 1), value

        state, losses = jax.lax.scan(step, state, perm)
        return state, jnp.mean(losses)


def predict(model: eqx.Module, data: ComplexArrays, *, batch_size: int = 256) -> Array:
    """Graph-level outputs `[g, out_dim]` of `model` on a stacked data set."""
    return jax.lax.map(model, data, batch_size=batch_size)
