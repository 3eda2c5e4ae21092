"""The smoke tier (`make smoke`, run by `.ci/run`): every experiment and every benchmark
executes its real code path end to end at its TINY size through `python -m experiments run
NAME --tiny`, each in its own process as a user runs it (real data files and real models
where the experiment uses them; the smallest model, a handful of items and steps), and every
experiment's FULL config passes `--full --dry-run` (config, data, models, memory, a time
estimate from the TINY run).

Each experiment must write metrics.json with its metrics, its claims and its figures
(PNG files); the metric names that its component's tests rely on are in `expected.py`.
Numbers from TINY runs are not results: nothing here checks a claim's verdict.
"""

from __future__ import annotations

import json
import math
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

from experiments._harness import _registry
from experiments._harness._dryrun import dry_run

from .expected import METRICS

ROOT = Path(__file__).resolve().parents[2]
_TINY = re.compile(r"^TINY\s*[:=]", re.MULTILINE)


def _with_tiny(bench: bool) -> list[str]:
    """The registered names whose module declares TINY (read from the source: cheap at
    collection); `test_every_module_declares_tiny` checks that none is left out."""
    out = []
    for dotted, name in _registry._module_names("experiments", bench):
        src = (ROOT / (dotted.replace(".", "/") + ".py")).read_text()
        if _TINY.search(src):
            out.append(name)
    return sorted(out)


EXPERIMENTS = _with_tiny(False)
BENCHMARKS = _with_tiny(True)
ALL = sorted(n for b in (False, True) for _, n in _registry._module_names("experiments", b))
_CLAIM_FIELDS = {"claim", "paper", "measured", "holds", "paper_id"}
# one TINY run; far above the slowest seen (~12 min at load 10), it only stops a hang
TIMEOUT_S = 1800

pytestmark = pytest.mark.smoke


def _finite_or_none(x) -> bool:
    return x is None or (isinstance(x, int | float) and math.isfinite(x))


def _cli(*args: str, out: Path) -> float:
    """Run `python -m experiments ARGS --tiny --out OUT` as a user does, in its own process
    (JAX's defaults; one run's crash or compile-cache growth cannot reach the next run);
    returns its wall time."""
    cmd = [sys.executable, "-m", "experiments", *args, "--tiny", "--out", str(out)]
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=TIMEOUT_S)
    seconds = time.perf_counter() - t0
    assert proc.returncode == 0, (
        f"{' '.join(cmd[1:])} exited {proc.returncode}:\n{proc.stderr[-4000:]}"
    )
    return seconds


@pytest.mark.parametrize("name", EXPERIMENTS)
def test_experiment(name, tmp_path, user_jax_config):
    mod = _registry.find(name)
    seconds = _cli("run", name, out=tmp_path)
    written = json.loads((tmp_path / name / "metrics.json").read_text())
    assert written["experiment"] == name
    assert written["config"] == "tiny"
    assert written["metrics"], f"{name} wrote no metrics"
    assert all(_finite_or_none(v) for v in written["metrics"].values())
    missing = [k for k in METRICS.get(name, ()) if k not in written["metrics"]]
    assert not missing, f"{name}: metrics {missing} not written"
    assert written["claims"], f"{name} checked no claim"
    for c in written["claims"]:
        assert set(c) >= _CLAIM_FIELDS, c
    assert written["figures"], f"{name} drew no figure"
    for fig in written["figures"]:
        png = tmp_path / name / fig
        assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n", png
    report = dry_run(mod, tiny_seconds=seconds)
    assert report.ok, "\n".join(report.lines())


@pytest.mark.parametrize("name", BENCHMARKS)
def test_benchmark(name, tmp_path):
    _cli("bench", name, out=tmp_path)
    rec = json.loads((tmp_path / "bench" / f"{name}.json").read_text())
    assert rec["config"] == "tiny"
    assert rec["timings"]
    assert set(rec["ours"]) <= set(rec["timings"])
    for t in rec["timings"].values():
        assert t["median_s"] > 0
    assert all(math.isfinite(v) and v > 0 for v in rec["ratios"].values())
    assert all(math.isfinite(v) for v in rec["fields"].values())


def test_cli_tiny_run_and_full_dry_run(tmp_path):
    """The two commands a user types, as subprocesses (JAX's defaults, the real CLI)."""
    name = "laplex_exactness"
    run = [sys.executable, "-m", "experiments", "run", name]
    out = subprocess.run(
        [*run, "--tiny", "--out", str(tmp_path)], cwd=ROOT, capture_output=True, text=True
    )
    assert out.returncode == 0, out.stderr[-2000:]
    assert json.loads((tmp_path / name / "metrics.json").read_text())["config"] == "tiny"
    dry = subprocess.run([*run, "--full", "--dry-run"], cwd=ROOT, capture_output=True, text=True)
    assert dry.returncode == 0, dry.stdout[-2000:] + dry.stderr[-2000:]
    assert f"{name} --full --dry-run: ok" in dry.stdout
    assert "time_estimate" in dry.stdout
    assert "device_memory" in dry.stdout
    bad = subprocess.run([*run, "--dry-run"], cwd=ROOT, capture_output=True, text=True)
    assert bad.returncode == 2
    assert "add --full" in bad.stderr


def test_every_module_declares_tiny():
    """Every registered experiment and benchmark is in the smoke tier (none left out)."""
    assert sorted(EXPERIMENTS + BENCHMARKS) == ALL
