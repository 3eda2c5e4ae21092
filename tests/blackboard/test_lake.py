"""Table reading (malformed files named, bounded, confined) and the real lake from wheels."""

from __future__ import annotations

import jax
import numpy as np
import pytest

import jaxlab.blackboard as bb
from jaxlab.blackboard import _lake
from jaxlab.blackboard._table import parse_csv, table_from_records


def test_types_and_missing_values():
    cols, dt = parse_csv(b",a,b,c\n1,1,x,2.5\n2,2,,NA\n3,3,z,4\n", file="f.csv", index_column=True)
    assert dt == {"a": "int", "b": "str", "c": "float"}
    assert cols["a"].dtype == np.int64
    assert list(cols["b"]) == ["x", None, "z"]
    assert np.isnan(cols["c"][1])


def test_column_types_by_hand():
    """The vectorised column conversion: each rule on one column (values stripped)."""
    data = (
        b"i,im,f,inf,s,empty,big\n"
        b" 1 ,1,1.5,1,a,NA,1\n"
        b"2,,2,inf,b,,99999999999999999999\n"
        b"-3,3,1e3,3,3,.,3\n"
    )
    cols, dt = parse_csv(data, file="t.csv")
    assert dt == {
        "i": "int",
        "im": "float",  # an int column with a missing value
        "f": "float",
        "inf": "str",  # a non-finite value keeps the column text
        "s": "str",
        "empty": "float",  # every value missing: all nan
        "big": "float",  # an int beyond int64: read as float
    }
    np.testing.assert_array_equal(cols["i"], [1, 2, -3])
    np.testing.assert_array_equal(cols["im"], [1.0, np.nan, 3.0])
    np.testing.assert_array_equal(cols["f"], [1.5, 2.0, 1000.0])
    assert list(cols["inf"]) == ["1", "inf", "3"]
    assert list(cols["s"]) == ["a", "b", "3"]
    assert np.isnan(cols["empty"]).all()
    assert cols["empty"].shape == (3,)


@pytest.mark.parametrize(
    ("data", "match"),
    [
        (b"a,b\n1,2\n3\n", "row 3 has 1 fields"),
        (b"a,b\n", "at least one row"),
        (b"a,a\n1,2\n", "duplicate column"),
        (b"a,b\x00\n1,2\n", "NUL"),
    ],
)
def test_malformed_csv_names_the_file(data, match):
    with pytest.raises(bb.TableError, match=rf"bad\.csv: .*{match}"):
        parse_csv(data, file="bad.csv")


def test_oversize_is_refused_before_parsing(monkeypatch):
    monkeypatch.setattr("jaxlab.blackboard._table.MAX_TABLE_BYTES", 10)
    with pytest.raises(bb.TableError, match="big.csv: .*exceeds"):
        parse_csv(b"a,b\n1,2\n3,4\n", file="big.csv")


def test_records_json():
    cols, dt = table_from_records(b'[{"x": 1, "y": "a"}, {"x": 2.5, "y": null}]', file="r.json")
    assert dt == {"x": "float", "y": "str"}
    with pytest.raises(bb.TableError, match="r.json: malformed JSON"):
        table_from_records(b"[{", file="r.json")
    with pytest.raises(bb.TableError, match="r.json: expected a JSON list"):
        table_from_records(b'{"a": 1}', file="r.json")


def test_reads_are_confined_to_the_package_folder(tmp_path):
    root = tmp_path / "pkg"
    root.mkdir()
    (tmp_path / "secret.csv").write_text("a\n1\n")
    with pytest.raises(bb.TableError, match="outside the package folder"):
        _lake._read(root / ".." / "secret.csv", root)


def test_bad_arguments():
    with pytest.raises(ValueError, match="sources"):
        bb.load_lake(["nope"])
    with pytest.raises(ValueError, match="partition_size"):
        bb.load_lake(["vega_datasets"], partition_size=0)


def test_small_real_source_with_profiles():
    lake = bb.load_lake(["vega_datasets"], partition_size=5)
    assert len(lake) >= 10
    assert all(len(p) <= 5 for p in lake.partitions.values())
    t = lake.tables["vega_datasets/seattle-weather"]
    assert {"date", "precipitation", "weather"} <= set(t.columns)
    prof = bb.profile_text(t)
    assert "precipitation (float" in prof
    assert "sample:" in prof
    assert "doc:" in prof
    small = lake.subset(6, key=jax.random.key(0), keep=["vega_datasets/stocks"])
    assert "vega_datasets/stocks" in small.tables
    assert len(small) >= 6
    assert set(small.partitions) <= set(lake.partitions)


@pytest.mark.slow
def test_whole_lake_has_500_tables_in_20_partitions():
    lake = bb.load_lake()
    assert len(lake) >= 500
    assert len(lake.partitions) >= 20
    assert {t.source for t in lake.tables.values()} == set(bb.SOURCES)
    assert all(len(v) <= 20 for v in lake.partitions.values())
    assert all(t.title for t in lake.tables.values())
