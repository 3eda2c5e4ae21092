"""The committed results snapshot, the provenance every record carries, and the README/docs
tables generated from it."""

from __future__ import annotations

import dataclasses
import datetime
import hashlib
import json
import os
import shutil
import subprocess
import types
from pathlib import Path

import jax
import jax.numpy as jnp
import pytest

from experiments import __main__ as cli
from experiments._harness import _pages, _provenance, _registry, _snapshot
from experiments._harness._api import Bench, Claim, Result
from experiments._harness._bench import run_bench
from experiments._harness._config import config_to_json
from experiments._harness._papers import PAPERS
from experiments._harness._report import bench_table, claims_table
from experiments._harness._runner import run_experiment

ROOT = Path(__file__).resolve().parents[2]


# --- the committed snapshot -------------------------------------------------------------


def test_committed_readme_and_docs_equal_what_the_generator_writes():
    differ = _pages.write_docs_tables(ROOT, check=True)
    assert not differ, (
        f"generated parts differ from the snapshot: {[str(p.relative_to(ROOT)) for p in differ]}"
        "; run `python -m experiments docs-tables` and commit the result"
    )


def test_committed_snapshot_holds_no_stale_result():
    stale = _snapshot.stale_results(_snapshot.load_records(_snapshot.SNAPSHOT_DIR))
    stale += _snapshot.stale_results(
        _snapshot.load_benches(_snapshot.BENCH_SNAPSHOT_DIR), bench=True
    )
    assert not stale, "stale snapshot results (re-run them at QUICK):\n" + "\n".join(
        f"  {name}: {why}" for name, why in stale
    )


def test_snapshot_folders_are_not_ignored_by_git():
    if not (ROOT / ".git").exists():
        pytest.skip("not a git checkout")
    paths = ["results/quick/x/metrics.json", "results/quick/x/fig.png", "results/bench/x.json"]
    paths.append("results/fuzz/contracts.json")
    out = subprocess.run(
        ["git", "check-ignore", *paths, "results/x/metrics.json", "results/quick/x/checkpoints/a"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    # only other output, and the runs' checkpoints, are ignored
    assert out.stdout.split() == ["results/x/metrics.json", "results/quick/x/checkpoints/a"]


def test_module_index_lists_every_registered_experiment_and_benchmark():
    for bench in (False, True):
        expected = {name for _, name in _registry._module_names("experiments", bench)}
        index = _snapshot.module_index(bench=bench)
        assert {m.name for m in index} == expected
        assert all(m.paper in PAPERS and m.description for m in index)
    assert len(_snapshot.module_index()) == 63


# --- provenance and the config hash -----------------------------------------------------


def test_config_hash_is_sha256_of_canonical_json():
    want = hashlib.sha256(b'{"a":[1,2.5],"b":"x"}').hexdigest()
    assert _provenance.config_hash({"b": "x", "a": [1, 2.5]}) == want
    assert _provenance.config_hash({"a": (1, 2.5), "b": "x"}) == want  # tuples as lists
    assert _provenance.config_hash({"a": [1, 2.5], "b": "y"}) != want
    with pytest.raises(ValueError, match="values"):
        _provenance.config_hash({"a": float("nan")})


@dataclasses.dataclass(frozen=True)
class _Config:
    n: int = 3
    sizes: tuple[int, ...] = (1, 2)


def _fake_module(name="snap", **extra):
    def run(config, key, ctx):
        x = jax.random.normal(key, (config.n,))
        return Result(metrics={"mean": jnp.mean(x)}, claims=[Claim("c", "p", "m", True)])

    mod = types.ModuleType(f"test_snapshot_{name}")
    mod.NAME, mod.PAPER, mod.DESCRIPTION = name, "P9", "a test experiment"
    mod.QUICK, mod.FULL, mod.run = _Config(), _Config(n=30), run
    for k, v in extra.items():
        setattr(mod, k, v)
    return _registry.validate_module(mod)


def _head() -> str | None:
    out = subprocess.run(
        ["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True, check=False
    )
    return out.stdout.strip() if out.returncode == 0 else None


def test_metrics_json_records_machine_date_commit_versions_and_config_hash(tmp_path):
    before = datetime.datetime.now(datetime.UTC).replace(microsecond=0)
    rec = run_experiment(_fake_module(), out=tmp_path)
    data = json.loads((tmp_path / "snap" / "metrics.json").read_text())
    assert data == json.loads(json.dumps(rec))
    want = hashlib.sha256(b'{"n":3,"sizes":[1,2]}').hexdigest()
    assert data["config_hash"] == want
    prov = data["provenance"]
    when = datetime.datetime.fromisoformat(prov["date_utc"])
    assert when.utcoffset() == datetime.timedelta(0)
    assert before <= when <= datetime.datetime.now(datetime.UTC)
    assert prov["git_commit"] == _head()
    assert isinstance(prov["git_dirty"], bool) == (_head() is not None)
    import jaxlab

    assert prov["jaxlab_version"] == jaxlab.__version__
    assert data["jax"]["version"] == jax.__version__
    m = data["machine"]
    assert m["cpu_count"] == os.cpu_count()
    assert m["device_kind"] == jax.devices()[0].device_kind
    assert m["device_count"] == len(jax.devices())
    assert m["memory_gb"] > 0
    assert m["cpu"]
    assert len(m["load_avg"]) == 3
    assert all(x >= 0 for x in m["load_avg"])
    assert data["runtime_s"] > 0


def test_bench_json_records_the_same_provenance(tmp_path):
    def setup(config, key):
        a = jax.random.normal(key, (config["n"],))
        return Bench(
            impls={"ours": lambda: a.sum(), "peer": lambda: a.prod()}, ours=("ours",), size={"n": 8}
        )

    mod = _fake_module("b", setup=setup)
    mod.QUICK = {"n": 8, "warmup": 1, "repeats": 2}
    rec = run_bench(mod, out=tmp_path)
    assert rec["config_hash"] == hashlib.sha256(b'{"n":8,"repeats":2,"warmup":1}').hexdigest()
    assert set(rec["provenance"]) == {"date_utc", "git_commit", "git_dirty", "jaxlab_version"}
    assert rec["machine"]["cpu_count"] == os.cpu_count()
    assert rec["runtime_s"] > 0


def test_git_state_is_none_outside_a_checkout(tmp_path, monkeypatch):
    monkeypatch.setattr(_provenance, "ROOT", tmp_path)
    monkeypatch.setenv("GIT_CEILING_DIRECTORIES", str(tmp_path.parent))
    assert _provenance.git_state() == {"commit": None, "dirty": None}


def test_stale_results_names_each_record_not_of_the_current_quick_config():
    mod = _registry.find("laplex_exactness")
    values = config_to_json(mod.QUICK)
    fresh = json.dumps(values, sort_keys=True, separators=(",", ":")).encode()
    good = {
        "experiment": "laplex_exactness",
        "config": "quick",
        "config_hash": hashlib.sha256(fresh).hexdigest(),
    }
    changed = {**good, "config_hash": _provenance.config_hash({**values, "extra": 1})}
    tiny = {**good, "config": "tiny"}
    legacy = {k: v for k, v in good.items() if k != "config_hash"}
    gone = {**good, "experiment": "laplex_nonexistent"}
    assert _snapshot.stale_results([good]) == []
    stale = _snapshot.stale_results([changed, tiny, legacy, gone])
    assert [name for name, _ in stale] == ["laplex_exactness"] * 3 + ["laplex_nonexistent"]
    reasons = [why for _, why in stale]
    assert "QUICK config changed" in reasons[0]
    assert "'tiny'" in reasons[1]
    assert "no config hash" in reasons[2]
    assert "no such module" in reasons[3]


# --- verdicts, counts and the tables ----------------------------------------------------


def _protocol(v, **kw):
    claim = {
        "claim": f"claim {v}",
        "paper": "paper says",
        "measured": "we measured",
        "holds": v == "holds",
        "verdict": v,
        "estimate": {
            "value": 0.5,
            "low": 0.4,
            "high": 0.6,
            "level": 0.95,
            "method": "bca",
            "n": 100,
        },
        "null": "baseline knn",
        "margin": 0.03,
        "test": "paired bootstrap",
        "alpha": 0.05,
        "protocol": True,
    }
    return {**claim, **kw}


def _legacy(holds):
    return {"claim": "old", "paper": "p", "measured": "m", "holds": holds}


def test_verdicts_and_per_paper_counts():
    recs = [
        {"experiment": "a", "paper": "P2", "claims": [_protocol("holds"), _legacy(False)]},
        {"experiment": "b", "paper": "P10", "claims": [_protocol("fails"), _legacy(True)]},
        {"experiment": "c", "paper": "P2", "claims": [_protocol("untestable", gate="g")]},
    ]
    counts = _snapshot.paper_counts(recs)
    assert list(counts) == ["P2", "P10"]
    assert counts["P2"] == {"holds": 1, "fails": 0, "inconclusive": 0, "untestable": 1, "legacy": 1}
    assert counts["P10"] == {
        "holds": 0,
        "fails": 1,
        "inconclusive": 0,
        "untestable": 0,
        "legacy": 1,
    }
    assert _snapshot.verdict(_legacy(True)) == "holds (legacy)"
    assert _snapshot.verdict(_legacy(False)) == "no (legacy)"
    with pytest.raises(ValueError, match="verdict"):
        _snapshot.verdict(_protocol("maybe"))


def test_claims_table_shows_interval_null_and_verdict():
    recs = [
        {"experiment": "z", "paper": "P10", "claims": [_protocol("inconclusive")]},
        {"experiment": "y", "paper": "P2", "claims": [_legacy(False), _protocol("fails")]},
    ]
    rows = claims_table(recs).splitlines()
    assert len(rows) == 5
    assert rows[2] == "| P2 | y | old | p | m | — | — | **no** (legacy) |"
    assert rows[3] == (
        "| P2 | y | claim fails | paper says | we measured | 0.5 [0.4, 0.6] (95% bca n=100) | "
        "baseline knn; margin 0.03; paired bootstrap; alpha 0.05 | **fails** |"
    )
    assert rows[4].startswith("| P10 | z |")
    assert rows[4].endswith("| inconclusive |")
    gated = claims_table(
        [
            {
                "experiment": "g",
                "paper": "P2",
                "claims": [_protocol("untestable", gate="too few positives")],
            }
        ]
    )
    assert gated.splitlines()[2].endswith("| untestable (too few positives) |")


def _bench_record(name="lowrank_speed"):
    return {
        "bench": name,
        "paper": "P1",
        "config": "quick",
        "size": {"N": 10},
        "ours": ["ode"],
        "timings": {
            "ode": {"median_s": 0.002, "min_s": 0.001, "max_s": 0.003},
            "gd": {"median_s": 4.0, "min_s": 3.0, "max_s": 5.0},
        },
        "ratios": {"ode_vs_gd": 2000.0},
        "fields": {},
    }


def test_bench_table_has_one_row_per_benchmark_with_ratios():
    rows = bench_table([_bench_record("b2"), _bench_record("b1")]).splitlines()
    assert rows[2] == "| b1 | P1 | N 10 | ode 2 ms | gd 4 s | gd 2e+03x |"
    assert len(rows) == 4


def test_bench_table_shows_every_pair_a_benchmark_names_and_rounds_sizes():
    t = {"median_s": 1.0, "min_s": 1.0, "max_s": 1.0}
    rec = {
        **_bench_record("b"),
        "size": {"horizon": 1.5, "rate": 360726.58992, "n": 3},
        "ours": ["ode_N1", "ode_N10"],
        "timings": {
            "ode_N1": t,
            "gd_N1": {**t, "median_s": 2.0},
            "ode_N10": t,
            "gd_N10": {**t, "median_s": 20.0},
        },
        # one pair per size (2 of the 4 ours x peers combinations)
        "ratios": {"ode_N1_vs_gd_N1": 2.0, "ode_N10_vs_gd_N10": 20.0},
    }
    row = bench_table([rec]).splitlines()[2]
    assert row == (
        "| b | P1 | horizon 1.5, rate 3.607e+05, n 3 | ode_N1 1 s, ode_N10 1 s | "
        "gd_N1 2 s, gd_N10 20 s | ode_N1 vs gd_N1 2x; ode_N10 vs gd_N10 20x |"
    )
    # every ours against every peer: the main implementation's ratios only, as before
    rec["ratios"] = {
        "ode_N1_vs_gd_N1": 2.0,
        "ode_N1_vs_gd_N10": 20.0,
        "ode_N10_vs_gd_N1": 2.0,
        "ode_N10_vs_gd_N10": 20.0,
    }
    row = bench_table([rec]).splitlines()[2]
    assert row.endswith("| ode_N1 1 s | gd_N1 2 s, gd_N10 20 s | gd_N1 2x; gd_N10 20x |")


def test_replace_block_needs_its_markers():
    text = "a\n<!-- x:begin (generated) -->\nold\n<!-- x:end -->\nb\n"
    assert _pages.replace_block(text, "x", "new\n") == (
        "a\n<!-- x:begin (generated) -->\nnew\n<!-- x:end -->\nb\n"
    )
    with pytest.raises(ValueError, match="README.md: no <!-- y:begin"):
        _pages.replace_block(text, "y", "z", where="README.md")


def _tmp_root(tmp_path: Path) -> Path:
    root = tmp_path / "repo"
    (root / "docs").mkdir(parents=True)
    for rel in ("README.md", "docs/index.md", "docs/papers.md", "docs/status.md"):
        shutil.copy(ROOT / rel, root / rel)
    (root / "experiments").symlink_to(ROOT / "experiments")
    return root


def test_generated_pages_from_a_snapshot(tmp_path, capsys):
    root = _tmp_root(tmp_path)
    snap = root / "results" / "quick"
    rec = {
        "experiment": "bandits_synthetic",
        "paper": "P16",
        "description": "d",
        "config": "quick",
        "seed": 0,
        "claims": [_protocol("holds"), _protocol("inconclusive"), _legacy(True)],
        "figures": ["curve.png", "missing.png"],
        "notes": "synthetic\nworld",
        "runtime_s": 12.5,
        "config_hash": "ab" * 32,
        "jax": {"version": "0.0"},
        "machine": {"cpu": "CPU X", "cpu_count": 2, "memory_gb": 8.0, "device_kind": "cpu"},
        "provenance": {"date_utc": "2026-12-05T00:00:00+00:00", "git_commit": "f" * 40},
    }
    (snap / "bandits_synthetic").mkdir(parents=True)
    (snap / "bandits_synthetic" / "metrics.json").write_text(json.dumps(rec))
    (snap / "bandits_synthetic" / "curve.png").write_bytes(b"png")
    (root / "results" / "bench").mkdir()
    (root / "results" / "bench" / "lowrank_speed.json").write_text(json.dumps(_bench_record()))

    assert cli.main(["docs-tables", "--check", "--root", str(root)]) == 1
    assert cli.main(["docs-tables", "--root", str(root)]) == 0
    assert cli.main(["docs-tables", "--check", "--root", str(root)]) == 0
    err = capsys.readouterr().err
    assert "stale snapshot result bandits_synthetic: its QUICK config changed" in err
    assert "stale snapshot result lowrank_speed: no config hash" in err

    readme = (root / "README.md").read_text()
    assert "1 of 63 experiments are in the snapshot" in readme
    assert (
        "| [P16](docs/results.md#p16) | `jaxlab.bandits` | 1 of 3 | 1 | 0 | 1 | 0 | 1 |" in readme
    )
    assert "| [P16](results.md#p16) |" in (root / "docs" / "index.md").read_text()
    page = (root / "docs" / "results.md").read_text()
    section = page.split("{#p16}", 1)[1].split("\n## ", 1)[0]
    assert "### `bandits_synthetic`" in section
    assert "run 2026-12-05T00:00:00+00:00 on CPU X, 2 CPUs, 8 GB, device cpu; 12.5 s" in section
    assert "commit `ffffffffff`" in section
    assert "| 0.5 [0.4, 0.6] (95% bca n=100) |" in section
    assert "| holds (legacy) |" in section
    assert "![bandits_synthetic curve](results/bandits_synthetic/curve.png)" in section
    assert "missing.png" not in section
    assert "Notes: synthetic world" in section
    assert "- `bandits_synthetic`" not in section  # in the snapshot, so not listed as missing
    assert "Not yet re-run on the protocol" in section
    assert page.count("Not yet re-run on the protocol") == len(PAPERS)  # every paper misses some
    bench = (root / "docs" / "benchmarks.md").read_text()
    assert "1 of 11 benchmarks are in the snapshot" in bench
    assert "| lowrank_speed | P1 | N 10 | ode 2 ms | gd 4 s | gd 2e+03x |" in bench
    assert "- `lowrank_speed`" not in bench
    assert "- `laplex_matvec` (P9)" in bench


def _fuzz_record(**comps):
    keys = ("tried", "refused", "documented", "accepted", "other")
    return {
        "suite": "x",
        "components": {
            name: dict(zip(keys, c, strict=True))
            | {"functions": 3, "public_functions": 5, "tier": "slow", "git_commit": "c" * 40}
            | {"date_utc": "2026-12-06T00:00:00+00:00"}
            for name, c in comps.items()
        },
    }


def test_fuzz_totals_are_generated_from_results_fuzz(tmp_path):
    """Issue #59: README's fuzz line and docs/status.md's per-component tables come from
    results/fuzz/*.json (the slow tier writes them), not from hand-typed numbers."""
    root = _tmp_root(tmp_path)
    fuzz = root / "results" / "fuzz"
    fuzz.mkdir(parents=True)
    pub = _fuzz_record(bandits=(10, 7, 1, 2, 0), lm=(5, 5, 0, 0, 0))
    con = _fuzz_record(bandits=(20, 18, 1, 1, 0))
    con["components"]["bandits"]["size_1e9"] = {"a(n)": "refused", "b(n)": "accepted"}
    (fuzz / "public_api.json").write_text(json.dumps(pub))
    (fuzz / "contracts.json").write_text(json.dumps(con))
    files = _pages.generated_files(root)
    readme, status = files[root / "README.md"], files[root / "docs" / "status.md"]
    assert "public-api 15 inputs to 6 of 10 public functions in 2 components (12 refused" in (
        readme
    )
    assert "1 documented, 2 accepted, **0 other**" in readme
    assert "contracts 20 inputs to 3 of 5 public functions in 1 components (18 refused" in readme
    assert "| `jaxlab.bandits` | slow | 3 of 5 | 10 | 7 | 1 | 2 | 0 |" in status
    assert "| **total** (2) | | 6 of 10 | 15 | 12 | 1 | 2 | 0 |" in status
    assert "2 tried, 1 refused, 1 answered within the limits, 0 other" in status
    assert "run 2026-12-06 at commit cccccccccc" in status
    # counts that do not add up are refused, naming the file
    con["components"]["bandits"]["other"] = 3
    (fuzz / "contracts.json").write_text(json.dumps(con))
    with pytest.raises(ValueError, match="contracts.json.*do not add up"):
        _pages.generated_files(root)


def test_claims_and_bench_table_commands(tmp_path, capsys):
    rec = {"experiment": "x", "paper": "P2", "claims": [_protocol("holds")]}
    (tmp_path / "x").mkdir()
    (tmp_path / "x" / "metrics.json").write_text(json.dumps(rec))
    (tmp_path / "bench").mkdir()
    (tmp_path / "bench" / "b.json").write_text(json.dumps(_bench_record("b")))
    assert cli.main(["claims", str(tmp_path)]) == 0
    assert capsys.readouterr().out == claims_table([rec])
    assert cli.main(["bench-table", str(tmp_path / "bench")]) == 0
    assert capsys.readouterr().out == bench_table([_bench_record("b")])
    assert cli.main(["bench-table", str(tmp_path / "nothing")]) == 1


def test_bench_table_size_cell_keeps_short_scalars_and_marks_the_cut():
    rec = {
        **_bench_record("b"),
        "size": {
            "n": 3,
            "note": "x" * 40,
            "weights": {"a": 1},
            **{f"k{i}": i for i in range(10)},
        },
    }
    size = bench_table([rec]).splitlines()[2].split(" | ")[2]
    assert size == "n 3, k0 0, k1 1, k2 2, k3 3, k4 4, k5 5, k6 6, ..."
    rec["size"] = {"n": 3, "rate": 0.5}
    assert bench_table([rec]).splitlines()[2].split(" | ")[2] == "n 3, rate 0.5"


def test_earlier_numbers_finds_the_first_dated_section_with_a_row(tmp_path):
    log = tmp_path / "CHANGELOG.md"
    log.write_text(
        "# Changelog\n\n## 2026-12-05: later\n\n| paper | experiment | x |\n|---|---|---|\n"
        "| P1 | a_b | 1 |\n\n## 2026-12-04: earlier\n\n| P1 | a_b | 0 |\n| P2 | c_d | 2 |\n"
    )
    found = _pages.earlier_numbers(log, ["a_b", "c_d", "e_f"])
    assert found == {"a_b": "2026-12-05: later", "c_d": "2026-12-04: earlier"}
    assert _pages.earlier_numbers(tmp_path / "missing.md", ["a_b"]) == {}
