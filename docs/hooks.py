"""mkdocs hook: the navigation, built from the components that exist under `jaxlab/`
(so a new component needs no edit of mkdocs.yml). `gen_pages.py` writes the pages."""

from __future__ import annotations

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
