"""`AbstractModelStep`: one optimiser step on an equinox model's minibatch loss.

The state is `(params, opt_state)` with `params = eqx.filter(model, eqx.is_array)`: the
model's non-array parts (activation functions, sizes) stay in the step as a static
`structure`, so the state is all arrays and the driver can carry it through `lax.scan`.
"""

from __future__ import annotations

import abc
from typing import Any

import equinox as eqx
import jax
import optax

from jaxlab._core import AbstractStep, optimizer_update

__all__ = ["AbstractModelStep"]


class AbstractModelStep(AbstractStep):
    """Subclasses set `structure` (`eqx.filter(model, eqx.is_array, inverse=True)`) and
    `optimizer` (both static) and define `loss(model, key) -> (loss, aux dict)`; aux is
    `{"loss": loss, **aux}`."""

    structure: eqx.AbstractVar[Any]
    optimizer: eqx.AbstractVar[optax.GradientTransformation]

    def combine(self, params) -> Any:
        """The model with trained `params` (the first element of the state)."""
        return eqx.combine(params, self.structure)

    def init(self, model: Any, key: jax.Array):
        del key
        if eqx.filter(model, eqx.is_array, inverse=True) != self.structure:
            raise ValueError(
                f"model: expected a {type(self.structure).__name__} of the "
                f"structure this step was built for"
            )
        params = eqx.filter(model, eqx.is_array)
        return params, self.optimizer.init(params)

    @abc.abstractmethod
    def loss(self, model: Any, key: jax.Array) -> tuple[jax.Array, dict[str, jax.Array]]:
        """The minibatch loss of `model` (the batch drawn from `key`) and named extras."""

    def step(self, state, key):
        params, opt_state = state
        (loss, aux), grads = jax.value_and_grad(
            lambda p: self.loss(self.combine(p), key), has_aux=True
        )(params)
        updates, opt_state = optimizer_update(self.optimizer, grads, opt_state, params)
        return (optax.apply_updates(params, updates), opt_state), {"loss": loss, **aux}
