"""`optimizer_update`: an optax update that also runs under strict dtype promotion.

optax's bias corrections compute `decay ** count` with a Python float and an
int32 step count; `jax_numpy_dtype_promotion="strict"` (the test-suite setting,
and a sensible one for users) rejects that mix although the result is float
either way. Every training loop calls this instead of `optimizer.update`.
"""

from __future__ import annotations

from typing import Any

import jax
import optax

__all__ = ["optimizer_update"]


def optimizer_update(
    optimizer: optax.GradientTransformation, updates: Any, state: Any, params: Any = None
) -> tuple[Any, Any]:
    """`optimizer.update(updates, state, params)` under standard dtype promotion."""
    with jax.numpy_dtype_promotion("standard"):
        return optimizer.update(updates, state, params)
