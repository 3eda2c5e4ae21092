"""`Plan`: a small typed query plan, its strict text format and its deterministic executor.

The text format (one clause per line: TABLE, JOIN, WHERE, GROUP, AGG, HAVING, OUTPUT)
is documented in `parse_plan`. The parser is a regular-expression grammar: model text
is never evaluated or executed; anything outside the grammar raises `PlanError` saying
which line and why.
"""

from __future__ import annotations

import dataclasses
import math
import re
from collections.abc import Mapping

import numpy as np

from .._core import check_instance
from ._table import Table

__all__ = [
    "Plan",
    "ColumnRef",
    "Condition",
    "PlanError",
    "parse_plan",
    "format_plan",
    "execute",
    "AGGREGATES",
    "OPERATORS",
    "OUTPUTS",
]

AGGREGATES = ("count", "sum", "mean", "min", "max", "nunique")
"""The plan language's AGG functions."""
OPERATORS = ("=", "!=", "<", "<=", ">", ">=")
"""The plan language's WHERE / HAVING comparison operators."""
OUTPUTS = ("value", "argmax", "argmin", "keys")
"""The plan language's OUTPUT kinds: one value, the group of the largest / smallest value, or
the group keys."""
_MAX_TABLES = 3
#: the most rows one JOIN may produce: the pair count is computed from the key index
#: before any row is built, so a join on a constant key is refused instead of running
#: for hours (the lake's real joins produce at most a few thousand rows)
MAX_JOIN_ROWS = 2_000_000


class PlanError(ValueError):
    """A plan outside the grammar, or one that does not fit the tables it names."""


@dataclasses.dataclass(frozen=True)
class ColumnRef:
    """Column `column` of the table with alias `alias` (`"t0"`, `"t1"`, ...)."""

    alias: str
    column: str

    def __str__(self) -> str:
        return f"{self.alias}.{self.column}"


@dataclasses.dataclass(frozen=True)
class Condition:
    """`column <op> value` (value a float or a str)."""

    column: ColumnRef
    op: str
    value: float | str


@dataclasses.dataclass(frozen=True)
class Plan:
    """A query plan: tables, joins onto t0, filters, optional group, one aggregate, output.

    - `tables`: the table names in alias order (`t0`, `t1`, ...).
    - `joins`: one `(left, right)` pair of `ColumnRef` per table after the first; the right
      side is the new table's column.
    - `where`: conditions, all must hold.
    - `group`: the grouping column or `None`.
    - `agg`: one of `AGGREGATES`; `agg_column` its column (`None` only for `count`).
    - `having`: `(op, number)` on the grouped aggregate, or `None`.
    - `output`: `value` (the aggregate; without `group`), `argmax`/`argmin` (the group key
      with the largest/smallest aggregate) or `keys` (the sorted group keys kept by `having`).
    """

    tables: tuple[str, ...]
    agg: str
    output: str
    agg_column: ColumnRef | None = None
    joins: tuple[tuple[ColumnRef, ColumnRef], ...] = ()
    where: tuple[Condition, ...] = ()
    group: ColumnRef | None = None
    having: tuple[str, float] | None = None

    def __post_init__(self):
        _validate(self)


def _validate(p: Plan) -> None:
    if not 1 <= len(p.tables) <= _MAX_TABLES:
        raise PlanError(f"tables: expected 1 to {_MAX_TABLES}, received {len(p.tables)}")
    if len(set(p.tables)) != len(p.tables):
        raise PlanError("tables: a table is named twice")
    aliases = {f"t{i}" for i in range(len(p.tables))}
    if len(p.joins) != len(p.tables) - 1:
        raise PlanError(
            f"joins: expected {len(p.tables) - 1} (one per extra table), received {len(p.joins)}"
        )
    for i, (left, right) in enumerate(p.joins, start=1):
        if right.alias != f"t{i}":
            raise PlanError(
                f"joins: join {i} must bring in t{i} on its right side, received {right.alias}"
            )
        if int(left.alias[1:]) >= i:
            raise PlanError(
                f"joins: join {i}'s left side must be an earlier table, received {left.alias}"
            )
    refs = [c.column for c in p.where] + [x for j in p.joins for x in j]
    refs += [r for r in (p.group, p.agg_column) if r is not None]
    for r in refs:
        if r.alias not in aliases:
            raise PlanError(f"column {r}: alias {r.alias} is not a declared table")
    if p.agg not in AGGREGATES:
        raise PlanError(f"AGG: expected one of {AGGREGATES}, received {p.agg!r}")
    if p.agg_column is None and p.agg != "count":
        raise PlanError(f"AGG {p.agg}: needs a column")
    if p.output not in OUTPUTS:
        raise PlanError(f"OUTPUT: expected one of {OUTPUTS}, received {p.output!r}")
    if (p.group is None) != (p.output == "value"):
        raise PlanError(
            f"OUTPUT: `value` exactly when there is no GROUP (group={p.group}, output={p.output})"
        )
    if p.having is not None and (p.group is None or p.having[0] not in OPERATORS):
        raise PlanError("HAVING: needs GROUP and an operator")
    for c in p.where:
        if c.op not in OPERATORS:
            raise PlanError(f"WHERE: operator {c.op!r} not in {OPERATORS}")


_IDENT = r"[A-Za-z_][A-Za-z0-9_.]*"
_TABLE_NAME = r"[A-Za-z0-9_][A-Za-z0-9_.\-/#]*"
_REF = rf"(t[0-2])\.({_IDENT})"
_LIT = r'(-?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?|"[^"\\\n]*")'
_OP = r"(!=|<=|>=|=|<|>)"
_LINES = {
    "TABLE": re.compile(rf"TABLE (t[0-2]) ({_TABLE_NAME})"),
    "JOIN": re.compile(rf"JOIN {_REF} = {_REF}"),
    "WHERE": re.compile(rf"WHERE {_REF} {_OP} {_LIT}"),
    "GROUP": re.compile(rf"GROUP {_REF}"),
    "AGG": re.compile(rf"AGG (count|sum|mean|min|max|nunique)(?: {_REF})?"),
    "HAVING": re.compile(rf"HAVING {_OP} (-?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?)"),
    "OUTPUT": re.compile(r"OUTPUT (value|argmax|argmin|keys)"),
}
_ORDER = ("TABLE", "JOIN", "WHERE", "GROUP", "AGG", "HAVING", "OUTPUT")
_MAX_PLAN_CHARS = 4000


def _literal(s: str) -> float | str:
    return s[1:-1] if s.startswith('"') else float(s)


def parse_plan(text: str) -> Plan:
    """Parse the plan text format into a `Plan`, strictly.

    The format, one clause per line in this order (`tN` are table aliases):

        TABLE t0 <table name>
        TABLE t1 <table name>              (optional, up to 3 tables)
        JOIN t0.<col> = t1.<col>           (one per extra table, inner equi-join)
        WHERE t0.<col> <op> <literal>      (zero or more; op in = != < <= > >=)
        GROUP t1.<col>                     (optional)
        AGG <count|sum|mean|min|max|nunique> [t0.<col>]
        HAVING <op> <number>               (optional, only with GROUP)
        OUTPUT <value|argmax|argmin|keys>

    A literal is a number or a double-quoted string without quotes or backslashes inside;
    the text is matched by a regular-expression grammar, never evaluated.

    **Arguments:**

    - `text`: the plan, one clause per line (blank lines ignored).

    **Returns:** the `Plan`. Raises `PlanError` (a `ValueError`) naming the offending line
    for anything outside the grammar: unknown clauses, clauses out of order, a repeated
    GROUP/AGG/HAVING/OUTPUT, missing TABLE/AGG/OUTPUT, aliases out of sequence.
    """
    if not isinstance(text, str):
        raise PlanError(f"text: expected a str, received {type(text).__name__}")
    if len(text) > _MAX_PLAN_CHARS:
        raise PlanError(
            f"text: expected at most {_MAX_PLAN_CHARS} characters, received {len(text)}"
        )
    tables: list[str] = []
    joins, where = [], []
    single: dict[str, re.Match] = {}
    last = -1
    for n, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if not line:
            continue
        kw = line.split(" ", 1)[0]
        if kw not in _LINES:
            raise PlanError(f"line {n}: unknown clause {kw[:40]!r} (expected one of {_ORDER})")
        m = _LINES[kw].fullmatch(line)
        if m is None:
            raise PlanError(f"line {n}: malformed {kw} clause {line[:80]!r}")
        pos = _ORDER.index(kw)
        if pos < last:
            raise PlanError(f"line {n}: {kw} after {_ORDER[last]} (clauses out of order)")
        if kw in single or (kw in ("GROUP", "AGG", "HAVING", "OUTPUT") and pos == last):
            raise PlanError(f"line {n}: repeated {kw} clause")
        last = pos
        if kw == "TABLE":
            if m.group(1) != f"t{len(tables)}":
                raise PlanError(f"line {n}: expected alias t{len(tables)}, received {m.group(1)}")
            tables.append(m.group(2))
        elif kw == "JOIN":
            joins.append((ColumnRef(m.group(1), m.group(2)), ColumnRef(m.group(3), m.group(4))))
        elif kw == "WHERE":
            where.append(
                Condition(ColumnRef(m.group(1), m.group(2)), m.group(3), _literal(m.group(4)))
            )
        else:
            single[kw] = m
    for kw in ("AGG", "OUTPUT"):
        if kw not in single:
            raise PlanError(f"text: missing {kw} clause")
    if not tables:
        raise PlanError("text: missing TABLE clause")
    agg = single["AGG"]
    group = single.get("GROUP")
    having = single.get("HAVING")
    return Plan(
        tables=tuple(tables),
        agg=agg.group(1),
        output=single["OUTPUT"].group(1),
        agg_column=ColumnRef(agg.group(2), agg.group(3)) if agg.group(2) else None,
        joins=tuple(joins),
        where=tuple(where),
        group=ColumnRef(group.group(1), group.group(2)) if group else None,
        having=(having.group(1), float(having.group(2))) if having else None,
    )


def _lit_text(v: float | str) -> str:
    if isinstance(v, str):
        return f'"{v}"'
    return repr(float(v)) if not float(v).is_integer() else str(int(v))


def format_plan(plan: Plan) -> str:
    """The text of `plan` (a `Plan`) in the format `parse_plan` reads (round-trips exactly)."""
    check_instance("plan", plan, Plan)
    lines = [f"TABLE t{i} {t}" for i, t in enumerate(plan.tables)]
    lines += [f"JOIN {a} = {b}" for a, b in plan.joins]
    lines += [f"WHERE {c.column} {c.op} {_lit_text(c.value)}" for c in plan.where]
    if plan.group is not None:
        lines.append(f"GROUP {plan.group}")
    lines.append(f"AGG {plan.agg}" + (f" {plan.agg_column}" if plan.agg_column else ""))
    if plan.having is not None:
        lines.append(f"HAVING {plan.having[0]} {_lit_text(plan.having[1])}")
    lines.append(f"OUTPUT {plan.output}")
    return "\n".join(lines)


# ----------------------------------------------------------------------------- executor


def _compare(values: np.ndarray, op: str, lit, numeric: bool) -> np.ndarray:
    if numeric:
        v = values.astype(np.float64)
        with np.errstate(invalid="ignore"):
            out = {
                "=": v == lit,
                "!=": v != lit,
                "<": v < lit,
                "<=": v <= lit,
                ">": v > lit,
                ">=": v >= lit,
            }[op]
        return out & ~np.isnan(v)
    present = np.array([x is not None for x in values], dtype=bool)
    if op == "=":
        return present & np.array([x == lit for x in values], dtype=bool)
    if op == "!=":
        return present & np.array([x != lit for x in values], dtype=bool)
    raise PlanError(f"WHERE: operator {op} needs a numeric column")


def _column(tables, plan, rows, ref: ColumnRef) -> tuple[np.ndarray, str]:
    i = int(ref.alias[1:])
    t = tables[plan.tables[i]]
    if ref.column not in t.columns:
        raise PlanError(
            f"column {ref}: {plan.tables[i]!r} has no column {ref.column!r} "
            f"(columns: {list(t.columns)[:20]})"
        )
    return t.columns[ref.column][rows[i]], t.dtypes[ref.column]


def _key_list(values: np.ndarray, dtype: str | None) -> list:
    if dtype == "str":
        return list(values)
    return [None if (isinstance(x, float) and math.isnan(x)) else x for x in values.tolist()]


def _join(tables, plan, rows, left: ColumnRef, right: ColumnRef):
    """Inner equi-join of the current row set with a new table; rows stay in left order."""
    lv, ldt = _column(tables, plan, rows, left)
    j = int(right.alias[1:])
    t = tables[plan.tables[j]]
    if right.column not in t.columns:
        raise PlanError(f"column {right}: {plan.tables[j]!r} has no column {right.column!r}")
    rv, rdt = t.columns[right.column], t.dtypes[right.column]
    if (ldt == "str") != (rdt == "str"):
        raise PlanError(f"JOIN {left} = {right}: a text column joined to a numeric one")
    index: dict = {}
    for k, key in enumerate(_key_list(rv, rdt)):
        if key is not None:
            index.setdefault(key, []).append(k)
    lkeys = _key_list(lv, ldt)
    n_out = sum(len(index.get(key, ())) for key in lkeys if key is not None)
    if n_out > MAX_JOIN_ROWS:
        raise PlanError(
            f"JOIN {left} = {right}: would produce {n_out} rows, more than the "
            f"{MAX_JOIN_ROWS} accepted (a key shared by many rows on both sides; "
            "join on a more specific column)"
        )
    li, ri = [], []
    for k, key in enumerate(lkeys):
        for r in index.get(key, ()) if key is not None else ():
            li.append(k)
            ri.append(r)
    li = np.asarray(li, dtype=np.int64)
    new = [r[li] for r in rows]
    new.append(np.asarray(ri, dtype=np.int64))
    return new


def _aggregate(values: np.ndarray | None, dtype: str | None, agg: str, n: int) -> float:
    if agg == "count":
        return float(n)
    assert values is not None
    if agg == "nunique":
        return float(len({x for x in _key_list(values, dtype) if x is not None}))
    if dtype == "str":
        raise PlanError(f"AGG {agg}: needs a numeric column")
    v = values.astype(np.float64)
    v = v[~np.isnan(v)]
    if agg == "sum":
        return float(v.sum())
    if len(v) == 0:
        return math.nan
    return float({"mean": np.mean, "min": np.min, "max": np.max}[agg](v))


def execute(plan: Plan | str, tables: Mapping[str, Table]):
    """Run a plan over the named tables, deterministically.

    Semantics (those of pandas, the tests' oracle): inner joins; a condition on a missing
    value is false; `count` counts rows, `nunique` distinct non-missing values, the others
    skip missing values (an all-missing mean/min/max is NaN); groups with a missing key are
    dropped; `argmax`/`argmin` return the first group key in sorted order among ties.

    **Arguments:**

    - `plan`: a `Plan` or its text (parsed with `parse_plan`).
    - `tables`: table name -> `Table`; must hold every table the plan names.

    **Returns:** a float (`value`), a group key (`argmax`/`argmin`; str, int or float) or a
    sorted list of keys (`keys`). Raises `PlanError` for unknown tables/columns or a plan
    the data cannot answer (an empty argmax), and for a JOIN that would produce more than
    `MAX_JOIN_ROWS` rows (checked from the key counts before any row is built).
    """
    check_instance("plan", plan, (Plan, str))
    check_instance("tables", tables, Mapping)
    for t in tables.values():
        check_instance("tables", t, Table)
    if isinstance(plan, str):
        plan = parse_plan(plan)
    for name in plan.tables:
        if name not in tables:
            raise PlanError(f"TABLE {name!r}: not in the lake")
    first = tables[plan.tables[0]]
    rows = [np.arange(first.n_rows, dtype=np.int64)]
    for left, right in plan.joins:
        rows = _join(tables, plan, rows, left, right)
    keep = np.ones(len(rows[0]), dtype=bool)
    for c in plan.where:
        vals, dt = _column(tables, plan, rows, c.column)
        numeric = dt != "str"
        if numeric != isinstance(c.value, float):
            raise PlanError(
                f"WHERE {c.column}: a {'numeric' if numeric else 'text'} column "
                f"compared to {c.value!r}"
            )
        keep &= _compare(vals, c.op, c.value, numeric)
    rows = [r[keep] for r in rows]
    n = len(rows[0])
    aval, adt = (None, None)
    if plan.agg_column is not None:
        aval, adt = _column(tables, plan, rows, plan.agg_column)
    if plan.group is None:
        return _aggregate(aval, adt, plan.agg, n)
    gval, gdt = _column(tables, plan, rows, plan.group)
    keys = _key_list(gval, gdt)
    members: dict = {}
    for k, key in enumerate(keys):
        if key is not None:
            members.setdefault(key, []).append(k)
    result = []
    for key in sorted(members):
        idx = np.asarray(members[key], dtype=np.int64)
        result.append(
            (key, _aggregate(None if aval is None else aval[idx], adt, plan.agg, len(idx)))
        )
    if plan.having is not None:
        op, lim = plan.having
        result = [(k, v) for k, v in result if _compare(np.array([v]), op, lim, True)[0]]
    if plan.output == "keys":
        return [k for k, _ in result]
    scored = [(k, v) for k, v in result if not math.isnan(v)]
    if not scored:
        raise PlanError("OUTPUT: no group has a value")
    best = (max if plan.output == "argmax" else min)(v for _, v in scored)
    return next(k for k, v in scored if v == best)
