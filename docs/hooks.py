"""mkdocs hook: the navigation, built from the components that exist under `jaxlab/`
(so a new component needs no edit of mkdocs.yml). `gen_pages.py` writes the pages."""

from __future__ import annotations

import ast
import inspect
import pkgutil
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

# The shared runtime first, then by paper number, the data catalogue last.
FIRST = ["lm", "interp"]


def papers() -> dict[str, dict]:
    with open(ROOT / "experiments" / "papers.toml", "rb") as f:
        return tomllib.load(f)


def papers_by_component() -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for pid, entry in papers().items():
        out.setdefault(entry["component"], []).append(pid)
    return out


def components() -> list[str]:
    found = [
        i.name for i in pkgutil.iter_modules([str(ROOT / "jaxlab")]) if not i.name.startswith("_")
    ]
    by = papers_by_component()

    def first_paper(c):
        return min((int(p[1:]) for p in by.get(c, []) if p[1:].isdigit()), default=99)

    rest = sorted((c for c in found if c not in FIRST and c != "data"), key=first_paper)
    return [c for c in FIRST if c in found] + rest + (["data"] if "data" in found else [])


def constant_docstring(comp: str, name: str) -> str | None:
    """The attribute docstring (the string literal right after the assignment, what
    mkdocstrings shows) of the constant `name` that `jaxlab/<comp>/__init__.py` re-exports
    (`from ._x import NAME as NAME`); None when it has none. Read from the source: a
    constant's `__doc__` is its type's (`tuple`'s "Built-in immutable sequence.")."""
    pkg = ROOT / "jaxlab" / comp
    path, orig = pkg / "__init__.py", name
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, ast.ImportFrom) and node.level == 1 and node.module:
            for alias in node.names:
                if (alias.asname or alias.name) == name:
                    base = pkg.joinpath(*node.module.split("."))
                    path = base.with_suffix(".py") if base.with_suffix(".py").exists() else base
                    path = path / "__init__.py" if path.is_dir() else path
                    orig = alias.name
    body = ast.parse(path.read_text()).body
    for node, nxt in zip(body, [*body[1:], None], strict=True):
        if isinstance(node, ast.Assign):
            targets = node.targets
        elif isinstance(node, ast.AnnAssign):
            targets = [node.target]
        else:
            continue
        if any(isinstance(t, ast.Name) and t.id == orig for t in targets):
            if isinstance(nxt, ast.Expr) and isinstance(nxt.value, ast.Constant):
                doc = nxt.value.value
                return inspect.cleandoc(doc) if isinstance(doc, str) else None
            return None
    return None


def summary(comp: str, name: str, obj) -> str:
    """One line for a component page's API table: the first paragraph of the docstring;
    for a constant its attribute docstring (never its type's), else its type."""
    if inspect.isclass(obj) or callable(obj):
        doc = inspect.getdoc(obj) or ""
    else:
        doc = constant_docstring(comp, name) or f"constant of type `{type(obj).__name__}`"
    return doc.strip().split("\n\n")[0].replace("\n", " ").replace("|", "\\|")


def examples() -> list[str]:
    return [c for c in components() if (ROOT / "examples" / f"{c}.py").exists()]


def on_config(config, **kwargs):
    comps = components()
    config["nav"] = [
        {"Home": "index.md"},
        {"Install": "install.md"},
        {"Results": ["results.md", "benchmarks.md", "papers.md", "gpu.md"]},
        {"Components": ["components/index.md", *[f"components/{c}.md" for c in comps]]},
        {"Examples": ["examples/index.md", *[f"examples/{c}.py" for c in examples()]]},
        {"API reference": ["api/index.md", *[f"api/{c}.md" for c in comps]]},
        {"Experiment runner": "experiments.md"},
        {"Writing a component": "new-component.md"},
        {"Component status": "status.md"},
        {"Design": "design.md"},
        {"Renamed arguments": "changes.md"},
    ]
    return config
