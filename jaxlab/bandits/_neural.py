"""Neural-linear backbone: a learned feature map with an exact linear UCB head.

Riquelme, Tucker, Snoek (2018), "Deep Bayesian bandits showdown": a small
network phi(x) is trained by regression on past (context, reward) pairs every
`train_every` rounds; exploration uses a ridge/UCB model on the network's last
layer features. Between retrainings the head's inverse Gram matrix is updated
by Sherman–Morrison; after a retraining the features change, so the Gram
matrix is rebuilt from the replay buffer and inverted directly.
"""

from __future__ import annotations

import equinox as eqx
import jax
import jax.numpy as jnp
from jaxtyping import Array, Bool, Float, Int

from ._backbone import AbstractBackbone, Selection, _check_hyper, masked_argmax, sherman_morrison

__all__ = ["NeuralLinear", "NeuralLinearState"]


class NeuralLinearState(eqx.Module):
    """Network weights, UCB head statistics and a ring buffer of past observations."""

    w1: Float[Array, "h d"]
    b1: Float[Array, " h"]
    head: Float[Array, " h"]
    a_inv: Float[Array, "h h"]
    b: Float[Array, " h"]
    buf_x: Float[Array, "B d"]
    buf_r: Float[Array, " B"]
    count: Int[Array, ""]


class NeuralLinear(AbstractBackbone):
    """Neural-linear UCB: `phi(x) = tanh(W1 x + b1)`, score = `phi.theta + alpha ||phi||_{A^-1}`.

    **Arguments:**

    - `hidden`: width h of the learned representation.
    - `alpha` (>= 0), `lam` (> 0): UCB width and ridge prior of the head.
    - `train_every`: retrain the network every this many updates.
    - `train_steps`, `learning_rate`: full-batch gradient steps on the buffer.
    - `buffer`: ring-buffer size B of stored (context, reward) pairs.
    """

    hidden: int = eqx.field(static=True, default=16)
    alpha: float = 1.0
    lam: float = 1.0
    train_every: int = eqx.field(static=True, default=25)
    train_steps: int = eqx.field(static=True, default=50)
    learning_rate: float = 0.05
    buffer: int = eqx.field(static=True, default=256)

    def __check_init__(self):
        for name in ("hidden", "train_every", "train_steps", "buffer"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise ValueError(f"{name}: expected a positive integer, received {v!r}")
        _check_hyper("alpha", self.alpha, low=0.0)
        _check_hyper("lam", self.lam, low=0.0, low_inclusive=False)
        _check_hyper("learning_rate", self.learning_rate, low=0.0, low_inclusive=False)

    def init(self, dim: int, n_arms: int = 1, *, key: Array) -> NeuralLinearState:
        """Random first layer (scaled 1/sqrt(d)), empty buffer, prior head."""
        del n_arms
        dtype = jnp.zeros(()).dtype
        h = self.hidden
        w1 = jax.random.normal(key, (h, dim), dtype) / jnp.sqrt(jnp.asarray(dim, dtype))
        return NeuralLinearState(
            w1=w1,
            b1=jnp.zeros(h, dtype),
            head=jnp.zeros(h, dtype),
            a_inv=jnp.eye(h, dtype=dtype) / jnp.asarray(self.lam, dtype),
            b=jnp.zeros(h, dtype),
            buf_x=jnp.zeros((self.buffer, dim), dtype),
            buf_r=jnp.zeros(self.buffer, dtype),
            count=jnp.zeros((), jnp.int32),
        )

    @staticmethod
    def features(state: NeuralLinearState, x: Float[Array, "... d"]) -> Float[Array, "... h"]:
        """The learned representation phi(x)."""
        return jnp.tanh(x @ state.w1.T + state.b1[(None,) * (x.ndim - 1)])

    def select(
        self,
        state: NeuralLinearState,
        contexts: Float[Array, "K d"],
        mask: Bool[Array, " K"],
        *,
        key: Array | None = None,
    ) -> Selection:
        del key
        phi = self.features(state, jnp.asarray(contexts).astype(state.b.dtype))
        theta = state.a_inv @ state.b
        width = jnp.sqrt(jnp.maximum(jnp.sum((phi @ state.a_inv) * phi, axis=-1), 0.0))
        scores = phi @ theta + self.alpha * width
        return Selection(arm=masked_argmax(scores, mask), scores=scores)

    def _retrain(self, state: NeuralLinearState) -> NeuralLinearState:
        dtype = state.b.dtype
        valid = (jnp.arange(self.buffer, dtype=jnp.int32) < state.count).astype(dtype)
        n = jnp.maximum(jnp.sum(valid), 1.0)

        def loss(params):
            w1, b1, head = params
            phi = jnp.tanh(state.buf_x @ w1.T + b1[None])
            err = phi @ head - state.buf_r
            return jnp.sum(valid * err**2) / n + 1e-3 * jnp.sum(head**2)

        def step(_, params):
            g = jax.grad(loss)(params)
            return jax.tree_util.tree_map(lambda p, gp: p - self.learning_rate * gp, params, g)

        w1, b1, head = jax.lax.fori_loop(
            0, self.train_steps, step, (state.w1, state.b1, state.head)
        )
        phi = jnp.tanh(state.buf_x @ w1.T + b1[None]) * valid[:, None]
        gram = jnp.eye(self.hidden, dtype=dtype) * jnp.asarray(self.lam, dtype) + phi.T @ phi
        return NeuralLinearState(
            w1=w1,
            b1=b1,
            head=head,
            a_inv=jnp.linalg.inv(gram),
            b=phi.T @ state.buf_r,
            buf_x=state.buf_x,
            buf_r=state.buf_r,
            count=state.count,
        )

    def update(
        self,
        state: NeuralLinearState,
        choice: Selection,
        contexts: Float[Array, "K d"],
        reward: Float[Array, ""],
    ) -> NeuralLinearState:
        """Store the observation, update the head (Sherman–Morrison), retrain on schedule."""
        dtype = state.b.dtype
        x = contexts[choice.arm].astype(dtype)
        r = jnp.asarray(reward).astype(dtype)
        slot = state.count % self.buffer
        phi = self.features(state, x)
        new = NeuralLinearState(
            w1=state.w1,
            b1=state.b1,
            head=state.head,
            a_inv=sherman_morrison(state.a_inv, phi),
            b=state.b + r * phi,
            buf_x=state.buf_x.at[slot].set(x),
            buf_r=state.buf_r.at[slot].set(r),
            count=state.count + 1,
        )
        # a closure, not the bound method: a bound method is hashed with its module, which
        # fails when a hyperparameter is traced (vmap over alpha)
        return jax.lax.cond(
            new.count % self.train_every == 0, lambda s: self._retrain(s), lambda s: s, new
        )
