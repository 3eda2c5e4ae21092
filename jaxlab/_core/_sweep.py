"""`sweep`: vmap a function over a leading batch axis, sharded over devices.

With one device this is `jax.vmap(fn)(batch)`. With several, the batch axis is
padded up to a multiple of the device count (by repeating the last element),
laid out over a 1-D `jax.sharding.Mesh`, mapped, and the padding dropped. The
per-element computation is the same program, so results agree with plain vmap.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec

__all__ = ["sweep"]


def _leading_size(batch: Any) -> int:
    leaves = jax.tree_util.tree_leaves(batch)
    if not leaves:
        raise ValueError("batch: expected a pytree with at least one array leaf, received none")
    sizes = {int(np.shape(x)[0]) if np.ndim(x) > 0 else -1 for x in leaves}
    if -1 in sizes:
        raise ValueError("batch: every leaf needs a leading batch axis, received a scalar leaf")
    if len(sizes) != 1:
        raise ValueError(
            f"batch: leaves disagree on the leading axis size, received {sorted(sizes)}"
        )
    (n,) = sizes
    if n == 0:
        raise ValueError("batch: expected a non-empty leading axis, received size 0")
    return n


def sweep(
    fn: Callable[..., Any],
    batch: Any,
    *,
    devices: Sequence[jax.Device] | None = None,  # pyright: ignore[reportInvalidTypeForm] -- jax.Device is a class alias pyright reads as a variable
) -> Any:
    """Map `fn` over the leading axis of every leaf of `batch`.

    **Arguments:**

    - `fn`: function of one unbatched pytree (e.g. a seed key or a config).
    - `batch`: pytree whose leaves share a leading axis of size B.
    - `devices`: devices to shard over (default: all of `jax.devices()`).

    **Returns:** `fn`'s output pytree with a leading axis of size B.
    """
    n = _leading_size(batch)
    devices = list(jax.devices() if devices is None else devices)
    mapped = jax.vmap(fn)
    if len(devices) == 1:
        return jax.jit(mapped)(batch)
    d = len(devices)
    padded = -(-n // d) * d

    def pad(x):
        x = jnp.asarray(x)
        if padded == n:
            return x
        reps = jnp.broadcast_to(x[-1:], (padded - n,) + x.shape[1:])
        return jnp.concatenate([x, reps], axis=0)

    mesh = Mesh(np.asarray(devices), ("batch",))
    sharding = NamedSharding(mesh, PartitionSpec("batch"))
    batch_p = jax.tree_util.tree_map(lambda x: jax.device_put(pad(x), sharding), batch)
    out = jax.jit(mapped, in_shardings=(sharding,), out_shardings=sharding)(batch_p)
    return jax.tree_util.tree_map(lambda y: y[:n], out)
