"""The P16 experiments and benchmark write the metric keys issue 10 names (tiny configs)."""

import dataclasses
import importlib

import jax
import matplotlib
import pytest

from experiments._harness import RunContext
from experiments._harness._registry import find

matplotlib.use("Agg")

pytestmark = pytest.mark.slow


def _run(name, tmp_path, **overrides):
    mod = find(name)
    config = dataclasses.replace(mod.QUICK, **overrides)
    return mod.run(config, jax.random.key(0), RunContext(mod.NAME, tmp_path))


def test_synthetic_contract(tmp_path):
    res = _run(
        "bandits_synthetic",
        tmp_path,
        n_items=40,
        n_values=(3, 3, 3),
        relevant=(1,),
        horizon=40,
        seeds=2,
        small_n_items=30,
        small_n_values=(2, 2),
        small_relevant=(0,),
        small_horizon=20,
        identify_every=10,
    )
    for k in (
        "regret_tdge",
        "regret_linucb",
        "regret_lints",
        "regret_egreedy",
        "dim_recovery_tdge",
        "rounds_to_identify_tdge",
        "rounds_to_identify_linucb",
        "small_regret_tdge",
    ):
        assert k in res.metrics
    assert 0.0 <= res.metrics["dim_recovery_tdge"] <= 1.0
    assert "regret" in res.figures
    assert len(res.claims) == 3
    assert 10 <= res.metrics["rounds_to_identify_tdge"] <= 40


def test_movielens_contract(tmp_path):
    res = _run("bandits_movielens", tmp_path, n_users=3, events=120, pool=40, candidates=10)
    for k in (
        "reward_tdge",
        "reward_linucb",
        "reward_lints",
        "reward_egreedy",
        "coldstart_reward_tdge",
        "coldstart_reward_linucb",
    ):
        assert 0.0 <= res.metrics[k] <= 1.0
    assert "trajectory" in res.figures


def test_obd_contract(tmp_path):
    res = _run("bandits_obd", tmp_path, n_boot=10, policy_samples=8)
    for name in ("tdge", "linucb", "lints", "egreedy"):
        for est in ("ips", "snips", "dr"):
            m = res.metrics
            assert m[f"random/{est}_{name}_low"] <= m[f"random/{est}_{name}_high"]


def test_speed_bench_contract():
    mod = importlib.import_module("experiments.bench.bandits_speed")
    bench = mod.setup({"rounds": 50, "alpha": 1.0}, jax.random.key(0))
    for k in ("jaxlab_decisions_s", "mabwiser_decisions_s", "decisions_ratio", "arm_agreement"):
        assert k in bench.size
    assert bench.size["arm_agreement"] > 0.9
