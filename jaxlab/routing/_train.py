"""`QualityFitStep`: full-batch optax steps on a router's own loss, run by `run_steps`.

`init_params`, `descend` and `fit_params` are the shared part of this component's optax
steps (the router, VQA-model and image-encoder fits): the state is (trainable arrays,
optimiser state), the model's non-array part a static field of the step.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import equinox as eqx
import jax
import jax.numpy as jnp
import optax
from jaxtyping import Array, Float

from jaxlab._core import (
    AbstractStep,
    Driver,
    History,
    as_array,
    check_positive_int,
    driver_for,
    optimizer_update,
    run_steps,
)

__all__ = ["QualityFitStep", "fit_router", "fit_on_table"]


def init_params(optimizer: optax.GradientTransformation, model):
    """The state of this component's optax steps: (trainable arrays of `model`, optimiser
    state)."""
    params = eqx.filter(model, eqx.is_inexact_array)
    return params, optimizer.init(params)


def descend(static, optimizer: optax.GradientTransformation, state, loss_fn, *, has_aux=False):
    """`(new_state, loss, aux)` after one update of the trainable arrays in `state` on
    `loss_fn(model)` (the model re-assembled with its non-array part `static`; `loss_fn`
    returns `(loss, aux)` when `has_aux`, aux None otherwise)."""
    params, opt_state = state

    def of_params(p):
        return loss_fn(eqx.combine(p, static))

    out, grads = jax.value_and_grad(of_params, has_aux=has_aux)(params)
    loss, aux = out if has_aux else (out, None)
    updates, opt_state = optimizer_update(optimizer, grads, opt_state, params)
    return (eqx.apply_updates(params, updates), opt_state), loss, aux


def fit_params(step: AbstractStep, model, *, key, steps: int, driver: Driver):
    """`model` trained by `step` through `jaxlab.run_steps` with `driver` (its chunk cut to
    `steps`); returns `(trained_model, history)`."""
    params, static = eqx.partition(model, eqx.is_inexact_array)
    steps = check_positive_int("steps", steps)
    state, hist = run_steps(
        step,
        step.init(params, key),
        key=key,
        steps=steps,
        driver=driver.replace(chunk=min(steps, driver.chunk)),
    )
    return eqx.combine(state[0], static), hist


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
        return init_params(self.optimizer, model)

    def step(self, state, key):
        def loss_fn(model):
            return model.loss(self.features, self.quality, key=key)

        state, loss, _ = descend(self.static, self.optimizer, state, loss_fn)
        return state, {"loss": loss}


def fit_router(
    router,
    features,
    quality,
    *,
    key: jax.Array,
    steps: int = 300,
    optimizer: optax.GradientTransformation | None = None,
    driver: Driver | None = None,
    monitor: Callable[[Any, int], bool] | None = None,
    monitor_every: int = 100,
) -> tuple[Any, History]:
    """Train `router` (an `AbstractRouter` with a `loss`) full batch through `run_steps`.

    **Arguments:** `router`; `features` (N, F) finite, N >= 1, F the router's width;
    `quality` (N, M) in [0, 1] (the routers' losses are binary cross-entropies), M the
    router's candidates (anything else raises a `ValueError` naming the argument); `key`;
    `steps`;
    `optimizer` (default `optax.adam(1e-2)`); `driver` a `jaxlab.Driver` (chunk,
    checkpointer, progress, e.g. `Driver(progress=jaxlab.TqdmProgress())`; default
    silent); `monitor`: `monitor(router, steps_done) -> bool` called with the router after
    every `monitor_every` steps and after the last one (validation scoring, early
    stopping: True ends the fit there; it goes through the driver's `stop`, combined
    with the driver's own); `monitor_every` is then also the jitted chunk length.

    **Returns:** `(trained_router, history)`, `history.losses` (steps,) (NaN after an
    early stop).
    """
    sizes: dict[str, int] = {}
    x = as_array("features", features, shape=("N", "F"), sizes=sizes, finite=True, real=True)
    y = as_array(
        "quality", quality, shape=("N", "M"), sizes=sizes, finite=True, real=True, low=0, high=1
    )
    if x.shape[0] == 0:
        raise ValueError(f"features: expected at least one query, received shape {x.shape}")
    try:  # shapes only: nothing is computed or compiled
        pred = eqx.filter_eval_shape(router.predict_quality, x)
    except TypeError as e:  # a width mismatch inside the router's matmul / distances
        raise ValueError(
            f"features: expected the feature width the router was built for, received shape "
            f"{tuple(x.shape)} ({type(router).__name__}: {e})"
        ) from None
    if tuple(pred.shape) != tuple(y.shape):
        raise ValueError(
            f"quality: expected shape {tuple(pred.shape)} (queries x the router's candidates), "
            f"received {tuple(y.shape)}"
        )
    x, y = x.astype(jnp.float32), y.astype(jnp.float32)
    static = eqx.partition(router, eqx.is_inexact_array)[1]
    optimizer = optax.adam(1e-2) if optimizer is None else optimizer
    step = QualityFitStep(x, y, static, optimizer)
    driver = driver_for(driver)
    if monitor is not None:
        chunk = check_positive_int("monitor_every", monitor_every)
        driver = driver_for(
            driver.replace(chunk=chunk), stop=_monitor_stop(monitor, static, chunk, steps)
        )
    return fit_params(step, router, key=key, steps=steps, driver=driver)


def _monitor_stop(monitor, static, chunk: int, steps: int):
    """`run_steps`' `stop` calling `monitor(router, steps_done)` after each chunk."""
    calls = [0]

    def stop(state):
        # without a checkpointer run_steps ends a chunk at every multiple of `chunk`
        calls[0] += 1
        return bool(monitor(eqx.combine(state[0], static), min(calls[0] * chunk, steps)))

    return stop


def fit_on_table(table, build, *, key, steps, optimizer, **options):
    """`build(init_key)` trained on `table`'s features and quality by `fit_router`
    (init and training keys split from `key`; `options`: its `driver`, `monitor`,
    `monitor_every`)."""
    k_init, k_fit = jax.random.split(key)
    return fit_router(
        build(k_init),
        table.features,
        table.quality,
        key=k_fit,
        steps=steps,
        optimizer=optimizer,
        **options,
    )[0]
