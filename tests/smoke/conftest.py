"""The smoke tier's set-up: experiments run as a user runs them, and a status file.

The suite's conftest turns on float64, strict dtype promotion and raising rank promotion
for the library's tests; `python -m experiments run` has none of them, so each smoke test
runs with JAX's defaults (restored afterwards). With `JAXLAB_SMOKE_STATUS=FILE` (`make
smoke` sets it) the outcome of every smoke test is written to FILE as JSON
(`{"experiments": {NAME: "passed" | "failed"}, "benchmarks": {...}}`): the claims table
marks the rows of an experiment that failed as stale.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import jax
import pytest

_DEFAULTS = {
    "jax_enable_x64": False,
    "jax_numpy_dtype_promotion": "standard",
    "jax_numpy_rank_promotion": "allow",
}
_OUTCOMES: dict[str, dict[str, str]] = {"experiments": {}, "benchmarks": {}}


@pytest.fixture
def user_jax_config():
    """JAX's default configuration (what `python -m experiments` runs with) for one test."""
    old = {k: getattr(jax.config, k) for k in _DEFAULTS}
    for k, v in _DEFAULTS.items():
        jax.config.update(k, v)
    try:
        yield
    finally:
        for k, v in old.items():
            jax.config.update(k, v)


def pytest_runtest_logreport(report):
    """Record each smoke test's outcome (runs in the controller under xdist too)."""
    if "tests/smoke/test_smoke.py::test_" not in report.nodeid or "[" not in report.nodeid:
        return
    kind = "benchmarks" if "::test_benchmark" in report.nodeid else "experiments"
    name = report.nodeid.rsplit("[", 1)[1].rstrip("]")
    if report.when == "call" or report.outcome == "failed":
        prev = _OUTCOMES[kind].get(name)
        if prev != "failed":
            _OUTCOMES[kind][name] = "passed" if report.passed else "failed"


def pytest_sessionfinish(session):
    path = os.environ.get("JAXLAB_SMOKE_STATUS")
    if path and not hasattr(session.config, "workerinput") and any(_OUTCOMES.values()):
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        Path(path).write_text(json.dumps(_OUTCOMES, indent=1, sort_keys=True) + "\n")
