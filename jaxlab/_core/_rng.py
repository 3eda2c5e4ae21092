"""NumPy and scikit-learn randomness drawn from a JAX key (a key is the only randomness)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

__all__ = ["numpy_rng", "sklearn_seed"]


def _check_key(key) -> np.ndarray:
    if not isinstance(key, jax.Array):
        raise ValueError(
            f"key: expected a JAX PRNG key (jax.random.key(seed)), received {type(key).__name__}"
        )
    if jnp.issubdtype(key.dtype, jax.dtypes.prng_key):
        return np.asarray(jax.random.key_data(key)).ravel()
    if key.dtype != jnp.uint32:
        raise ValueError(f"key: expected a PRNG key or uint32 key data, received {key.dtype}")
    return np.asarray(key).ravel()


def numpy_rng(key: jax.Array) -> np.random.Generator:
    """A NumPy generator seeded by the bits of the JAX key `key` (for host-side sampling:
    Poisson counts of a large matrix, a permutation of file rows).

    **Arguments:** `key`, a typed key (`jax.random.key`) or raw `uint32` key data.

    **Returns:** `np.random.default_rng(key_data)`: the same key gives the same stream.
    """
    return np.random.default_rng(_check_key(key))


def sklearn_seed(key: jax.Array) -> int:
    """An integer `random_state` in `[0, 2**31 - 1)` for scikit-learn or MNE, from `key`."""
    return int(numpy_rng(key).integers(0, 2**31 - 1))
