"""A synthetic recommendation world whose reward-relevant dimensions are known."""

from __future__ import annotations

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Bool, Float, Int

from jaxlab._core import (
    as_array,
    check_array,
    check_ids,
    check_memory,
    check_positive_int,
    check_range,
    check_real,
)

__all__ = ["DimensionWorld", "make_dimension_world", "one_hot_items"]


def one_hot_items(values: Int[Array, "N M"], n_values: tuple[int, ...]) -> Float[Array, "N F"]:
    """Concatenated one-hot encodings of each item's value in every dimension.

    **Arguments:** `values` `(N, M)` int, value of item n in dimension m (in
    `0..n_values[m]-1`); `n_values`: number of values per dimension.

    **Returns:** `(N, F)` 0/1 float rows, `F = sum(n_values)`. A value outside
    `0..n_values[m]-1` raises (one-hot would give a silent all-zero block).
    """
    n_values = _n_values(n_values, minimum=1)
    values = as_array("values", values, shape=(None, len(n_values)), dtype=jnp.integer)
    cols = [
        jax.nn.one_hot(check_ids(f"values[:, {m}]", values[:, m], v, what="values"), v)
        for m, v in enumerate(n_values)
    ]
    return jnp.concatenate(cols, axis=1)


def _n_values(n_values, *, minimum: int) -> tuple[int, ...]:
    """`n_values` (values per dimension) as a tuple of ints, each >= `minimum`."""
    # host values (they set shapes), never a traced array: callers build worlds inside jit
    if n_values is None or isinstance(n_values, str | bytes | dict):
        raise ValueError(
            f"n_values: expected a 1-D sequence of ints, received {type(n_values).__name__}"
        )
    try:
        arr = np.asarray(n_values)
    except (TypeError, ValueError, jax.errors.TracerArrayConversionError) as e:
        raise ValueError(f"n_values: expected a 1-D sequence of concrete ints ({e})") from e
    check_array("n_values", arr, ndim=1, dtype=np.integer)
    if arr.size == 0:
        raise ValueError("n_values: expected at least one dimension, received none")
    check_range("n_values", arr, low=minimum)
    return tuple(int(v) for v in arr)


class DimensionWorld(eqx.Module):
    """Items with categorical dimensions; reward depends on a few of them only.

    `mean_rewards[n] = sum_{m relevant} w[m, value(n, m)]`; observed rewards add
    Gaussian noise of scale `noise`.
    """

    values: Int[Array, "N M"]
    features: Float[Array, "N F"]
    feature_dim: tuple[int, ...] = eqx.field(static=True)
    weights: Float[Array, " F"]
    relevant: Bool[Array, " M"]
    mean_rewards: Float[Array, " N"]
    noise: float

    def sample_rewards(self, horizon: int, *, key: Array) -> Float[Array, "T N"]:
        """`(T, N)` noisy reward tables, one row per round."""
        eps = jax.random.normal(key, (horizon, self.mean_rewards.shape[0]), self.mean_rewards.dtype)
        return self.mean_rewards[None] + self.noise * eps


def make_dimension_world(
    n_items: int,
    n_values: tuple[int, ...],
    relevant: tuple[int, ...],
    *,
    key: Array,
    noise: float = 0.5,
    scale: float = 1.0,
) -> DimensionWorld:
    """Draw a synthetic world: random item values, weights only on relevant dimensions.

    **Arguments:**

    - `n_items`: number of items N.
    - `n_values`: values per dimension (M dimensions).
    - `relevant`: indices of the reward-relevant dimensions.
    - `key`: PRNG key; `noise`: reward noise scale; `scale`: weight scale.

    **Returns:** a `DimensionWorld`. Each relevant dimension's value weights are
    evenly spaced in `[-scale, scale]` in a random order, so the best value is unique.
    """
    check_positive_int("n_items", n_items)
    n_values = _n_values(n_values, minimum=2)
    m = len(n_values)
    rel_ids = np.asarray(check_ids("relevant", relevant, m, what="dimension indices"))
    if rel_ids.ndim != 1:
        raise ValueError(f"relevant: expected a 1-D sequence, received shape {rel_ids.shape}")
    rel = np.zeros(m, bool)
    rel[rel_ids] = True
    noise = check_real("noise", noise, low=0.0)
    # item values (int64), features and their one-hot copy (float64), rewards
    check_memory("n_items", 8.0 * n_items * (m + 2 * sum(n_values) + 2))
    k_vals, k_w = jax.random.split(key)
    vkeys = jax.random.split(k_vals, m)
    values = jnp.stack(
        [jax.random.randint(vkeys[i], (n_items,), 0, v) for i, v in enumerate(n_values)], axis=1
    )
    dtype = jnp.zeros(()).dtype
    wkeys = jax.random.split(k_w, m)
    ws = []
    for i, v in enumerate(n_values):
        grid = jnp.linspace(-scale, scale, v, dtype=dtype)
        w = jax.random.permutation(wkeys[i], grid)
        ws.append(w if rel[i] else jnp.zeros(v, dtype))
    weights = jnp.concatenate(ws)
    features = one_hot_items(values, n_values).astype(dtype)
    feature_dim = tuple(int(i) for i, v in enumerate(n_values) for _ in range(v))
    return DimensionWorld(
        values=values,
        features=features,
        feature_dim=feature_dim,
        weights=weights,
        relevant=jnp.asarray(rel),
        mean_rewards=features @ weights,
        noise=float(noise),
    )
