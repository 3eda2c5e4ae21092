"""The P16 experiments and benchmark at their TINY size: what the smoke tier does not check
(value ranges, the identification round, interval order, the peer's agreement). The
metric names issue 10 asks for are checked by the smoke tier (tests/smoke/expected.py)."""

import importlib

import jax
import matplotlib
import pytest

from experiments._harness import RunContext
from experiments._harness._registry import find

matplotlib.use("Agg")

pytestmark = pytest.mark.slow


def _run(name, tmp_path):
    mod = find(name)
    return mod.TINY, mod.run(mod.TINY, jax.random.key(0), RunContext(mod.NAME, tmp_path))


def test_synthetic_ranges(tmp_path):
    cfg, res = _run("bandits_synthetic", tmp_path)
    assert 0.0 <= res.metrics["dim_recovery_tdge"] <= 1.0
    assert "regret" in res.figures
    assert len(res.claims) == 3
    # a checkpoint round, capped at the horizon when not identified
    assert cfg.identify_every <= res.metrics["rounds_to_identify_tdge"] <= cfg.horizon


def test_movielens_rewards_are_click_rates(tmp_path):
    _, res = _run("bandits_movielens", tmp_path)
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


def test_obd_intervals_are_ordered(tmp_path):
    _, res = _run("bandits_obd", tmp_path)
    for name in ("tdge", "linucb", "lints", "egreedy"):
        for est in ("ips", "snips", "dr"):
            m = res.metrics
            assert m[f"random/{est}_{name}_low"] <= m[f"random/{est}_{name}_high"]


def test_speed_bench_agrees_with_mabwiser():
    mod = importlib.import_module("experiments.bench.bandits_speed")
    config = {**mod.QUICK, **mod.TINY}
    config = {k: v for k, v in config.items() if k not in ("warmup", "repeats")}
    bench = mod.setup(config, jax.random.key(0))
    for k in ("jaxlab_decisions_s", "mabwiser_decisions_s", "decisions_ratio", "arm_agreement"):
        assert k in bench.size
    assert bench.size["arm_agreement"] > 0.9
