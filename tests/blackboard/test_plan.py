"""Plan parser (strict, never executes text) and executor (pandas is the oracle)."""

from __future__ import annotations

import math
import os

import pytest

import jaxlab.blackboard as bb

from ._tables import frame, tables


def _run(text):
    return bb.execute(text, tables())


def test_mean_with_missing_equals_pandas():
    got = _run("TABLE t0 shop/sales\nAGG mean t0.units\nOUTPUT value")
    assert got == pytest.approx(frame("shop/sales").units.mean(), rel=1e-12)


def test_filtered_count_and_text_filter_equal_pandas():
    df = frame("shop/sales")
    got = _run("TABLE t0 shop/sales\nWHERE t0.price > 2.1\nAGG count\nOUTPUT value")
    assert got == len(df[df.price > 2.1])
    got = _run(
        'TABLE t0 shop/sales\nWHERE t0.region = "north"\nWHERE t0.units >= 7\n'
        "AGG sum t0.units\nOUTPUT value"
    )
    assert got == df[(df.region == "north") & (df.units >= 7)].units.sum()
    got = _run('TABLE t0 shop/sales\nWHERE t0.region != "north"\nAGG count\nOUTPUT value')
    assert got == len(df[(df.region != "north") & df.region.notna()])


def test_group_argmax_argmin_keys_equal_pandas():
    df = frame("shop/sales")
    g = df.groupby("region").units.mean()
    assert (
        _run("TABLE t0 shop/sales\nGROUP t0.region\nAGG mean t0.units\nOUTPUT argmax") == g.idxmax()
    )
    assert (
        _run("TABLE t0 shop/sales\nGROUP t0.region\nAGG mean t0.units\nOUTPUT argmin") == g.idxmin()
    )
    keys = _run("TABLE t0 shop/sales\nGROUP t0.region\nAGG mean t0.units\nHAVING > 6\nOUTPUT keys")
    assert keys == sorted(g[g > 6].index)
    n = _run("TABLE t0 shop/sales\nGROUP t0.store\nAGG nunique t0.day\nHAVING >= 2\nOUTPUT keys")
    u = df.groupby("store").day.nunique()
    assert n == sorted(u[u >= 2].index)


def test_two_and_three_table_joins_equal_pandas():
    s, st, c = frame("shop/sales"), frame("shop/stores"), frame("shop/cities")
    j = s.merge(st, on="store")
    got = _run(
        "TABLE t0 shop/sales\nTABLE t1 shop/stores\nJOIN t0.store = t1.store\n"
        "GROUP t1.city\nAGG sum t0.units\nOUTPUT argmax"
    )
    assert got == j.groupby("city").units.sum().idxmax()
    got = _run(
        "TABLE t0 shop/sales\nTABLE t1 shop/stores\nJOIN t0.store = t1.store\n"
        "WHERE t1.size > 70\nAGG mean t0.price\nOUTPUT value"
    )
    assert got == pytest.approx(j[j["size"] > 70].price.mean(), rel=1e-12)
    j3 = j.merge(c, on="city")
    got = _run(
        "TABLE t0 shop/sales\nTABLE t1 shop/stores\nTABLE t2 shop/cities\n"
        "JOIN t0.store = t1.store\nJOIN t1.city = t2.city\n"
        "GROUP t2.country\nAGG max t0.units\nOUTPUT argmax"
    )
    assert got == j3.groupby("country").units.max().idxmax()
    got = _run(
        "TABLE t0 shop/sales\nTABLE t1 shop/stores\nTABLE t2 shop/cities\n"
        "JOIN t0.store = t1.store\nJOIN t1.city = t2.city\n"
        'WHERE t2.country = "England"\nAGG count\nOUTPUT value'
    )
    assert got == len(j3[j3.country == "England"])


def test_all_missing_mean_is_nan_not_an_error():
    got = _run('TABLE t0 shop/sales\nWHERE t0.store = "zz"\nAGG mean t0.units\nOUTPUT value')
    assert math.isnan(got)


@pytest.mark.parametrize(
    "text",
    [
        "",
        "TABLE t0 shop/sales",  # no AGG / OUTPUT
        "AGG count\nOUTPUT value",  # no TABLE
        "TABLE t1 shop/sales\nAGG count\nOUTPUT value",  # alias out of sequence
        "TABLE t0 shop/sales\nAGG count\nAGG count\nOUTPUT value",  # repeated
        "TABLE t0 shop/sales\nOUTPUT value\nAGG count",  # out of order
        "TABLE t0 shop/sales\nAGG median t0.units\nOUTPUT value",  # unknown aggregate
        "TABLE t0 shop/sales\nAGG mean\nOUTPUT value",  # mean without a column
        "TABLE t0 shop/sales\nAGG mean t0.units\nOUTPUT argmax",  # argmax without GROUP
        "TABLE t0 shop/sales\nGROUP t0.region\nAGG count\nOUTPUT value",
        "TABLE t0 shop/sales\nAGG mean t1.units\nOUTPUT value",  # undeclared alias
        "TABLE t0 shop/sales\nTABLE t1 shop/stores\nAGG count\nOUTPUT value",  # missing JOIN
        "TABLE t0 shop/sales\nWHERE t0.units ~ 3\nAGG count\nOUTPUT value",
        "TABLE t0 shop/sales\nWHERE t0.region = 'north'\nAGG count\nOUTPUT value",
        "SELECT * FROM sales",
        "TABLE t0 shop/sales\nAGG count\nOUTPUT value\nOUTPUT value",
        "x" * 5000,
    ],
)
def test_parser_rejects_malformed_plans(text):
    with pytest.raises(bb.PlanError):
        bb.parse_plan(text)


def test_parser_never_executes_text(tmp_path):
    target = tmp_path / "pwned"
    evil = [
        f"TABLE t0 shop/sales\nAGG count\nOUTPUT value; open({str(target)!r}, 'w')",
        f"__import__('os').system('touch {target}')",
        f'TABLE t0 shop/sales\nWHERE t0.units > __import__("os").system("touch {target}")'
        "\nAGG count\nOUTPUT value",
    ]
    for text in evil:
        with pytest.raises(bb.PlanError):
            bb.parse_plan(text)
    assert not os.path.exists(target)


def test_plan_errors_are_value_errors_naming_the_problem():
    with pytest.raises(ValueError, match="line 2: unknown clause"):
        bb.parse_plan("TABLE t0 a\nDROP TABLE a\nAGG count\nOUTPUT value")
    with pytest.raises(bb.PlanError, match="no column 'nope'"):
        _run("TABLE t0 shop/sales\nAGG mean t0.nope\nOUTPUT value")
    with pytest.raises(bb.PlanError, match="not in the lake"):
        _run("TABLE t0 shop/missing\nAGG count\nOUTPUT value")
    with pytest.raises(bb.PlanError, match="text column compared"):
        _run("TABLE t0 shop/sales\nWHERE t0.region > 3\nAGG count\nOUTPUT value")


def test_format_parse_round_trip():
    text = (
        "TABLE t0 shop/sales\nTABLE t1 shop/stores\nJOIN t0.store = t1.store\n"
        'WHERE t1.city = "Leeds"\nWHERE t0.price <= 2.5\nGROUP t1.city\n'
        "AGG mean t0.units\nHAVING > 1.5\nOUTPUT keys"
    )
    assert bb.format_plan(bb.parse_plan(text)) == text
