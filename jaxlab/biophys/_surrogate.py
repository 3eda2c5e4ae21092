"""Heaviside spike nonlinearity with a surrogate derivative.

The forward pass is the exact step function (a spike is 0 or 1); the backward
pass replaces the Dirac delta by the derivative of a fast sigmoid,
``1 / (1 + slope * |x|)**2`` (SuperSpike; Zenke & Ganguli, Neural Computation
2018). We choose it because it is cheap, has heavy tails (a membrane far below
threshold still receives some gradient, which is what lets an input current
grow until the neuron fires) and its peak value 1 at threshold does not depend
on `slope`. Used by `LIF` and `AdEx` for threshold/reset; Hodgkin–Huxley is
smooth and needs no surrogate. Method of P12 (differentiable simulator with
spike-time anchors).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from jaxtyping import Array, ArrayLike, Float

from jaxlab._core import as_array

__all__ = ["spike_surrogate"]


@jax.custom_jvp
def _heaviside(x: Array, slope: Array) -> Array:
    return jnp.where(x >= 0, jnp.ones_like(x), jnp.zeros_like(x))


@_heaviside.defjvp
def _heaviside_jvp(primals, tangents):
    x, slope = primals
    dx, _ = tangents
    out = _heaviside(x, slope)
    grad = 1.0 / (1.0 + slope * jnp.abs(x)) ** 2
    return out, grad * dx


def spike_surrogate(x: Float[ArrayLike, "*shape"], slope: float = 5.0) -> Float[Array, "*shape"]:
    """Step function `x >= 0` whose derivative is the SuperSpike fast sigmoid.

    **Arguments:**

    - `x`: distance to threshold, e.g. `v - v_threshold` (any shape; mV for the neuron models).
    - `slope`: steepness `beta` of the surrogate `1 / (1 + beta |x|)^2` (per unit of `x`).

    **Returns:** an array shaped like `x` with entries 0.0 or 1.0.
    """
    x = as_array("x", x, dtype=jnp.floating, finite=True)
    return _heaviside(x, jnp.asarray(slope, dtype=x.dtype))
