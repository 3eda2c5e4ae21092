"""P11: ablation of the partial-diffusion start step t0 (t0 = 0: no diffusion; t0 = T: full)."""

from __future__ import annotations

import dataclasses

import jax
import matplotlib.pyplot as plt
import numpy as np

from experiments._harness import (
    Claim,
    Estimate,
    Precondition,
    Result,
    RunContext,
    all_of,
    at_scale,
    gated,
    log,
    paired_t,
    superior,
)
from experiments.em._setup import (  # noqa: F401 (--full --dry-run)
    FULL_MEMORY_GB,
    FULL_OVERRIDES,
    NOTES,
    EmConfig,
    full_work,
    image_scores,
    make_split,
    optimizer,
    paper_scale,
    predict,
    train_methods,
)
from jaxlab import em

NAME = "em_t0"
PAPER = "P11"
DESCRIPTION = (
    "VOI/ARAND/CREMI and distance to the HR embedding vs the partial-diffusion "
    "start step t0 (0 = none, T = from pure noise) on synthetic EM x4"
)


@dataclasses.dataclass(frozen=True)
class Config(EmConfig):
    """Settings of one run; the defaults are QUICK (2 CPU cores, minutes).

    Each of `seeds` trains its own models on its own data; every t0 is refined
    `n_refine` times (fresh noise) and scored on `n_test` held-out images. The claims
    compare the trained start step `t0` (fixed before the run) with 0 and T."""

    factor: int = 4
    regime: str = "cremi_like"
    t0_values: tuple[int, ...] = (0, 10, 30, 50, 100)
    n_test: int = 24
    seeds: tuple[int, ...] = (0, 1, 2)
    n_refine: int = 2
    level: float = 0.95


QUICK = Config()
# the smoke tier: tiny models, two seeds (the paired intervals), t0 in {0, 3, T}
TINY = Config(
    size=32,
    n_train=4,
    n_test=2,
    features=(2, 4),
    seg_features=(2, 4),
    denoiser_features=4,
    steps=2,
    finetune_steps=2,
    denoiser_steps=2,
    batch_size=2,
    T=10,
    t0=3,
    refine_steps=2,
    chunk=2,
    t0_values=(0,),
    seeds=(0, 1),
)
FULL = Config(**FULL_OVERRIDES, t0_values=(0, 10, 20, 40, 60, 90, 120, 160, 200))

SEG_METRICS = ("voi", "voi_split", "voi_merge", "arand", "cremi", "boundary_f1")


def t0_values(config) -> list[int]:
    """The ablated start steps: the configured ones, the trained t0, 0 (no diffusion) and T."""
    return sorted({int(t) for t in config.t0_values} | {0, int(config.t0), int(config.T)})


def metric_keys(config) -> list[str]:
    """Keys `run(config, ...)` writes per t0: VOI (and split/merge), ARAND, CREMI, boundary
    F1, emb MSE."""
    return [f"{metric}_t0_{t}" for t in t0_values(config) for metric in (*SEG_METRICS, "emb_mse")]


def _seed_run(config, key, ctx, seed: int, t0s, opt):
    """Train once and score every t0: per-t0 means over images and refinements."""
    factor, regime = int(config.factor), config.regime
    k_train, k_test, k_fit, k_pred = jax.random.split(key, 4)
    size, noise = int(config.size), float(config.lr_noise)
    train = make_split(regime, factor, int(config.n_train), size, noise, key=k_train)
    test = make_split(regime, factor, int(config.n_test), size, noise, key=k_test)
    tag = f"t0_{regime}_x{factor}" + (f"_s{seed}" if seed else "")
    tr = train_methods(train, factor, config, k_fit, ctx, tag, opt, methods=("joint_diffusion",))
    # the refiner's target space: E(HR) of the frozen base joint model (as in training)
    hr_emb = np.asarray(em.embed_images(tr.joint_net, tr.params["joint_base"], test.hr))
    out: dict[str, dict[int, float]] = {k: {} for k in (*SEG_METRICS, "emb_mse", "emb_mse_one")}
    priors, sr = {}, {}
    for t0 in t0s:
        per_r, prior_sum = [], 0.0
        n_r = 1 if t0 == 0 else int(config.n_refine)  # t0 = 0: no noise, one pass
        for r in range(n_r):
            pred = predict(tr, test, "joint_diffusion", jax.random.fold_in(k_pred, r), t0=t0)
            per_r.append(image_scores(pred, test))
            p = np.asarray(pred.prior)
            prior_sum = prior_sum + p
            out["emb_mse_one"].setdefault(t0, 0.0)
            out["emb_mse_one"][t0] += float(np.mean((p - hr_emb) ** 2)) / n_r
        for metric in SEG_METRICS:
            out[metric][t0] = float(np.mean([sc[metric] for sc in per_r]))
        mean_prior = prior_sum / n_r
        out["emb_mse"][t0] = float(np.mean((mean_prior - hr_emb) ** 2))
        priors[t0] = mean_prior
        sr = {"psnr": float(per_r[0]["psnr"].mean()), "ssim": float(per_r[0]["ssim"].mean())}
        log.info("em_t0 seed %d t0=%d: VOI %.3f", seed, t0, out["voi"][t0])
    return out, sr, priors, hr_emb


def run(config, key: jax.Array, ctx: RunContext) -> Result:
    T = int(config.T)
    t0s = t0_values(config)
    if t0s[0] < 0 or t0s[-1] > T:
        raise ValueError(f"t0_values: expected values in [0, {T}], received {t0s}")
    seeds = [int(s) for s in config.seeds]
    per_seed: dict[str, float] = {}
    priors, hr_emb = {}, None
    opt = optimizer(config)  # one object: the seeds' trainings share compiled steps
    for seed in seeds:
        k = key if seed == 0 else jax.random.fold_in(key, seed)  # seed 0: the one-seed run
        out, sr, p, e = _seed_run(config, k, ctx, seed, t0s, opt)
        if not priors:
            priors, hr_emb = p, e
        for metric in (*SEG_METRICS, "emb_mse", "emb_mse_one"):
            for t0 in t0s:
                per_seed[f"{metric}_t0_{t0}_s{seed}"] = out[metric][t0]
        per_seed[f"psnr_s{seed}"], per_seed[f"ssim_s{seed}"] = sr["psnr"], sr["ssim"]
    m, claims = seed_summary(config, per_seed)
    return Result(
        metrics=m,
        claims=claims,
        figures={"t0_ablation": _figure(m, t0s, T, seeds), "priors": _prior_figure(priors, hr_emb)},
        notes=NOTES + f" The segmentation decoder was fine-tuned once per seed with priors "
        f"refined from t0 = {config.t0}; the other t0 values change only the refiner at "
        f"inference. {len(seeds)} seeds (each its own training and test images), every t0 "
        f"refined {config.n_refine} times; the embedding MSE is that of the mean prior, "
        f"in the {config.embedding} embedding space (E(HR) of the frozen base joint model).",
    )


def seed_summary(
    config, per_seed: dict[str, float]
) -> tuple[dict[str, float | Estimate], list[Claim]]:
    """Metrics and claims of a run from its per-seed values.

    `per_seed` holds `<metric>_t0_<t>_s<seed>` and `psnr_s<seed>`, `ssim_s<seed>` for every
    seed of `config.seeds` (merged metrics of single-seed runs, `--set 'seeds=[s]'`, give
    the same result as one run over all seeds). **Returns:** `(metrics, claims)`: the
    per-seed values, their means over seeds (`<metric>_t0_<t>`, `psnr`, `ssim`) and the
    claims; `gap_<metric>_t0_<t0>_vs_<t>` the claims' paired differences (`Estimate`s,
    t intervals over seeds).
    """
    T, t0c = int(config.T), int(config.t0)
    t0s = t0_values(config)
    seeds = [int(s) for s in config.seeds]
    m: dict[str, float | Estimate] = {"T": T, "t0_trained": t0c}
    for metric in (*SEG_METRICS, "emb_mse", "emb_mse_one"):
        for t0 in t0s:
            vals = [per_seed[f"{metric}_t0_{t0}_s{seed}"] for seed in seeds]
            m[f"{metric}_t0_{t0}"] = float(np.mean(vals))
            for seed, v in zip(seeds, vals, strict=True):
                m[f"{metric}_t0_{t0}_s{seed}"] = float(v)
    for metric in ("psnr", "ssim"):  # SR does not depend on t0
        m[metric] = float(np.mean([per_seed[f"{metric}_s{seed}"] for seed in seeds]))
        m.update({f"{metric}_s{seed}": float(per_seed[f"{metric}_s{seed}"]) for seed in seeds})

    def diff(metric, a, b) -> Estimate:
        av = [m[f"{metric}_t0_{a}_s{seed}"] for seed in seeds]
        bv = [m[f"{metric}_t0_{b}_s{seed}"] for seed in seeds]
        if len(seeds) < 2:  # no interval from one seed: the claims are untestable (gate)
            d = float(av[0] - bv[0])
            return Estimate(d, float("nan"), float("nan"), config.level, "paired t", 1)
        return paired_t(av, bv, config.level)

    pct, n_s = f"{config.level:.0%}", len(seeds)
    voi = {t: m[f"voi_t0_{t}"] for t in t0s}
    mid = [t for t in t0s if 0 < t < T]
    best_mid = min(mid, key=voi.get)
    d0, dT = diff("voi", t0c, 0), diff("voi", t0c, T)
    bf1 = {t: m[f"boundary_f1_t0_{t}"] for t in t0s}
    b0, bT = diff("boundary_f1", t0c, 0), diff("boundary_f1", t0c, T)
    emb = {t: m[f"emb_mse_t0_{t}"] for t in t0s}
    e0 = diff("emb_mse", t0c, 0)
    m[f"gap_voi_t0_{t0c}_vs_0"], m[f"gap_voi_t0_{t0c}_vs_{T}"] = d0, dT
    m[f"gap_boundary_f1_t0_{t0c}_vs_0"], m[f"gap_boundary_f1_t0_{t0c}_vs_{T}"] = b0, bT
    m[f"gap_emb_mse_t0_{t0c}_vs_0"] = e0
    enough = Precondition("at least two seeds (a paired t interval)", n_s >= 2, f"{n_s} seed(s)")
    partial = f"partial diffusion t0={t0c}"
    none_, full = "no diffusion (t0=0)", f"full diffusion from noise (t0=T={T})"

    def better(est, baseline, metric, higher_is_better):
        return superior(
            est,
            partial,
            baseline,
            claim=f"{metric} at t0={t0c} better than {baseline}",
            paper="-",
            higher_is_better=higher_is_better,
        )

    claims = [
        gated(
            all_of(
                {
                    "VOI vs t0=0": better(d0, none_, "VOI", False),
                    "VOI vs t0=T": better(dT, full, "VOI", False),
                },
                claim="partial diffusion (0 < t0 < T) segments better than no diffusion (t0 = 0) "
                "and full diffusion from noise (t0 = T)",
                paper="starting from a partially noised SR embedding is the right design",
                detail=f"VOI at the trained t0={t0c}: {voi[t0c]:.3f} vs t0=0: {voi[0]:.3f} "
                f"(difference {d0:+.3f}) and t0=T={T}: {voi[T]:.3f} (difference {dT:+.3f}); {pct} "
                f"paired t over {n_s} seeds (training + {config.n_test} test images each, VOI "
                f"averaged over {config.n_refine} refinements; null: no difference); best "
                f"partial t0={best_mid}: {voi[best_mid]:.3f} (chosen after the run, descriptive)",
            ),
            enough,
        ),
        gated(
            superior(
                e0,
                f"refined prior (t0={t0c})",
                "SR embedding (t0=0)",
                claim="the refined prior approximates the HR embedding better than the SR "
                "embedding",
                paper="structural prior closely approximates real HR features",
                higher_is_better=False,
                detail=f"MSE to the HR embedding E(HR) ({config.embedding} embedding of the "
                f"frozen base joint model) of the prior averaged over {config.n_refine} "
                f"refinements (removes the sampling variance a single draw adds): t0=0 (SR "
                f"embedding) {emb[0]:.3f}, trained t0={t0c}: {emb[t0c]:.3f} (difference "
                f"{e0:+.3f}, {pct} paired t over {n_s} seeds), t0=T: {emb[T]:.3f}; one draw at "
                f"t0={t0c}: {m[f'emb_mse_one_t0_{t0c}']:.3f}",
            ),
            enough,
        ),
        gated(
            all_of(
                {
                    "boundary F1 vs t0=0": better(b0, none_, "boundary F1", True),
                    "boundary F1 vs t0=T": better(bT, full, "boundary F1", True),
                },
                claim="partial diffusion gives the segmentation a higher boundary F1 (2-px "
                "tolerance, a structural metric) than no diffusion and full diffusion",
                paper="the refined structural prior improves the segmented structure",
                detail=f"boundary F1 at the trained t0={t0c}: {bf1[t0c]:.3f} vs t0=0: "
                f"{bf1[0]:.3f} (difference {b0:+.3f}) and t0=T: {bf1[T]:.3f} (difference "
                f"{bT:+.3f}); {pct} paired t over {n_s} seeds, averaged over {config.n_refine} "
                "refinements",
            ),
            enough,
        ),
    ]
    scale = paper_scale(config)  # below FULL's scale a verdict is inconclusive
    return m, [at_scale(c, scale) for c in claims]


def _figure(m, t0s, T, seeds=()):
    """Each metric against t0: the mean over seeds (line) and each seed (dots)."""
    shown = ("voi", "arand", "cremi", "boundary_f1", "emb_mse")
    fig, axes = plt.subplots(1, len(shown), figsize=(4 * len(shown), 3.4))
    for ax, metric in zip(axes, shown, strict=True):
        ax.plot(t0s, [m[f"{metric}_t0_{t}"] for t in t0s], "o-")
        for seed in seeds if len(seeds) > 1 else ():
            ax.plot(t0s, [m[f"{metric}_t0_{t}_s{seed}"] for t in t0s], "k.", ms=3, alpha=0.6)
        ax.set_xlabel("t0 (partial-diffusion start step)")
        ax.set_title(metric.upper() + (" to HR embedding" if metric == "emb_mse" else ""))
        ax.axvline(m["t0_trained"], color="grey", ls=":", lw=1)
        ax.axvline(T, color="k", ls="--", lw=0.8)
    fig.suptitle(
        "P11 partial-diffusion ablation (t0 = 0: SR embedding; t0 = T: from noise; "
        f"dotted: t0 used in training; {len(seeds) or 1} seed(s), dots: seeds) — synthetic EM"
    )
    fig.tight_layout()
    return fig


def _prior_figure(priors, hr_emb, i: int = 0, channel: int = 0):
    t0s = list(priors)
    fig, ax = plt.subplots(1, len(t0s) + 1, figsize=(2.2 * (len(t0s) + 1), 2.6))
    for a, t0 in zip(ax, t0s, strict=False):
        a.imshow(priors[t0][i, ..., channel], cmap="magma", vmin=-2, vmax=3)
        a.set_title(f"prior t0={t0}", fontsize=9)
    ax[-1].imshow(hr_emb[i, ..., channel], cmap="magma", vmin=-2, vmax=3)
    ax[-1].set_title("HR embedding", fontsize=9)
    for a in ax:
        a.axis("off")
    fig.suptitle(f"channel {channel} of the refined structural prior (embedding space) vs t0")
    fig.tight_layout()
    return fig
