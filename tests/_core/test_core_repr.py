"""Issue 60: data containers print arrays as dtype[shape] and cut long sequences (before,
`print(table)` printed every value and all 599 query ids)."""

from __future__ import annotations

import dataclasses
import importlib
import inspect
import pkgutil
import re
from typing import NamedTuple

import equinox as eqx
import jax.numpy as jnp
import numpy as np

import jaxlab
from jaxlab._core import short_repr
from jaxlab._core._repr import short_value


@dataclasses.dataclass(frozen=True)
class _Box:
    x: np.ndarray
    names: tuple[str, ...]
    note: str = ""
    table: dict = dataclasses.field(default_factory=dict)

    __repr__ = short_repr


class _Pair(NamedTuple):
    a: jnp.ndarray
    n: int

    __repr__ = short_repr


def test_values_by_hand():
    assert short_value(np.zeros((599, 6))) == "f64[599,6]"
    assert short_value(jnp.zeros((3,), jnp.int32)) == "i32[3]"
    assert short_value(np.zeros(4, bool)) == "bool[4]"
    assert short_value(np.array(["a", "bc"])) == "str[2]"
    assert short_value(("a", "b")) == "('a', 'b')"
    assert short_value(("a",)) == "('a',)"
    assert short_value([1, 2, 3, 4, 5, 6, 7]) == "[1, 2, 3, ... (7 items)]"
    assert short_value(tuple(f"q{i}" for i in range(599))) == "('q0', 'q1', 'q2', ... (599 items))"
    assert short_value({"a": 1}) == "{'a': 1}"
    assert short_value({str(i): i for i in range(10)}) == "{'0': 0, '1': 1, '2': 2, ... (10 items)}"
    long = "x" * 500
    assert short_value(long) == repr("x" * 60) + "... (500 chars)"


def test_containers_by_hand():
    box = _Box(np.ones((2, 3), np.float32), tuple("abcdefgh"), table={"t": _Box(np.ones(1), ())})
    assert repr(box) == (
        "_Box(x=f32[2,3], names=('a', 'b', 'c', ... (8 items)), note='', table={'t': _Box(...)})"
    )
    assert repr(_Pair(jnp.zeros((5, 2), jnp.float32), 3)) == "_Pair(a=f32[5,2], n=3)"


def test_routing_table_of_599_queries():
    from jaxlab import routing

    n = 599
    table = routing.RoutingTable(
        quality=np.zeros((n, 3)),
        cost=np.ones((n, 3)),
        candidates=("a", "b", "c"),
        features=np.zeros((n, 16)),
        query_ids=tuple(f"item/{i}" for i in range(n)),
    )
    r = repr(table)
    assert len(r) < 800, len(r)
    assert "quality=f64[599,3]" in r
    assert "features=f64[599,16]" in r
    assert "(599 items)" in r
    assert "item/3'" not in r  # only the first three ids


def _containers():
    """Public non-equinox dataclasses and named tuples of every component (flax modules
    keep their own repr)."""
    import flax.linen as nn

    seen = set()
    mods = [jaxlab] + [
        importlib.import_module(f"jaxlab.{i.name}")
        for i in pkgutil.iter_modules(jaxlab.__path__)
        if not i.name.startswith("_")
    ]
    for mod in mods:
        for name, cls in vars(mod).items():
            if name.startswith("_") or not inspect.isclass(cls) or cls in seen:
                continue
            seen.add(cls)
            if issubclass(cls, eqx.Module | nn.Module):
                continue
            if dataclasses.is_dataclass(cls):
                ann = {f.name: str(f.type) for f in dataclasses.fields(cls)}
            elif issubclass(cls, tuple) and hasattr(cls, "_fields"):
                ann = {k: str(t) for k, t in getattr(cls, "__annotations__", {}).items()}
            else:
                continue
            yield cls, ann


# containers without an array-typed field that still hold long data (tables, texts, ids)
LONG = {"Lake", "Discovery", "CompletionSet", "RouterSelection", "Complex", "SnapshotData"}


def test_every_container_of_arrays_has_the_short_repr():
    arrays = re.compile(r"Array|ndarray|Float\[|Int\[|Bool\[|UInt")
    want = [
        cls
        for cls, ann in _containers()
        if cls.__name__ in LONG or any(arrays.search(t) for t in ann.values())
    ]
    assert len(want) >= 20
    missing = sorted(c.__qualname__ for c in want if c.__repr__ is not short_repr)
    assert not missing, "containers printing whole arrays: " + str(missing)
