"""Discovery of experiment and benchmark modules, and a check of their contract."""

from __future__ import annotations

import importlib
import pkgutil
from types import ModuleType

from ._papers import PAPERS

__all__ = ["discover", "validate_module", "find"]

_EXPERIMENT_ATTRS = ("NAME", "PAPER", "DESCRIPTION", "QUICK", "FULL", "run")
_BENCH_ATTRS = ("NAME", "PAPER", "DESCRIPTION", "QUICK", "FULL", "setup")


def validate_module(mod: ModuleType, *, bench: bool = False) -> ModuleType:
    """Raise `ValueError` naming the module and what it lacks."""
    attrs = _BENCH_ATTRS if bench else _EXPERIMENT_ATTRS
    missing = [a for a in attrs if not hasattr(mod, a)]
    if missing:
        raise ValueError(f"{mod.__name__}: missing {', '.join(missing)}")
    if mod.PAPER not in PAPERS:
        raise ValueError(f"{mod.__name__}: PAPER must be one of {', '.join(PAPERS)}, "
                         f"received {mod.PAPER!r}")
    return mod


def discover(*, bench: bool = False) -> dict[str, ModuleType]:
    """Import every public module of `experiments` (or `experiments.bench`), by NAME."""
    pkg = importlib.import_module("experiments.bench" if bench else "experiments")
    found: dict[str, ModuleType] = {}
    for info in sorted(pkgutil.iter_modules(pkg.__path__), key=lambda i: i.name):
        if info.name.startswith("_") or info.ispkg:
            continue
        mod = validate_module(importlib.import_module(f"{pkg.__name__}.{info.name}"), bench=bench)
        if mod.NAME in found:
            raise ValueError(f"duplicate experiment NAME {mod.NAME!r} in {mod.__name__}")
        found[mod.NAME] = mod
    return found


def find(name: str, *, bench: bool = False) -> ModuleType:
    """The registered module called `name`, or a `KeyError` listing the known names."""
    mods = discover(bench=bench)
    if name not in mods:
        kind = "benchmark" if bench else "experiment"
        raise KeyError(f"unknown {kind} {name!r}; known: {', '.join(sorted(mods)) or '(none)'}")
    return mods[name]
