"""Structure checks of docs/design.md §1, read statically from the source with `ast`
(nothing is imported):

- no import circle among the modules of `jaxlab/` and `experiments/`;
- experiments use only the public face of jaxlab: no module under `experiments/` (except
  the harness, `experiments._harness`, their infrastructure over `jaxlab._core`) imports
  a private module (`jaxlab._core`, `jaxlab.<comp>._model`, any dotted part starting with
  `_`) or a private name (`from jaxlab.cells import _x`);
- no experiment imports another experiment: a module of `experiments/<comp>/` imports,
  of `experiments`, only the harness's public face (`experiments._harness`) and its own
  component's private helpers (`experiments.<comp>._setup`, ...), never a claim module
  (`experiments.<comp>.<claim>`) nor another component's helpers.

Which imports count: every `import` and `from ... import` statement anywhere in a module,
at module level and inside functions, classes and `try` blocks alike (a function-level
import closes a circle as soon as the function runs), with relative imports resolved
against the importing module's package. The one exception is a block under
`if TYPE_CHECKING:`, which never runs: it is left out of the circle check (a typing-only
back-reference is how a circle is legitimately broken) but kept for the two
public-face rules. `from pkg import name` is an edge to the module `pkg.name` when that
is a module of the tree, else to `pkg`; edges from a package's `__init__` to its own
submodules (the re-exports) are part of the graph like any other.
"""

from __future__ import annotations

import ast
import dataclasses
import functools
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

# Forbidden imports that exist today in files other helpers are editing or that the lead
# owns; each entry is (importing module, imported module) and is reported if it is gone,
# so the list can only shrink. The lead empties it.
ALLOWED_FOR_NOW: dict[tuple[str, str], str] = {}


@dataclasses.dataclass(frozen=True)
class Import:
    source: str  # importing module
    target: str  # imported module of the tree
    names: tuple[str, ...]  # names imported from `target` (empty for `import target`)
    line: int
    typing_only: bool  # under `if TYPE_CHECKING:`


def module_map(root: Path, packages: list[str]) -> dict[str, Path]:
    """Dotted module name -> file, for every `.py` under `root/<package>` (a package's
    `__init__.py` is the package itself)."""
    mods = {}
    for pkg in packages:
        for path in sorted((root / pkg).rglob("*.py")):
            parts = list(path.relative_to(root).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts = parts[:-1]
            mods[".".join(parts)] = path
    return mods


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _walk(node: ast.AST, typing_only: bool = False):
    """(import statement, under TYPE_CHECKING) for every import below `node`."""
    for child in ast.iter_child_nodes(node):
        if isinstance(child, (ast.Import, ast.ImportFrom)):
            yield child, typing_only
        elif isinstance(child, ast.If) and _is_type_checking(child.test):
            for stmt in child.body:
                yield from _walk_stmt(stmt, True)
            for stmt in child.orelse:
                yield from _walk_stmt(stmt, typing_only)
        else:
            yield from _walk(child, typing_only)


def _walk_stmt(stmt: ast.stmt, typing_only: bool):
    if isinstance(stmt, (ast.Import, ast.ImportFrom)):
        yield stmt, typing_only
    else:
        yield from _walk(stmt, typing_only)


def imports_of(name: str, path: Path, mods: dict[str, Path]) -> list[Import]:
    """The imports of module `name` (file `path`) that land on modules of `mods`."""
    package = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
    out = []
    for node, typing_only in _walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            for alias in node.names:
                # `import a.b.c` runs a, a.b and a.b.c; the deepest module of the tree counts
                parts = alias.name.split(".")
                for k in range(len(parts), 0, -1):
                    if ".".join(parts[:k]) in mods:
                        out.append(Import(name, ".".join(parts[:k]), (), node.lineno, typing_only))
                        break
            continue
        if node.level:
            if node.level - 1 > len(package):
                raise ValueError(f"{path}:{node.lineno}: relative import beyond the top package")
            base = package[: len(package) - (node.level - 1)]
            module = ".".join(base + ([node.module] if node.module else []))
        else:
            module = node.module or ""
        plain = []
        for alias in node.names:
            sub = f"{module}.{alias.name}"
            if sub in mods:
                out.append(Import(name, sub, (), node.lineno, typing_only))
            else:
                plain.append(alias.name)
        if plain and module in mods:
            out.append(Import(name, module, tuple(plain), node.lineno, typing_only))
    return out


def import_graph(root: Path, packages: list[str]) -> list[Import]:
    mods = module_map(root, packages)
    return [imp for name, path in mods.items() for imp in imports_of(name, path, mods)]


def circles(imports: list[Import]) -> list[list[str]]:
    """One cycle (a list of modules, first repeated last) per strongly connected component
    of more than one module, or of one module importing itself (Tarjan, iterative)."""
    graph: dict[str, set[str]] = {}
    for imp in imports:
        if imp.typing_only or imp.source == imp.target:
            continue
        graph.setdefault(imp.source, set()).add(imp.target)
        graph.setdefault(imp.target, set())
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components = []
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            v, children = work[-1]
            for w in children:
                if w not in index:
                    index[w] = low[w] = len(index)
                    stack.append(w)
                    on_stack.add(w)
                    work.append((w, iter(sorted(graph[w]))))
                    break
                if w in on_stack:
                    low[v] = min(low[v], index[w])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[v])
                if low[v] == index[v]:
                    comp = []
                    while True:
                        w = stack.pop()
                        on_stack.discard(w)
                        comp.append(w)
                        if w == v:
                            break
                    if len(comp) > 1:
                        components.append(set(comp))
    return [_cycle_in(graph, comp) for comp in components]


def _cycle_in(graph: dict[str, set[str]], comp: set[str]) -> list[str]:
    """A shortest cycle through the smallest module of a strongly connected component."""
    start = min(comp)
    prev = {start: start}
    frontier = [start]
    while frontier:
        nxt = []
        for v in frontier:
            for w in sorted(graph[v] & comp):
                if w == start:
                    path = [v]
                    while path[-1] != start:
                        path.append(prev[path[-1]])
                    return [*reversed(path), start]
                if w not in prev:
                    prev[w] = v
                    nxt.append(w)
        frontier = nxt
    raise AssertionError(f"not a strongly connected component: {sorted(comp)}")


def _private(module: str) -> bool:
    return any(part.startswith("_") for part in module.split("."))


def _component(module: str) -> str | None:
    """`experiments.<comp>.<...>` -> `<comp>` (None for experiments' own top modules)."""
    parts = module.split(".")
    return parts[1] if len(parts) > 2 or (len(parts) == 2 and parts[1] != "__main__") else None


def violations(imports: list[Import], top: str = "experiments", lib: str = "jaxlab") -> list:
    """(source, target, line, why) for every import that breaks the two public-face rules."""
    bad = []
    for imp in imports:
        s, t = imp.source, imp.target
        if s.split(".")[0] != top:
            continue
        if t.split(".")[0] == lib:
            if _component(s) == "_harness":
                continue  # the harness is the experiments' infrastructure over jaxlab._core
            if _private(t):
                bad.append((s, t, imp.line, "private jaxlab module"))
            elif any(n.startswith("_") for n in imp.names):
                bad.append(
                    (s, t, imp.line, f"private name {[n for n in imp.names if n[0] == '_']}")
                )
            continue
        if t.split(".")[0] != top:
            continue
        comp_s, comp_t = _component(s), _component(t)
        if comp_s in (None, "_harness"):
            continue  # the harness and `python -m experiments` may reach every experiment
        if comp_s == "bench" and comp_t and s.split(".")[-1].startswith(comp_t + "_"):
            comp_s = comp_t  # benchmark `bench/<comp>_<x>.py` times <comp>'s helpers
        if t == f"{top}._harness":
            continue
        if comp_t == "_harness":
            bad.append((s, t, imp.line, "private harness module (import experiments._harness)"))
        elif comp_t != comp_s:
            bad.append((s, t, imp.line, "another component's experiment code"))
        elif t != f"{top}.{comp_s}" and not t.split(".")[-1].startswith("_"):
            bad.append((s, t, imp.line, "a claim module (experiments import only helpers)"))
    return bad


# --- the checks on this repository ------------------------------------------------------


@functools.cache
def _repo_imports() -> tuple[Import, ...]:
    return tuple(import_graph(ROOT, ["jaxlab", "experiments"]))


def test_no_import_circles():
    found = circles(list(_repo_imports()))
    assert not found, "import circles:\n" + "\n".join(" -> ".join(c) for c in found)


def test_experiments_use_public_jaxlab_and_no_other_experiment():
    bad = violations(list(_repo_imports()))
    pairs = {(s, t) for s, t, _, _ in bad}
    new = [
        f"{s}:{line} imports {t}: {why}" for s, t, line, why in bad if (s, t) not in ALLOWED_FOR_NOW
    ]
    assert not new, "forbidden imports:\n" + "\n".join(new)
    gone = sorted(set(ALLOWED_FOR_NOW) - pairs)
    assert not gone, f"allowed-for-now imports no longer present (remove them): {gone}"


# --- the checker itself, on a synthetic tree ---------------------------------------------


def _write(root: Path, files: dict[str, str]) -> None:
    for rel, text in files.items():
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)


def test_checker_finds_circles_through_relative_and_function_level_imports(tmp_path):
    _write(
        tmp_path,
        {
            "lib/__init__.py": "from .a import f as f\n",
            "lib/a.py": "from .b import g\ndef f():\n    return g()\n",
            # function level; `hh` is a module of lib.sub, so the edge is b -> lib.sub.hh
            "lib/b.py": "def g():\n    from .sub import hh\n    return hh\n",
            "lib/sub/__init__.py": "",
            "lib/sub/hh.py": "",
            "lib/c.py": "import lib.d\n",
            "lib/d.py": (
                "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from lib import c\n"
            ),
        },
    )
    assert circles(import_graph(tmp_path, ["lib"])) == []
    # `..a` from lib.sub.hh is lib.a (`f` is a name, not a module): a -> b -> sub.hh -> a
    (tmp_path / "lib/sub/hh.py").write_text("from ..a import f\n")
    found = circles(import_graph(tmp_path, ["lib"]))
    assert found == [["lib.a", "lib.b", "lib.sub.hh", "lib.a"]], found
    # the TYPE_CHECKING back-reference d -> c was no circle; a function-level one is
    (tmp_path / "lib/d.py").write_text("def late():\n    import lib.c\n")
    found = circles(import_graph(tmp_path, ["lib"]))
    assert sorted(found) == [["lib.a", "lib.b", "lib.sub.hh", "lib.a"], ["lib.c", "lib.d", "lib.c"]]


def test_checker_finds_forbidden_experiment_imports(tmp_path):
    _write(
        tmp_path,
        {
            "jaxlab/__init__.py": "from ._core import run as run\n",
            "jaxlab/_core/__init__.py": "def run(): pass\n",
            "jaxlab/cells/__init__.py": "from ._model import M as M\n_hidden = 1\n",
            "jaxlab/cells/_model.py": "class M: pass\n",
            "experiments/__init__.py": "",
            "experiments/_harness/__init__.py": "from ._api import Claim as Claim\n",
            "experiments/_harness/_api.py": "from jaxlab import run\nClaim = 1\n",
            "experiments/cells/__init__.py": "",
            "experiments/cells/_setup.py": (
                "from jaxlab.cells import M\nfrom experiments._harness import Claim\n"
            ),
            "experiments/cells/rare.py": (
                "import jaxlab\nfrom jaxlab import run\nfrom ._setup import M\n"
                "from experiments._harness import Claim\n"
            ),
            "experiments/routing/__init__.py": "",
            "experiments/routing/_setup.py": "",
            "experiments/routing/text.py": "from . import _setup\n",
            "experiments/bench/__init__.py": "",
            "experiments/bench/cells_speed.py": "from experiments.cells._setup import M\n",
        },
    )
    assert violations(import_graph(tmp_path, ["jaxlab", "experiments"])) == []
    _write(
        tmp_path,
        {
            "experiments/cells/rare.py": (
                "def f():\n    from jaxlab._core import run\n"  # function level
                "from jaxlab.cells import _hidden\n"
                "from ..routing import text\n"  # another experiment (relative)
                "from experiments.routing._setup import x\n"  # another component's helper
                "from experiments._harness._api import Claim\n"
            ),
            "experiments/cells/_setup.py": "from . import rare\n",  # a helper importing a claim
            "experiments/bench/cells_speed.py": "import experiments.routing._setup\n",
            "experiments/_harness/_api.py": "from jaxlab._core import run\n",
        },
    )
    got = {
        (s, t, why.split(" [")[0])
        for s, t, _, why in violations(import_graph(tmp_path, ["jaxlab", "experiments"]))
    }
    assert got == {
        ("experiments.cells.rare", "jaxlab._core", "private jaxlab module"),
        ("experiments.cells.rare", "jaxlab.cells", "private name"),
        (
            "experiments.cells.rare",
            "experiments.routing.text",
            "another component's experiment code",
        ),
        (
            "experiments.cells.rare",
            "experiments.routing._setup",
            "another component's experiment code",
        ),
        (
            "experiments.cells.rare",
            "experiments._harness._api",
            "private harness module (import experiments._harness)",
        ),
        (
            "experiments.cells._setup",
            "experiments.cells.rare",
            "a claim module (experiments import only helpers)",
        ),
        (
            "experiments.bench.cells_speed",
            "experiments.routing._setup",
            "another component's experiment code",
        ),
    }, got  # the harness's own jaxlab._core import (experiments/_harness/_api.py) is allowed
