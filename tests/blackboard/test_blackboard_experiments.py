"""The P8 discovery experiment without a model: the FULL config's KramaBench path."""

from __future__ import annotations

import dataclasses

import jax
import pytest

from .test_kramabench_lake import _checkout


def test_full_dry_run_names_a_missing_kramabench_checkout(tmp_path):
    from experiments.blackboard import discovery as d

    assert d.FULL.kramabench == ""  # nothing of KramaBench is shipped
    # no checkout named: FULL runs the generated lake, and the dry run says how to add it
    assert "--set kramabench=PATH" in d.preflight(d.FULL)["kramabench"]
    with pytest.raises(ValueError, match="no KramaBench checkout"):
        d.preflight(dataclasses.replace(d.FULL, kramabench=str(tmp_path / "nowhere")))
    full = dataclasses.replace(d.FULL, kramabench=str(_checkout(tmp_path)))
    assert d.preflight(full)["kramabench"].startswith("checkout at")
    lake, tasks = d._lake_and_tasks(full, jax.random.key(0))
    assert [t.id for t in tasks] == ["wildfire-easy-1", "wildfire-hard-2"]
    assert tasks[0].data_sources[0] in lake.tables
