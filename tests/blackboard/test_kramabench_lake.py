"""`load_kramabench`: a KramaBench checkout's data lake and workload (a synthetic checkout
in KramaBench's layout here: no KramaBench data is shipped)."""

from __future__ import annotations

import json

import pytest

import jaxlab.blackboard as bb


def _checkout(root):
    (root / "workload").mkdir(parents=True)
    inp = root / "data" / "wildfire" / "input"
    (inp / "noaa").mkdir(parents=True)
    (inp / "fires_by_state.csv").write_text("state,acres\nCA,10\nOR,4\nWA,3\nNV,1\nAZ,2\n")
    (inp / "noaa" / "rain.csv").write_text("state,mm\nCA,1\nOR,9\nWA,8\nNV,0\nAZ,0\n")
    (inp / "notes.txt").write_text("not a table")
    (inp / "broken.csv").write_bytes(b"\xff\xfe\x00bad")
    tasks = [
        {
            "id": "wildfire-easy-1",
            "query": "Which state burned most?",
            "answer": "CA",
            "answer_type": "string_exact",
            "data_sources": ["fires_by_state.csv"],
        },
        {
            "id": "wildfire-hard-2",
            "query": "Does rain reduce fires?",
            "answer": "yes",
            "answer_type": "string_exact",
            "data_sources": ["fires_by_state.csv", "rain.csv", "satellite.xlsx"],
        },
    ]
    (root / "workload" / "wildfire.json").write_text(json.dumps(tasks))
    (root / "workload" / "legal.json").write_text("[]")  # no data folder: left out
    return root


def test_kramabench_lake_and_tasks_share_names(tmp_path):
    lake, tasks = bb.load_kramabench(_checkout(tmp_path))
    assert set(lake.tables) == {"wildfire/fires_by_state.csv", "wildfire/noaa/rain.csv"}
    assert set(lake.partitions) == {"wildfire"}
    assert lake.tables["wildfire/noaa/rain.csv"].title == "rain"
    assert [t.id for t in tasks] == ["wildfire-easy-1", "wildfire-hard-2"]
    assert tasks[0].data_sources == ("wildfire/fires_by_state.csv",)
    # a bare file name resolves to the one table of that name; an unread source stays
    assert tasks[1].data_sources == (
        "wildfire/fires_by_state.csv",
        "wildfire/noaa/rain.csv",
        "wildfire/satellite.xlsx",
    )
    assert any("broken.csv" in s for s in lake.skipped)


def test_kramabench_checkout_missing_is_named(tmp_path):
    with pytest.raises(ValueError, match="KramaBench checkout"):
        bb.load_kramabench(tmp_path / "nowhere")
    with pytest.raises(ValueError, match="domains"):
        bb.load_kramabench(_checkout(tmp_path), domains=("astronomy",))
