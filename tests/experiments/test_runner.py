"""The experiment runner, report and benchmark harness, on test-only experiments."""

import json
import subprocess
import sys
import types
from pathlib import Path

import jax
import jax.numpy as jnp
import matplotlib
import pytest

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from experiments import __main__ as cli  # noqa: E402
from experiments._harness import _registry  # noqa: E402
from experiments._harness._api import Bench, Claim, Result, RunContext  # noqa: E402
from experiments._harness._bench import run_bench  # noqa: E402
from experiments._harness._report import claims_table, write_report  # noqa: E402
from experiments._harness._runner import reproduce, run_experiment  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]


def _module(name, run, paper="P9", **extra):
    mod = types.ModuleType(f"test_exp_{name}")
    mod.NAME, mod.PAPER, mod.DESCRIPTION = name, paper, f"test experiment {name}"
    mod.QUICK, mod.FULL = {"n": 3}, {"n": 30}
    mod.run = run
    for k, v in extra.items():
        setattr(mod, k, v)
    return _registry.validate_module(mod)


def _good_run(config, key, ctx):
    x = jax.random.normal(key, (config["n"],))
    fig, ax = plt.subplots()
    ax.plot(x)
    assert isinstance(ctx, RunContext) and ctx.name == "good" and ctx.out_dir.name == "good"
    return Result(
        metrics={"mean": jnp.mean(x), "nested": {"n": config["n"], "flag": True},
                 "nan": float("nan")},
        claims=[Claim("sum |x| is finite", "finite", f"{float(jnp.sum(x)):.3f}", True)],
        figures={"trace": fig},
        notes="synthetic test data",
    )


def _bad_run(config, key, ctx):
    raise RuntimeError("deliberate failure")


def test_run_writes_valid_metrics(tmp_path):
    rec = run_experiment(_module("good", _good_run), out=tmp_path, seed=3)
    data = json.loads((tmp_path / "good" / "metrics.json").read_text())
    assert data == json.loads(json.dumps(rec))
    assert data["experiment"] == "good" and data["config"] == "quick" and data["seed"] == 3
    assert set(data["metrics"]) == {"mean", "nested/n", "nested/flag", "nan"}
    assert data["metrics"]["nested/n"] == 3 and data["metrics"]["nan"] is None
    assert isinstance(data["metrics"]["mean"], float)
    (claim,) = data["claims"]
    assert set(claim) >= {"claim", "paper", "measured", "holds"} and claim["holds"] is True
    assert data["runtime_s"] > 0
    assert set(data["jax"]) == {"version", "backend", "devices"}
    assert (tmp_path / "good" / "trace.png").read_bytes()[:4] == b"\x89PNG"
    assert "done good" in (tmp_path / "good" / "run.log").read_text()
    # Same seed -> same metrics; FULL config is passed through.
    again = run_experiment(_module("good", _good_run), out=tmp_path, seed=3)
    assert again["metrics"]["mean"] == rec["metrics"]["mean"]
    full = run_experiment(_module("good", _good_run), out=tmp_path / "f", full=True)
    assert full["config"] == "full" and full["metrics"]["nested/n"] == 30


def test_non_scalar_metric_rejected(tmp_path):
    def run(config, key, ctx):
        return Result(metrics={"vec": jnp.zeros(3)})

    with pytest.raises(ValueError, match=r"metrics\['vec'\]: metric must be a scalar"):
        run_experiment(_module("vec", run), out=tmp_path)


def test_reproduce_continues_past_failure(tmp_path):
    mods = [_module("bad", _bad_run, paper="P1"), _module("good", _good_run)]
    done, failed = reproduce(mods, out=tmp_path, progress=False)
    assert [d["experiment"] for d in done] == ["good"]
    assert [f["experiment"] for f in failed] == ["bad"]
    assert "RuntimeError: deliberate failure" in failed[0]["error"]
    assert "deliberate failure" in failed[0]["traceback"]
    md, page = write_report(tmp_path, names=["bad", "good"], failures=failed, header="h")
    text, html = md.read_text(), page.read_text()
    assert "bad — FAILED" in text and "RuntimeError: deliberate failure" in text
    assert "sum \\|x\\| is finite" in text and "| nested/n | 3 |" in text  # pipes escaped
    assert "data:image/png;base64," in html and "FAILED" in html
    # Papers sorted numerically: P1 section before P9.
    assert text.index("## P1 ") < text.index("## P9 ")


def test_reproduce_cli_exit_status(tmp_path, monkeypatch):
    mods = {"bad": _module("bad", _bad_run), "good": _module("good", _good_run)}
    monkeypatch.setattr(_registry, "discover", lambda bench=False: {} if bench else mods)
    assert cli.main(["reproduce", "--out", str(tmp_path)]) == 1
    assert (tmp_path / "report.html").is_file()
    assert cli.main(["reproduce", "--out", str(tmp_path / "g"), "--only", "go*"]) == 0


def test_interrupted_metrics_write_keeps_previous(tmp_path, monkeypatch):
    mod = _module("good", _good_run)
    run_experiment(mod, out=tmp_path, seed=1)
    before = (tmp_path / "good" / "metrics.json").read_text()

    def crash(fd):
        raise OSError("disk full (simulated)")

    import jaxlab._core._checkpoint as ck

    monkeypatch.setattr(ck.os, "fsync", crash)
    with pytest.raises(OSError, match="disk full"):
        run_experiment(mod, out=tmp_path, seed=2)
    assert (tmp_path / "good" / "metrics.json").read_text() == before
    assert not list((tmp_path / "good").glob(".*.tmp"))


def test_registry_rejects_incomplete_module():
    mod = types.ModuleType("broken")
    mod.NAME, mod.PAPER = "broken", "P1"
    with pytest.raises(ValueError, match="broken: missing DESCRIPTION, QUICK, FULL, run"):
        _registry.validate_module(mod)
    mod = _module("x", _good_run)
    mod.PAPER = "P99"
    with pytest.raises(ValueError, match="PAPER must be one of"):
        _registry.validate_module(mod)


def test_bench_writes_timings_and_ratios(tmp_path):
    def setup(config, key):
        a = jax.random.normal(key, (config["n"], config["n"]))
        fast = jax.jit(lambda: a.sum())
        slow = jax.jit(lambda: (a @ a @ a).sum())
        return Bench(impls={"ours": fast, "peer": slow}, ours=("ours",), size={"n": config["n"]})

    mod = _module("b", None, setup=setup)
    mod.QUICK = {"n": 200, "warmup": 1, "repeats": 3}
    rec = run_bench(mod, out=tmp_path)
    data = json.loads((tmp_path / "bench" / "b.json").read_text())
    assert data["size"] == {"n": 200} and set(data["timings"]) == {"ours", "peer"}
    t = data["timings"]["ours"]
    assert t["min_s"] <= t["median_s"] <= t["max_s"] and t["repeats"] == 3
    ratio = data["ratios"]["ours_vs_peer"]
    assert ratio == pytest.approx(
        data["timings"]["peer"]["median_s"] / data["timings"]["ours"]["median_s"])
    assert rec["ratios"] == data["ratios"]
    # Named fields are computed from the medians.
    def setup_fields(config, key):
        b = setup(config, key)
        return Bench(impls=b.impls, ours=b.ours, size=b.size,
                     fields={"ours_s": lambda m: m["ours"],
                             "speedup": lambda m: m["peer"] / m["ours"]})

    mod.setup = setup_fields
    f = run_bench(mod, out=tmp_path)
    assert f["fields"]["ours_s"] == f["timings"]["ours"]["median_s"]
    assert f["fields"]["speedup"] == pytest.approx(f["ratios"]["ours_vs_peer"])
    # Explicit pairs restrict the ratios; unknown names are rejected.
    def setup_pairs(config, key):
        b = setup(config, key)
        return Bench(impls={**b.impls, "other": b.impls["peer"]}, ours=("ours",), size=b.size,
                     pairs=(("ours", "other"),))

    mod.setup = setup_pairs
    assert set(run_bench(mod, out=tmp_path)["ratios"]) == {"ours_vs_other"}
    mod.setup = lambda c, k: Bench(impls={"ours": lambda: 0}, ours=("ours",), size={},
                                   pairs=(("ours", "nope"),))
    with pytest.raises(ValueError, match=r"pairs \[\('ours', 'nope'\)\] name"):
        run_bench(mod, out=tmp_path)


def test_bench_interleaved_rounds(tmp_path):
    # interleave=True: one call of each implementation per round, in order
    calls = []

    def make(name):
        def fn():
            calls.append(name)
            return jnp.zeros(())
        return fn

    def setup(config, key):
        return Bench(impls={"ours": make("ours"), "peer": make("peer")}, ours=("ours",),
                     size={}, interleave=True)

    mod = _module("bi", None, setup=setup)
    mod.QUICK = {"warmup": 1, "repeats": 3}
    rec = run_bench(mod, out=tmp_path)
    assert calls == ["ours", "peer"] + ["ours", "peer"] * 3
    assert rec["interleaved"] and rec["timings"]["peer"]["repeats"] == 3
    assert set(rec["ratios"]) == {"ours_vs_peer"}


def test_cli_list_runs():
    proc = subprocess.run([sys.executable, "-m", "experiments", "list"], cwd=ROOT,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "experiments (" in proc.stdout and "benchmarks (" in proc.stdout


def test_claims_table_orders_papers_and_escapes():
    def rec(name, paper, holds):
        return {"experiment": name, "paper": paper,
                "claims": [{"claim": "a|b", "paper": "p", "measured": "m", "holds": holds}]}

    table = claims_table([rec("z", "P10", False), rec("y", "P2", True)]).splitlines()
    assert table[2] == "| P2 | y | a\\|b | p | m | yes |"
    assert table[3] == "| P10 | z | a\\|b | p | m | **no** |" and len(table) == 4
