"""Boundary validation: clear `ValueError`s that name the argument.

Public functions call these on their inputs before any tracing-sensitive work.
They work on concrete arrays and on tracers (shape/dtype checks only need
static information); value checks (finiteness, ranges) are skipped for tracers
— inside `jit` use `equinox.error_if` instead.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import jax
import jax.core
import jax.numpy as jnp
import numpy as np

__all__ = ["check_array", "check_finite", "check_range", "check_positive_int"]

# A shape spec entry: an int (exact), None (any size), or a str (named size that
# must agree across all entries with the same name within one call).
ShapeSpec = Sequence[int | str | None]


def _is_concrete(x: Any) -> bool:
    return not isinstance(x, jax.core.Tracer)


def check_array(
    name: str,
    x: Any,
    *,
    shape: ShapeSpec | None = None,
    ndim: int | None = None,
    dtype: Any | None = None,
    sizes: dict[str, int] | None = None,
) -> dict[str, int]:
    """Check that `x` is an array of the expected shape / dtype kind.

    **Arguments:**

    - `name`: the argument's name, used in the error message.
    - `x`: the value received.
    - `shape`: expected shape; entries are ints, `None` (any) or names that must
      agree with `sizes` (and are recorded there).
    - `ndim`: expected number of dimensions (when `shape` is not given).
    - `dtype`: a dtype *kind* such as `jnp.floating`, `jnp.integer`,
      `jnp.complexfloating`, `jnp.inexact`, or a concrete dtype.
    - `sizes`: named sizes already bound by earlier checks (updated in place).

    **Returns:** the `sizes` dict with any newly bound names.
    """
    sizes = {} if sizes is None else sizes
    if not hasattr(x, "shape") or not hasattr(x, "dtype"):
        raise ValueError(f"{name}: expected an array, received {type(x).__name__} ({x!r:.80})")
    got = tuple(x.shape)
    if ndim is not None and len(got) != ndim:
        raise ValueError(f"{name}: expected {ndim}-D array, received shape {got}")
    if shape is not None:
        expected = tuple(shape)
        bound = dict(sizes)  # commit new bindings only when the whole shape matches
        ok = len(got) == len(expected)
        if ok:
            for g, e in zip(got, expected, strict=True):
                if e is None:
                    continue
                if isinstance(e, str):
                    if e in bound and bound[e] != g:
                        ok = False
                        break
                    bound[e] = g
                elif g != e:
                    ok = False
                    break
        if not ok:
            pretty = tuple(
                (f"{e}={sizes[e]}" if isinstance(e, str) and e in sizes else e) for e in expected
            )
            raise ValueError(f"{name}: expected shape {pretty}, received shape {got}")
        sizes.update(bound)
    if dtype is not None:
        dt = jnp.dtype(x.dtype)
        if isinstance(dtype, type) and issubclass(dtype, np.generic):
            good = jnp.issubdtype(dt, dtype)
        else:
            good = dt == jnp.dtype(dtype)
        if not good:
            want = getattr(dtype, "__name__", str(dtype))
            raise ValueError(f"{name}: expected dtype {want}, received {dt}")
    return sizes


def check_finite(name: str, x: Any) -> None:
    """Raise if a concrete array holds NaN or inf (no-op under tracing)."""
    if _is_concrete(x):
        arr = np.asarray(x)
        if np.issubdtype(arr.dtype, np.inexact) and not np.all(np.isfinite(arr)):
            bad = int(np.size(arr) - np.count_nonzero(np.isfinite(arr)))
            raise ValueError(f"{name}: expected finite values, received {bad} NaN/inf entries")


def check_range(
    name: str,
    x: Any,
    *,
    low: float | None = None,
    high: float | None = None,
    low_inclusive: bool = True,
    high_inclusive: bool = True,
) -> None:
    """Raise if any entry of a concrete array/scalar lies outside [low, high]."""
    if not _is_concrete(x):
        return
    arr = np.asarray(x)
    lo_b = "[" if low_inclusive else "("
    hi_b = "]" if high_inclusive else ")"
    interval = f"{lo_b}{'-inf' if low is None else low}, {'inf' if high is None else high}{hi_b}"
    if arr.size == 0:
        return
    mn, mx = arr.min(), arr.max()
    if low is not None and (mn < low or (not low_inclusive and mn == low)):
        raise ValueError(f"{name}: expected values in {interval}, received min {mn}")
    if high is not None and (mx > high or (not high_inclusive and mx == high)):
        raise ValueError(f"{name}: expected values in {interval}, received max {mx}")


def check_positive_int(name: str, x: Any) -> int:
    """Raise unless `x` is a Python/NumPy integer >= 1; returns it as `int`."""
    if isinstance(x, bool) or not isinstance(x, int | np.integer) or x < 1:
        raise ValueError(f"{name}: expected a positive integer, received {x!r}")
    return int(x)
