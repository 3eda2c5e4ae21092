"""The laplex experiment and benchmark modules: their paper, the exactness bars at TINY,
the GPU device script on CPU."""

from __future__ import annotations

import importlib

import jax
import pytest

from experiments._harness import RunContext
from experiments._harness._registry import find

EXPERIMENTS = ["laplex_exactness", "laplex_scaling", "laplex_head", "laplex_gram"]
BENCHES = ["laplex_matvec", "laplex_gpu"]


@pytest.mark.parametrize("name", EXPERIMENTS + BENCHES)
def test_laplex_modules_are_p9(name):
    # the runner's contract (metrics, claims, figures) is the smoke tier's (tests/smoke)
    mod = find(name, bench=name in BENCHES)
    assert mod.PAPER == "P9"


@pytest.mark.slow  # compiles every matvec/gradient variant: ~10 s idle, a minute under load
def test_exactness_tiny_run_meets_the_bars(tmp_path):
    mod = importlib.import_module("experiments.laplex.exactness")
    res = mod.run(mod.TINY, jax.random.key(0), RunContext(mod.NAME, tmp_path))
    assert res.metrics["max_rel_err_f64"] < 1e-10
    assert res.metrics["max_grad_rel_err_f64"] < 1e-8
    assert res.metrics["max_rel_err_f32"] < 1e-5


def test_gpu_bench_refuses_cpu():
    mod = importlib.import_module("experiments.bench.laplex_gpu")
    if jax.default_backend() == "cpu":
        with pytest.raises(RuntimeError, match="needs a GPU"):
            mod.setup(mod.QUICK, jax.random.key(0))


def test_gpu_device_script_dry_run(tmp_path):
    # the device check end to end on CPU (Pallas in interpret mode, tiny sizes): the
    # float64-oracle exactness stage, every implementation timed, fields written
    mod = importlib.import_module("experiments.bench.laplex_gpu")
    x64 = jax.config.jax_enable_x64
    try:
        rec = mod.main(
            [
                "--dry-run",
                "--sizes",
                "1024",
                "--check-n",
                "256",
                "--chunks",
                "16",
                "--tiles",
                "4x8",
                "--grad-tiles",
                "4x8",
                "--out",
                str(tmp_path),
            ]
        )
    finally:
        jax.config.update("jax_enable_x64", x64)
    for ex in (rec["exactness"]["block"], rec["exactness"]["pallas"]):
        assert ex["max_rel_err_real"] < 1e-5
        assert ex["max_rel_err_phased"] < 1e-5
        assert ex["max_grad_rel_err"] < 1e-3
        assert ex["max_grad_rel_err_ties"] < 1e-3
        assert ex["max_grad_rel_err_phased"] < 1e-3
    assert rec["exactness"]["block"]["max_rel_err_merge"] < 1e-5
    assert rec["exactness"]["block"]["max_grad_rel_err_merge"] < 1e-3
    entry = rec["sizes"]["1024"]
    assert not entry["errors"]
    assert {
        "t_matvec_s",
        "t_matvec_grad_s",
        "achieved_fraction_matvec",
        "speedup_vs_assoc_scan",
        "ratio_to_stream_floor",
        "t_block_matvec_s",
        "block_speedup_vs_assoc_scan",
        "block_achieved_fraction",
        "block_grad_over_matvec",
        "block_phased_over_real",
        "block_phased_speedup_vs_previous",
        "t_block_merge_matvec_s",
        "block_merge_speedup_vs_previous",
        "block_merge_grad_over_matvec",
        "block_merge_over_sym_matvec",
        "block_phased_grad_over_phased",
        "t_lax_sort_pairs_s",
        "t_plan_reuse_s",
        "fastest_sort_over_block_matvec",
    } <= set(entry["fields"])
    assert isinstance(rec["tile_sweep"]["4x8"], float)
    assert isinstance(rec["grad_tile_sweep"]["4x8"], float)
    assert (tmp_path / "bench" / "laplex_gpu.json").exists()
