"""Tiny runs of the experiments issue #34 items 5 and 8 changed (slow: each fits models)."""

import warnings

import jax
import matplotlib
import numpy as np
import pytest

from experiments._harness import RunContext
from experiments._harness._runner import flatten_metrics

matplotlib.use("Agg")


@pytest.mark.slow
def test_biophys_currents_tiny_run_has_the_baseline_and_the_2x2_ablation(tmp_path):
    from experiments.biophys import currents as mod

    cfg = mod.TINY  # two neurons, 150 ms, 4 steps per fit
    # the experiment runs in float32 under JAX's standard promotion (the CLI's setting),
    # not the suite's strict mode (its synthetic data mix float32 arrays with the cell)
    with jax.numpy_dtype_promotion("standard"):
        res = mod.run(cfg, jax.random.key(0), RunContext(mod.NAME, tmp_path))
    m = flatten_metrics(res.metrics)
    cells = [f"ablation_match_{s}_{ls}" for s in mod.STARTS for ls in mod.LOSSES]
    assert set(cells) <= set(m)
    assert {"current_corr_start", "current_corr_lowpass_mean", "current_corr_gain_lo"} <= set(m)
    assert m["current_corr_gain_lo"] <= m["current_corr_gain"] <= m["current_corr_gain_hi"]
    assert all(np.isfinite(v) for v in m.values())
    assert m["spike_match_heldout_gain_lo"] <= m["spike_match_heldout_gain_hi"]
    assert {"spike_match_frac", "spike_match_heldout_true_current"} <= set(m)
    assert len(res.claims) == 6
    assert [c.kind for c in res.claims] == [
        "at_least",
        "superior",
        "at_least",
        "superior",  # held-out spike match vs the initial guess
        "at_least",  # class-I current
        "superior",  # all_of over two superior parts keeps their kind
    ]


@pytest.mark.slow
def test_cells_rare_tiny_run_has_intervals_over_seeds(tmp_path):
    from experiments.cells import rare as mod

    cfg = mod.TINY  # fractions 5% and 10%, seeds 0 and 1, both data sets
    res = mod.run(cfg, jax.random.key(0), RunContext(mod.NAME, tmp_path))
    m = flatten_metrics(res.metrics)
    for pre in ("", "sim_"):
        for b in ("knn", "iforest"):
            assert m[f"{pre}auroc_diff_lecell_{b}_lo"] <= m[f"{pre}auroc_diff_lecell_{b}_hi"]
        assert {f"{pre}auroc_lecell_10pct_s1", f"{pre}auroc_lecell_10pct_mean"} <= set(m)
        assert np.isfinite(m[f"{pre}dose_spearman_lecell_residualized"])
    # the exact-likelihood check, on the simulated counts only
    lo, hi = m["sim_nll_spearman_diff_lecell_knn_lo"], m["sim_nll_spearman_diff_lecell_knn_hi"]
    assert lo <= m["sim_nll_spearman_diff_lecell_knn"] <= hi
    assert np.isfinite(m["sim_nll_spearman_lecell_10pct_s1"])
    assert not any(k.startswith("nll_") for k in m)
    assert len(res.claims) == 5
    assert all("simulated" in c.claim and "simulated" in c.measured for c in res.claims[2:])
    assert "exact negative log-likelihood" in res.claims[4].claim
    assert set(res.figures) == {"auroc", "sim_auroc"}


@pytest.mark.slow
# scib-metrics warns (and clips to 0) when a 4-step embedding raises the batch variance
@pytest.mark.filterwarnings("ignore:PCR comparison score is negative:UserWarning")
def test_cells_scib_tiny_run_has_intervals_over_seeds_on_both_data_sets(tmp_path):
    from experiments.cells import scib as mod

    with warnings.catch_warnings():
        # umap (imported by scib-metrics) warns once that TensorFlow is absent
        warnings.simplefilter("ignore", ImportWarning)
        import scib_metrics.benchmark  # noqa: F401
    cfg = mod.TINY  # seeds 0 and 1, both data sets
    # as the CLI runs it: scib-metrics divides float distances by integer label counts,
    # broadcasts (n, k) by (k,) and keeps float32 k-means carries, so standard promotion,
    # implicit rank promotion and 32-bit defaults instead of the suite's strict modes
    with (
        jax.numpy_dtype_promotion("standard"),
        jax.numpy_rank_promotion("allow"),
        jax.enable_x64(False),
    ):
        res = mod.run(cfg, jax.random.key(0), RunContext(mod.NAME, tmp_path))
    m = flatten_metrics(res.metrics)
    for pre in ("", "sim_"):
        for part in ("bio", "batch", "total"):
            for b in ("pca", "vae_nobatch"):
                lo, hi = (
                    m[f"{pre}scib_{part}_diff_lecell_{b}_lo"],
                    m[f"{pre}scib_{part}_diff_lecell_{b}_hi"],
                )
                assert lo <= m[f"{pre}scib_{part}_diff_lecell_{b}"] <= hi
            per_seed = [m[f"{pre}scib_{part}_lecell_s{s}"] for s in (0, 1)]
            assert np.isclose(m[f"{pre}scib_{part}_lecell"], np.mean(per_seed))
            assert np.isclose(
                m[f"{pre}scib_{part}_diff_lecell_pca"],
                m[f"{pre}scib_{part}_lecell"] - m[f"{pre}scib_{part}_pca"],
            )
        for part in ("batch", "total"):  # the pair given the batch labels
            d = m[f"{pre}scib_{part}_diff_lecell_batch_vae"]
            assert np.isclose(d, m[f"{pre}scib_{part}_lecell_batch"] - m[f"{pre}scib_{part}_vae"])
    # per data set: bio, batch, total (no labels), then batch, total (with labels)
    assert len(res.claims) == 10
    assert all("simulated" in c.claim for c in res.claims[5:])
    assert not any("simulated" in c.claim for c in res.claims[:5])
    assert all("Batch-conditioned" in c.claim for c in res.claims[3:5] + res.claims[8:])
    assert all(c.protocol and c.null for c in res.claims)
    assert all(c.margin == cfg.margin for c in res.claims[:3] + res.claims[5:8])
    assert all(c.margin == cfg.batch_margin for c in res.claims[3:5] + res.claims[8:])
