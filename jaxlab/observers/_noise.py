"""Measurement noise of a sampled sensor: white samples held between sample times.

Paper: P2, "Provably stable neural-network observers" (evaluation under sensor noise).
"""

from __future__ import annotations

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float

from jaxlab._core import check_array

__all__ = ["SensorNoise"]


class SensorNoise(eqx.Module):
    """Output (measurement) noise of a digital sensor sampled every `period` seconds:
    `noise(t) = samples[k]` on `[t0 + k period, t0 + (k + 1) period)` (zero-order hold; the
    last sample is held after the last sample time). The observer sees `y + noise(t)`.

    Fields: `samples (K, p)`; `period` and `t0` (static floats, so the hold times are
    concrete and `simulate` can step exactly to them as jumps).
    """

    samples: Float[Array, "K p"]
    period: float = eqx.field(static=True)
    t0: float = eqx.field(static=True, default=0.0)

    @classmethod
    def white(cls, std, *, key: jax.Array, period: float, horizon: float, t0: float = 0.0):
        """Gaussian white samples with per-channel standard deviation `std (p,)` (or a
        scalar with `p` given by its shape `(p,)`), covering `[t0, t0 + horizon]`."""
        std = jnp.atleast_1d(jnp.asarray(std, dtype=float))
        check_array("std", std, ndim=1)
        if not (period > 0 and horizon > 0):
            raise ValueError(f"period, horizon: expected > 0, received {period}, {horizon}")
        k = int(np.ceil(horizon / period)) + 1
        samples = std[None, :] * jax.random.normal(key, (k, std.shape[0]), dtype=std.dtype)
        return cls(samples, float(period), float(t0))

    def jump_ts(self) -> np.ndarray:
        """The times at which the held value changes (`(K - 1,)`, concrete)."""
        k = self.samples.shape[-2]
        return self.t0 + self.period * np.arange(1, k)

    def __call__(self, t):
        idx = jnp.searchsorted(jnp.asarray(self.jump_ts()), t, side="right")
        return self.samples[idx]
