"""Tasks in KramaBench's JSON format, generated over a lake with known ground truth.

A KramaBench task is `{id, query, answer, answer_type, data_sources, subtasks}`. Ours add
`plan` (the ground-truth query plan text): the answer is what `execute` returns for it
over the true tables, and `data_sources` are exactly the plan's tables. Questions name
what is measured (a table's documented title and column labels), never the table's name.
"Not in the lake" tasks ask about data no table holds; their answer is `NOT_IN_LAKE` and
their `data_sources` are empty. "Lexical-free" tasks (tag `lexical_free`) ask about a
column's content: they quote entries of a text column that the table's profile does not
show, and share no word (beyond `LEXICAL_STOPWORDS`) with the profile, so that matching
words of the question against the table's description cannot find the table.
"""

from __future__ import annotations

import dataclasses
import math
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, cast

import jax
import numpy as np

from .._core import check_instance, check_real, check_size, read_json
from ._lake import profile_text
from ._plan import ColumnRef, Condition, Plan, execute, format_plan
from ._score import ANSWER_TYPES
from ._table import Table

__all__ = [
    "Task",
    "NOT_IN_LAKE",
    "LEXICAL_STOPWORDS",
    "generate_tasks",
    "save_tasks",
    "load_tasks",
]

NOT_IN_LAKE = "not in the lake"
"""The answer of a task whose data is not in the lake (and of `answer_query` when discovery
found no table)."""
_SAFE = re.compile(r"[A-Za-z_][A-Za-z0-9_.]*")
_WORD = re.compile(r"[a-z0-9]+")  # BM25's tokens
LEXICAL_STOPWORDS = ("a", "an", "the", "of", "and", "or", "in", "on", "to", "is", "it", "by")
"""Words a lexical-free question may share with its table's profile (function words)."""
_MAX_TASK_FILE = 32 * 2**20
MAX_TASKS = 10_000
"""The most tasks `generate_tasks` is asked for: a lake yields at most one single-table and
one lexical-free task per table, a few "not in the lake" tasks and its distinct join
questions (each join attempt executes a plan, 20 attempts per join task asked for), so a
larger count only makes the generator run for hours."""
# Data no table of the lake holds (written for jaxlab): what "not in the lake" tasks ask for.
_ABSENT = (
    ("mean emission wavelength", "quantum-dot samples synthesised in a chemistry lab"),
    ("average opacity", "dust storms recorded by Mars rovers"),
    ("median ticket resolution time", "a software company's customer-support tickets"),
    ("average battery cycle life", "lithium-ion cells in an electric-vehicle fleet"),
    ("highest recorded wave height", "buoys in the Southern Ocean during 2021"),
    ("average spin period", "millisecond pulsars catalogued by a radio telescope"),
    ("total streaming minutes", "subscribers of a music service by country"),
    ("mean leaf nitrogen content", "trees in an Amazon rainforest plot survey"),
    ("average latency", "requests served by a content-delivery network's edge nodes"),
    ("average goal count", "matches of a women's professional football league in 2023"),
    ("mean crop yield", "drone-surveyed rice paddies in Vietnam"),
    ("average bitrate", "video calls on a teleconferencing platform"),
)


@dataclasses.dataclass(frozen=True)
class Task:
    """One task in KramaBench's format (plus the ground-truth `plan` text, "" if none)."""

    id: str
    query: str
    answer: object
    answer_type: str
    data_sources: tuple[str, ...]
    subtasks: tuple[dict, ...] = ()
    plan: str = ""
    tags: tuple[str, ...] = ()  # e.g. ("lexical_free",); written to JSON when non-empty

    def __post_init__(self):
        if self.answer_type not in ANSWER_TYPES:
            raise ValueError(
                f"answer_type: expected one of {ANSWER_TYPES}, received {self.answer_type!r}"
            )

    def to_json(self) -> dict:
        d = {
            "id": self.id,
            "query": self.query,
            "answer": self.answer,
            "answer_type": self.answer_type,
            "data_sources": list(self.data_sources),
            "subtasks": list(self.subtasks),
        }
        if self.plan:
            d["plan"] = self.plan
        if self.tags:
            d["tags"] = list(self.tags)
        return d


def _desc(table: Table) -> str:
    return table.title.rstrip(". ") or "an unnamed data set"


def _label(table: Table, col: str) -> str:
    lab = table.column_docs.get(col, "")
    return f"'{col}' ({lab})" if lab else f"'{col}'"


def _num_cols(t: Table) -> list[str]:
    out = []
    for c, dt in t.dtypes.items():
        if dt == "str" or not _SAFE.fullmatch(c):
            continue
        v = t.columns[c].astype(np.float64)
        v = v[~np.isnan(v)]
        if len(v) >= max(5, 0.8 * t.n_rows) and len(np.unique(v)) >= 5:
            out.append(c)
    return out


def _cat_cols(t: Table, lo=2, hi=30) -> list[str]:
    out = []
    for c, dt in t.dtypes.items():
        if dt != "str" or not _SAFE.fullmatch(c):
            continue
        vals = {x for x in t.columns[c] if x is not None}
        if lo <= len(vals) <= hi and all(x and '"' not in x and "\\" not in x for x in vals):
            out.append(c)
    return out


def _round(x: float) -> float:
    return float(f"{x:.3g}")


def _finish(
    tid: str, query: str, plan: Plan, answer_type: str, tables: Mapping[str, Table]
) -> Task | None:
    try:
        ans: Any = execute(plan, {n: tables[n] for n in plan.tables})  # scalar or list
    except ValueError:
        return None
    if isinstance(ans, float) and not math.isfinite(ans):
        return None
    if answer_type == "list_exact":
        items = cast(list, ans)  # a list_exact plan returns a list
        if not 1 <= len(items) <= 6:
            return None
        ans = [str(a) for a in items]
    elif answer_type == "string_exact":
        ans = str(ans)
    elif answer_type == "numeric_exact":
        ans = int(ans)
    sources = tuple(plan.tables)
    sub = (
        {
            "id": f"{tid}-1",
            "query": "Which tables of the lake are needed?",
            "answer": list(sources),
            "answer_type": "list_exact",
        },
        {
            "id": f"{tid}-2",
            "query": "What computation answers the question?",
            "answer": format_plan(plan),
            "answer_type": "string_exact",
        },
    )
    return Task(tid, query, ans, answer_type, sources, sub, format_plan(plan))


def _single_table_tasks(t: Table, rng: np.random.Generator, tables) -> list[Task]:
    nums, cats = _num_cols(t), _cat_cols(t)
    if not nums:
        return []
    c = nums[rng.integers(len(nums))]
    ref = ColumnRef("t0", c)
    d, lab = _desc(t), _label(t, c)
    v = t.columns[c].astype(np.float64)
    med = _round(float(np.nanmedian(v)))
    out = []
    kind = rng.integers(4) if cats else rng.integers(2)
    if kind == 0:
        p = Plan((t.name,), "mean", "value", agg_column=ref)
        q = f"What is the average of {lab} in the data on: {d}?"
        out.append(_finish("", q, p, "numeric_approximate", tables))
    elif kind == 1:
        p = Plan((t.name,), "count", "value", where=(Condition(ref, ">", med),))
        q = f"In the data on: {d}, how many records have {lab} greater than {med:g}?"
        out.append(_finish("", q, p, "numeric_exact", tables))
    else:
        g = cats[rng.integers(len(cats))]
        gref = ColumnRef("t0", g)
        if kind == 2:
            p = Plan((t.name,), "mean", "argmax", agg_column=ref, group=gref)
            means = _group_means(t, g, c)
            if len(means) < 2 or sorted(means.values())[-1] == sorted(means.values())[-2]:
                return []
            q = f"In the data on: {d}, which value of {_label(t, g)} has the highest average {lab}?"
            out.append(_finish("", q, p, "string_exact", tables))
        else:
            means = sorted(_group_means(t, g, c).values())
            if len(means) < 3:
                return []
            cut = _round(means[len(means) // 2])
            p = Plan((t.name,), "mean", "keys", agg_column=ref, group=gref, having=(">", cut))
            q = (
                f"In the data on: {d}, list every value of {_label(t, g)} whose average "
                f"{lab} is above {cut:g}."
            )
            out.append(_finish("", q, p, "list_exact", tables))
    return [x for x in out if x is not None]


def _words(text: str) -> set[str]:
    return set(_WORD.findall(text.lower()))


def _lexical_free_task(t: Table, rng: np.random.Generator, tables) -> Task | None:
    """A question quoting 2-3 entries of one of `t`'s text columns that its profile does
    not show, asking how many records the table holds; None when no question shares no
    content word with the profile."""
    profile = _words(profile_text(t))
    stop = set(LEXICAL_STOPWORDS)
    for g in rng.permutation(_cat_cols(t, 3, 10**9)).tolist():
        vals = sorted({x for x in t.columns[g] if x is not None})
        unseen = [v for v in vals if _WORD.findall(v.lower()) and not _words(v) & profile]
        if len(unseen) < 2:
            continue
        pick = [unseen[i] for i in sorted(rng.choice(len(unseen), min(3, len(unseen)), False))]
        q = (
            f"How many records has the data set whose column lists "
            f"{', '.join(repr(v) for v in pick)}?"
        )
        if _words(q) - stop & profile:
            continue
        task = _finish("", q, Plan((t.name,), "count", "value"), "numeric_exact", tables)
        if task is not None:
            return dataclasses.replace(task, tags=("lexical_free",))
    return None


def _group_means(t: Table, g: str, c: str) -> dict:
    keys, vals = t.columns[g], t.columns[c].astype(np.float64)
    acc: dict = {}
    for k, x in zip(keys, vals, strict=True):
        if k is not None and not math.isnan(x):
            acc.setdefault(k, []).append(x)
    return {k: float(np.mean(v)) for k, v in acc.items()}


def _foreign_keys(tables: Mapping[str, Table]) -> list[tuple[str, str, str]]:
    """(child, column, parent): same-named text columns, unique in parent, child covered."""
    keyed: dict[str, list[str]] = {}
    for t in tables.values():
        for c, dt in t.dtypes.items():
            if dt != "str" or not _SAFE.fullmatch(c):
                continue
            vals = [x for x in t.columns[c] if x is not None]
            if len(vals) == t.n_rows and len(set(vals)) == len(vals) and len(vals) >= 3:
                keyed.setdefault(c, []).append(t.name)
    out = []
    for t in tables.values():
        for c in t.columns:
            for parent in keyed.get(c, ()):
                if parent == t.name or t.dtypes[c] != "str":
                    continue
                child = {x for x in t.columns[c] if x is not None}
                pkeys = set(tables[parent].columns[c])
                if (
                    len(child) >= 2
                    and len(child & pkeys) >= 0.8 * len(child)
                    and len(child) < t.n_rows
                ):
                    out.append((t.name, c, parent))
    return sorted(out)


def _join_tasks(tables: Mapping[str, Table], rng: np.random.Generator, n: int) -> list[Task]:
    fks = _foreign_keys(tables)
    out: list[Task] = []
    by_child: dict[str, list[tuple[str, str]]] = {}
    for child, col, parent in fks:
        by_child.setdefault(child, []).append((col, parent))
    attempts = 0
    while len(out) < n and fks and attempts < 20 * n:
        attempts += 1
        child, col, parent = fks[rng.integers(len(fks))]
        ct, pt = tables[child], tables[parent]
        nums = _num_cols(ct)
        descr = [g for g in _cat_cols(pt, 2, 10**9) if g != col]
        if not nums or not descr:
            continue
        c, g = nums[rng.integers(len(nums))], descr[rng.integers(len(descr))]
        others = [(k, p) for k, p in by_child.get(child, ()) if p != parent]
        joins = ((ColumnRef("t0", col), ColumnRef("t1", col)),)
        names = (child, parent)
        where: tuple[Condition, ...] = ()
        extra = ""
        if others and rng.integers(2):
            k3, p3 = others[rng.integers(len(others))]
            nums3 = _num_cols(tables[p3])
            if nums3:
                c3 = nums3[rng.integers(len(nums3))]
                med = _round(float(np.nanmedian(tables[p3].columns[c3].astype(np.float64))))
                names = (child, parent, p3)
                joins += ((ColumnRef("t0", k3), ColumnRef("t2", k3)),)
                where = (Condition(ColumnRef("t2", c3), ">", med),)
                extra = (
                    f", counting only records whose {_label(tables[p3], c3)} in the data "
                    f"on: {_desc(tables[p3])} is greater than {med:g}"
                )
        p = Plan(
            names,
            "mean",
            "argmax",
            agg_column=ColumnRef("t0", c),
            group=ColumnRef("t1", g),
            joins=joins,
            where=where,
        )
        q = (
            f"Combining the data on: {_desc(ct)} with the data on: {_desc(pt)}, which "
            f"{_label(pt, g)} has the highest average {_label(ct, c)}{extra}?"
        )
        task = _finish("", q, p, "string_exact", tables)
        if task is not None and task.query not in {t.query for t in out}:
            out.append(task)
    return out


def generate_tasks(
    tables: Mapping[str, Table],
    n_tasks: int,
    *,
    key: jax.Array,
    join_fraction: float = 0.2,
    absent_fraction: float = 0.1,
    lexical_free_fraction: float = 0.0,
) -> list[Task]:
    """Generate KramaBench-format tasks over `tables` with known ground truth.

    **Arguments:**

    - `tables`: table name -> `Table` (a lake's `tables`; at least one).
    - `n_tasks`: how many tasks (a positive integer, at most `MAX_TASKS` = 10,000; fewer
      come back when the lake admits fewer distinct tasks).
    - `key`: the only randomness (which tables, columns and templates).
    - `join_fraction`: share of 2-3-table join tasks (as many as the lake's same-named
      key columns allow).
    - `absent_fraction`: share of "not in the lake" tasks.
    - `lexical_free_fraction`: share of lexical-free tasks (tag `lexical_free`: a count
      of records of the table whose text column holds the quoted entries, the question
      sharing no word beyond `LEXICAL_STOPWORDS` with the table's `profile_text`; as
      many as the tables allow).

    **Returns:** the tasks; each one's `answer` is `execute(plan)` over exactly its
    `data_sources`. Answer types: numeric_exact (counts), numeric_approximate (means),
    string_exact (arg-max group), list_exact (groups above a threshold).
    """
    check_instance("tables", tables, Mapping)
    if not tables:
        raise ValueError("tables: expected at least one table, received none")
    for t in tables.values():
        check_instance("tables", t, Table)
    n_tasks = check_size("n_tasks", n_tasks, cap=MAX_TASKS, why="MAX_TASKS")
    join_fraction = check_real("join_fraction", join_fraction, low=0.0, high=1.0)
    absent_fraction = check_real("absent_fraction", absent_fraction, low=0.0, high=1.0)
    lexical_free_fraction = check_real(
        "lexical_free_fraction", lexical_free_fraction, low=0.0, high=1.0
    )
    seed = np.asarray(jax.random.key_data(key)).astype(np.uint32)
    rng = np.random.default_rng(seed)
    n_absent = int(round(absent_fraction * n_tasks))
    n_join = int(round(join_fraction * n_tasks))
    n_free = int(round(lexical_free_fraction * n_tasks))
    tasks = _join_tasks(tables, rng, n_join)
    names = sorted(tables)
    used = {s for t in tasks for s in t.data_sources}
    if n_free:
        free: list[Task] = []
        for i in rng.permutation(len(names)):
            if len(free) >= n_free:
                break
            if names[i] in used:
                continue
            task = _lexical_free_task(tables[names[i]], rng, tables)
            if task is not None:
                free.append(task)
                used.add(names[i])
        tasks += free
    order = rng.permutation(len(names))
    for i in order:
        if len(tasks) >= n_tasks - n_absent:
            break
        if names[i] in used:
            continue
        made = _single_table_tasks(tables[names[i]], rng, tables)
        if made:
            tasks.append(made[0])
            used.add(names[i])
    for j in rng.permutation(len(_ABSENT))[:n_absent]:
        what, where = _ABSENT[j]
        tasks.append(
            Task("", f"What is the {what} of {where}?", NOT_IN_LAKE, "string_exact", (), ())
        )
    return [
        dataclasses.replace(
            t,
            id=f"lake-task-{i:04d}",
            subtasks=tuple(
                {**s, "id": f"lake-task-{i:04d}-{k + 1}"} for k, s in enumerate(t.subtasks)
            ),
        )
        for i, t in enumerate(tasks)
    ]


def save_tasks(tasks: Sequence[Task], path: str | Path) -> None:
    """Write tasks as a KramaBench-style JSON list (atomically).

    `tasks` a sequence of `Task` (possibly empty), `path` a `str` or `Path`; anything else
    raises a `ValueError` naming the argument.
    """
    from .._core import write_json

    check_instance("path", path, (str, Path))
    if isinstance(tasks, str | bytes) or not hasattr(tasks, "__iter__"):
        raise ValueError(f"tasks: expected a sequence of Task, received {type(tasks).__name__}")
    tasks = list(tasks)
    for t in tasks:
        check_instance("tasks", t, Task)

    write_json(path, [t.to_json() for t in tasks])


def _check_subtasks(sub, file: str, i: int) -> tuple[dict, ...]:
    if sub is None:
        return ()
    if not isinstance(sub, list) or not all(isinstance(s, dict) for s in sub):
        raise ValueError(f"{file}: task {i}: subtasks: expected a list of objects")
    return tuple(sub)


def _check_tags(tags, file: str, i: int) -> tuple[str, ...]:
    if tags is None:
        return ()
    if not isinstance(tags, list) or not all(isinstance(x, str) for x in tags):
        raise ValueError(f"{file}: task {i}: tags: expected a list of strings")
    return tuple(tags)


def load_tasks(path: str | Path) -> list[Task]:
    """Read a KramaBench task file (a JSON list of tasks, or one task object).

    Required fields: `id`, `query`, `answer`, `answer_type`; `data_sources` (list of file
    names), `subtasks` (list of objects), `plan` and `tags` (list of strings, jaxlab's
    task files) may be absent. Raises `ValueError` naming the
    file and the task for anything else (naming `path` when it is not a `str`/`Path` of a
    file).
    """
    check_instance("path", path, (str, Path))
    path = Path(path)
    if not path.is_file():
        raise ValueError(f"path: expected a KramaBench task file, received {str(path)!r}")
    if path.stat().st_size > _MAX_TASK_FILE:
        raise ValueError(f"{path}: larger than {_MAX_TASK_FILE} bytes")
    try:
        raw = read_json(path, max_bytes=_MAX_TASK_FILE)
    except ValueError as e:
        raise ValueError(f"{path}: not valid JSON ({e})") from None
    if isinstance(raw, dict):
        raw = [raw]
    if not isinstance(raw, list):
        raise ValueError(f"{path}: expected a list of task objects")
    out = []
    for i, d in enumerate(raw):
        if not isinstance(d, dict):
            raise ValueError(f"{path}: task {i}: expected an object")
        missing = [k for k in ("id", "query", "answer", "answer_type") if k not in d]
        if missing:
            raise ValueError(f"{path}: task {i}: missing fields {missing}")
        ds = d.get("data_sources") or []
        if not isinstance(ds, list) or not all(isinstance(s, str) for s in ds):
            raise ValueError(f"{path}: task {i}: data_sources: expected a list of names")
        try:
            out.append(
                Task(
                    str(d["id"]),
                    str(d["query"]),
                    d["answer"],
                    str(d["answer_type"]),
                    tuple(ds),
                    _check_subtasks(d.get("subtasks"), str(path), i),
                    str(d.get("plan", "")),
                    _check_tags(d.get("tags"), str(path), i),
                )
            )
        except ValueError as e:
            raise ValueError(f"{path}: task {i}: {e}") from None
    return out
