"""P11: joint EM SR + segmentation vs bicubic / separate baselines, and the refiner's effect."""

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
from experiments.em._setup import (
    FULL_OVERRIDES,
    HIGHER_IS_BETTER,
    METHODS,
    METRICS,
    NOTES,
    EmConfig,
    image_scores,
    make_split,
    optimizer,
    paper_scale,
    predict,
    sample_figure,
    train_methods,
)

NAME = "em_joint"
PAPER = "P11"
DESCRIPTION = (
    "PSNR/SSIM and VOI/ARAND/CREMI of bicubic, separate, joint and joint+partial-"
    "diffusion SR + segmentation on synthetic EM at x2/x4"
)
MAIN_REGIME = "cremi_like"


@dataclasses.dataclass(frozen=True)
class Config(EmConfig):
    """Settings of one run; the defaults are QUICK (2 CPU cores, minutes).

    Each of `seeds` trains its own models on its own training and `n_test` test images
    per setting; each claim's gap carries a `level` paired t interval over the seeds'
    mean gaps (training and test variation). A one-seed run falls back to the paired t
    interval over its test images (test variation only) and says so."""

    # (factor, regime) pairs
    settings: tuple[tuple[int, str], ...] = ((2, MAIN_REGIME), (4, MAIN_REGIME), (4, "noisy"))
    n_test: int = 24
    seeds: tuple[int, ...] = (0, 1, 2)
    level: float = 0.95


QUICK = Config()
# the smoke tier: QUICK's three settings, tiny models, two seeds (the paired intervals)
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
    seeds=(0, 1),
)
FULL = Config(
    **FULL_OVERRIDES,
    settings=tuple((f, r) for r in (MAIN_REGIME, "dense", "noisy") for f in (2, 4)),
)


def _suffix(factor: int, regime: str) -> str:
    return f"x{factor}" if regime == MAIN_REGIME else f"x{factor}_{regime}"


def metric_keys(config) -> list[str]:
    """The contract keys `run(config, ...)` writes: `<metric>_<method>_x<k>[_<regime>]`
    (means over seeds; `..._s<seed>` holds each seed's value)."""
    return [
        f"{metric}_{meth}_{_suffix(int(f), r)}"
        for f, r in config.settings
        for meth in METHODS
        for metric in METRICS
    ]


def _fmt(m, metric, suffix, methods=("separate", "joint", "joint_diffusion")):
    return ", ".join(f"{k}={m[f'{metric}_{k}_{suffix}']:.3f}" for k in methods)


def run(config, key: jax.Array, ctx: RunContext) -> Result:
    per_seed: dict[str, float] = {}
    per_image: dict[str, np.ndarray] = {}
    figures = {}
    opt = optimizer(config)
    seeds = [int(s) for s in config.seeds]
    size, noise = int(config.size), float(config.lr_noise)
    if not seeds or len(set(seeds)) != len(seeds):
        raise ValueError(f"seeds: expected distinct seeds, received {config.seeds!r}")
    for i, (factor, regime) in enumerate(config.settings):
        factor = int(factor)
        sfx = _suffix(factor, regime)
        for seed in seeds:
            # seed 0 keeps the key (and checkpoint tag) of the one-seed run
            k_set = jax.random.fold_in(key, i)
            k_set = k_set if seed == 0 else jax.random.fold_in(k_set, seed)
            k_train, k_test, k_fit, k_pred = jax.random.split(k_set, 4)
            train = make_split(regime, factor, int(config.n_train), size, noise, key=k_train)
            test = make_split(regime, factor, int(config.n_test), size, noise, key=k_test)
            tag = f"{regime}_x{factor}" + (f"_s{seed}" if seed else "")
            tr = train_methods(train, factor, config, k_fit, ctx, tag, opt)
            preds = {meth: predict(tr, test, meth, k_pred) for meth in METHODS}
            for meth, pred in preds.items():
                sc = image_scores(pred, test)
                for metric, v in sc.items():
                    per_seed[f"{metric}_{meth}_{sfx}_s{seed}"] = float(v.mean())
                    if len(seeds) == 1:
                        per_image[f"{metric}_{meth}_{sfx}"] = v
                log.info(
                    "em_joint %s seed %d %s: %s",
                    sfx,
                    seed,
                    meth,
                    {k: float(v.mean()) for k, v in sc.items()},
                )
            for name, ls in tr.losses.items():
                per_seed[f"final_loss_{name}_{sfx}_s{seed}"] = float(np.mean(ls[-20:]))
            first = seed == seeds[0]
            if first and ((regime == MAIN_REGIME and factor == 4) or "samples" not in figures):
                figures["samples"] = sample_figure(test, preds, f"{regime} x{factor}")
    m, claims = seed_summary(config, per_seed, per_image or None)
    missing = set(metric_keys(config)) - set(m)
    if missing:
        raise RuntimeError(f"em_joint: contract keys not written: {sorted(missing)}")
    figures["metrics"] = _bar_figure(m, [_suffix(int(f), r) for f, r in config.settings], seeds)
    return Result(metrics=m, claims=claims, figures=figures, notes=NOTES)


def seed_summary(
    config, per_seed: dict[str, float], per_image: dict[str, np.ndarray] | None = None
) -> tuple[dict[str, float | Estimate], list[Claim]]:
    """Metrics and claims of a run from its per-seed values.

    `per_seed` holds `<metric>_<method>_<setting>_s<seed>` (each seed's mean over its test
    images) and `final_loss_<model>_<setting>_s<seed>` for every seed of `config.seeds`;
    merged metrics of single-seed runs (`--set 'seeds=[s]'`) give the same result as one
    run over all seeds. With one seed, `per_image` (`<metric>_<method>_<setting>` ->
    per-image scores) gives the intervals over test images instead.

    **Returns:** `(metrics, claims)`: per-seed values, their means over seeds (the contract
    keys), every gap's mean and `level` paired t interval, and the claims.
    """
    seeds = [int(s) for s in config.seeds]
    suffixes = [_suffix(int(f), r) for f, r in config.settings]
    level = float(config.level)
    if len(seeds) < 2 and per_image is None:
        raise ValueError("per_image: required for a one-seed run (intervals over images)")
    m: dict[str, float | Estimate] = {}
    stems = sorted({k.rsplit("_s", 1)[0] for k in per_seed if k.endswith(f"_s{seeds[0]}")})
    for stem in stems:
        vals = [per_seed[f"{stem}_s{seed}"] for seed in seeds]
        m[stem] = float(np.mean(vals))
        m.update({f"{stem}_s{seed}": float(v) for seed, v in zip(seeds, vals, strict=True)})

    def gap(metric, a, b, s) -> Estimate:
        """Mean and paired t interval of metric(a) - metric(b): over seeds (>= 2 seeds) or
        over the one seed's test images."""
        if len(seeds) >= 2:
            av = [m[f"{metric}_{a}_{s}_s{seed}"] for seed in seeds]
            bv = [m[f"{metric}_{b}_{s}_s{seed}"] for seed in seeds]
        else:
            av = per_image[f"{metric}_{a}_{s}"]  # type: ignore[index]
            bv = per_image[f"{metric}_{b}_{s}"]  # type: ignore[index]
        return paired_t(av, bv, level)

    gaps: dict[str, Estimate] = {}
    for s in suffixes:
        gaps[f"gap_psnr_joint_vs_separate_{s}"] = gap("psnr", "joint", "separate", s)
        for metric in ("voi", "arand", "boundary_f1"):
            gaps[f"gap_{metric}_joint_diffusion_vs_joint_{s}"] = gap(
                metric, "joint_diffusion", "joint", s
            )

    def psnr_claim(s):  # joint - separate PSNR: the interval lies above 0
        return superior(
            gaps[f"gap_psnr_joint_vs_separate_{s}"],
            "joint SR + segmentation",
            "separate SR",
            claim=f"{s}: joint PSNR > separate SR PSNR",
            paper="joint SR beats SR-only in PSNR/SSIM",
        )

    def refiner_claims(s):  # diffusion - joint VOI and ARAND: both intervals lie below 0
        return {
            f"{metric} {s}": superior(
                gaps[f"gap_{metric}_joint_diffusion_vs_joint_{s}"],
                "joint + partial-diffusion refiner",
                "joint model without refiner",
                claim=f"{s}: the refiner lowers {metric.upper()}",
                paper="full model segments better than joint without refiner",
                higher_is_better=False,
            )
            for metric in ("voi", "arand")
        }

    def psnr_text(s):
        g = gaps[f"gap_psnr_joint_vs_separate_{s}"]
        return (
            f"{s}: PSNR {_fmt(m, 'psnr', s, ('separate', 'joint'))} dB (joint - separate {g:+.3f})"
        )

    def refiner_text(s):
        g = {k: gaps[f"gap_{k}_joint_diffusion_vs_joint_{s}"] for k in ("voi", "arand")}
        f1 = gaps[f"gap_boundary_f1_joint_diffusion_vs_joint_{s}"]
        return (
            f"{s}: VOI {_fmt(m, 'voi', s, ('joint', 'joint_diffusion'))} (diffusion - joint "
            f"{g['voi']:+.3f}), ARAND "
            f"{_fmt(m, 'arand', s, ('joint', 'joint_diffusion'))} "
            f"({g['arand']:+.3f}), boundary F1 "
            f"{_fmt(m, 'boundary_f1', s, ('joint', 'joint_diffusion'))} "
            f"({f1:+.3f})"
        )

    pct, n_img = f"{level:.0%}", int(config.n_test)
    if len(seeds) >= 2:
        over = (
            f"{pct} paired t intervals over {len(seeds)} seeds (each its own training and "
            f"{n_img} test images; seed means compared)"
        )
    else:
        over = f"{pct} paired t intervals over {n_img} held-out images, one training seed"
    how = f"; {over} (null: no difference)"
    main = [s for s in suffixes if "_" not in s]
    extra = [s for s in suffixes if "_" in s]
    every = {f"psnr {s}": psnr_claim(s) for s in suffixes}
    for s in suffixes:
        every.update(refiner_claims(s))
    claims = [
        all_of(
            {f"psnr {s}": every[f"psnr {s}"] for s in main},
            claim="segmentation as an auxiliary task (shared encoder) improves SR: joint PSNR > "
            "separate SR PSNR",
            paper="joint SR beats SR-only in PSNR/SSIM",
            detail="; ".join(psnr_text(s) for s in main) + how,
        ),
        all_of(
            {k: every[k] for s in main for k in refiner_claims(s)},
            claim="the partial-diffusion refiner lowers VOI and ARAND vs the joint model",
            paper="full model segments better than joint without refiner",
            detail="; ".join(refiner_text(s) for s in main)
            + how
            + "; the refiner works in the joint model's learned embedding (Embedder head on "
            "the shared encoder), E(SR) -> E(HR) of the frozen base model; both methods get "
            "the same base training and fine-tuning steps",
        ),
        gated(
            all_of(
                every,
                claim="both gains hold across degradation settings and generator regimes",
                paper="consistent over data sets and degradations",
                detail=f"PSNR gain in {sum(every[f'psnr {s}'].holds for s in suffixes)}/"
                f"{len(suffixes)}, refiner gain in "
                f"{sum(all(c.holds for c in refiner_claims(s).values()) for s in suffixes)}/"
                f"{len(suffixes)} settings ({', '.join(suffixes)}; {over}); extra regimes: "
                + "; ".join(f"{psnr_text(s)}; {refiner_text(s)}" for s in extra),
            ),
            Precondition(
                "settings include a regime beyond the main one",
                bool(extra),
                f"settings {', '.join(suffixes)}",
            ),
        ),
    ]
    m.update(gaps)
    scale = paper_scale(config)  # below FULL's scale a verdict is inconclusive
    return m, [at_scale(c, scale) for c in claims]


def _bar_figure(m, suffixes, seeds):
    """Bars: means over seeds; dots: each seed's value."""
    fig, axes = plt.subplots(1, len(METRICS), figsize=(4 * len(METRICS), 3.6))
    x = np.arange(len(suffixes))
    w = 0.8 / len(METHODS)
    for ax, metric in zip(axes, METRICS, strict=True):
        for j, meth in enumerate(METHODS):
            xs = x + (j - 1.5) * w
            ax.bar(xs, [m[f"{metric}_{meth}_{s}"] for s in suffixes], w, label=meth, color=f"C{j}")
            if len(seeds) > 1:
                for seed in seeds:
                    ys = [m[f"{metric}_{meth}_{s}_s{seed}"] for s in suffixes]
                    ax.plot(xs, ys, "k.", ms=3)
        ax.set_xticks(x, suffixes, rotation=15)
        better = "higher" if metric in HIGHER_IS_BETTER else "lower"
        ax.set_title(f"{metric.upper()} ({better} better)")
        if metric in ("psnr", "ssim"):
            vals = [m[k] for k in m if k.startswith(f"{metric}_") and not k.startswith("gap")]
            lo, hi = min(vals), max(vals)
            ax.set_ylim(lo - 0.1 * (hi - lo + 1e-9), hi + 0.1 * (hi - lo + 1e-9))
    axes[0].legend(fontsize=8)
    n = f"{len(seeds)} seeds: bars = mean, dots = seeds" if len(seeds) > 1 else "one seed"
    fig.suptitle(f"P11 on synthetic EM: SR fidelity and instance-segmentation errors ({n})")
    fig.tight_layout()
    return fig
