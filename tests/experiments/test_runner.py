"""The experiment runner, report and benchmark harness, on test-only experiments."""

import argparse
import dataclasses
import importlib
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
from experiments._harness._config import config_from_json  # noqa: E402
from experiments._harness._dryrun import dry_run, named_models, work_ratio  # noqa: E402
from experiments._harness._report import claims_table, failed_smoke, write_report  # noqa: E402
from experiments._harness._runner import reproduce, run_experiment  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]


@dataclasses.dataclass(frozen=True)
class _Config:
    n: int = 3
    sizes: tuple[int, ...] = (1, 2)


def _module(name, run, paper="P9", **extra):
    mod = types.ModuleType(f"test_exp_{name}")
    mod.NAME, mod.PAPER, mod.DESCRIPTION = name, paper, f"test experiment {name}"
    mod.QUICK, mod.FULL = _Config(), _Config(n=30, sizes=(4,))
    mod.run = run
    for k, v in extra.items():
        setattr(mod, k, v)
    return _registry.validate_module(mod)


def _good_run(config, key, ctx):
    x = jax.random.normal(key, (config.n,))
    fig, ax = plt.subplots()
    ax.plot(x)
    assert isinstance(ctx, RunContext)
    assert ctx.name == "good"
    assert ctx.out_dir.name == "good"
    return Result(
        metrics={"mean": jnp.mean(x), "nested": {"n": config.n, "flag": True}, "nan": float("nan")},
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
    assert data["experiment"] == "good"
    assert data["config"] == "quick"
    assert data["seed"] == 3
    assert set(data["metrics"]) == {"mean", "nested/n", "nested/flag", "nan"}
    assert data["metrics"]["nested/n"] == 3
    assert data["metrics"]["nan"] is None
    assert isinstance(data["metrics"]["mean"], float)
    (claim,) = data["claims"]
    assert set(claim) >= {"claim", "paper", "measured", "holds"}
    assert claim["holds"] is True
    assert data["runtime_s"] > 0
    assert data["config_values"] == {"n": 3, "sizes": [1, 2]}  # the config as JSON
    assert config_from_json(_Config, data["config_values"]) == _Config()
    assert set(data["jax"]) == {"version", "backend", "devices"}
    assert (tmp_path / "good" / "trace.png").read_bytes()[:4] == b"\x89PNG"
    assert "done good" in (tmp_path / "good" / "run.log").read_text()
    # Same seed -> same metrics; FULL config is passed through.
    again = run_experiment(_module("good", _good_run), out=tmp_path, seed=3)
    assert again["metrics"]["mean"] == rec["metrics"]["mean"]
    full = run_experiment(_module("good", _good_run), out=tmp_path / "f", full=True)
    assert full["config"] == "full"
    assert full["metrics"]["nested/n"] == 30


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
    assert "bad — FAILED" in text
    assert "RuntimeError: deliberate failure" in text
    assert "sum \\|x\\| is finite" in text
    assert "| nested/n | 3 |" in text  # pipes escaped
    assert "data:image/png;base64," in html
    assert "FAILED" in html
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
    assert data["size"] == {"n": 200}
    assert set(data["timings"]) == {"ours", "peer"}
    t = data["timings"]["ours"]
    assert t["min_s"] <= t["median_s"] <= t["max_s"]
    assert t["repeats"] == 3
    ratio = data["ratios"]["ours_vs_peer"]
    assert ratio == pytest.approx(
        data["timings"]["peer"]["median_s"] / data["timings"]["ours"]["median_s"]
    )
    assert rec["ratios"] == data["ratios"]

    # Named fields are computed from the medians.
    def setup_fields(config, key):
        b = setup(config, key)
        return Bench(
            impls=b.impls,
            ours=b.ours,
            size=b.size,
            fields={"ours_s": lambda m: m["ours"], "speedup": lambda m: m["peer"] / m["ours"]},
        )

    mod.setup = setup_fields
    f = run_bench(mod, out=tmp_path)
    assert f["fields"]["ours_s"] == f["timings"]["ours"]["median_s"]
    assert f["fields"]["speedup"] == pytest.approx(f["ratios"]["ours_vs_peer"])

    # Explicit pairs restrict the ratios; unknown names are rejected.
    def setup_pairs(config, key):
        b = setup(config, key)
        return Bench(
            impls={**b.impls, "other": b.impls["peer"]},
            ours=("ours",),
            size=b.size,
            pairs=(("ours", "other"),),
        )

    mod.setup = setup_pairs
    assert set(run_bench(mod, out=tmp_path)["ratios"]) == {"ours_vs_other"}
    mod.setup = lambda c, k: Bench(
        impls={"ours": lambda: 0}, ours=("ours",), size={}, pairs=(("ours", "nope"),)
    )
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
        return Bench(
            impls={"ours": make("ours"), "peer": make("peer")},
            ours=("ours",),
            size={},
            interleave=True,
        )

    mod = _module("bi", None, setup=setup)
    mod.QUICK = {"warmup": 1, "repeats": 3}
    rec = run_bench(mod, out=tmp_path)
    assert calls == ["ours", "peer"] + ["ours", "peer"] * 3
    assert rec["interleaved"]
    assert rec["timings"]["peer"]["repeats"] == 3
    assert set(rec["ratios"]) == {"ours_vs_peer"}


def test_interleaved_times_are_per_round_and_ordered():
    # one call of each per round after the warm-ups; one time per round, in round order
    from experiments._harness import interleaved_times

    calls = []

    def make(name):
        def fn():
            calls.append(name)
            return jnp.zeros(())

        return fn

    ts = interleaved_times({"a": make("a"), "b": make("b")}, warmup=2, repeats=5)
    assert calls == ["a", "a", "b", "b"] + ["a", "b"] * 5
    assert set(ts) == {"a", "b"}
    assert all(len(v) == 5 and min(v) >= 0 for v in ts.values())


def test_time_callable_times_only_the_calls_after_warm_up():
    from experiments._harness import time_callable

    calls = []
    ts = time_callable(lambda: calls.append(1) or jnp.zeros(()), warmup=3, repeats=4)
    assert len(calls) == 7
    assert len(ts) == 4
    assert min(ts) >= 0


def test_cli_list_finds_every_experiment_in_the_subpackages():
    # every experiments/<component>/<claim>.py is listed as <component>_<claim> (importing it
    # and checking its contract, configs included), every experiments/bench/<name>.py as <name>
    proc = subprocess.run(
        [sys.executable, "-m", "experiments", "list"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    exp_part, bench_part = proc.stdout.split("benchmarks (")
    listed = [line.split()[0] for line in exp_part.splitlines()[1:]]
    benches = [line.split()[0] for line in bench_part.splitlines()[1:]]
    tree = ROOT / "experiments"
    files = sorted(
        f"{p.parent.name}_{p.stem}"
        for p in tree.glob("*/[!_]*.py")
        if p.parent.name not in ("bench", "_harness")
    )
    assert listed == files
    assert len(files) >= 37
    assert benches == sorted(p.stem for p in (tree / "bench").glob("[!_]*.py"))
    assert exp_part.startswith(f"experiments ({len(files)}):")


def test_claims_table_orders_papers_and_escapes():
    def rec(name, paper, holds):
        return {
            "experiment": name,
            "paper": paper,
            "claims": [{"claim": "a|b", "paper": "p", "measured": "m", "holds": holds}],
        }

    table = claims_table([rec("z", "P10", False), rec("y", "P2", True)]).splitlines()
    assert table[2] == "| P2 | y | a\\|b | p | m | — | — | holds (legacy) |"
    assert table[3] == "| P10 | z | a\\|b | p | m | — | — | **no** (legacy) |"
    assert len(table) == 4


def test_config_must_be_frozen_dataclass_and_json_round_trip():
    mod = _module("cfg", _good_run)
    mod.QUICK = {"n": 3}
    with pytest.raises(ValueError, match="QUICK must be an instance of a frozen dataclass"):
        _registry.validate_module(mod)

    @dataclasses.dataclass
    class Mutable:
        n: int = 3

    mod.QUICK = mod.FULL = Mutable()
    with pytest.raises(ValueError, match="frozen dataclass"):
        _registry.validate_module(mod)
    mod.QUICK, mod.FULL = _Config(sizes=[1, 2]), _Config()  # a list does not come back as such
    with pytest.raises(ValueError, match="QUICK does not survive the JSON round trip"):
        _registry.validate_module(mod)

    @dataclasses.dataclass(frozen=True)
    class Other:
        n: int = 3

    mod.QUICK, mod.FULL = _Config(), Other()
    with pytest.raises(ValueError, match="one config class"):
        _registry.validate_module(mod)
    with pytest.raises(ValueError, match=r"unknown config keys \['m'\]"):
        config_from_json(_Config, {"n": 1, "m": 2})


def test_run_context_checkpointer(tmp_path):
    ctx = RunContext("x", tmp_path / "x", resume=True)
    ckpt = ctx.checkpointer("fit_a", every=25)
    assert ckpt.path == tmp_path / "x" / "checkpoints" / "fit_a.eqx"
    assert ckpt.every == 25
    assert ckpt.resume is True
    assert not ckpt.exists()
    tree = {"w": jnp.arange(3.0)}
    ckpt.save(tree)
    assert ckpt.exists()
    assert jnp.array_equal(ckpt.load(tree)["w"], tree["w"])
    fresh = RunContext("x", tmp_path / "x").checkpointer("fit_a")
    assert fresh.resume is False
    assert fresh.every is None
    assert fresh.path == ckpt.path


def _fake_tree(root, files, monkeypatch):
    """A package `root.name` made of `files` on sys.path, none of it imported yet."""
    for rel, text in files.items():
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)
    monkeypatch.syspath_prepend(str(root.parent))
    for m in [m for m in sys.modules if m.split(".")[0] == root.name]:
        monkeypatch.delitem(sys.modules, m)
    importlib.invalidate_caches()


_FAKE_EXPERIMENT = """
import dataclasses

NAME, PAPER, DESCRIPTION = "{name}", "P5", "a fake experiment"


@dataclasses.dataclass(frozen=True)
class Config:
    n: int = 1


QUICK, FULL = Config(), Config(n=2)


def run(config, key, ctx):
    raise NotImplementedError
"""


@pytest.mark.parametrize(
    "importer",
    [
        "from fakeexp.cells.rare import run as other_run\n",  # absolute
        "from fakeexp.cells import rare\n",  # the module from its package
        "import fakeexp.cells.rare\n",
        "from . import rare\n",  # relative
        "def f():\n    from .rare import Config\n",  # inside a function
    ],
)
def test_registry_rejects_an_experiment_importing_another(tmp_path, monkeypatch, importer):
    _fake_tree(
        tmp_path / "fakeexp",
        {
            "__init__.py": "",
            "bench/__init__.py": "",
            "cells/__init__.py": "",
            "cells/rare.py": _FAKE_EXPERIMENT.format(name="cells_rare"),
            "cells/genes.py": importer + _FAKE_EXPERIMENT.format(name="cells_genes"),
        },
        monkeypatch,
    )
    with pytest.raises(
        ValueError,
        match=r"fakeexp\.cells\.genes imports the experiment "
        r"module\(s\) fakeexp\.cells\.rare; experiments never",
    ):
        _registry.discover(package="fakeexp")
    with pytest.raises(ValueError, match="imports the experiment"):
        _registry.find("cells_rare", package="fakeexp")


def test_registry_finds_subpackage_experiments_and_rejects_setup_importing_one(
    tmp_path, monkeypatch
):
    files = {
        "__init__.py": "",
        "bench/__init__.py": "",
        "cells/__init__.py": "",
        "eeg/__init__.py": "",
        "cells/_setup.py": "from fakeexp2._harness import x\nSHARED = 1\n",
        "cells/rare.py": "from fakeexp2.cells._setup import SHARED\n"
        + _FAKE_EXPERIMENT.format(name="cells_rare"),
        "eeg/state.py": _FAKE_EXPERIMENT.format(name="eeg_state"),
    }
    _fake_tree(tmp_path / "fakeexp2", files, monkeypatch)
    # the harness import in _setup.py is not an experiment; the names follow the tree
    assert (
        _registry.check_imports(
            tmp_path / "fakeexp2/cells/_setup.py", "fakeexp2.cells._setup", package="fakeexp2"
        )
        is None
    )
    (tmp_path / "fakeexp2/cells/_setup.py").write_text("SHARED = 1\n")
    assert sorted(_registry.discover(package="fakeexp2")) == ["cells_rare", "eeg_state"]
    assert _registry.find("eeg_state", package="fakeexp2").NAME == "eeg_state"
    with pytest.raises(KeyError, match="unknown experiment 'eeg_stat'; did you mean eeg_state\\?"):
        _registry.find("eeg_stat", package="fakeexp2")
    with pytest.raises(KeyError, match=r"unknown experiment 'zzz'; \(`python -m experiments list`"):
        _registry.find("zzz", package="fakeexp2")
    (tmp_path / "fakeexp2/cells/_setup.py").write_text("from fakeexp2.eeg.state import NAME\n")
    with pytest.raises(
        ValueError,
        match=r"fakeexp2\.cells\._setup imports the experiment "
        r"module\(s\) fakeexp2\.eeg\.state",
    ):
        _registry.discover(package="fakeexp2")
    # a module whose NAME does not follow its place in the tree is rejected
    (tmp_path / "fakeexp2/cells/_setup.py").write_text("SHARED = 1\n")
    (tmp_path / "fakeexp2/eeg/state.py").write_text(_FAKE_EXPERIMENT.format(name="state"))
    _fake_tree(tmp_path / "fakeexp2", {}, monkeypatch)
    with pytest.raises(ValueError, match=r"NAME must be 'eeg_state'"):
        _registry.discover(package="fakeexp2")


def test_cache_dir_follows_jaxlab_cache_dir(tmp_path, monkeypatch):
    # one variable, $JAXLAB_CACHE_DIR, roots every cache: the experiments', topology's
    # encodings (read $JAXLAB_CACHE before) and the C++ kernels (were under .../jaxlab/)
    from experiments._harness import cache_dir
    from jaxlab._kernels._build import kernel_cache_dir
    from jaxlab.topology import default_cache_dir

    monkeypatch.delenv("XDG_CACHE_HOME", raising=False)
    monkeypatch.setenv("JAXLAB_CACHE", str(tmp_path / "old"))  # the old name: ignored
    monkeypatch.setenv("JAXLAB_CACHE_DIR", str(tmp_path / "c"))
    d = cache_dir("stereo")
    assert d == tmp_path / "c" / "stereo"
    assert d.is_dir()
    assert default_cache_dir() == tmp_path / "c" / "topology"
    assert kernel_cache_dir() == tmp_path / "c" / "kernels"
    monkeypatch.delenv("JAXLAB_CACHE_DIR")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    home = tmp_path / "home" / ".cache" / "jaxlab"
    assert cache_dir("x") == home / "x"
    assert default_cache_dir() == home / "topology"
    assert kernel_cache_dir() == home / "kernels"


def test_cli_misspelled_name_suggests_and_exits_2(capsys):
    assert cli.main(["run", "bandit_synthetic"]) == 2
    captured = capsys.readouterr()
    err = captured.err.strip()
    assert len(err.splitlines()) == 1
    assert "Traceback" not in err
    assert "unknown experiment 'bandit_synthetic'; did you mean bandits_synthetic" in err
    assert cli.main(["bench", "laplex_matvc"]) == 2
    assert "unknown benchmark 'laplex_matvc'" in capsys.readouterr().err
    # argparse's own usage errors exit 2 as well
    with pytest.raises(SystemExit) as e:
        cli.main(["run", "bandits_synthetic", "--sed", "1"])
    assert e.value.code == 2


def test_cli_full_on_a_cpu_is_refused_with_the_estimate(tmp_path, capsys, monkeypatch):
    assert jax.default_backend() == "cpu"
    assert cli.main(["run", "bandits_synthetic", "--full", "--out", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert "about 26 GB of device memory" in err
    assert "CPU backend" in err
    assert "--force" in err
    assert not (tmp_path / "bandits_synthetic").exists()  # nothing started
    mods = {"bandits_synthetic": _registry.find("bandits_synthetic")}
    monkeypatch.setattr(_registry, "discover", lambda bench=False: {} if bench else mods)
    assert cli.main(["reproduce", "--full", "--only", "bandits_s*", "--out", str(tmp_path)]) == 2
    assert not (tmp_path / "report.html").exists()


def test_full_guard_on_an_accelerator_compares_the_declared_memory(monkeypatch):
    from experiments._harness import _runner

    mod = _module("good", _good_run, FULL_MEMORY_GB=26)
    monkeypatch.setattr(_runner, "_memory_gb", lambda: ("gpu", 16.0))
    assert "needs about 26 GB" in _runner.full_refusal(mod)
    monkeypatch.setattr(_runner, "_memory_gb", lambda: ("gpu", 80.0))
    assert _runner.full_refusal(mod) is None
    with pytest.raises(ValueError, match="FULL_MEMORY_GB must be a positive number"):
        _module("bad_need", _good_run, FULL_MEMORY_GB="lots")


def test_cli_resume_says_what_it_resumes(tmp_path, monkeypatch, capsys):
    mod = _module("good", _good_run)
    monkeypatch.setattr(_registry, "find", lambda name, bench=False: mod)
    assert cli.main(["run", "good", "--resume", "--out", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "--resume: no checkpoints of good in" in out
    assert "running from the start" in out
    ckpt = tmp_path / "good" / "checkpoints"
    ckpt.mkdir(parents=True, exist_ok=True)
    (ckpt / "fit.eqx").write_bytes(b"x")
    assert cli.main(["run", "good", "--resume", "--out", str(tmp_path)]) == 0
    assert "resuming good from 1 checkpoint(s)" in capsys.readouterr().out


def test_cli_help_documents_every_flag(capsys):
    parser = cli.build_parser()
    (sub,) = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    assert set(sub.choices) >= {"list", "run", "reproduce", "bench", "claims"}
    for name, sp in sub.choices.items():
        for action in sp._actions:
            if isinstance(action, argparse._HelpAction):
                continue
            assert action.help, f"{name} {action.option_strings or action.dest}: no help text"
    with pytest.raises(SystemExit):
        cli.main(["run", "--help"])
    text = capsys.readouterr().out
    assert "OUT/NAME/checkpoints" in text
    assert "DIR/NAME" not in text
    assert "exit status: 0 success; 1 an experiment" in text


def test_claims_table_marks_rows_of_experiments_that_fail_the_smoke_tier(tmp_path):
    def rec(name, holds):
        c = {"claim": "c", "paper": "p", "measured": "m", "holds": holds}
        return {"experiment": name, "paper": "P2", "claims": [c]}

    status = tmp_path / "status.json"
    status.write_text(json.dumps({"experiments": {"a": "passed", "b": "failed"}}))
    stale = failed_smoke(status)
    assert stale == {"b"}
    table = claims_table([rec("a", True), rec("b", True)], stale=stale).splitlines()
    assert table[2].endswith("| holds (legacy) |")
    assert table[3].endswith("| stale (its code fails the smoke tier) |")
    status.write_text("[1]")
    with pytest.raises(ValueError, match="smoke status"):
        failed_smoke(status)


def test_tiny_config_runs_and_must_be_of_the_config_class(tmp_path):
    mod = _module("good", _good_run, TINY=_Config(n=2, sizes=(1,)))
    rec = run_experiment(mod, out=tmp_path, tiny=True)
    assert rec["config"] == "tiny"
    assert rec["config_values"] == {"n": 2, "sizes": [1]}
    with pytest.raises(ValueError, match="choose one scale"):
        run_experiment(mod, out=tmp_path, tiny=True, full=True)

    @dataclasses.dataclass(frozen=True)
    class Other:
        n: int = 3

    mod.TINY = Other()
    with pytest.raises(ValueError, match="QUICK and TINY must be instances of one config class"):
        _registry.validate_module(mod)
    del mod.TINY
    with pytest.raises(ValueError, match="declares no TINY"):
        run_experiment(mod, out=tmp_path, tiny=True)


def test_bench_tiny_updates_quick_and_is_checked(tmp_path):
    mod = types.ModuleType("test_bench_tiny")
    mod.NAME, mod.PAPER, mod.DESCRIPTION = "tb", "P9", "test bench"
    mod.QUICK, mod.FULL = {"n": 1000, "repeats": 3, "warmup": 1}, {"n": 10**6}
    mod.TINY = {"n": 10, "repeats": 1, "warmup": 0}
    seen = []

    def setup(config, key):
        seen.append(config["n"])
        return Bench(impls={"ours": lambda: jnp.ones(config["n"])}, ours=("ours",), size={})

    mod.setup = setup
    _registry.validate_module(mod, bench=True)
    rec = run_bench(mod, out=tmp_path, tiny=True)
    assert seen == [10]
    assert rec["config"] == "tiny"
    assert rec["timings"]["ours"]["repeats"] == 1
    mod.TINY = {"size": 3}
    with pytest.raises(ValueError, match="TINY must be a dict with keys among QUICK's"):
        _registry.validate_module(mod, bench=True)


def test_dry_run_checks_the_full_config_and_estimates_from_the_tiny_run(tmp_path):
    mod = _module("good", _good_run, TINY=_Config(n=3, sizes=(1,)))
    report = dry_run(mod)
    assert report.ok, report.lines()
    # FULL n=30, sizes has 1 entry in both: x10 the TINY work by the generic estimate
    assert "x10 the TINY work" in report.facts["time_estimate"]
    assert "n 3->30" in report.facts["time_estimate"]
    assert report.facts["device_memory"].startswith("not declared")
    mod.full_work = lambda c: c.n**2
    assert work_ratio(mod, mod.TINY, mod.FULL) == (100.0, "the module's full_work(config)")
    mod.FULL_MEMORY_GB = 12

    def preflight(config):
        if config.n > 10:
            raise ValueError("n: at most 10 here")
        return {}

    mod.preflight = preflight
    report = dry_run(mod, tiny_seconds=1.0)
    assert not report.ok
    assert report.problems == ["preflight: n: at most 10 here"]
    assert report.facts["device_memory"].startswith("about 12 GB")

    def crashing(config, key, ctx):
        raise RuntimeError("boom")

    bad = _module("bad", crashing, TINY=_Config())
    report = dry_run(bad)
    assert report.problems == ["the TINY run failed: RuntimeError: boom"]
    assert "1 problem(s)" in report.lines()[0]


def test_dry_run_names_pool_models_and_checks_their_files():
    @dataclasses.dataclass(frozen=True)
    class LMConfig:
        models: tuple[str, ...] = ("smollm2", "not-a-model")
        layer: str = "gemma3-270m"

    assert named_models(LMConfig()) == ["smollm2-135m-instruct", "gemma3-270m"]
    mod = _module("lmcheck", _good_run)
    mod.QUICK = mod.FULL = mod.TINY = LMConfig(models=("smollm2",), layer="x")
    report = dry_run(mod, tiny_seconds=0.5)
    assert report.ok, report.lines()
    assert "smollm2-135m-instruct" in report.facts["models"]
    assert report.facts["device_memory"].startswith("at least 0.538 GB")


def test_dry_run_takes_model_folders_and_reports_memory_per_device_and_paper_scale(
    tmp_path, monkeypatch
):
    """A Hugging Face folder in a model field is described from its metadata (no weight
    read); each model's memory per device is `lm.memory_per_device` on the mesh the
    current devices allow (oracle: the same call on that AbstractMesh); a paper with a
    stated scale (P17) is compared with the models' sizes."""
    from jax.sharding import AbstractMesh

    import jaxlab.lm as lm
    from experiments._harness import _dryrun
    from tests.lm.hf_writer import write_hf
    from tests.lm.lm_reference import tiny_llama

    model = lm.Transformer.random(tiny_llama(vocab_size=64), key=jax.random.key(0))  # 4 heads
    folder = str(write_hf(model, tmp_path / "Tiny_Llama"))
    missing = str(tmp_path / "no-such-model")

    @dataclasses.dataclass(frozen=True)
    class LMConfig:
        models: tuple[str, ...] = (folder, "smollm2")
        notes: str = "a/b"  # a path-like string outside a model field is not a model

    assert named_models(LMConfig()) == [folder, "smollm2-135m-instruct"]
    mod = _module("lmfolder", _good_run, paper="P17")
    mod.QUICK = mod.TINY = LMConfig()
    mod.FULL = LMConfig(models=(folder,))
    monkeypatch.setattr(jax, "local_device_count", lambda: 8)
    report = dry_run(mod, tiny_seconds=0.5)
    assert report.ok, report.lines()
    assert f"{folder} (" in report.facts["models"]
    assert "hf)" in report.facts["models"]
    # 8 devices, 4 heads: model axis 4, data axis 2 (two rows, one per data shard)
    want = lm.memory_per_device(
        model.config, AbstractMesh((2, 4), ("data", "model")), dtype=jnp.float32, batch=2
    )
    line = report.facts[f"memory {folder}"]
    assert line.startswith(f"{want['total'] / 2**30:.3g} GiB float32")
    assert "2x4 (data x model) mesh of 8" in line
    assert report.facts["paper_models"].startswith("three open-weight 7-8B")
    assert " is below the paper's ~8B" in report.facts["paper_scale"]
    ref = lm.memory_per_device(
        _dryrun._reference_config(), AbstractMesh((1, 8), ("data", "model")),
        dtype=jnp.bfloat16, batch=1,
    )  # fmt: skip
    assert f"/ {ref['total'] / 2**30:.3g} GiB bfloat16" in report.facts["paper_scale"]
    mod.FULL = LMConfig(models=(missing,))
    report = dry_run(mod, tiny_seconds=0.5)
    assert report.problems == [
        f"model {missing}: not a Hugging Face folder (with config.json) or a GGUF file here"
    ]
