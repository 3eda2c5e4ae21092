"""The P11 experiments declare the metric keys issue 14 names and summarise seeds (their
TINY runs write those keys: tests/smoke)."""

import dataclasses
import importlib

import jax
import matplotlib
import numpy as np
import pytest

from experiments._harness import RunContext

matplotlib.use("Agg")

METHODS = ("bicubic", "separate", "joint", "joint_diffusion")
METRICS = ("psnr", "ssim", "voi", "arand", "cremi")
# tiny model overrides (tests/experiments/test_kill_resume.py builds its em cases on them)
TINY = {
    "size": 32,
    "n_train": 6,
    "n_test": 2,
    "features": (2, 4),
    "seg_features": (2, 4),
    "denoiser_features": 4,
    "steps": 3,
    "finetune_steps": 2,
    "denoiser_steps": 3,
    "batch_size": 2,
    "T": 10,
    "t0": 3,
    "refine_steps": 2,
    "chunk": 2,
    "progress": False,
}


def _contract(factors):
    return {f"{metric}_{meth}_x{k}" for k in factors for meth in METHODS for metric in METRICS}


def test_em_joint_declares_the_contract_keys():
    mod = importlib.import_module("experiments.em.joint")
    assert mod.NAME == "em_joint"
    assert mod.PAPER == "P11"
    for config in (mod.QUICK, mod.FULL):
        keys = set(mod.metric_keys(config))
        assert _contract((2, 4)) <= keys
    # QUICK has at least one extra regime at x4; FULL has all regimes at x2 and x4
    assert any(int(f) == 4 and r != "cremi_like" for f, r in mod.QUICK.settings)
    from jaxlab import em

    assert {(f, r) for f in (2, 4) for r in em.REGIMES} <= {tuple(s) for s in mod.FULL.settings}


def test_em_t0_declares_both_ends(tmp_path):
    mod = importlib.import_module("experiments.em.t0")
    assert mod.NAME == "em_t0"
    assert mod.PAPER == "P11"
    for config in (mod.QUICK, mod.FULL):
        t0s = mod.t0_values(config)
        assert 0 in t0s
        assert config.T in t0s
        assert len(t0s) >= 4
        keys = set(mod.metric_keys(config))
        assert {f"{m}_t0_{t}" for t in t0s for m in ("voi", "arand", "cremi")} <= keys
    with pytest.raises(ValueError, match="t0_values"):
        mod.run(
            dataclasses.replace(mod.TINY, t0_values=(0, 11)),
            jax.random.key(0),
            RunContext(mod.NAME, tmp_path),
        )


@pytest.mark.slow
def test_em_t0_tiny_run_moves_the_embedding(tmp_path):
    mod = importlib.import_module("experiments.em.t0")
    config = mod.TINY  # t0 in {0, 3, T = 10}
    res = mod.run(config, jax.random.key(0), RunContext(mod.NAME, tmp_path))
    assert set(mod.metric_keys(config)) <= set(res.metrics)
    # t0 = 0 leaves the SR embedding unchanged; t0 = T moves it
    assert res.metrics["emb_mse_t0_0"] != res.metrics["emb_mse_t0_10"]
    assert {"t0_ablation", "priors"} <= set(res.figures)
    assert len(res.claims) == 3


def test_em_t0_seed_summary_means_and_paired_intervals():
    from scipy import stats

    mod = importlib.import_module("experiments.em.t0")
    config = mod.QUICK
    t0s, seeds, t0c = mod.t0_values(config), (0, 1, 2), int(config.t0)
    rng = np.random.default_rng(0)
    names = (*mod.SEG_METRICS, "emb_mse", "emb_mse_one")
    per_seed = {f"{k}_t0_{t}_s{s}": float(rng.uniform()) for k in names for t in t0s for s in seeds}
    per_seed.update(
        {f"{k}_s{s}": float(rng.uniform(10, 20)) for k in ("psnr", "ssim") for s in seeds}
    )
    m, claims = mod.seed_summary(config, per_seed)
    voi = np.asarray([[per_seed[f"voi_t0_{t}_s{s}"] for t in t0s] for s in seeds])
    np.testing.assert_allclose([m[f"voi_t0_{t}"] for t in t0s], voi.mean(0), rtol=1e-12)
    np.testing.assert_allclose(m["psnr"], np.mean([per_seed[f"psnr_s{s}"] for s in seeds]))
    # the claim's paired t interval over seeds, recomputed with scipy
    highs = []
    for other in (0, int(config.T)):
        d = voi[:, t0s.index(t0c)] - voi[:, t0s.index(other)]
        half = stats.t.ppf(0.975, 2) * d.std(ddof=1) / np.sqrt(3)
        lo, hi = d.mean() - half, d.mean() + half
        assert f"{d.mean():+.3f} [{lo:+.3f}, {hi:+.3f}]" in claims[0].measured
        highs.append(hi)
    assert claims[0].holds == bool(max(highs) < 0)
    assert m[f"gap_voi_t0_{t0c}_vs_0"].n == 3
    # one seed: no interval, every claim untestable (the named gate)
    c1 = mod.seed_summary(dataclasses.replace(config, seeds=(0,)), per_seed)[1]
    assert [c.verdict for c in c1] == ["untestable"] * 3
    assert c1[0].gate.name.startswith("at least two seeds")
    # single-seed runs merged give the same as the three seeds at once
    one = [mod.seed_summary(dataclasses.replace(config, seeds=(s,)), per_seed)[0] for s in seeds]
    merged = {k: v for r in one for k, v in r.items() if k.endswith(tuple(f"_s{s}" for s in seeds))}
    assert mod.seed_summary(config, merged)[0] == m


def test_em_joint_seed_summary_means_and_paired_intervals():
    from scipy import stats

    mod = importlib.import_module("experiments.em.joint")
    config, seeds = mod.QUICK, (0, 1, 2)
    sfx = [mod._suffix(int(f), r) for f, r in config.settings]
    rng = np.random.default_rng(1)
    per_seed = {
        f"{k}_{meth}_{s}_s{seed}": float(rng.uniform(0.1, 30))
        for k in (*METRICS, "boundary_f1")
        for meth in METHODS
        for s in sfx
        for seed in seeds
    }
    m, claims = mod.seed_summary(config, per_seed)
    assert set(mod.metric_keys(config)) <= set(m)
    np.testing.assert_allclose(
        m["psnr_joint_x2"], np.mean([per_seed[f"psnr_joint_x2_s{s}"] for s in seeds])
    )
    # the claim's paired t interval over seeds, recomputed with scipy
    d = np.asarray(
        [
            per_seed[f"psnr_joint_{s}_s{k}"] - per_seed[f"psnr_separate_{s}_s{k}"]
            for s in ("x2",)
            for k in seeds
        ]
    )
    half = stats.t.ppf(0.975, 2) * d.std(ddof=1) / np.sqrt(3)
    assert f"{d.mean():+.3f} [{d.mean() - half:+.3f}, {d.mean() + half:+.3f}]" in claims[0].measured
    gap = m["gap_psnr_joint_vs_separate_x2"]  # an Estimate: written as gap, gap_lo, gap_hi, gap_n
    np.testing.assert_allclose([gap.low, gap.high], [d.mean() - half, d.mean() + half])
    assert gap.n == 3
    assert "over 3 seeds" in claims[0].measured
    # claim 1: joint beats separate in PSNR at x2 and x4 (the intervals' lower ends above 0)
    ends = [m[f"gap_psnr_joint_vs_separate_{s}"] for s in ("x2", "x4")]
    want = (
        "holds"
        if all(e.low > 0 for e in ends)
        else "fails"
        if any(e.high <= 0 for e in ends)
        else "inconclusive"
    )
    assert claims[0].verdict == want
    assert claims[0].kind == "superior"
    assert claims[0].null == "separate SR"
    # claim 3 needs a regime beyond the main one: without it, untestable
    main_only = dataclasses.replace(config, settings=((2, "cremi_like"), (4, "cremi_like")))
    keep = {k: v for k, v in per_seed.items() if "noisy" not in k}
    assert mod.seed_summary(main_only, keep)[1][2].verdict == "untestable"
    # single-seed runs merged give the same as the three seeds at once
    one = [{k: v for k, v in per_seed.items() if k.endswith(f"_s{s}")} for s in seeds]
    merged = {k: v for r in one for k, v in r.items()}
    assert mod.seed_summary(config, merged)[0] == m
    # one seed: intervals over its test images (the one-seed run's path), said so
    one_cfg = dataclasses.replace(config, seeds=(0,))
    with pytest.raises(ValueError, match="per_image"):
        mod.seed_summary(one_cfg, one[0])
    per_image = {k[: -len("_s0")]: rng.uniform(0, 30, config.n_test) for k in one[0]}
    m1, c1 = mod.seed_summary(one_cfg, one[0], per_image)
    d1 = per_image["psnr_joint_x2"] - per_image["psnr_separate_x2"]
    np.testing.assert_allclose(m1["gap_psnr_joint_vs_separate_x2"].value, d1.mean())
    assert m1["gap_psnr_joint_vs_separate_x2"].n == config.n_test
    assert "one training seed" in c1[0].measured
