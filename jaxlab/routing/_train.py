"""`QualityFitStep`: full-batch optax steps on a router's own loss, run by `run_steps`."""

from __future__ import annotations

from typing import Any

import equinox as eqx
import jax
import jax.numpy as jnp
import optax
from jaxtyping import Array, Float

from jaxlab._core import AbstractStep, NoProgress, optimizer_update, run_steps

__all__ = ["QualityFitStep", "fit_router", "fit_on_table"]


class QualityFitStep(AbstractStep):
    """One optimiser step on `router.loss(features, quality, key=key)`.

    The router's trainable part (its inexact arrays) is the state together with the
    optimiser state; its non-array part is held here as a static field. Subclasses of
    `AbstractRouter` that train define `loss(features, quality, *, key) -> scalar`.

    **Arguments:** `features` (N, F), `quality` (N, M) targets in [0, 1], `static` (the
    router's non-array part, `eqx.partition(router, eqx.is_inexact_array)[1]`),
    `optimizer`.
    """

    features: Float[Array, "N F"]
    quality: Float[Array, "N M"]
    static: Any = eqx.field(static=True)
    optimizer: optax.GradientTransformation = eqx.field(static=True)

    def init(self, model, key):
        del key
        params = eqx.filter(model, eqx.is_inexact_array)
        return params, self.optimizer.init(params)

    def step(self, state, key):
        params, opt_state = state

        def loss_fn(p):
            return eqx.combine(p, self.static).loss(self.features, self.quality, key=key)

        loss, grads = jax.value_and_grad(loss_fn)(params)
        updates, opt_state = optimizer_update(self.optimizer, grads, opt_state, params)
        return (eqx.apply_updates(params, updates), opt_state), {"loss": loss}


def fit_router(
    router,
    features,
    quality,
    *,
    key: jax.Array,
    steps: int = 300,
    learning_rate: float = 1e-2,
    progress=None,
):
    """Train `router` (an `AbstractRouter` with a `loss`) with Adam through `run_steps`.

    **Arguments:** `router`; `features` (N, F); `quality` (N, M); `key`; `steps`;
    `learning_rate`; `progress` (a `jaxlab._core` progress strategy, default none).

    **Returns:** `(trained_router, losses)`, losses (steps,).
    """
    x = jnp.asarray(features, jnp.float32)
    y = jnp.asarray(quality, jnp.float32)
    params, static = eqx.partition(router, eqx.is_inexact_array)
    step = QualityFitStep(x, y, static, optax.adam(learning_rate))
    state, hist = run_steps(
        step,
        step.init(params, key),
        key=key,
        steps=steps,
        chunk=min(steps, 100),
        progress=NoProgress() if progress is None else progress,
    )
    return eqx.combine(state[0], static), hist.losses


def fit_on_table(table, build, *, key, steps, learning_rate):
    """`build(init_key)` trained on `table`'s features and quality by `fit_router`
    (init and training keys split from `key`)."""
    k_init, k_fit = jax.random.split(key)
    return fit_router(
        build(k_init),
        table.features,
        table.quality,
        key=k_fit,
        steps=steps,
        learning_rate=learning_rate,
    )[0]
