"""`sweep`: vmap a function over a leading batch axis, sharded over devices.

With one device this is `jax.vmap(fn)(batch)`. With several, the batch axis is
padded up to a multiple of the device count (by repeating the last element),
laid out over a 1-D `jax.sharding.Mesh`, mapped, and the padding dropped. The
per-element computation is the same program, so results agree with plain vmap.

In a multi-process job (`jax.distributed` initialised, `jax.process_count() > 1`) the
default devices are the global ones, `jax.devices()`, of every process: each process
passes the same `batch`, holds only its devices' rows (`jax.make_array_from_callback`),
and the output is gathered (replicated) so that every process returns the whole result
as arrays on its own default device. Typed PRNG keys travel as their key data.
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
    - `devices`: devices to shard over (default: all of `jax.devices()`, every
      process's in a multi-process job; then every process must call `sweep` with the
      same `fn` and `batch`).

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

    if any(dev.process_index != jax.process_index() for dev in devices):
        return _sweep_processes(mapped, batch, n, padded, devices)
    mesh = Mesh(np.asarray(devices), ("batch",))
    sharding = NamedSharding(mesh, PartitionSpec("batch"))
    batch_p = jax.tree_util.tree_map(lambda x: jax.device_put(pad(x), sharding), batch)
    out = jax.jit(mapped, in_shardings=(sharding,), out_shardings=sharding)(batch_p)
    return jax.tree_util.tree_map(lambda y: y[:n], out)


def _is_key(x: Any) -> bool:
    return jnp.issubdtype(getattr(x, "dtype", np.float32), jax.dtypes.prng_key)


def _sweep_processes(mapped: Callable[..., Any], batch: Any, n: int, padded: int, devices) -> Any:
    """`sweep` over devices of several processes: each process builds only its shards
    of the (identical) padded batch, the mapped output is all-gathered (replicated), and
    its first `n` rows come back as arrays on this process's default device."""
    leaves, treedef = jax.tree_util.tree_flatten(batch)
    impls = [jax.random.key_impl(x) if _is_key(x) else None for x in leaves]
    hosts = [
        np.asarray(jax.random.key_data(x) if impl else x)
        for x, impl in zip(leaves, impls, strict=True)
    ]
    hosts = [
        x if padded == n else np.concatenate([x, np.repeat(x[-1:], padded - n, axis=0)])
        for x in hosts
    ]
    mesh = Mesh(np.asarray(devices), ("batch",))
    sharding = NamedSharding(mesh, PartitionSpec("batch"))
    replicated = NamedSharding(mesh, PartitionSpec())
    globals_ = [
        jax.make_array_from_callback(x.shape, sharding, lambda idx, x=x: x[idx]) for x in hosts
    ]
    out_keys: list[Any] = []

    def run(*data):
        args = [
            jax.random.wrap_key_data(d, impl=impl) if impl else d
            for d, impl in zip(data, impls, strict=True)
        ]
        out = mapped(jax.tree_util.tree_unflatten(treedef, args))
        flat, out_def = jax.tree_util.tree_flatten(out)
        out_keys[:] = [jax.random.key_impl(y) if _is_key(y) else None for y in flat]
        flat = [jax.random.key_data(y) if _is_key(y) else y for y in flat]
        return jax.tree_util.tree_unflatten(out_def, flat)

    out = jax.jit(run, in_shardings=(sharding,) * len(globals_), out_shardings=replicated)(
        *globals_
    )
    flat, out_def = jax.tree_util.tree_flatten(out)
    local = [jnp.asarray(np.asarray(y)[:n]) for y in flat]
    local = [
        jax.random.wrap_key_data(y, impl=impl) if impl else y
        for y, impl in zip(local, out_keys, strict=True)
    ]
    return jax.tree_util.tree_unflatten(out_def, local)
