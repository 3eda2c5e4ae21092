"""P15: inter-pupillary distance (IPD) from stereo depth vs the 0.5 mm clinical requirement."""

from __future__ import annotations

import dataclasses

import jax
import matplotlib.pyplot as plt
import numpy as np

from experiments._harness import Estimate, Result, RunContext, all_of, at_least, bootstrap
from experiments.stereo._setup import (
    FULL_OVERRIDES,
    METHODS,
    RAFT_TIMING_METRICS,
    FaceStereoConfig,
    detector_sigma,
    face_set,
    fill_invalid,
    landmarks_from_disparity,
    noisy_landmark_px,
    predict_disparities,
    trained_raft,
)

NAME = "stereo_ipd"
PAPER = "P15"
DESCRIPTION = "IPD error (mm) from pupil landmarks + stereo depth vs the 0.5 mm clinical bar"
TIMING_METRICS = RAFT_TIMING_METRICS
CLINICAL_MM = 0.5
# Pupil-localisation noise (an assumption, stated in the claims): Timm & Barth 2011
# ("Accurate eye centre localisation by means of gradients", VISAPP) localise both eye
# centres within 0.05 x the inter-ocular distance on 82.5% of the BioID faces; a Gaussian
# detector with that rate has sigma = detector_sigma(0.825) = 0.023 IOD per coordinate.
DETECTOR_RATE = 0.825


@dataclasses.dataclass(frozen=True)
class IPDConfig(FaceStereoConfig):
    """stereo_ipd's settings: the shared face-set ones plus the landmark-noise model."""

    detector_rate: float = DETECTOR_RATE  # fraction of faces with worst-eye error <= 0.05 IOD
    noise_draws: int = 64  # detector-noise draws per face
    noise_sweep: tuple[float, ...] = (0.0, 0.005, 0.01, 0.02, 0.05, 0.1)  # sigma / IOD
    n_boot: int = 2000
    # the first claim's bar in multiples of the 0.5 mm clinical requirement (the paper:
    # "about an order of magnitude above 0.5 mm")
    bar_factor: float = 10.0


QUICK = IPDConfig()
# the smoke tier: stereo_faces' TINY face set and RAFT, a few noise draws and resamples
TINY = IPDConfig(
    n_disp=8,
    n_steps=16,
    shard_size=4,
    raft_feature_dim=8,
    raft_hidden_dim=8,
    raft_context_dim=8,
    raft_levels=2,
    raft_iters=2,
    raft_n_train=4,
    raft_steps=4,
    raft_batch=2,
    raft_checkpoint_every=2,
    n_pairs=6,
    height=32,
    width=48,
    batch=2,
    noise_draws=4,
    n_boot=50,
)
# FULL: the evaluation faces at full VGA resolution (480 x 640; the shared FULL face set
# is 240 x 320), the disparity range doubled with it (its own face set and RAFT tag)
FULL = IPDConfig(**{**FULL_OVERRIDES, "height": 480, "width": 640, "n_disp": 224, "batch": 12})


def _face_errors(disp, data, ipd_true, vis, sigma_iod, draws, key):
    """Per-face mean |IPD error| (mm) over `draws` detector-noise draws (exact pupils
    when `sigma_iod` = 0); faces with an occluded pupil dropped."""
    if sigma_iod == 0:
        lm = landmarks_from_disparity(disp, data)
        return np.abs(np.linalg.norm(lm[:, 0] - lm[:, 1], axis=-1) - ipd_true)[vis]
    errs = []
    for r in range(draws):
        px = noisy_landmark_px(data["landmarks_px"], sigma_iod, key=jax.random.fold_in(key, r))
        lm = landmarks_from_disparity(disp, data, px)
        errs.append(np.abs(np.linalg.norm(lm[:, 0] - lm[:, 1], axis=-1) - ipd_true)[vis])
    return np.mean(errs, axis=0)


def _mean_ci(errors, *, seed, n_resamples) -> Estimate:
    """Mean |IPD error| over faces, 95% percentile bootstrap over faces; NaN (the claims
    untestable) when a face's error is not finite or fewer than two faces remain."""
    errors = np.asarray(errors, np.float64)
    if errors.size < 2 or not np.all(np.isfinite(errors)):
        nan = float("nan")
        return Estimate(nan, nan, nan, 0.95, "percentile bootstrap", max(errors.size, 1))
    return bootstrap(errors, seed=seed, n_resamples=n_resamples)


def _crossing(sigmas, errs, level):
    """Smallest sigma (linear interpolation on the sweep) where `errs` reaches `level`;
    inf when it never does."""
    for i in range(1, len(sigmas)):
        if errs[i] >= level:
            lo, hi = errs[i - 1], errs[i]
            if lo >= level:
                return float(sigmas[i - 1])
            return float(sigmas[i - 1] + (level - lo) / (hi - lo) * (sigmas[i] - sigmas[i - 1]))
    return float("inf")


def run(config, key: jax.Array, ctx: RunContext) -> Result:
    data = face_set(config, key)
    raft, raft_info = trained_raft(config, key, ctx)
    disps = {m: fill_invalid(d) for m, d in predict_disparities(data, config, raft).items()}
    disps["gt_disparity"] = data["disparity"].astype(np.float64)  # interpolation floor
    vis = data["landmarks_visible"][:, :2].all(-1)
    ipd_true = np.linalg.norm(data["landmarks_3d"][:, 0] - data["landmarks_3d"][:, 1], axis=-1)
    iod_px = np.hypot(*(data["landmarks_px"][:, 0, [0, 2]] - data["landmarks_px"][:, 1, [0, 2]]).T)
    sigma = detector_sigma(config.detector_rate)
    k_noise, k_boot = jax.random.split(jax.random.fold_in(key, 0x1BD))
    boot_seed = int(jax.random.randint(k_boot, (), 0, 2**31 - 1))
    m: dict[str, float | Estimate] = {
        "n_pairs_pupils_visible": int(vis.sum()),
        "ipd_true_mean_mm": float(ipd_true[vis].mean()),
        "iod_px_mean": float(iod_px[vis].mean()),
        "detector_sigma_iod": sigma,
        "detector_sigma_px_mean": float(sigma * iod_px[vis].mean()),
        **raft_info,
    }
    names = [*METHODS, "gt_disparity"]
    exact, noisy, ci = {}, {}, {}
    for meth in names:
        exact[meth] = _face_errors(disps[meth], data, ipd_true, vis, 0.0, 1, k_noise)
        noisy[meth] = _face_errors(
            disps[meth], data, ipd_true, vis, sigma, config.noise_draws, k_noise
        )
        ci[meth] = _mean_ci(noisy[meth], seed=boot_seed, n_resamples=config.n_boot)
        m[f"ipd_abs_err_mm_{meth}"] = ci[meth]
        m[f"ipd_abs_err_median_mm_{meth}"] = float(np.median(noisy[meth]))
        m[f"ipd_ratio_to_clinical_{meth}"] = ci[meth].value / CLINICAL_MM
        m[f"ipd_abs_err_exact_px_mm_{meth}"] = float(np.mean(exact[meth]))
    best = min(METHODS, key=lambda k: ci[k].value)
    best_exact = min(METHODS, key=lambda k: m[f"ipd_abs_err_exact_px_mm_{k}"])
    # the verdicts' sensitivity to the assumed detector noise: every method's mean |IPD
    # error| and its bootstrap interval at each sigma of the sweep, and both claims'
    # verdicts there (the all-of verdict reads each method's interval against the bar)
    sweep_ci = {
        meth: [
            _mean_ci(
                _face_errors(disps[meth], data, ipd_true, vis, s, config.noise_draws, k_noise),
                seed=boot_seed,
                n_resamples=config.n_boot,
            )
            for s in config.noise_sweep
        ]
        for meth in names
    }
    sweep = {meth: [e.value for e in sweep_ci[meth]] for meth in names}
    bar = config.bar_factor * CLINICAL_MM

    def above(est, meth, level_mm, null):
        return at_least(
            est,
            level_mm,
            null=null,
            claim=f"{meth}: mean |IPD error| >= {level_mm:g} mm",
            paper="-",
            subject=f"{meth} mean |IPD error| (mm)",
        )

    nulls = {
        bar: f"{config.bar_factor:g} x the 0.5 mm clinical bar",
        CLINICAL_MM: "a method at the 0.5 mm bar",
    }

    def every_method(cis, level, **kw):  # both claims: all_of over the methods
        return all_of({k: above(cis[k], k, level, nulls[level]) for k in METHODS}, **kw)

    sweep_verdicts = {
        level: [
            every_method({k: sweep_ci[k][j] for k in METHODS}, level, claim="-", paper="-").verdict
            for j in range(len(config.noise_sweep))
        ]
        for level in (bar, CLINICAL_MM)
    }
    cross = _crossing(config.noise_sweep, sweep[best], bar)
    m["sigma_iod_for_10x_best"] = cross
    for j, s in enumerate(config.noise_sweep):
        for meth in names:
            m[f"sweep_{meth}_sigma{s:g}"] = sweep_ci[meth][j]
        # the decisive end: the lowest lower bound over the methods (holds iff >= the bar)
        m[f"sweep_min_low_mm_sigma{s:g}"] = min(sweep_ci[k][j].low for k in METHODS)
    ratio, lo, hi = (x / CLINICAL_MM for x in (ci[best].value, ci[best].low, ci[best].high))
    noise_txt = (
        f"pupil-detector noise sigma = {sigma:.3f} IOD per coordinate "
        f"({m['detector_sigma_px_mean']:.2f} px; an assumption calibrated to Timm & Barth 2011, "
        f"{config.detector_rate:.1%} of BioID faces within 0.05 IOD)"
    )

    claims = [
        every_method(
            ci,
            bar,
            claim="IPD from stereo misses the sub-millimetre clinical requirement",
            paper="IPD error about an order of magnitude above 0.5 mm for all methods",
            detail=f"with {noise_txt}: best method {best}: mean |IPD error| {ci[best]:.2f} mm "
            f"(95% bootstrap over faces) = {ratio:.1f} x [{lo:.1f}, {hi:.1f}] 0.5 mm; exact "
            f"pupils (depth error only): {best_exact} "
            f"{m[f'ipd_abs_err_exact_px_mm_{best_exact}']:.2f} mm; 10 x needs sigma >= "
            f"{cross:.3f} IOD; verdict vs assumed sigma/IOD: "
            + ", ".join(
                f"{sg:g}: {v}"
                for sg, v in zip(config.noise_sweep, sweep_verdicts[bar], strict=True)
            ),
        ),
        every_method(
            ci,
            CLINICAL_MM,
            claim="every method is above the 0.5 mm bar",
            paper="no method reaches clinical IPD accuracy",
            detail="with the detector noise, exact pupils: "
            + ", ".join(f"{k}={m[f'ipd_abs_err_exact_px_mm_{k}']:.2f}" for k in METHODS)
            + f" mm; exact disparity with noisy pupils {ci['gt_disparity']:.2f} mm; verdict vs "
            "assumed sigma/IOD: "
            + ", ".join(
                f"{sg:g}: {v}"
                for sg, v in zip(config.noise_sweep, sweep_verdicts[CLINICAL_MM], strict=True)
            ),
        ),
    ]
    fig, axes = plt.subplots(1, 2, figsize=(12, 4))
    ax = axes[0]
    ax.boxplot([noisy[k][np.isfinite(noisy[k])] for k in names])
    ax.set_xticks(range(1, len(names) + 1), names, rotation=15)
    ax.axhline(CLINICAL_MM, color="r", ls="--", label="0.5 mm clinical bar")
    ax.set_yscale("log")
    ax.set_ylabel("|IPD error| (mm), noisy pupils")
    ax.legend()
    ax = axes[1]
    xs = np.array([max(sg, 1e-3) for sg in config.noise_sweep])
    for i, meth in enumerate(names):
        est = sweep_ci[meth]
        ax.errorbar(
            xs * (1 + 0.03 * (i - len(names) / 2)),  # dodge the interval bars
            [e.value for e in est],
            yerr=[[e.value - e.low for e in est], [e.high - e.value for e in est]],
            fmt="o-" if meth != "gt_disparity" else "k--",
            ms=3,
            capsize=2,
            label=meth,
        )
    ax.axhline(CLINICAL_MM, color="r", ls="--", label="0.5 mm bar")
    ax.axhline(bar, color="k", ls=":", label=f"{config.bar_factor:g} x 0.5 mm bar")
    ax.axvline(sigma, color="g", ls="-.", label=f"assumed detector ({sigma:.3f})")
    for x, v10, v1 in zip(xs, sweep_verdicts[bar], sweep_verdicts[CLINICAL_MM], strict=True):
        ax.text(
            x,
            0.02,
            f"{str(v10)[:4]}/{str(v1)[:4]}",
            transform=ax.get_xaxis_transform(),  # x in data, y in axes units
            rotation=90,
            fontsize=7,
            ha="center",
            va="bottom",
        )
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("assumed pupil noise sigma / IOD (0 plotted at 1e-3)")
    ax.set_ylabel("mean |IPD error| (mm), 95% bootstrap over faces")
    ax.set_title("verdict sensitivity (text: 10x claim / 0.5 mm claim)", fontsize=9)
    ax.legend(fontsize=7)
    fig.tight_layout()
    notes = (
        "Same synthetic face set as stereo_faces (jaxlab.stereo renderer; npz shards "
        "reloaded). Pupil centres: true 3-D points on the rendered eyeballs; predicted "
        "ones back-project the pupil pixels with depth from each method's disparity "
        "(bilinear). The pupil pixels carry Gaussian localisation noise (per coordinate, "
        "sigma a fixed fraction of the face's inter-ocular distance in pixels; calibrated "
        "to a published eye-centre detector's BioID rate; an assumption, not a detector "
        f"run on these images), {config.noise_draws} draws per face; the exact-pixel "
        "numbers isolate the depth error. "
        "raft = RAFT-Stereo-lite (jaxlab.stereo, flax) trained on a separately rendered "
        "training split (reused from stereo_faces' checkpoint dir when present, "
        "raft_cached = 1). "
        "gt_disparity is the interpolation floor. Pairs with an occluded pupil excluded. "
        "Detector-noise assumption: the verdicts depend on the assumed pupil noise sigma; "
        f"the right panel and the sweep_* metrics give both claims' verdicts at sigma/IOD in "
        f"{list(config.noise_sweep)} (the 10 x claim needs sigma >= {cross:.3f} IOD for the "
        "best method). FULL renders the evaluation faces at full VGA resolution (480 x 640, "
        "disparity range doubled), so the pixel grid is not what limits the IPD error."
    )
    return Result(metrics=m, claims=claims, figures={"ipd_error": fig}, notes=notes)
