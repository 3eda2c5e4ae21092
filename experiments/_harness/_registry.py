"""Discovery of experiment and benchmark modules, and a check of their contract.

Experiments live in one subpackage per component, `experiments/<component>/<claim>.py`,
with NAME `<component>_<claim>` (`experiments/cells/rare.py` is `cells_rare`); modules whose
name starts with `_` (the component's `_setup.py`) are shared set-up, not experiments.
Benchmarks live in `experiments/bench/<name>.py` with NAME `<name>`. No module under
`experiments` imports an experiment module: what experiments share lives in the
component's `_setup.py` (or in the library).
"""

from __future__ import annotations

import ast
import difflib
import importlib
import pkgutil
from pathlib import Path
from types import ModuleType

from ._config import check_config_pair
from ._papers import PAPERS

__all__ = ["discover", "validate_module", "find", "check_imports", "UnknownName"]

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
        raise ValueError(
            f"{mod.__name__}: PAPER must be one of {', '.join(PAPERS)}, received {mod.PAPER!r}"
        )
    need = getattr(mod, "FULL_MEMORY_GB", None)
    if need is not None and not (isinstance(need, int | float) and need > 0):
        raise ValueError(
            f"{mod.__name__}: FULL_MEMORY_GB must be a positive number, received {need!r}"
        )
    timing = getattr(mod, "TIMING_METRICS", ())
    if not (isinstance(timing, tuple) and all(isinstance(t, str) and t for t in timing)):
        raise ValueError(
            f"{mod.__name__}: TIMING_METRICS must be a tuple of metric-name patterns, "
            f"received {timing!r}"
        )
    tiny = getattr(mod, "TINY", None)
    if bench:
        if tiny is not None and not (isinstance(tiny, dict) and set(tiny) <= set(mod.QUICK)):
            raise ValueError(
                f"{mod.__name__}: TINY must be a dict with keys among QUICK's "
                f"({sorted(mod.QUICK)}), received {tiny!r}"
            )
    else:
        check_config_pair(mod.__name__, mod.QUICK, mod.FULL, tiny)
    work = getattr(mod, "full_work", None)
    if work is not None and not callable(work):
        raise ValueError(f"{mod.__name__}: full_work must be a function of a config")
    return mod


def _experiment_path(dotted: str, package: str) -> bool:
    """Whether `dotted` names an experiment module `<package>.<component>.<claim>`."""
    parts = dotted.split(".")
    return (
        len(parts) >= 3
        and parts[0] == package
        and parts[1] != _BENCH_PACKAGE
        and not parts[1].startswith("_")
        and not parts[2].startswith("_")
    )


def _imported_names(tree: ast.Module, modname: str, is_package: bool) -> list[str]:
    """Dotted names of everything `modname` imports (relative imports resolved)."""
    names = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names += [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base_parts = modname.split(".")
                drop = node.level - 1 if is_package else node.level
                base_parts = base_parts[: len(base_parts) - drop]
                base = ".".join(base_parts + ([node.module] if node.module else []))
            else:
                base = node.module or ""
            names += [base] + [f"{base}.{a.name}" for a in node.names]
    return names


def check_imports(path: Path, modname: str, *, package: str = "experiments") -> None:
    """`ValueError` if the module at `path` (called `modname`) imports an experiment module.

    Read from the source (nothing is imported): `import`, `from ... import` and relative
    imports anywhere in the file count.
    """
    tree = ast.parse(Path(path).read_text(), filename=str(path))
    is_package = Path(path).name == "__init__.py"
    bad = sorted(
        {
            ".".join(n.split(".")[:3])
            for n in _imported_names(tree, modname, is_package)
            if _experiment_path(n, package)
        }
        - {modname}
    )
    if bad:
        raise ValueError(
            f"{modname} imports the experiment module(s) {', '.join(bad)}; "
            "experiments never import each other: move what they share to the "
            "component's _setup.py (or into the library)"
        )


def _check_package_imports(pkg: ModuleType, package: str) -> None:
    for info in pkgutil.iter_modules(pkg.__path__):
        if not info.ispkg:
            check_imports(
                Path(pkg.__path__[0]) / f"{info.name}.py",
                f"{pkg.__name__}.{info.name}",
                package=package,
            )


def _public_modules(pkg: ModuleType, *, packages: bool) -> list[str]:
    return [
        i.name
        for i in sorted(pkgutil.iter_modules(pkg.__path__), key=lambda i: i.name)
        if not i.name.startswith("_") and i.ispkg == packages
    ]


def _module_names(package: str, bench: bool) -> list[tuple[str, str]]:
    """(dotted module path, expected NAME) of every experiment or benchmark module."""
    root = importlib.import_module(package)
    if bench:
        pkg = importlib.import_module(f"{package}.{_BENCH_PACKAGE}")
        _check_package_imports(pkg, package)
        return [(f"{pkg.__name__}.{m}", m) for m in _public_modules(pkg, packages=False)]
    out = []
    for comp in _public_modules(root, packages=True):
        if comp == _BENCH_PACKAGE:
            continue
        pkg = importlib.import_module(f"{package}.{comp}")
        _check_package_imports(pkg, package)
        mods = _public_modules(pkg, packages=False)
        out += [(f"{pkg.__name__}.{m}", f"{comp}_{m}") for m in mods]
    return out


def _load(path: str, expected: str, bench: bool) -> ModuleType:
    mod = validate_module(importlib.import_module(path), bench=bench)
    if expected != mod.NAME:
        raise ValueError(
            f"{path}: NAME must be {expected!r} (from its place in the tree), received {mod.NAME!r}"
        )
    return mod


def discover(*, bench: bool = False, package: str = "experiments") -> dict[str, ModuleType]:
    """Import every experiment (or benchmark) module under `package`, by NAME."""
    found: dict[str, ModuleType] = {}
    for path, expected in _module_names(package, bench):
        mod = _load(path, expected, bench)
        found[mod.NAME] = mod
    return found


class UnknownName(KeyError):
    """No experiment (or benchmark) has this NAME; `str()` is one line with suggestions."""

    def __str__(self) -> str:
        return str(self.args[0])


def find(name: str, *, bench: bool = False, package: str = "experiments") -> ModuleType:
    """The registered module called `name`, or `UnknownName` (a `KeyError`) suggesting the
    closest known names.

    Imports only that module (its path follows from the NAME).
    """
    names = _module_names(package, bench)
    for path, expected in names:
        if expected == name:
            return _load(path, expected, bench)
    kind = "benchmark" if bench else "experiment"
    close = difflib.get_close_matches(name, sorted(e for _, e in names), n=3, cutoff=0.6)
    hint = f"did you mean {' or '.join(close)}? " if close else ""
    raise UnknownName(
        f"unknown {kind} {name!r}; {hint}(`python -m experiments list` names them all)"
    )
