"""Discovery of experiment and benchmark modules, and a check of their contract.

Experiments live in one subpackage per component, `experiments/<component>/<claim>.py`,
with NAME `<component>_<claim>` (`experiments/cells/rare.py` is `cells_rare`); modules whose
name starts with `_` (the component's `_setup.py`) are shared set-up, not experiments.
Benchmarks live in `experiments/bench/<name>.py` with NAME `<name>`.
"""

from __future__ import annotations

import importlib
import pkgutil
from types import ModuleType

from ._papers import PAPERS

__all__ = ["discover", "validate_module", "find"]

_EXPERIMENT_ATTRS = ("NAME", "PAPER", "DESCRIPTION", "QUICK", "FULL", "run")
_BENCH_ATTRS = ("NAME", "PAPER", "DESCRIPTION", "QUICK", "FULL", "setup")
_BENCH_PACKAGE = "bench"


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


def _public_modules(pkg: ModuleType, *, packages: bool) -> list[str]:
    return [i.name for i in sorted(pkgutil.iter_modules(pkg.__path__), key=lambda i: i.name)
            if not i.name.startswith("_") and i.ispkg == packages]


def _module_names(package: str, bench: bool) -> list[tuple[str, str]]:
    """(dotted module path, expected NAME) of every experiment or benchmark module."""
    root = importlib.import_module(package)
    if bench:
        pkg = importlib.import_module(f"{package}.{_BENCH_PACKAGE}")
        return [(f"{pkg.__name__}.{m}", m) for m in _public_modules(pkg, packages=False)]
    out = []
    for comp in _public_modules(root, packages=True):
        if comp == _BENCH_PACKAGE:
            continue
        pkg = importlib.import_module(f"{package}.{comp}")
        mods = _public_modules(pkg, packages=False)
        out += [(f"{pkg.__name__}.{m}", f"{comp}_{m}") for m in mods]
    return out


def _load(path: str, expected: str, bench: bool) -> ModuleType:
    mod = validate_module(importlib.import_module(path), bench=bench)
    if mod.NAME != expected:
        raise ValueError(f"{path}: NAME must be {expected!r} (from its place in the tree), "
                         f"received {mod.NAME!r}")
    return mod


def discover(*, bench: bool = False, package: str = "experiments") -> dict[str, ModuleType]:
    """Import every experiment (or benchmark) module under `package`, by NAME."""
    found: dict[str, ModuleType] = {}
    for path, expected in _module_names(package, bench):
        mod = _load(path, expected, bench)
        found[mod.NAME] = mod
    return found


def find(name: str, *, bench: bool = False, package: str = "experiments") -> ModuleType:
    """The registered module called `name`, or a `KeyError` listing the known names.

    Imports only that module (its path follows from the NAME).
    """
    for path, expected in _module_names(package, bench):
        if expected == name:
            return _load(path, expected, bench)
    kind = "benchmark" if bench else "experiment"
    known = ", ".join(sorted(e for _, e in _module_names(package, bench))) or "(none)"
    raise KeyError(f"unknown {kind} {name!r}; known: {known}")
