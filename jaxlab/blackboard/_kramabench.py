"""A KramaBench checkout as a lake and tasks (github.com/mitdbg/Kramabench).

KramaBench's layout: `workload/<domain>.json` (tasks whose `data_sources` name files of
the domain's lake) and `data/<domain>/input/` (the lake's files). Its CSV files become
tables named `<domain>/<path under input>`, partitioned by domain; the tasks' data
sources are renamed to match (a bare file name to the one table of that name). Files that
are not CSV (xlsx, json, text) are not read, so a task may name sources the lake lacks:
they stay in its ground truth (every method misses them alike). Nothing of KramaBench is
shipped with jaxlab (its repository states no licence): the user points to a checkout.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from .._core import check_instance, check_positive_int, check_strings
from ._lake import Lake
from ._table import Table, parse_csv
from ._tasks import Task, load_tasks

__all__ = ["load_kramabench"]

_MAX_FILE = 256 * 2**20


def _domains(root: Path) -> list[str]:
    return sorted(
        p.stem
        for p in (root / "workload").glob("*.json")
        if (root / "data" / p.stem / "input").is_dir()
    )


def load_kramabench(
    checkout: str | Path,
    *,
    domains: Sequence[str] | None = None,
    partition_size: int = 20,
    max_bytes: int = _MAX_FILE,
) -> tuple[Lake, list[Task]]:
    """The data lake and the tasks of a KramaBench checkout.

    **Arguments:**

    - `checkout`: the folder holding KramaBench's `workload/` and `data/`.
    - `domains`: which domains (`workload/<domain>.json` with `data/<domain>/input/`);
      `None`: every such domain; else a sequence of names (not a bare string).
    - `partition_size`: the most tables in one partition (a domain larger than this is
      cut into consecutive chunks).
    - `max_bytes`: CSV files larger than this are left out (recorded in `skipped`).

    **Returns:** `(lake, tasks)`: the lake's `skipped` names every CSV file that could not
    be read; the tasks' `data_sources` are lake table names (or `<domain>/<source>` for a
    source the lake lacks). Raises `ValueError` naming the checkout when it is not a
    KramaBench checkout, and `domains` when a domain has no workload or data.
    """
    check_instance("checkout", checkout, (str, Path))
    root = Path(checkout).expanduser()
    if not (root / "workload").is_dir() or not (root / "data").is_dir():
        raise ValueError(
            f"checkout: expected a KramaBench checkout (workload/ and data/), received "
            f"{str(root)!r}"
        )
    check_positive_int("partition_size", partition_size)
    check_positive_int("max_bytes", max_bytes)
    have = _domains(root)
    domains = have if domains is None else check_strings("domains", domains, nonempty=False)
    missing = [d for d in domains if d not in have]
    if missing or not domains:
        raise ValueError(
            f"domains: expected some of {have} (workload and data), received {missing}"
        )
    tables: dict[str, Table] = {}
    partitions: dict[str, tuple[str, ...]] = {}
    skipped: list[str] = []
    tasks: list[Task] = []
    for d in domains:
        inp = root / "data" / d / "input"
        names = []
        for f in sorted(inp.rglob("*")):
            if not f.is_file() or f.suffix.lower() != ".csv":
                continue
            rel = f.relative_to(inp).as_posix()
            if f.stat().st_size > max_bytes:
                skipped.append(f"{d}/{rel}: larger than {max_bytes} bytes")
                continue
            try:
                cols, dt = parse_csv(f.read_bytes(), file=rel)
            except ValueError as e:
                skipped.append(f"{d}/{rel}: {e}")
                continue
            name = f"{d}/{rel}"
            title = f.stem.replace("_", " ").replace("-", " ").strip()
            tables[name] = Table(name, cols, dt, title=title, source="kramabench", partition=d)
            names.append(name)
        k = max(1, -(-len(names) // partition_size))
        for i, chunk in enumerate(np.array_split(np.asarray(names, dtype=object), k)):
            p = d if k == 1 else f"{d}#{i + 1}"
            partitions[p] = tuple(chunk.tolist())
            for n in partitions[p]:
                tables[n] = dataclasses.replace(tables[n], partition=p)
        by_base: dict[str, list[str]] = {}
        for n in names:
            by_base.setdefault(n.rsplit("/", 1)[-1], []).append(n)

        def resolve(s: str, d=d, by_base=by_base) -> str:
            if f"{d}/{s}" in tables:
                return f"{d}/{s}"
            hits = by_base.get(s.rsplit("/", 1)[-1], [])
            return hits[0] if len(hits) == 1 else f"{d}/{s}"

        for t in load_tasks(root / "workload" / f"{d}.json"):
            tasks.append(
                dataclasses.replace(t, data_sources=tuple(resolve(s) for s in t.data_sources))
            )
    partitions = {p: ns for p, ns in partitions.items() if ns}
    return Lake(tables, partitions, tuple(skipped)), tasks
