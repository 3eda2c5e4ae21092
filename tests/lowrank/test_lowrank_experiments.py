"""The lowrank experiments and benchmark keep their contract (tiny configs; slow)."""

from __future__ import annotations

import dataclasses

import jax
import pytest

from experiments._harness import Bench, Result, RunContext
from experiments.bench import lowrank_speed
from experiments.lowrank import agreement, exposure, memory, predictions

TINY = {
    agreement: (
        {
            "ns": [30, 120],
            "tanh_seeds": 2,
            "horizon": 0.5,
            "n_save": 3,
            "sgd_n": 20,
            "sgd_steps": 3,
        },
        ["linear_max_err", "tanh_err_slope"],
    ),
    exposure: (
        {"n_neurons": 40, "horizon": 1.0, "n_save": 5},
        ["initial_output_diff", "final_output_diff"],
    ),
    memory: (
        {
            "n_nets": 8,
            "t_first": 2.0,
            "t_last": 4.0,
            "weight_decays": [0.0, 0.1],
            "input_correlations": [0.0, 0.9],
        },
        ["history_decode_acc_invisible", "history_decode_acc_visible"],
    ),
    predictions: (
        {"n_nets": 4, "t_phase": 2.0, "t_probe": 2.0, "n_save": 5},
        ["savings_ratio", "connectivity_signature_gap"],
    ),
}


@pytest.mark.slow
@pytest.mark.parametrize("mod", list(TINY), ids=lambda m: m.NAME)
def test_experiment_contract(mod, tmp_path):
    config, keys = TINY[mod]
    result = mod.run(
        dataclasses.replace(mod.QUICK, **config), jax.random.key(0), RunContext(mod.NAME, tmp_path)
    )
    assert isinstance(result, Result)
    for k in keys:
        assert k in result.metrics
    assert result.claims
    assert result.figures


@pytest.mark.slow
def test_bench_contract():
    bench = lowrank_speed.setup({"ns": [20, 40], "horizon": 0.2, "rtol": 1e-4}, jax.random.key(0))
    assert isinstance(bench, Bench)
    assert set(bench.ours) <= set(bench.impls)
    for fn in bench.impls.values():
        jax.block_until_ready(fn())
