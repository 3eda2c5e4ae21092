"""Tiny runs of the experiments issue #34 items 5 and 8 changed (slow: each fits models)."""

import jax
import matplotlib
import numpy as np
import pytest

from experiments._harness import RunContext

matplotlib.use("Agg")


@pytest.mark.slow
def test_biophys_currents_tiny_run_has_the_baseline_and_the_2x2_ablation(tmp_path):
    from experiments.biophys import currents as mod

    cfg = mod.Config(n_neurons=2, duration_ms=150.0, fit_steps=4, ablation_steps=2)
    # the experiment runs in float32 under JAX's standard promotion (the CLI's setting),
    # not the suite's strict mode (its synthetic data mix float32 arrays with the cell)
    with jax.numpy_dtype_promotion("standard"):
        res = mod.run(cfg, jax.random.key(0), RunContext(mod.NAME, tmp_path))
    m = res.metrics
    cells = [f"ablation_match_{s}_{ls}" for s in mod.STARTS for ls in mod.LOSSES]
    assert set(cells) <= set(m)
    assert {"current_corr_start", "current_corr_lowpass_mean", "current_corr_gain_low"} <= set(m)
    assert m["current_corr_gain_low"] <= m["current_corr_gain"] <= m["current_corr_gain_high"]
    assert all(np.isfinite(v) for v in m.values())
    assert len(res.claims) == 5


@pytest.mark.slow
def test_cells_rare_tiny_run_has_intervals_over_seeds(tmp_path):
    from experiments.cells import rare as mod

    cfg = mod.Config(fractions=(0.05, 0.1), seeds=(0, 1), steps=4, width=32, batch_size=64)
    res = mod.run(cfg, jax.random.key(0), RunContext(mod.NAME, tmp_path))
    m = res.metrics
    for b in ("knn", "iforest"):
        assert m[f"auroc_diff_lecell_{b}_low"] <= m[f"auroc_diff_lecell_{b}_high"]
    assert {"auroc_lecell_10pct_s1", "auroc_lecell_10pct_mean"} <= set(m)
    assert np.isfinite(m["dose_spearman_lecell_residualized"])
    assert len(res.claims) == 2
