"""The committed results snapshot: what it holds, each claim's verdict, and stale results.

The snapshot is `results/quick/<experiment>/metrics.json` (with its figures) and
`results/bench/<benchmark>.json`, written by `python -m experiments run NAME --out
results/quick` and `python -m experiments bench NAME --out results` at the QUICK config.
README's and the docs' claims and benchmark tables are generated from it (`_pages`), and a
test checks that each record's config hash equals its module's current QUICK config.

A claim record written by the claims protocol has a four-valued `verdict` (holds, fails,
inconclusive, untestable); an older record has only `holds: bool` and counts as *legacy*.
"""

from __future__ import annotations

import ast
import dataclasses
import json
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from . import _registry
from ._config import config_to_json
from ._papers import paper_sort_key
from ._provenance import config_hash

__all__ = [
    "ROOT",
    "SNAPSHOT_DIR",
    "BENCH_SNAPSHOT_DIR",
    "VERDICTS",
    "COUNT_KEYS",
    "ModuleInfo",
    "module_index",
    "load_records",
    "load_benches",
    "verdict",
    "is_legacy",
    "paper_counts",
    "current_config_hash",
    "stale_results",
]

ROOT = Path(__file__).resolve().parents[2]
SNAPSHOT_DIR = ROOT / "results" / "quick"
BENCH_SNAPSHOT_DIR = ROOT / "results" / "bench"

#: the protocol's verdicts, in the order the tables count them
VERDICTS = ("holds", "fails", "inconclusive", "untestable")
#: the per-paper counts: the four verdicts and the legacy records (`holds: bool` only)
COUNT_KEYS = (*VERDICTS, "legacy")


@dataclasses.dataclass(frozen=True)
class ModuleInfo:
    """An experiment or benchmark module as its source declares it (nothing imported)."""

    name: str
    paper: str
    description: str
    path: Path


def _constants(path: Path) -> dict[str, str]:
    values = {}
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1:
            t = node.targets[0]
            if (
                isinstance(t, ast.Name)
                and t.id in ("NAME", "PAPER", "DESCRIPTION")
                and isinstance(node.value, ast.Constant)
                and isinstance(node.value.value, str)
            ):
                values[t.id] = node.value.value
    return values


def module_index(*, bench: bool = False, package_dir: Path | None = None) -> list[ModuleInfo]:
    """Every experiment (`experiments/<component>/<claim>.py`) or benchmark
    (`experiments/bench/<name>.py`) with its NAME, PAPER and DESCRIPTION read from the source,
    ordered by paper then name: the list the results page checks the snapshot against."""
    pkg = package_dir or ROOT / "experiments"
    if bench:
        paths = sorted((pkg / "bench").glob("[!_]*.py"))
    else:
        paths = sorted(
            p
            for p in pkg.glob("*/[!_]*.py")
            if not p.parent.name.startswith("_") and p.parent.name != "bench"
        )
    out = []
    for path in paths:
        c = _constants(path)
        if "NAME" in c:
            out.append(ModuleInfo(c["NAME"], c.get("PAPER", "?"), c.get("DESCRIPTION", ""), path))
    return sorted(out, key=lambda m: (paper_sort_key(m.paper), m.name))


def _read_json(path: Path) -> dict[str, Any] | None:
    try:
        data = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError):
        return None
    return data if isinstance(data, dict) else None


def load_records(folder: str | Path, names: Sequence[str] | None = None) -> list[dict[str, Any]]:
    """Every FOLDER/*/metrics.json that parses (restricted to experiments in `names` when
    given), in folder order; a missing folder holds none."""
    recs = []
    for p in sorted(Path(folder).glob("*/metrics.json")):
        rec = _read_json(p)
        if rec is not None and (names is None or rec.get("experiment") in names):
            recs.append(rec)
    return recs


def load_benches(folder: str | Path) -> list[dict[str, Any]]:
    """Every FOLDER/*.json benchmark record that parses (a missing folder holds none)."""
    out = []
    for p in sorted(Path(folder).glob("*.json")):
        rec = _read_json(p)
        if rec is not None and "bench" in rec:
            out.append(rec)
    return out


def is_legacy(claim: Mapping[str, Any]) -> bool:
    """A claim record without the protocol's `verdict` (only `holds: bool`)."""
    return "verdict" not in claim


def verdict(claim: Mapping[str, Any]) -> str:
    """The claim's verdict: one of `VERDICTS`, or `"holds (legacy)"` / `"no (legacy)"` for
    a record without one. An unknown verdict is a `ValueError` naming it."""
    if is_legacy(claim):
        return "holds (legacy)" if claim.get("holds") else "no (legacy)"
    v = claim["verdict"]
    if v not in VERDICTS:
        raise ValueError(f"claim verdict: expected one of {VERDICTS}, received {v!r}")
    return v


def paper_counts(records: Iterable[Mapping[str, Any]]) -> dict[str, dict[str, int]]:
    """Paper id -> {holds, fails, inconclusive, untestable, legacy} claim counts, papers in
    order (P1 ... P19, LM)."""
    counts: dict[str, dict[str, int]] = {}
    for r in records:
        c = counts.setdefault(r.get("paper", "?"), dict.fromkeys(COUNT_KEYS, 0))
        for claim in r.get("claims", []):
            c["legacy" if is_legacy(claim) else verdict(claim)] += 1
    return dict(sorted(counts.items(), key=lambda kv: paper_sort_key(kv[0])))


def current_config_hash(name: str, *, bench: bool = False) -> str:
    """`config_hash` of the module's current QUICK config, as the runner (or, for a
    benchmark, `run_bench`) writes it into a QUICK record."""
    mod = _registry.find(name, bench=bench)
    if bench:
        return config_hash(dict(mod.QUICK))
    return config_hash(config_to_json(mod.QUICK))


def stale_results(
    records: Iterable[Mapping[str, Any]], *, bench: bool = False
) -> list[tuple[str, str]]:
    """(name, why) of every snapshot record that is not a fresh QUICK result of its module's
    current code: not the QUICK config (TINY, FULL or overrides), no config hash, a config
    hash other than the current QUICK config's, or a module that no longer exists."""
    out = []
    for r in records:
        name = str(r.get("bench" if bench else "experiment", "?"))
        if r.get("config") != "quick":
            out.append((name, f"config {r.get('config')!r}, not 'quick'"))
            continue
        if not r.get("config_hash"):
            out.append((name, "no config hash (written before provenance was recorded)"))
            continue
        try:
            now = current_config_hash(name, bench=bench)
        except _registry.UnknownName:
            out.append((name, "no such module any more"))
            continue
        if now != r["config_hash"]:
            out.append((name, "its QUICK config changed since this result was written"))
    return out
