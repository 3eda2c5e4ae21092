"""Boundary validation: clear `ValueError`s that name the argument.

Public functions call these on their inputs before any tracing-sensitive work.
They work on concrete arrays and on tracers (shape/dtype checks only need
static information); value checks (finiteness, ranges) are skipped for tracers
— inside `jit` use `equinox.error_if` instead.

`error_if_not_finite` is the traced finiteness check (an O(size) reduction per call);
callers that offer an opt-out for hot loops take an explicit `traced_checks=` keyword
(e.g. `laplex.matvec`) and pass it on. Concrete-input checks (`ValueError`s at the
boundary) are never switched off.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import equinox as eqx
import jax
import jax.core
import jax.numpy as jnp
import numpy as np

__all__ = [
    "as_array",
    "available_memory",
    "check_array",
    "check_finite",
    "check_ids",
    "check_instance",
    "check_lengths",
    "check_memory",
    "check_nonnegative_int",
    "check_range",
    "check_real",
    "check_positive_int",
    "check_size",
    "check_strings",
    "error_if_not_finite",
]

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


def as_array(
    name: str,
    x: Any,
    *,
    shape: ShapeSpec | None = None,
    ndim: int | None = None,
    dtype: Any | None = None,
    sizes: dict[str, int] | None = None,
    finite: bool = False,
    nonempty: bool = False,
    low: float | None = None,
    high: float | None = None,
    low_inclusive: bool = True,
    high_inclusive: bool = True,
    real: bool = False,
) -> jax.Array:
    """Convert a list, NumPy or JAX array to a JAX array once, at the boundary, and check it.

    The one entry point for public functions: lists and NumPy arrays become `jnp` arrays
    (so later traced code never meets a NumPy array), tracers pass through unchanged.
    None, strings, mappings and ragged lists raise a `ValueError` naming the argument, as
    does a complex list/NumPy array unless `dtype` admits complex values.
    A Python list/scalar asked to be `jnp.floating` is converted to the default float
    dtype (a list states no dtype); NumPy/JAX arrays keep theirs and are checked. A
    list/tuple holding tracers (inside `jit`) is stacked with `jnp.asarray`.

    **Arguments:**

    - `name`: the argument's name, used in the error message.
    - `x`: the value received.
    - `shape`, `ndim`, `dtype`, `sizes`: as in `check_array`.
    - `finite`: reject NaN/inf (concrete values; inside `jit` use `error_if_not_finite`).
    - `nonempty`: reject arrays with a zero-length axis.
    - `low`, `high`, `low_inclusive`, `high_inclusive`: as in `check_range` (concrete
      values only).
    - `real`: reject complex dtypes even where `dtype` admits them (e.g. `np.number`: any
      integer or float array, whose later cast to float would drop an imaginary part).

    **Returns:** the value as a `jax.Array`.
    """
    if isinstance(x, jax.core.Tracer | jax.Array):
        arr = x
    elif isinstance(x, list | tuple) and any(
        isinstance(v, jax.core.Tracer) for v in jax.tree.leaves(x)
    ):  # e.g. `(lo, lo + 0.1)` inside `jit`: stacked as traced values (shape checks only)
        try:
            arr = jnp.asarray(x)
        except (ValueError, TypeError) as e:  # ragged
            raise ValueError(f"{name}: expected an array, received {type(x).__name__} ({e})") from e
    else:
        if x is None or isinstance(x, str | bytes | dict):
            raise ValueError(f"{name}: expected an array, received {type(x).__name__} ({x!r:.80})")
        try:
            host = np.asarray(x)
        except (ValueError, TypeError) as e:  # ragged nested lists
            raise ValueError(f"{name}: expected an array, received {type(x).__name__} ({e})") from e
        if host.dtype == object or host.dtype.kind in "USV":
            raise ValueError(
                f"{name}: expected a numeric array, received {type(x).__name__} "
                f"of dtype {host.dtype}"
            )
        if host.dtype.kind == "c" and (dtype is None or not jnp.issubdtype(host.dtype, dtype)):
            # a later cast to float would drop the imaginary part silently
            raise ValueError(f"{name}: expected real values, received dtype {host.dtype}")
        if (
            host.dtype.kind in "iu"
            and host.size
            and not jax.config.read("jax_enable_x64")
            and (host.min() < np.iinfo(np.int32).min or host.max() > np.iinfo(np.int32).max)
        ):
            raise ValueError(
                f"{name}: expected integers that fit int32, received range "
                f"[{host.min()}, {host.max()}]"
            )
        if (
            not isinstance(x, np.ndarray | np.generic)
            and dtype is not None
            and isinstance(dtype, type)
            and issubclass(dtype, np.floating)
            and host.dtype.kind in "biu"
        ):
            host = host.astype(float)
        arr = jnp.asarray(host)
    check_array(name, arr, shape=shape, ndim=ndim, dtype=dtype, sizes=sizes)
    if real and jnp.issubdtype(arr.dtype, jnp.complexfloating):
        raise ValueError(f"{name}: expected real values, received dtype {arr.dtype}")
    if nonempty and 0 in arr.shape:
        raise ValueError(f"{name}: expected a non-empty array, received shape {tuple(arr.shape)}")
    if finite:
        check_finite(name, arr)
    if low is not None or high is not None:
        check_range(
            name,
            arr,
            low=low,
            high=high,
            low_inclusive=low_inclusive,
            high_inclusive=high_inclusive,
        )
    return arr


def error_if_not_finite(name: str, x: jax.Array, *, enabled: bool = True) -> jax.Array:
    """Inside `jit`: `x`, with an `equinox.error_if` that fires when it holds NaN/inf.

    The traced counterpart of `check_finite` (an O(size) reduction); `enabled=False`
    returns `x` unchecked, for callers whose hot loop checked its inputs once.
    """
    if not enabled or not jnp.issubdtype(x.dtype, jnp.inexact):
        return x
    return eqx.error_if(x, ~jnp.all(jnp.isfinite(x)), f"{name}: expected finite values")


def check_finite(name: str, x: Any, *, where: Any = None) -> None:
    """Raise if a concrete array holds NaN or inf (no-op under tracing). `where`: a
    boolean mask of `x`'s shape; only the entries where it is True must be finite (e.g. a
    ground truth whose other entries are ignored)."""
    if not _is_concrete(x) or (where is not None and not _is_concrete(where)):
        return
    arr = np.asarray(x)
    if not np.issubdtype(arr.dtype, np.inexact):
        return
    ok = np.isfinite(arr)
    if where is not None:
        ok = ok | ~np.broadcast_to(np.asarray(where, bool), arr.shape)
    if not np.all(ok):
        bad = int(np.size(ok) - np.count_nonzero(ok))
        span = " where it is used" if where is not None else ""
        raise ValueError(f"{name}: expected finite values{span}, received {bad} NaN/inf entries")


def check_range(
    name: str,
    x: Any,
    *,
    low: float | None = None,
    high: float | None = None,
    low_inclusive: bool = True,
    high_inclusive: bool = True,
) -> None:
    """Raise if any entry of a concrete array/scalar lies outside [low, high] (a complex
    array raises: it has no order)."""
    if not _is_concrete(x):
        return
    arr = np.asarray(x)
    lo_b = "[" if low_inclusive else "("
    hi_b = "]" if high_inclusive else ")"
    interval = f"{lo_b}{'-inf' if low is None else low}, {'inf' if high is None else high}{hi_b}"
    if arr.size == 0:
        return
    if np.issubdtype(arr.dtype, np.complexfloating):  # no order: a bound means real values
        raise ValueError(f"{name}: expected real values in {interval}, received {arr.dtype}")
    if np.issubdtype(arr.dtype, np.inexact) and np.any(np.isnan(arr)):
        raise ValueError(f"{name}: expected values in {interval}, received NaN")
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


def check_real(
    name: str,
    x: Any,
    *,
    low: float | None = None,
    high: float | None = None,
    low_inclusive: bool = True,
    high_inclusive: bool = True,
) -> float:
    """A finite real number (Python/NumPy scalar or 0-d array) in [low, high]; returns
    it as `float`. Booleans, strings, None, complex and NaN/inf raise a `ValueError`
    naming the argument (a string "0.5" would compare or multiply as text, a NaN would
    pass every `<` test). A tracer passes through unchecked (inside `jit`)."""
    if isinstance(x, jax.core.Tracer):
        return x  # type: ignore[return-value]
    if isinstance(x, bool | np.bool_ | str | bytes) or x is None:
        raise ValueError(f"{name}: expected a real number, received {type(x).__name__} {x!r:.60}")
    arr = np.asarray(x) if hasattr(x, "shape") or isinstance(x, int | float | np.generic) else None
    if arr is None or arr.shape != () or arr.dtype.kind not in "iuf":
        raise ValueError(f"{name}: expected a real number, received {type(x).__name__} {x!r:.60}")
    v = float(arr)
    if not np.isfinite(v):
        raise ValueError(f"{name}: expected a finite number, received {v}")
    check_range(
        name, v, low=low, high=high, low_inclusive=low_inclusive, high_inclusive=high_inclusive
    )
    return v


def check_nonnegative_int(name: str, x: Any) -> int:
    """Raise unless `x` is a Python/NumPy integer >= 0 (a count that may be zero: rows to
    show, characters to keep); returns it as `int`. Booleans, floats and strings raise."""
    if isinstance(x, bool) or not isinstance(x, int | np.integer) or x < 0:
        raise ValueError(f"{name}: expected an integer >= 0, received {x!r:.60}")
    return int(x)


def check_instance(name: str, x: Any, types: type | tuple[type, ...]) -> Any:
    """Raise unless `x` is an instance of `types` (a `ValueError` naming the argument and
    the expected type, instead of an AttributeError deep inside); returns `x`."""
    if not isinstance(x, types):
        want = " or ".join(t.__name__ for t in (types if isinstance(types, tuple) else (types,)))
        raise ValueError(f"{name}: expected a {want}, received {type(x).__name__} {x!r:.60}")
    return x


def check_size(name: str, x: Any, *, cap: int, why: str = "") -> int:
    """Raise unless `x` is an integer in [1, cap]; returns it as `int`.

    For every size a caller or a file can set (resamples, counts, widths, lengths):
    checked before anything is allocated, so a huge value is a `ValueError` naming the
    argument and its cap instead of an abort inside XLA or a hang. `why` says where the
    cap comes from (shown in the message).
    """
    x = check_positive_int(name, x)
    if x > cap:
        reason = f" ({why})" if why else ""
        raise ValueError(f"{name}: expected at most {cap}{reason}, received {x}")
    return x


def check_ids(name: str, ids: Any, n: int | None, *, what: str = "ids") -> Any:
    """Integer ids, each in [0, n): concrete ids as a NumPy int64 array of the same shape.

    Token, option and class ids are never wrapped: a negative id or one >= `n` raises
    (JAX indexing would clamp or wrap it and return another entry's value silently).
    Booleans, floats and strings raise. `what` names the id space in the message
    (e.g. "token ids", "option ids"). Under tracing the value check is an
    `equinox.error_if` on the returned array (the dtype check stays static).
    `n=None`: no upper bound is known (a tokenizer's ids, labels): only ids < 0 raise.
    """
    if isinstance(ids, jax.core.Tracer):
        if not jnp.issubdtype(ids.dtype, jnp.integer):
            raise ValueError(f"{name}: expected integer {what}, received dtype {ids.dtype}")
        bad = jnp.any(ids < 0) if n is None else jnp.any((ids < 0) | (ids >= n))
        span = "be >= 0" if n is None else f"lie in [0, {n})"
        return eqx.error_if(ids, bad, f"{name}: {what} must {span}")  # type: ignore[return-value]
    if isinstance(ids, str | bytes) or ids is None:
        raise ValueError(f"{name}: expected integer {what}, received {type(ids).__name__}")
    try:
        arr = np.asarray(ids)
    except (ValueError, TypeError) as e:  # ragged nested lists
        raise ValueError(f"{name}: expected integer {what}, received a ragged sequence") from e
    if arr.size and (arr.dtype == bool or not np.issubdtype(arr.dtype, np.integer)):
        raise ValueError(f"{name}: expected integer {what}, received dtype {arr.dtype}")
    arr = arr.astype(np.int64)
    bad = arr[arr < 0] if n is None else arr[(arr < 0) | (arr >= n)]
    if bad.size:
        span = "be >= 0" if n is None else f"lie in [0, {n})"
        raise ValueError(
            f"{name}: {what} must {span}, received {bad[:5].tolist()}"
            + (f" and {bad.size - 5} more" if bad.size > 5 else "")
        )
    return arr


def check_id_lists(name: str, seqs: Any, n: int | None, *, what: str = "ids") -> list[list[int]]:
    """A non-empty sequence of 1-D integer id lists (prompts, completions), each checked by
    `check_ids` as `name[i]`; returns them as lists of ints. A (B, T) array counts as B
    lists. None, a string, a non-sequence, an empty sequence and an entry that is not a
    flat list raise a `ValueError` naming the argument (instead of a TypeError from
    `len` or an ambiguous-truth error from an array)."""
    if seqs is None or isinstance(seqs, str | bytes) or not hasattr(seqs, "__len__"):
        raise ValueError(f"{name}: expected a sequence of {what} lists, received {seqs!r:.60}")
    if len(seqs) and not hasattr(seqs[0], "__len__"):
        raise ValueError(f"{name}: expected a sequence of {what} lists, received flat {what}")
    if len(seqs) == 0:
        raise ValueError(f"{name}: expected at least one {what} list, received none")
    out = []
    for i, s in enumerate(seqs):
        arr = check_ids(f"{name}[{i}]", s, n, what=what)
        if arr.ndim != 1:
            raise ValueError(f"{name}[{i}]: expected a flat list of {what}, received {arr.ndim}-D")
        out.append(arr.tolist())
    return out


def check_lengths(**named: Any) -> int:
    """Raise unless every named argument has the same length (`len` or leading axis);
    returns that length. Paired arguments (features and queries, items and labels)
    must match; a shorter one is never broadcast or truncated."""
    lengths = {
        k: (v.shape[0] if hasattr(v, "shape") and v.shape else len(v)) for k, v in named.items()
    }
    if len(set(lengths.values())) > 1:
        pretty = ", ".join(f"{k}={n}" for k, n in lengths.items())
        raise ValueError(f"{', '.join(lengths)}: expected one length, received {pretty}")
    return next(iter(lengths.values()), 0)


def check_strings(name: str, x: Any, *, nonempty: bool = True) -> tuple[str, ...]:
    """A sequence of strings as a tuple. A bare string raises (it would iterate as its
    characters: `candidates="abc"` is not three candidates), as do non-string entries."""
    if isinstance(x, str | bytes):
        raise ValueError(f"{name}: expected a sequence of strings, received the string {x!r:.60}")
    try:
        out = tuple(x)
    except TypeError as e:
        raise ValueError(
            f"{name}: expected a sequence of strings, received {type(x).__name__}"
        ) from e
    bad = [v for v in out if not isinstance(v, str)]
    if bad:
        raise ValueError(f"{name}: expected strings, received {bad[0]!r:.60}")
    if nonempty and not out:
        raise ValueError(f"{name}: expected at least one string, received none")
    return out


def _address_space_left() -> int | None:
    """Bytes of address space left under this process's RLIMIT_AS (a soft limit set by
    `ulimit -v` or a parent process), or None when there is no limit or it cannot be
    read: the limit minus the current virtual size (VmSize in /proc/self/status)."""
    try:
        import resource

        soft, _ = resource.getrlimit(resource.RLIMIT_AS)
        if soft == resource.RLIM_INFINITY:
            return None
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmSize:"):
                    return max(0, soft - int(line.split()[1]) * 1024)
    except (ImportError, OSError, ValueError):
        return None
    return None


def available_memory() -> int:
    """Bytes of memory this process may still allocate: MemAvailable from /proc/meminfo
    where it exists, otherwise physical memory (os.sysconf), otherwise 8 GiB; at most the
    address space left under the process's RLIMIT_AS when one is set (a larger request
    would be a MemoryError, not a refusal)."""
    system = _system_memory()
    limit = _address_space_left()
    return system if limit is None else min(system, limit)


def _system_memory() -> int:
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    try:
        import os

        return int(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES"))
    except (ValueError, OSError, AttributeError):
        return 8 << 30


def check_memory(name: str, n_bytes: float, *, fraction: float = 0.5) -> None:
    """Raise before allocating when an argument asks for more than `fraction` of the
    memory still available (`available_memory`): the estimate `n_bytes` is the caller's
    (e.g. resamples x items x 8). The message names the argument and both sizes."""
    budget = fraction * available_memory()
    if not np.isfinite(n_bytes) or n_bytes > budget:
        raise ValueError(
            f"{name}: needs about {n_bytes / 2**30:.1f} GiB, more than {fraction:.0%} of "
            f"the {budget / fraction / 2**30:.1f} GiB available; use a smaller value"
        )
