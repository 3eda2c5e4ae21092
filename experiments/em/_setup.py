"""Shared data, training and evaluation of the P11 em experiments.

Synthetic data only (no EM of neural tissue ships offline): `jaxlab.em.generate_em_dataset`
images with instance labels and membrane maps, degraded x2 / x4 by `jaxlab.em.degrade`.
Four methods, all trained with the one loop `jaxlab.em.fit` and evaluated by watershed
instance segmentation of the predicted boundary probabilities against the GT labels:

- `bicubic`: bicubic upsampling + a segmentation-only U-Net trained on bicubic images;
- `separate`: an SR-only U-Net, then a segmentation-only U-Net trained on its outputs;
- `joint`: shared encoder + SR and segmentation decoders (no refiner);
- `joint_diffusion`: the joint model whose segmentation decoder is guided by the
  partial-diffusion refinement (from step t0) of its SR embedding.

`joint` and `joint_diffusion` get the same number of steps: both start from one joint
model trained for `steps`; `joint` continues for `finetune_steps`, `joint_diffusion`
fine-tunes for `finetune_steps` with refined priors (precomputed once per training image).
"""

from __future__ import annotations

import dataclasses
from typing import Any

import jax
import jax.numpy as jnp
import matplotlib.pyplot as plt
import numpy as np

from experiments._harness import RunContext, log
from jaxlab import em

METHODS = ("bicubic", "separate", "joint", "joint_diffusion")
METRICS = ("psnr", "ssim", "voi", "arand", "cremi")

BASE_QUICK = {
    "size": 64, "n_train": 96, "n_test": 12, "lr_noise": 0.01,
    "features": [16, 32], "seg_features": [16, 32, 64], "denoiser_features": 16,
    "steps": 300, "finetune_steps": 100, "denoiser_steps": 300, "batch_size": 8,
    "learning_rate": 2e-3, "seg_weight": 0.5, "T": 100, "schedule": "linear", "t0": 30,
    "refine_steps": 5, "chunk": 50, "progress": False,
}
FULL_OVERRIDES = {
    "size": 128, "n_train": 512, "n_test": 48, "features": [32, 64, 128],
    "seg_features": [32, 64, 128, 256], "denoiser_features": 48, "steps": 4000,
    "finetune_steps": 1000, "denoiser_steps": 4000, "batch_size": 16, "learning_rate": 1e-3,
    "T": 200, "t0": 60, "refine_steps": 10, "chunk": 250, "progress": True,
}

NOTES = ("All data are SYNTHETIC: jaxlab.em.generate_em_dataset renders EM-like neural "
         "tissue (curved power-diagram tessellation with jittered membranes of varying "
         "thickness, mitochondria, vesicles, texture, blur, noise) with exact instance "
         "labels; low-resolution inputs come from jaxlab.em.degrade (anti-alias blur, area "
         "downsampling, read noise). No real EM volume was used; the paper's data sets "
         "(CREMI, AC3/AC4 ...) are not reproduced and numbers are not comparable to it. "
         "The refiner's embedding space is jaxlab.em.structure_embedding (standardised "
         "intensity, ridge and gradient-magnitude maps), in which SR and HR images are "
         "comparable; the denoiser is trained to map noised SR embeddings to HR ones. "
         "Instances: jaxlab.em.segment_watershed on sigmoid(boundary logits); metrics "
         "averaged over held-out generated images; one seed, small CPU-sized training.")


@dataclasses.dataclass
class Split:
    """Images `(N, S, S)`, LR `(N, S/f, S/f)`, bicubic `(N, S, S)`, boundaries, labels."""

    hr: jax.Array
    lr: jax.Array
    bicubic: jax.Array
    boundary: jax.Array
    labels: np.ndarray


def make_split(regime: str, factor: int, n: int, size: int, noise: float, *,
               key: jax.Array) -> Split:
    """`n` generated images of `regime` and their x`factor` degradations."""
    kg, kd = jax.random.split(key)
    s = em.generate_em_dataset(regime, n, size, key=kg)
    lr = jax.vmap(lambda im, k: em.degrade(im, factor, key=k, noise_sigma=noise))(
        s.image, jax.random.split(kd, n))
    bic = jax.vmap(lambda x: em.upsample_bicubic(x, factor))(lr)
    return Split(s.image, lr, bic, s.boundaries, np.asarray(s.labels))


def _features(config, name="features") -> tuple[int, ...]:
    return tuple(int(f) for f in config[name])


def _fit(objective, params, data, config, key, ctx: RunContext, tag: str,
         steps_key: str = "steps"):
    ckpt = ctx.checkpointer(tag)
    steps = int(config[steps_key])
    log.info("em: training %s for %d steps", tag, steps)
    params, losses = em.fit(objective, params, data, key=key, steps=steps,
                            batch_size=int(config["batch_size"]),
                            learning_rate=float(config["learning_rate"]),
                            chunk=int(config["chunk"]), checkpoint=ckpt.path,
                            resume=ckpt.resume,
                            progress=bool(config["progress"]), desc=f"em {tag}")
    return params, losses


@dataclasses.dataclass
class Trained:
    """All trained models of one setting (factor, regime)."""

    factor: int
    sr_net: em.SRNet
    seg_net: em.SegNet
    joint_net: em.JointSRSeg
    denoiser: em.Denoiser
    schedule: em.NoiseSchedule
    params: dict[str, Any]
    losses: dict[str, np.ndarray]


def _batched_apply(fn, x, batch: int = 16):
    return jnp.concatenate([fn(x[i:i + batch]) for i in range(0, x.shape[0], batch)])


def train_methods(train: Split, factor: int, config, key: jax.Array, ctx: RunContext,
                  tag: str, methods=METHODS) -> Trained:
    """Train every model the requested `methods` need on `train` (see module doc)."""
    feats, seg_feats = _features(config), _features(config, "seg_features")
    sr_net = em.SRNet(factor, feats)
    seg_net = em.SegNet(seg_feats)
    joint_net = em.JointSRSeg(factor, feats)
    T = int(config["T"])
    denoiser = em.Denoiser(T, int(config["denoiser_features"]), config["schedule"])
    schedule = em.make_schedule(config["schedule"], T)
    ks = jax.random.split(key, 12)
    x0 = train.lr[:1]
    params: dict[str, Any] = {}
    losses: dict[str, np.ndarray] = {}
    if "bicubic" in methods:
        p = em.init_params(seg_net, train.bicubic[:1], key=ks[0])
        params["seg_bicubic"], losses["seg_bicubic"] = _fit(
            em.SegObjective(seg_net), p, {"image": train.bicubic, "boundary": train.boundary},
            config, ks[1], ctx, f"{tag}_seg_bicubic")
    if "separate" in methods:
        p = em.init_params(sr_net, x0, key=ks[2])
        params["sr"], losses["sr"] = _fit(em.SRObjective(sr_net), p,
                                          {"lr": train.lr, "hr": train.hr}, config, ks[3], ctx,
                                          f"{tag}_sr")
        sr_train = _batched_apply(jax.jit(lambda x: sr_net.apply(params["sr"], x)), train.lr)
        p = em.init_params(seg_net, train.bicubic[:1], key=ks[4])
        params["seg_separate"], losses["seg_separate"] = _fit(
            em.SegObjective(seg_net), p, {"image": sr_train, "boundary": train.boundary},
            config, ks[5], ctx, f"{tag}_seg_separate")
    if "joint" in methods or "joint_diffusion" in methods:
        objective = em.JointObjective(joint_net, float(config["seg_weight"]))
        data = {"lr": train.lr, "hr": train.hr, "boundary": train.boundary}
        p = em.init_params(joint_net, x0, key=ks[6])
        base, losses["joint_base"] = _fit(objective, p, data, config, ks[7], ctx, f"{tag}_joint")
        if "joint" in methods:
            params["joint"], losses["joint"] = _fit(objective, base, data, config, ks[8], ctx,
                                                    f"{tag}_joint_ft", "finetune_steps")
        if "joint_diffusion" in methods:
            apply = jax.jit(lambda x: joint_net.apply(base, x).embedding)
            cond = _batched_apply(apply, train.lr)
            target = em.structure_embedding(train.hr)
            p = em.init_params(denoiser, cond[:1], jnp.ones((1,), jnp.int32), cond[:1], key=ks[9])
            params["denoiser"], losses["denoiser"] = _fit(
                em.DenoiserObjective(denoiser), p,
                {"cond": cond, "target": target}, config, ks[10], ctx, f"{tag}_denoiser",
                "denoiser_steps")
            prior = refine(denoiser, params["denoiser"], schedule, cond, int(config["t0"]),
                           int(config["refine_steps"]), ks[11])
            params["joint_diffusion"], losses["joint_diffusion"] = _fit(
                objective, base, {**data, "prior": prior}, config, jax.random.fold_in(ks[8], 1),
                ctx, f"{tag}_joint_diffusion_ft", "finetune_steps")
    return Trained(factor, sr_net, seg_net, joint_net, denoiser, schedule, params, losses)


def refine(denoiser, dparams, schedule, cond, t0: int, n_steps: int, key) -> jax.Array:
    """`em.refine_embedding` over a data set, in jitted batches."""
    fn = jax.jit(lambda z, k: em.refine_embedding(denoiser, dparams, schedule, z, t0=t0,
                                                  n_steps=n_steps, key=k))
    out, b = [], 16
    for i in range(0, cond.shape[0], b):
        out.append(fn(cond[i:i + b], jax.random.fold_in(key, i)))
    return jnp.concatenate(out)


@dataclasses.dataclass
class Prediction:
    sr: np.ndarray  # (N, S, S) clipped to [0, 1]
    prob: np.ndarray  # (N, S, S) boundary probabilities
    instances: np.ndarray  # (N, S, S) watershed labels
    prior: Any = None  # (N, S, S, C) refined structural prior (joint_diffusion only)


def _predict(sr, logits) -> Prediction:
    sr = np.clip(np.asarray(sr, np.float64), 0.0, 1.0)
    prob = np.asarray(jax.nn.sigmoid(logits), np.float64)
    inst = np.stack([em.segment_watershed(p) for p in prob])
    return Prediction(sr, prob, inst)


def predict(tr: Trained, test: Split, method: str, config: dict, key: jax.Array,
            t0: int | None = None) -> Prediction:
    """SR image, boundary probabilities and watershed instances of `method` on `test`."""
    p = tr.params
    if method == "bicubic":
        logits = _batched_apply(jax.jit(lambda x: tr.seg_net.apply(p["seg_bicubic"], x)),
                                test.bicubic)
        return _predict(test.bicubic, logits)
    if method == "separate":
        sr = _batched_apply(jax.jit(lambda x: tr.sr_net.apply(p["sr"], x)), test.lr)
        logits = _batched_apply(jax.jit(lambda x: tr.seg_net.apply(p["seg_separate"], x)), sr)
        return _predict(sr, logits)
    if method == "joint":
        out = tr.joint_net.apply(p["joint"], test.lr)
        return _predict(out.sr, out.boundary_logits)
    if method == "joint_diffusion":
        jp = p["joint_diffusion"]
        out = tr.joint_net.apply(jp, test.lr)
        t0 = int(config["t0"]) if t0 is None else t0
        prior = refine(tr.denoiser, p["denoiser"], tr.schedule, out.embedding, t0,
                       int(config["refine_steps"]), key)
        logits = tr.joint_net.apply(jp, test.lr, prior).boundary_logits
        pred = _predict(out.sr, logits)
        return dataclasses.replace(pred, prior=prior)
    raise ValueError(f"method: expected one of {METHODS}, received {method!r}")


def scores(pred: Prediction, test: Split) -> dict[str, float]:
    """Mean PSNR, SSIM, VOI (split + merge), ARAND and CREMI score over the test images."""
    hr = np.asarray(test.hr, np.float64)
    rows = []
    for i in range(hr.shape[0]):
        seg = em.segmentation_scores(pred.instances[i], test.labels[i])
        rows.append({"psnr": em.psnr(pred.sr[i], hr[i]), "ssim": em.ssim(pred.sr[i], hr[i]),
                     "voi": seg["voi"], "voi_split": seg["voi_split"],
                     "voi_merge": seg["voi_merge"], "arand": seg["arand"],
                     "cremi": seg["cremi"]})
    return {k: float(np.mean([r[k] for r in rows])) for k in rows[0]}


def sample_figure(test: Split, preds: dict[str, Prediction], title: str, i: int = 0):
    """Rows: images (LR, bicubic, SR per method, GT), boundary maps, watershed instances."""
    names = list(preds)
    ncol = len(names) + 2
    fig, ax = plt.subplots(3, ncol, figsize=(2.3 * ncol, 7.2))
    ax[0, 0].imshow(np.asarray(test.lr[i]), cmap="gray", vmin=0, vmax=1)
    ax[0, 0].set_title("LR input")
    for j, m in enumerate(names):
        ax[0, j + 1].imshow(preds[m].sr[i], cmap="gray", vmin=0, vmax=1)
        ax[0, j + 1].set_title("bicubic" if m == "bicubic" else f"SR {m}", fontsize=9)
        ax[1, j + 1].imshow(preds[m].prob[i], cmap="magma", vmin=0, vmax=1)
        ax[1, j + 1].set_title(f"P(boundary) {m}", fontsize=9)
        ax[2, j + 1].imshow(preds[m].instances[i] % 20, cmap="tab20", interpolation="nearest")
        ax[2, j + 1].set_title(f"watershed {m}", fontsize=9)
    ax[0, -1].imshow(np.asarray(test.hr[i]), cmap="gray", vmin=0, vmax=1)
    ax[0, -1].set_title("GT HR")
    ax[1, 0].imshow(np.asarray(test.boundary[i]), cmap="magma", vmin=0, vmax=1)
    ax[1, 0].set_title("GT boundaries")
    ax[2, 0].imshow(test.labels[i] % 20, cmap="tab20", interpolation="nearest")
    ax[2, 0].set_title("GT instances")
    for a in ax.ravel():
        a.axis("off")
    fig.suptitle(title + " (synthetic data)")
    fig.tight_layout()
    return fig
