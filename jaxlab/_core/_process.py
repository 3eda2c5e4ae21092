"""`process_slice`: this process's share of a work list in a multi-process JAX job.

A job launched on several hosts (or several processes of one host) runs the same
program in each of P = `jax.process_count()` processes; process p = `jax.process_index()`.
Work that is not one array computation (a list of prompts to generate from, files to
build, items to cache) is split by contiguous blocks: with n items, process p gets

    items[lo_p : hi_p],   lo_p = p * (n // P) + min(p, n mod P),
                          hi_p = lo_p + n // P + (1 if p < n mod P else 0),

so the blocks are disjoint, cover every item once, keep the list's order, and differ
in length by at most one. With one process (the default) it is the whole list.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TypeVar

import jax

from ._validate import check_positive_int

__all__ = ["process_bounds", "process_slice"]

T = TypeVar("T")


def process_bounds(n: int, *, index: int | None = None, count: int | None = None) -> range:
    """The indices `range(lo, hi)` of process `index` of `count` in a list of `n` items.

    **Arguments:**

    - `n`: the list's length (>= 0).
    - `index`, `count`: the process and the number of processes (default:
      `jax.process_index()` and `jax.process_count()`).

    **Returns:** `range(lo_p, hi_p)` with the block bounds of the module docstring.
    """
    if isinstance(n, bool) or not isinstance(n, int) or n < 0:
        raise ValueError(f"n: expected a non-negative int, received {n!r}")
    count = jax.process_count() if count is None else check_positive_int("count", count)
    index = jax.process_index() if index is None else index
    if isinstance(index, bool) or not isinstance(index, int) or not 0 <= index < count:
        raise ValueError(f"index: expected an int in [0, {count}), received {index!r}")
    base, extra = divmod(n, count)
    lo = index * base + min(index, extra)
    return range(lo, lo + base + (1 if index < extra else 0))


def process_slice(
    items: Sequence[T], *, index: int | None = None, count: int | None = None
) -> list[T]:
    """This process's contiguous block of `items` (see the module docstring).

    Over `index = 0 .. count - 1` the blocks partition `items`: no item is done twice,
    none is left out. A single-process run gets every item.

    **Arguments:**

    - `items`: the work list, the same on every process.
    - `index`, `count`: as in `process_bounds` (default: this JAX process of all).
    """
    return [items[i] for i in process_bounds(len(items), index=index, count=count)]
