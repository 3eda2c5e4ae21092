"""Issue 30 finding 1: `--resume` at every kill point of experiments that checkpoint.

Each experiment runs (tiny config) in a subprocess that SIGKILLs itself (a) right after
its first checkpoint (mid-training), (b) right after its last checkpoint, before the
metrics (the kill that crashed `sensing_maps` on `losses[0]` of an empty array), and (c)
inside the atomic metrics.json write; a second process resumes with `resume=True`.
The resumed metrics.json must equal an uninterrupted run's, apart from the runner's
runtime fields and what the experiment declares as wall-clock measurements
(`TIMING_METRICS`, speed claims with `Claim(timing=True)`), and no half-written result
file may be left. Slow (seven experiment runs per case).
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
import signal
import subprocess
import sys
import time
import types
from pathlib import Path

import jax
import pytest

from experiments._harness import Claim, Result, _registry
from experiments._harness._claim import TIMING_FIELDS
from experiments._harness._runner import run_experiment

from ..em.test_em_experiments import TINY as EM_TINY
from .killrun import _tuples

ROOT = Path(__file__).resolve().parents[2]
CHILD = Path(__file__).with_name("killrun.py")

# experiment -> tiny QUICK overrides (lists become the config's tuples). sensing_maps
# checkpoints every chunk (3 saves: the first kill is mid-training); laplex_gram fits two
# models with one final save each (the first kill falls between the two fits);
# biophys_currents fits six times (the main fit, the 2 x 2 start x loss ablation, class I),
# saving every 25-step chunk; cells_genes fits twice, saving every 50-step chunk (4 saves);
# topology_freesolv trains HOPSE then HOMP (2 random splits vmapped), saving every 10 epochs and
# at the end (4 saves); its epoch times and speed-up are metrics and a claim, compared
# through the experiment's declared TIMING_METRICS and `Claim.timing`.
CASES = {
    "biophys_currents": {
        "n_neurons": 2,
        "duration_ms": 80.0,
        "fit_steps": 50,
        "ablation_steps": 25,
        "class1_steps": 25,
    },
    "cells_genes": {"latent_dim": 4, "width": 16, "steps": 100, "batch_size": 32, "seeds": (0, 1)},
    "sensing_maps": {
        "n_flowers": 32,
        "n_probes": 4,
        "width": 8,
        "steps": 300,
        "n_eval": 2,
        "grid": 5,
    },
    "laplex_gram": {
        "n_train": 6,
        "n_val": 3,
        "n_test": 3,
        "steps": 4,
        "val_every": 2,
        "lanczos": 6,
        "eval_probes": 2,
        "eval_lanczos": 8,
        "cg_maxiter": 50,
        "n_boot": 50,
    },
    "topology_freesolv": {"splits": 2, "epochs": 12, "width": 8, "depth": 1, "speed_rounds": 5},
}
# eeg_state: the deep baselines (evaluate_deep, shared by every eeg_* experiment) train
# one model per fold with a final save each (2 saves). em_t0: em.train_methods
# checkpoints every chunk of each model it trains (em_joint shares that path). stereo_faces:
# the RAFT training behind stereo_faces / stereo_ipd, saving every 2 steps; its trained
# params are then cached, so each run pair needs its own empty cache (see `_cache`).
CASES |= {
    "eeg_state": {
        "n_subjects": 6,
        "block_seconds": 8.0,
        "n_folds": 2,
        "models": ("lda",),
        "deep_models": ("shallow",),
        "deep_epochs": 2,
    },
    # the em tests' tiny models, trained long enough to checkpoint 5 times
    "em_t0": {k: v for k, v in EM_TINY.items() if k != "progress"}
    | {
        "size": 16,
        "n_train": 8,
        "features": (4, 8),
        "seg_features": (4, 8),
        "steps": 20,
        "finetune_steps": 10,
        "denoiser_steps": 20,
        "chunk": 10,
        "t0_values": (0, 3, 10),
        "seeds": (0,),
        "n_refine": 1,
    },
    "stereo_faces": {
        "n_disp": 8,
        "n_steps": 16,
        "shard_size": 4,
        "raft_feature_dim": 8,
        "raft_hidden_dim": 8,
        "raft_context_dim": 8,
        "raft_levels": 2,
        "raft_iters": 2,
        "raft_n_train": 4,
        "raft_steps": 4,
        "raft_batch": 2,
        "raft_checkpoint_every": 2,
        "n_pairs": 4,
        "height": 32,
        "width": 48,
        "batch": 2,
    },
}
# interp_sae: SmolLM2's activation store (cached under $JAXLAB_CACHE_DIR, so a resume reads
# it back) streamed in buffers of 1024 tokens, 8 steps and one checkpoint each (3 saves).
# illusions_sae: SmolLM2 once, then the SAE in chunks of 100 steps (2 saves). cells_scib:
# the LeCell fit (chunks of 50: 2 saves) and two NB-VAEs (chunks of 100: 2 saves each).
# Measured 2026-12-02 (all three kill points passed; shared 2-core machine at load 11-13):
# interp_sae 21 min, illusions_sae 51, cells_scib 60, routing_haps_main 49. illusions_sae
# again after its framing change 2026-12-04: 2402 s (load 4-14).
# routing_haps_main: two of the pool's LMs (SmolLM2, Gemma-3) on 50 MedMCQA items, each of
# its 3 HAPS fits saving every 25 steps and at the end (6 saves). The experiments that
# share a covered case's training path are cases further down.
CASES |= {
    "interp_sae": {
        "models": ("smollm2",),
        "train_tokens": (2048,),
        "eval_tokens": 512,
        "steps": (24,),
        "batch_size": 128,
        "buffer_size": 1024,
        "ce_sequences": 2,
        "curve_k": (8, 32),
    },
    "illusions_sae": {
        "orders": 2,
        "expansion": 2,
        "k": 8,
        "steps": 150,
        "batch_size": 64,
        "ablate": 4,
    },
    "cells_scib": {
        "latent_dim": 4,
        "width": 16,
        "steps": 100,
        "batch_size": 32,
        "vae_steps": 200,
        "seeds": (0, 1),
        "sim_cells": 300,
        "sim_genes": 64,
    },
}
_HAPS_TINY = {
    "models": ("smollm2-135m-instruct", "gemma3-270m"),
    "per_source": (("medmcqa", 50),),
    "cached_top": 1,
    "top": 1,
    "n_active": 1,
    "rank": 2,
    "hidden": 16,
    "steps": 30,
    "batch_size": 4,
    "n_boot": 50,
}
CASES["routing_haps_main"] = _HAPS_TINY | {"n_seeds": 2, "cost_shifts": (0.0, 1.0)}
# The experiments that share a covered case's training path get a case of their own (a
# shared path does not cover what each does around it: its loops over settings, folds
# and seeds, its caches, its metrics). routing_haps_ablation: main's tiny HAPS fits, one
# per variant (6 saves each). biophys_localize: the anchored population fit of
# biophys_currents (25-step chunks: 2 saves). cells_rare: one LeCell fit per fraction
# (chunks of 50: 2 saves each). eeg_cross_session / eeg_technique: eeg_state's deep
# baselines. em_joint: em.train_methods as in em_t0, one setting, two seeds. stereo_ipd: the RAFT
# training of stereo_faces. topology_mutag / topology_zinc: topology_freesolv's train
# (every 10 epochs and at the end: 2 saves per model and fold).
# Measured 2026-12-03 (all three kill points passed; shared 2-core machine, run niced
# one case at a time): topology_mutag 180 s (load 3-4), eeg_technique 712 s (load 4-7),
# eeg_cross_session 1359 s (load 7-9), stereo_ipd 140 s (load 5-7), em_joint 208 s
# (load 5-7), cells_rare 158 s (load 2-5), topology_zinc 153 s (load 4-5); biophys_localize
# passed earlier that day (166 s). routing_haps_ablation passed 2026-12-04 (1289 s, niced,
# load 12-14, beside four helpers' jobs). Re-run after the cases changed (cells: simulated
# data, 2 seeds; em: learned embedding, em_joint 2 seeds), 2026-12-04 at load 4-8, all three
# kill points passed: cells_scib 3671 s, cells_rare 339 s, em_joint 169 s, em_t0 124 s.
_EEG_TINY = CASES["eeg_state"]
CASES |= {
    "routing_haps_ablation": _HAPS_TINY | {"n_seeds": 2},
    "biophys_localize": {"n_neurons": 2, "duration_ms": 80.0, "fit_steps": 50},
    "cells_rare": {
        "seeds": (0, 1),
        "latent_dim": 4,
        "width": 16,
        "steps": 100,
        "batch_size": 32,
        "sim_cells": 300,
        "sim_genes": 64,
    },
    "eeg_cross_session": dict(_EEG_TINY),
    "eeg_technique": dict(_EEG_TINY),
    "em_joint": {
        k: v for k, v in CASES["em_t0"].items() if k not in ("t0_values", "seeds", "n_refine")
    }
    | {"settings": ((2, "cremi_like"),), "seeds": (0, 1)},
    "stereo_ipd": CASES["stereo_faces"] | {"noise_draws": 4, "n_boot": 50},
    "topology_mutag": {"folds": 2, "epochs": 12, "width": 8, "depth": 1, "speed_rounds": 5},
    "topology_zinc": {
        "splits": 2,
        "speed_rounds": 5,
        "n_train": 48,
        "n_val": 16,
        "n_test": 16,
        "epochs": 12,
        "width": 8,
        "depth": 1,
    },
}
# the runner's provenance of a run: where, when and from which commit it ran
RUNTIME = {"runtime_s", "jax", "machine", "provenance"}


def _cache(root: Path) -> Path:
    """A fresh, empty `$JAXLAB_CACHE_DIR` for one uninterrupted run or one killed run and
    its resume (they share it, as one user's machine would). Shared across those pairs,
    a cached result would let the later runs skip the training that is to be killed
    (stereo caches its trained RAFT params). The C++ kernels' build cache is linked in:
    content-addressed, it cannot change a result, and rebuilding it per pair is slow."""
    from jaxlab._kernels._build import kernel_cache_dir

    root.mkdir(parents=True)
    kernels = kernel_cache_dir()
    kernels.mkdir(parents=True, exist_ok=True)
    (root / "kernels").symlink_to(kernels, target_is_directory=True)
    return root


def _run(name, out, point, *, resume=False, cache=None):
    """One child run. Every run of a case shares one JAX persistent compilation cache
    (beside the run pairs' caches), so the same programs are not compiled again in each of
    the seven runs. Like the kernels' build cache it cannot change a result: an entry is
    the executable XLA compiles for the same program and options, and an entry a killed
    run left half-written fails to decompress, which JAX warns about and recompiles."""
    env = dict(
        os.environ,
        PYTHONPATH=str(ROOT),
        JAXLAB_CACHE_DIR=str(cache),
        MPLBACKEND="Agg",
        JAX_COMPILATION_CACHE_DIR=str(Path(cache).parent / "xla"),
    )
    cmd = [sys.executable, str(CHILD), name, str(out), point, json.dumps(CASES[name])]
    if resume:
        cmd.append("--resume")
    return subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=1800)


def _comparable(rec: dict) -> dict:
    """metrics.json without what two runs of one seed need not share: the runner's
    runtime fields, the experiment's declared wall-clock metrics (`TIMING_METRICS`, listed
    in the record) and the measured value, estimate and verdict of its speed claims."""
    timing = set(rec["timing_metrics"])
    out = {k: v for k, v in rec.items() if k not in RUNTIME}
    out["metrics"] = {k: v for k, v in rec["metrics"].items() if k not in timing}
    out["claims"] = [
        {k: v for k, v in c.items() if not (c["timing"] and k in TIMING_FIELDS)}
        for c in rec["claims"]
    ]
    return out


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def _mode(path: Path) -> int:
    return path.stat().st_mode & 0o777


def _metrics(out, name):
    return _comparable(json.loads((Path(out) / name / "metrics.json").read_text()))


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(CASES))
def test_resume_at_every_kill_point_equals_uninterrupted(tmp_path, name):
    ref = _run(name, tmp_path / "ref", "none", cache=_cache(tmp_path / "cache_ref"))
    assert ref.returncode == 0, ref.stderr[-3000:]
    n_saves = int(re.search(r"SAVES=(\d+)", ref.stdout).group(1))
    assert n_saves >= 2, f"{name}: the tiny config must checkpoint more than once"
    want = _metrics(tmp_path / "ref", name)
    for point in ("save:1", f"save:{n_saves}", "metrics"):
        out = tmp_path / point.replace(":", "_")
        cache = _cache(tmp_path / f"cache_{out.name}")
        killed = _run(name, out, point, cache=cache)
        assert killed.returncode == -signal.SIGKILL, (point, killed.stderr[-3000:])
        assert not (out / name / "metrics.json").exists(), point
        if point == "metrics":  # the killed write left its temp file: the case to clean
            assert list((out / name).glob(".metrics.json.*.tmp")), point
        resumed = _run(name, out, "none", resume=True, cache=cache)
        assert resumed.returncode == 0, (point, resumed.stderr[-3000:])
        assert _metrics(out, name) == want, point
        assert _mode(out / name / "metrics.json") == 0o666 & ~_umask(), point  # not 0600
        leftovers = [p.name for p in (out / name).rglob(".*.tmp")]
        assert not leftovers, (point, leftovers)  # the resumed run removed the killed write's


@dataclasses.dataclass(frozen=True)
class _Tiny:
    n: int = 2


def _timed_module(timing=("*_time_s",)):
    mod = types.ModuleType("timed_experiment")
    mod.NAME, mod.PAPER, mod.DESCRIPTION = "timed", "P9", "a run that measures its own time"
    mod.QUICK, mod.FULL, mod.TIMING_METRICS = _Tiny(), _Tiny(n=3), timing

    def run(config, key, ctx):
        t0 = time.perf_counter()
        x = float(jax.random.normal(key, ()))
        secs = time.perf_counter() - t0 + 1e-9
        return Result(
            metrics={"x": x, "fit": {"train_time_s": secs}, "time_of_day": 1.0},
            claims=[
                Claim("x is finite", "finite", f"{x:.3f}", True),
                Claim("fast", "under a day", f"{secs:.2e} s", secs < 86400, timing=True),
            ],
        )

    mod.run = run
    return _registry.validate_module(mod)


def test_declared_timing_metrics_are_listed_and_left_out_of_the_comparison(tmp_path):
    mod = _timed_module()
    a = run_experiment(mod, out=tmp_path / "a")
    b = run_experiment(mod, out=tmp_path / "b")
    # fnmatch over the flat names: "fit/train_time_s" matches, "time_of_day" does not
    assert a["timing_metrics"] == ["fit/train_time_s"]
    assert [c["timing"] for c in a["claims"]] == [False, True]
    assert a["metrics"]["fit/train_time_s"] != b["metrics"]["fit/train_time_s"]
    # the runner's result files get open()'s 0666 minus the umask, not mkstemp's 0600
    for f in ("metrics.json", "run.log"):
        assert _mode(tmp_path / "a" / "timed" / f) == 0o666 & ~_umask(), f
    ca, cb = _metrics(tmp_path / "a", "timed"), _metrics(tmp_path / "b", "timed")
    assert ca == cb
    assert set(ca["metrics"]) == {"x", "time_of_day"}
    assert ca["claims"][0] == {k: v for k, v in a["claims"][0].items()}  # untimed: all kept
    assert set(ca["claims"][1]) == set(a["claims"][1]) - set(TIMING_FIELDS)
    # anything else that differs is still caught
    rec = json.loads((tmp_path / "a" / "timed" / "metrics.json").read_text())
    rec["metrics"]["time_of_day"] = 2.0
    assert _comparable(rec) != ca


@pytest.mark.parametrize("bad", [["*_s"], ("",), "train_time_s", (3,)])
def test_timing_metrics_must_be_a_tuple_of_patterns(bad):
    with pytest.raises(ValueError, match="TIMING_METRICS must be a tuple"):
        _timed_module(bad)


def test_every_case_overrides_fields_of_its_experiments_config():
    for name, overrides in CASES.items():
        mod = _registry.find(name)  # also validates its TIMING_METRICS
        tiny = dataclasses.replace(mod.QUICK, **_tuples(overrides))  # unknown field: TypeError
        assert all(getattr(tiny, k) != getattr(mod.QUICK, k) for k in overrides), name
