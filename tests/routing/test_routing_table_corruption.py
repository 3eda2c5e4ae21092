"""Issue 30: a corruption sweep of a saved `RoutingTable`'s .npz (a zip of .npy records,
no pickle): truncations at every zip field boundary and a spread through the file,
flipped bytes in every local header, central-directory entry and the end record, and
flipped bytes in the member data (covered by the zip CRC). `RoutingTable.load` must
raise one ValueError naming the file, or load a table equal to the original (a header
byte zipfile ignores). The default run takes a deterministic subset; `-m slow` all."""

from __future__ import annotations

import numpy as np
import pytest

from jaxlab import routing

from ..corruption import cuts, data_flips, flips, report, subset, sweep, zip_fields
from .test_routing_table import _table


@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    base = tmp_path_factory.mktemp("table") / "table"
    table = _table()
    table.save(base)
    path = base.with_suffix(".npz")
    data = path.read_bytes()
    return base, path, data, zip_fields(data), table


def _same(a: routing.RoutingTable, b: routing.RoutingTable) -> bool:
    return (
        a.candidates == b.candidates
        and a.group_names == b.group_names
        and a.query_ids == b.query_ids
        and all(
            np.array_equal(getattr(a, k), getattr(b, k))
            for k in ("quality", "cost", "input_tokens", "output_tokens", "latency")
        )
    )


def _accept(table):
    def accept(damage, got, caught):
        same = isinstance(got, routing.RoutingTable) and _same(got, table)
        return "a zip header byte the reader ignores (table unchanged)" if same else None

    return accept


def _damages(data, fields):
    header = [f for f in fields if f.kind != "data"]
    return cuts(fields, len(data), spread=24), flips(header), data_flips(fields)


def test_zip_walk_covers_the_archive(saved):
    _, _, data, fields, _ = saved
    assert fields[0].start == 0
    assert fields[-1].start + fields[-1].size == len(data)
    assert sum(f.kind == "data" for f in fields) >= 5


def test_routing_table_corruption_sweep_subset(saved, record_property):
    base, path, data, fields, table = saved
    c, fl, dfl = _damages(data, fields)
    damages = subset(c, 8) + subset(fl, 16) + subset(dfl, 4)
    res = sweep(path, lambda p: routing.RoutingTable.load(base), damages, _accept(table))
    report(record_property, "routing table npz (subset)", res)


@pytest.mark.slow
def test_routing_table_corruption_sweep_full(saved, record_property):
    base, path, data, fields, table = saved
    c, fl, dfl = _damages(data, fields)
    res = sweep(path, lambda p: routing.RoutingTable.load(base), c + fl + dfl, _accept(table))
    report(record_property, "routing table npz", res)
