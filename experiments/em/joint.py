"""P11: joint EM SR + segmentation vs bicubic / separate baselines, and the refiner's effect."""

from __future__ import annotations

import dataclasses

import jax
import matplotlib.pyplot as plt
import numpy as np

from experiments._harness import Claim, Result, RunContext, log, t_interval
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

    One training seed per setting; each claim's gap carries a `level` paired t interval
    over the `n_test` held-out images (test-image variation, not training variation)."""

    # (factor, regime) pairs
    settings: tuple[tuple[int, str], ...] = ((2, MAIN_REGIME), (4, MAIN_REGIME), (4, "noisy"))
    n_test: int = 24
    level: float = 0.95


QUICK = Config()
FULL = Config(
    **FULL_OVERRIDES,
    settings=tuple((f, r) for r in (MAIN_REGIME, "dense", "noisy") for f in (2, 4)),
)


def _suffix(factor: int, regime: str) -> str:
    return f"x{factor}" if regime == MAIN_REGIME else f"x{factor}_{regime}"


def metric_keys(config) -> list[str]:
    """The contract keys `run(config, ...)` writes: `<metric>_<method>_x<k>[_<regime>]`."""
    return [
        f"{metric}_{meth}_{_suffix(int(f), r)}"
        for f, r in config.settings
        for meth in METHODS
        for metric in METRICS
    ]


def _fmt(m, metric, suffix, methods=("separate", "joint", "joint_diffusion")):
    return ", ".join(f"{k}={m[f'{metric}_{k}_{suffix}']:.3f}" for k in methods)


def run(config, key: jax.Array, ctx: RunContext) -> Result:
    m: dict[str, float] = {}
    per_image: dict[str, np.ndarray] = {}
    figures = {}
    suffixes = []
    opt = optimizer(config)
    for i, (factor, regime) in enumerate(config.settings):
        factor = int(factor)
        sfx = _suffix(factor, regime)
        suffixes.append(sfx)
        k_train, k_test, k_fit, k_pred = jax.random.split(jax.random.fold_in(key, i), 4)
        size, noise = int(config.size), float(config.lr_noise)
        train = make_split(regime, factor, int(config.n_train), size, noise, key=k_train)
        test = make_split(regime, factor, int(config.n_test), size, noise, key=k_test)
        tr = train_methods(train, factor, config, k_fit, ctx, f"{regime}_x{factor}", opt)
        preds = {meth: predict(tr, test, meth, k_pred) for meth in METHODS}
        for meth, pred in preds.items():
            sc = image_scores(pred, test)
            for metric, v in sc.items():
                m[f"{metric}_{meth}_{sfx}"] = float(v.mean())
                per_image[f"{metric}_{meth}_{sfx}"] = v
            log.info("em_joint %s %s: %s", sfx, meth, {k: float(v.mean()) for k, v in sc.items()})
        for name, ls in tr.losses.items():
            m[f"final_loss_{name}_{sfx}"] = float(np.mean(ls[-20:]))
        if (regime == MAIN_REGIME and factor == 4) or "samples" not in figures:
            figures["samples"] = sample_figure(test, preds, f"{regime} x{factor}")

    def gap(metric, a, b, s):
        """Mean and paired t interval over test images of metric(a) - metric(b)."""
        t = t_interval(per_image[f"{metric}_{a}_{s}"] - per_image[f"{metric}_{b}_{s}"], level)
        for name, v in zip(("", "_lo", "_hi"), t, strict=True):
            m[f"gap_{metric}_{a}_vs_{b}_{s}{name}"] = v
        return t

    level = float(config.level)

    def ci(t):
        return f"{t[0]:+.3f} [{t[1]:+.3f}, {t[2]:+.3f}]"

    def psnr_holds(s):  # the interval lies above 0
        return gap("psnr", "joint", "separate", s)[1] > 0

    def refiner_holds(s):  # both intervals lie below 0
        return (
            gap("voi", "joint_diffusion", "joint", s)[2] < 0
            and gap("arand", "joint_diffusion", "joint", s)[2] < 0
        )

    def psnr_text(s):
        return (
            f"{s}: PSNR {_fmt(m, 'psnr', s, ('separate', 'joint'))} dB (joint - separate "
            f"{ci(gap('psnr', 'joint', 'separate', s))})"
        )

    def refiner_text(s):
        return (
            f"{s}: VOI {_fmt(m, 'voi', s, ('joint', 'joint_diffusion'))} (diffusion - joint "
            f"{ci(gap('voi', 'joint_diffusion', 'joint', s))}), ARAND "
            f"{_fmt(m, 'arand', s, ('joint', 'joint_diffusion'))} "
            f"({ci(gap('arand', 'joint_diffusion', 'joint', s))}), boundary F1 "
            f"{_fmt(m, 'boundary_f1', s, ('joint', 'joint_diffusion'))} "
            f"({ci(gap('boundary_f1', 'joint_diffusion', 'joint', s))})"
        )

    pct, n_img = f"{level:.0%}", int(config.n_test)
    how = (
        f"; {pct} paired t intervals over {n_img} held-out images, one training seed "
        f"(null: no difference)"
    )

    main = [s for s in suffixes if "_" not in s]
    extra = [s for s in suffixes if "_" in s]
    claims = [
        Claim(
            "segmentation as an auxiliary task (shared encoder) improves SR: joint PSNR > "
            "separate SR PSNR",
            "joint SR beats SR-only in PSNR/SSIM",
            "; ".join(psnr_text(s) for s in main) + how,
            all(psnr_holds(s) for s in main),
        ),
        Claim(
            "the partial-diffusion refiner lowers VOI and ARAND vs the joint model",
            "full model segments better than joint without refiner",
            "; ".join(refiner_text(s) for s in main)
            + how
            + "; the refiner works in the joint model's learned embedding (Embedder head on "
            "the shared encoder), E(SR) -> E(HR) of the frozen base model; both methods get "
            "the same base training and fine-tuning steps",
            all(refiner_holds(s) for s in main),
        ),
        Claim(
            "both gains hold across degradation settings and generator regimes",
            "consistent over data sets and degradations",
            f"PSNR gain in {sum(map(psnr_holds, suffixes))}/{len(suffixes)}, refiner gain "
            f"in {sum(map(refiner_holds, suffixes))}/{len(suffixes)} settings "
            f"({', '.join(suffixes)}; each gap's {pct} paired t interval over {n_img} "
            "images excludes 0); extra regimes: "
            + "; ".join(f"{psnr_text(s)}; {refiner_text(s)}" for s in extra),
            bool(extra) and all(psnr_holds(s) and refiner_holds(s) for s in suffixes),
        ),
    ]
    missing = set(metric_keys(config)) - set(m)
    if missing:
        raise RuntimeError(f"em_joint: contract keys not written: {sorted(missing)}")
    figures["metrics"] = _bar_figure(m, suffixes)
    return Result(metrics=m, claims=claims, figures=figures, notes=NOTES)


def _bar_figure(m, suffixes):
    fig, axes = plt.subplots(1, len(METRICS), figsize=(4 * len(METRICS), 3.6))
    x = np.arange(len(suffixes))
    w = 0.8 / len(METHODS)
    for ax, metric in zip(axes, METRICS, strict=True):
        for j, meth in enumerate(METHODS):
            ax.bar(
                x + (j - 1.5) * w,
                [m[f"{metric}_{meth}_{s}"] for s in suffixes],
                w,
                label=meth,
                color=f"C{j}",
            )
        ax.set_xticks(x, suffixes, rotation=15)
        better = "higher" if metric in HIGHER_IS_BETTER else "lower"
        ax.set_title(f"{metric.upper()} ({better} better)")
        if metric in ("psnr", "ssim"):
            lo = min(m[f"{metric}_{meth}_{s}"] for meth in METHODS for s in suffixes)
            hi = max(m[f"{metric}_{meth}_{s}"] for meth in METHODS for s in suffixes)
            ax.set_ylim(lo - 0.1 * (hi - lo + 1e-9), hi + 0.1 * (hi - lo + 1e-9))
    axes[0].legend(fontsize=8)
    fig.suptitle("P11 on synthetic EM: SR fidelity and instance-segmentation errors")
    fig.tight_layout()
    return fig
