"""blackboard refuses what the issue #59 probe found it accepting silently: a planning
model that scores options NaN (argmax picked one and an answer came back) and a JOIN on
a key shared by every row (quadratic rows, no bound)."""

from __future__ import annotations

import numpy as np
import pytest

import jaxlab.blackboard as bb
from jaxlab.blackboard._plan import MAX_JOIN_ROWS

from ._tables import frame, tables

QUESTION = "How many units were sold above 5?"


class ScriptedModel(bb.AgentModel):
    """Scores every option with `fill` (a constant, NaN, or a wrong-length vector)."""

    name = "scripted"

    def __init__(self, fill=0.0, length=None):
        self.fill, self.length = fill, length

    def option_scores(self, prompt, options):
        return np.full(len(options) if self.length is None else self.length, self.fill)

    def count_tokens(self, text):
        return len(text.split())


def _lake():
    parts = {"shop": ("shop/cities", "shop/sales", "shop/stores"), "zoo": ("zoo/animals",)}
    return bb.Lake(tables(), parts)


def test_answer_query_refuses_a_model_that_scores_nan():
    lake = _lake()
    ok = bb.answer_query(QUESTION, ["shop/sales"], lake, ScriptedModel(0.0))
    assert ok.answer is not None
    assert ok.reason == ""
    with pytest.raises(ValueError, match=r"model: 'scripted'.option_scores returned NaN"):
        bb.answer_query(QUESTION, ["shop/sales"], lake, ScriptedModel(np.nan))
    with pytest.raises(ValueError, match=r"model: .*returned shape \(1,\) for 4 options"):
        bb.answer_query(QUESTION, ["shop/sales"], lake, ScriptedModel(0.0, length=1))


def test_relevance_refuses_nan_scores():
    with pytest.raises(ValueError, match="model: .*NaN or inf"):
        bb.relevance(ScriptedModel(np.inf), "units sold", ["a table of sales", "zoo animals"])


def _keyed(name, n, key):
    return bb.Table(
        name=name,
        columns={"k": np.array([key] * n, dtype=object), "v": np.arange(n)},
        dtypes={"k": "str", "v": "int"},
    )


def test_join_on_a_constant_key_is_bounded_before_rows_are_built():
    plan = "TABLE t0 a\nTABLE t1 b\nJOIN t0.k = t1.k\nAGG count\nOUTPUT value"
    # below the bound: the count is the product (the pandas oracle of a many-to-many join)
    small = {"a": _keyed("a", 30, "x"), "b": _keyed("b", 40, "x")}
    assert bb.execute(plan, small) == 30 * 40
    n = 20_000  # 4e8 joined rows: ran without bound before
    assert n * n > MAX_JOIN_ROWS
    big = {"a": _keyed("a", n, "x"), "b": _keyed("b", n, "x")}
    with pytest.raises(bb.PlanError, match=rf"would produce {n * n} rows, more than the"):
        bb.execute(plan, big)


def test_the_join_of_the_shared_tables_still_matches_pandas():
    plan = (
        "TABLE t0 shop/sales\nTABLE t1 shop/stores\nJOIN t0.store = t1.store\n"
        "AGG sum t0.units\nOUTPUT value"
    )
    joined = frame("shop/sales").merge(frame("shop/stores"), on="store")
    assert bb.execute(plan, tables()) == pytest.approx(joined["units"].sum())


def test_readers_refuse_deeply_nested_json_naming_the_file(tmp_path):
    """Nesting deeper than the recursion limit is a ValueError naming the file (the probe
    asked: never a RecursionError) in every reader of the blackboard."""
    deep = "[" * 100_000 + "]" * 100_000
    f = tmp_path / "tasks.json"
    f.write_text(deep)
    with pytest.raises(ValueError, match=r"tasks.json: .*nested too deeply"):
        bb.load_tasks(f)
    root = tmp_path / "kb"
    (root / "workload").mkdir(parents=True)
    (root / "data" / "x" / "input").mkdir(parents=True)
    (root / "workload" / "x.json").write_text(deep)
    with pytest.raises(ValueError, match=r"x.json: .*nested too deeply"):
        bb.load_kramabench(root)
    from jaxlab.blackboard._table import table_from_records

    with pytest.raises(ValueError, match=r"cars.json: .*nested too deeply"):
        table_from_records(deep.encode(), file="cars.json")


def test_a_compressed_table_is_bounded_by_its_decompressed_size(tmp_path, monkeypatch):
    """load_lake's reader stops at MAX_TABLE_BYTES + 1 decompressed bytes (a bz2/gz bomb is
    a TableError naming the file, not the whole expansion in memory)."""
    import bz2
    import gzip

    from jaxlab.blackboard import _lake

    monkeypatch.setattr(_lake, "MAX_TABLE_BYTES", 1000)
    for name, pack in (("t.csv.bz2", bz2.compress), ("t.csv.gz", gzip.compress)):
        path = tmp_path / name
        path.write_bytes(pack(b"a,b\n" + b"1,2\n" * 10_000))
        assert path.stat().st_size < 1000  # the declared/compressed size says nothing
        with pytest.raises(bb.TableError, match=rf"{name}: more than 1000 bytes"):
            _lake._read(path, tmp_path)
