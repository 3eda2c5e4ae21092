"""`ValidatedStep`: a step wrapper that scores a validation loss, keeps the best state and
stops on a plateau (early stopping through the one driver).

The validation record lives in the training state (best state, best loss, evaluations
since the best) and in the history (`aux["val_loss"]`, NaN on steps that did not
evaluate), so a resumed run equals an uninterrupted one and `stop=step.stop` is a pure
function of the state. The training data never enter the choice: only `val_loss` does.

Early stopping as in Prechelt 1998 ("Early stopping - but when?"): the best-validation
state with a patience counted in evaluations.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import equinox as eqx
import jax
import jax.numpy as jnp

from ._loop import AbstractStep
from ._validate import check_positive_int

__all__ = ["ValidatedStep", "ValidatedState"]


class ValidatedState(eqx.Module):
    """State of a `ValidatedStep`: the inner step's `state`, the `best` inner state so far
    (by validation loss), its `best_loss`, `since_best` (evaluations without an
    improvement), `best_step` (steps taken when `best` was scored) and `count` (steps
    taken)."""

    state: Any
    best: Any
    best_loss: jax.Array
    since_best: jax.Array
    best_step: jax.Array
    count: jax.Array


class ValidatedStep(AbstractStep):
    """Wrap `inner`: every `every` steps score `val_loss(inner_state, val_data)`, keep the
    state with the lowest score, and report a plateau after `patience` evaluations that
    did not improve on the best by more than `min_rel_improvement` (relative).

    **Arguments:**

    - `inner`: the training step (its state must be a pytree of arrays, e.g.
      `(params, opt_state)`).
    - `val_loss`: `(inner_state, val_data) -> scalar`, jittable (e.g. the held-out NLL).
    - `val_data`: a pytree of arrays, traced (new data of one shape do not recompile).
    - `every`: steps between evaluations; `patience`: evaluations without an improvement
      before `stop` is True; `min_rel_improvement`: the relative decrease that counts.

    Use `run_steps(step, step.init(model, key), ..., driver=Driver(stop=step.stop))` and take
    `state.best` (the inner state to keep) from the result. The initial state is scored
    at `init` (step 0). `aux` gains `"val_loss"` (NaN on steps without an evaluation).
    """

    inner: AbstractStep
    val_data: Any
    val_loss: Callable[[Any, Any], jax.Array] = eqx.field(static=True)
    every: int = eqx.field(static=True)
    patience: int = eqx.field(static=True)
    min_rel_improvement: float = eqx.field(static=True)

    def __init__(
        self,
        inner: AbstractStep,
        val_loss: Callable[[Any, Any], jax.Array],
        val_data: Any,
        *,
        every: int,
        patience: int,
        min_rel_improvement: float = 0.0,
    ):
        if not isinstance(inner, AbstractStep):
            raise ValueError(f"inner: expected an AbstractStep, received {type(inner).__name__}")
        if not callable(val_loss):
            raise ValueError(f"val_loss: expected a callable, received {type(val_loss).__name__}")
        if not 0.0 <= float(min_rel_improvement) < 1.0:
            raise ValueError(
                "min_rel_improvement: expected a number in [0, 1), received "
                f"{min_rel_improvement!r}"
            )
        self.inner = inner
        self.val_loss = val_loss
        self.val_data = val_data
        self.every = check_positive_int("every", every)
        self.patience = check_positive_int("patience", patience)
        self.min_rel_improvement = float(min_rel_improvement)

    def _score(self, state) -> jax.Array:
        return jnp.asarray(self.val_loss(state, self.val_data), jnp.result_type(float))

    def init(self, model: Any, key: jax.Array) -> ValidatedState:
        """The inner step's initial state, scored as the first best."""
        state = self.inner.init(model, key)
        zero = jnp.asarray(0, jnp.int32)
        return ValidatedState(state, state, self._score(state), zero, zero, zero)

    def step(self, state: ValidatedState, key: jax.Array):
        new, aux = self.inner.step(state.state, key)
        count = state.count + 1
        evaluate = count % self.every == 0
        loss = jax.lax.cond(
            evaluate,
            lambda s: self._score(s),
            lambda s: jnp.full((), jnp.nan, state.best_loss.dtype),
            new,
        )
        threshold = state.best_loss - self.min_rel_improvement * jnp.abs(state.best_loss)
        improved = evaluate & (loss < threshold)
        best = jax.tree_util.tree_map(lambda a, b: jnp.where(improved, a, b), new, state.best)
        since = jnp.where(improved, 0, state.since_best + evaluate.astype(jnp.int32))
        out = ValidatedState(
            new,
            best,
            jnp.where(improved, loss, state.best_loss),
            since,
            jnp.where(improved, count, state.best_step),
            count,
        )
        return out, {**aux, "val_loss": loss}

    def stop(self, state: ValidatedState) -> bool:
        """True once `patience` evaluations in a row did not improve on the best."""
        return bool(state.since_best >= self.patience)
