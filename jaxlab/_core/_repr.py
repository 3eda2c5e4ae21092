"""Short reprs for data containers (dataclasses and named tuples that hold arrays or long
sequences): arrays as `f64[599,6]` (equinox's style), long sequences and mappings cut to
their first items and a count, long strings cut. `print(table)` then fits on a screen
instead of printing every value and all 599 query ids.

A class opts in with `__repr__ = short_repr` in its body (a dataclass keeps a `__repr__`
defined there; so does a `typing.NamedTuple`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping

import numpy as np

__all__ = ["short_repr", "short_value"]

_ITEMS = 3  # items shown of a long sequence or mapping
_LONG = 6  # a sequence longer than this is cut
_CHARS = 80  # a string or fallback repr longer than this is cut

_KIND = {"f": "f", "i": "i", "u": "u", "c": "c"}


def _array_repr(x) -> str:
    dtype = np.dtype(x.dtype)
    if dtype.kind in _KIND:
        name = f"{_KIND[dtype.kind]}{dtype.itemsize * 8}"
    elif dtype.kind == "b":
        name = "bool"
    elif dtype.kind in "US":
        name = "str"
    else:
        name = dtype.name
    return f"{name}[{','.join(str(int(d)) for d in x.shape)}]"


def _is_array(x) -> bool:
    return isinstance(x, np.ndarray) or (
        hasattr(x, "shape") and hasattr(x, "dtype") and type(x).__module__.startswith("jax")
    )


def short_value(x, depth: int = 0) -> str:
    """A short repr of one value (arrays by dtype and shape, long containers cut)."""
    if _is_array(x):
        return _array_repr(x)
    if isinstance(x, str | bytes):
        if len(x) <= _CHARS:
            return repr(x)
        return f"{x[: _CHARS - 20]!r}... ({len(x)} chars)"
    if isinstance(x, tuple | list) and not hasattr(x, "_fields"):
        open_, close = ("(", ")") if isinstance(x, tuple) else ("[", "]")
        if len(x) <= _LONG:
            items = [short_value(e, depth + 1) for e in x]
            tail = "," if isinstance(x, tuple) and len(x) == 1 else ""
            return f"{open_}{', '.join(items)}{tail}{close}"
        head = ", ".join(short_value(e, depth + 1) for e in x[:_ITEMS])
        return f"{open_}{head}, ... ({len(x)} items){close}"
    if isinstance(x, Mapping):
        keys = list(x)
        shown = keys if len(keys) <= _LONG else keys[:_ITEMS]
        body = ", ".join(
            f"{short_value(k, depth + 1)}: {short_value(x[k], depth + 1)}" for k in shown
        )
        more = f", ... ({len(keys)} items)" if len(shown) < len(keys) else ""
        return "{" + body + more + "}"
    if _fields(x) is not None:
        return f"{type(x).__name__}(...)" if depth >= 1 else short_repr(x)
    r = repr(x)
    return r if len(r) <= _CHARS else r[: _CHARS - 3] + "..."


def _fields(x) -> list[str] | None:
    if dataclasses.is_dataclass(x) and not isinstance(x, type):
        return [f.name for f in dataclasses.fields(x) if f.repr]
    if isinstance(x, tuple) and hasattr(x, "_fields"):
        return list(x._fields)  # type: ignore[attr-defined]
    return None


def short_repr(self) -> str:
    """`Name(field=value, ...)` with every value through `short_value`."""
    names = _fields(self) or []
    body = ", ".join(f"{n}={short_value(getattr(self, n), 1)}" for n in names)
    return f"{type(self).__name__}({body})"
