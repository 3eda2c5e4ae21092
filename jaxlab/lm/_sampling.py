"""Next-token selection strategies for `generate` (greedy, temperature + nucleus)."""

from __future__ import annotations

import equinox as eqx
import jax
import jax.numpy as jnp
from jaxtyping import Array, Float, Int

__all__ = ["Greedy", "Sample"]


class Greedy(eqx.Module):
    """Argmax decoding (deterministic; ignores the key)."""

    stochastic = False

    def __call__(self, logits: Float[Array, " V"], key) -> Int[Array, ""]:
        return jnp.argmax(logits).astype(jnp.int32)


class Sample(eqx.Module):
    """Sampling at `temperature` from the smallest top set of probability >= `top_p`.

    Holtzman et al. 2020, "The Curious Case of Neural Text Degeneration" (nucleus
    sampling). temperature and top_p are arrays: changing them does not recompile.
    """

    temperature: Float[Array, ""]
    top_p: Float[Array, ""]
    stochastic = True

    def __init__(self, temperature: float = 1.0, top_p: float = 1.0):
        if not float(temperature) > 0.0:
            raise ValueError(f"temperature must be > 0 (use Greedy() for 0), got {temperature}")
        if not 0.0 < float(top_p) <= 1.0:
            raise ValueError(f"top_p must lie in (0, 1], got {top_p}")
        self.temperature = jnp.asarray(temperature, jnp.float32)
        self.top_p = jnp.asarray(top_p, jnp.float32)

    def filtered_logits(self, logits: Float[Array, " V"]) -> Float[Array, " V"]:
        """Tempered logits with tokens outside the nucleus set to -inf."""
        z = logits.astype(jnp.float32) / self.temperature
        order = jnp.argsort(-z)
        probs = jax.nn.softmax(z[order])
        # keep a token if the mass strictly before it is < top_p (the first is always kept)
        keep_sorted = (jnp.cumsum(probs) - probs) < self.top_p
        keep = jnp.zeros_like(keep_sorted).at[order].set(keep_sorted)
        return jnp.where(keep, z, -jnp.inf)

    def __call__(self, logits: Float[Array, " V"], key) -> Int[Array, ""]:
        return jax.random.categorical(key, self.filtered_logits(logits)).astype(jnp.int32)
