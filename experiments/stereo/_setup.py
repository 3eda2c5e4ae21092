"""Shared pieces of the P15 face experiments: render (and reload) a face stereo set, train
(or reload) the learned matcher, run the stereo methods, convert disparities to depth and
read depth at landmark pixels."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import tempfile
import time

import jax
import jax.numpy as jnp
import numpy as np

from experiments._harness import RunContext, cache_dir, load_npz, log, save_npz
from jaxlab import Driver, TqdmProgress, load_checkpoint, save_checkpoint, stereo

METHODS = ("bm", "sgm_jaxlab", "sgbm_opencv", "raft")
# the wall-clock metrics of `trained_raft`'s info (the face experiments' TIMING_METRICS)
# wall-clock seconds, and whether the params came from the cache (a run resumed after its
# params were cached, or a rerun, reads them back): fields two runs of one seed need not share
RAFT_TIMING_METRICS = ("raft_render_s", "raft_train_s", "raft_cached")
RAFT_MODEL = (
    "raft_feature_dim",
    "raft_hidden_dim",
    "raft_context_dim",
    "raft_levels",
    "raft_radius",
    "raft_downsample",
)
RAFT_TRAIN = (
    "raft_n_train",
    "raft_steps",
    "raft_batch",
    "raft_iters",
    "raft_lr",
    "height",
    "width",
    "n_steps",
    "batch",
    "shard_size",
)


@dataclasses.dataclass(frozen=True)
class FaceStereoConfig:
    """QUICK settings shared by the P15 face experiments; `FULL_OVERRIDES` are the
    paper-scale values of FULL."""

    # matching
    n_disp: int = 48
    window: int = 5
    p1: float = 8.0
    p2: float = 32.0
    bm_radius: int = 2
    # rendering
    n_steps: int = 160
    shard_size: int = 16
    # the learned matcher, shared by stereo_faces and stereo_ipd (same cache tag)
    raft_feature_dim: int = 48
    raft_hidden_dim: int = 48
    raft_context_dim: int = 32
    raft_levels: int = 4
    raft_radius: int = 4
    raft_downsample: int = 4
    raft_iters: int = 6
    raft_n_train: int = 96
    raft_steps: int = 400
    raft_batch: int = 4
    raft_lr: float = 1e-3
    raft_checkpoint_every: int = 50
    # the evaluation set
    n_pairs: int = 24
    height: int = 96
    width: int = 128
    batch: int = 8


FULL_OVERRIDES = {
    "raft_feature_dim": 64,
    "raft_hidden_dim": 64,
    "raft_context_dim": 64,
    "raft_iters": 8,
    "raft_n_train": 2160,
    "raft_steps": 20000,
    "raft_batch": 8,
    "raft_checkpoint_every": 500,
    "n_pairs": 1080,
    "height": 240,
    "width": 320,
    "batch": 36,
    "n_disp": 112,
    "shard_size": 128,
}
GRAY = np.array([0.299, 0.587, 0.114])


def opencv_sgbm(
    left: np.ndarray, right: np.ndarray, n_disp: int, window: int, p1: float, p2: float
) -> np.ndarray:
    """OpenCV StereoSGBM, 8 paths (MODE_HH), P1/P2 scaled by the block area as OpenCV expects;
    pixels OpenCV marks invalid come back as NaN."""
    import cv2

    n16 = -(-n_disp // 16) * 16
    sg = cv2.StereoSGBM_create(
        minDisparity=0,
        numDisparities=n16,
        blockSize=window,
        P1=int(p1 * window * window),
        P2=int(p2 * window * window),
        mode=cv2.STEREO_SGBM_MODE_HH,
    )
    to8 = [(np.clip(a, 0, 1) * 255).astype(np.uint8) for a in (left, right)]
    d = sg.compute(to8[0], to8[1]).astype(np.float64) / 16.0
    return np.where(d < 0, np.nan, d)


def face_set(config, key) -> dict[str, np.ndarray]:
    """Render the set, write it as npz shards and read it back through the loader."""
    data = stereo.render_dataset(
        config.n_pairs,
        config.height,
        config.width,
        key=key,
        batch=config.batch,
        n_steps=config.n_steps,
    )
    with tempfile.TemporaryDirectory() as tmp:
        stereo.write_face_shards(
            tmp, data, shard_size=config.shard_size, configs=stereo.rig_configurations(config.width)
        )
        ds = stereo.FaceStereoDataset(tmp)
        out = ds.arrays()
    log.info("rendered %d face pairs %dx%d", len(ds), config.height, config.width)
    return out


def _raft_model(config) -> stereo.RAFTStereo:
    c = config
    return stereo.RAFTStereo(
        c.raft_feature_dim,
        c.raft_hidden_dim,
        c.raft_context_dim,
        c.raft_levels,
        c.raft_radius,
        c.raft_downsample,
    )


def _loss_summary(losses) -> dict[str, float]:
    if not len(losses):
        return {}
    return {
        "raft_loss_first10": float(np.mean(losses[:10])),
        "raft_loss_last10": float(np.mean(losses[-10:])),
    }


def trained_raft(config, key, ctx: RunContext) -> tuple[object, dict[str, float]]:
    """Train RAFT-Stereo-lite on a separately rendered training split (key folded away
    from the evaluation set's), or reload it: the final params are cached under
    `cache_dir("stereo")` as raft_<tag>.eqx (tag = hash of the model/training settings and
    the key), so stereo_ipd reuses what stereo_faces trained (and a rerun what it trained
    before; delete the file after changing the training code). Training checkpoints every
    raft_checkpoint_every steps in the run and resumes with --resume.
    Returns (predict(left, right) -> disparity, info)."""
    model = _raft_model(config)
    train_key = jax.random.fold_in(key, 0x5AF7)  # never the evaluation set's key
    settings = {k: getattr(config, k) for k in RAFT_MODEL + RAFT_TRAIN}
    tag = hashlib.sha256(
        json.dumps(settings, sort_keys=True).encode()
        + np.asarray(jax.random.key_data(train_key)).tobytes()
    ).hexdigest()[:12]
    cached = cache_dir("stereo") / f"raft_{tag}.eqx"
    # the training's losses and seconds, written before the params: a reused RAFT reports
    # the loss curve it was trained with, as the run that trained it did
    history = cached.with_suffix(".npz")
    like = stereo.init_raft(model, config.height, config.width, key=jax.random.key(0))
    info: dict[str, float] = {"raft_cached": 0.0}
    if cached.is_file():
        params = load_checkpoint(cached, like)
        log.info("RAFT params reused from %s", cached)
        info["raft_cached"] = 1.0
        saved = load_npz(history)
        if saved is not None:
            info["raft_render_s"] = float(saved["render_s"])
            info["raft_train_s"] = float(saved["train_s"])
            info |= _loss_summary(saved["losses"])
    else:
        t0 = time.perf_counter()
        train = face_set(dataclasses.replace(config, n_pairs=config.raft_n_train), train_key)
        info["raft_render_s"] = time.perf_counter() - t0
        t0 = time.perf_counter()
        ckpt = ctx.checkpointer(f"raft_train_{tag}", every=config.raft_checkpoint_every)
        params, hist = stereo.train_raft(
            model,
            train["left"],
            train["right"],
            train["disparity"],
            key=jax.random.fold_in(train_key, 1),
            steps=config.raft_steps,
            batch_size=config.raft_batch,
            n_iters=config.raft_iters,
            optimizer=stereo.raft_optimizer(config.raft_lr, 1e-5, config.raft_steps),
            driver=Driver(checkpointer=ckpt, progress=TqdmProgress(desc="stereo: RAFT training")),
        )
        losses = hist.losses
        info["raft_train_s"] = time.perf_counter() - t0
        info |= _loss_summary(losses)
        log.info(
            "RAFT: rendered %d training pairs in %.0f s, trained %d steps in %.0f s",
            config.raft_n_train,
            info["raft_render_s"],
            config.raft_steps,
            info["raft_train_s"],
        )
        save_npz(
            history,
            {
                "losses": np.asarray(losses),
                "render_s": np.asarray(info["raft_render_s"]),
                "train_s": np.asarray(info["raft_train_s"]),
            },
        )
        save_checkpoint(cached, params)
    return stereo.raft_predictor(model, params, n_iters=config.raft_iters), info


def predict_disparities(data, config, raft=None) -> dict[str, np.ndarray]:
    """Disparity maps (N, H, W) of each method (NaN = no estimate): BM and the SGMs on the
    gray images, the learned matcher `raft` (from `trained_raft`) on the colour images."""
    n, win, p1, p2 = config.n_disp, config.window, config.p1, config.p2
    cost = jax.jit(lambda a, b: stereo.census_cost_volume(a, b, n, win))
    bm = jax.jit(lambda a, b: stereo.block_matching(cost(a, b), config.bm_radius))
    sgm = jax.jit(lambda a, b: stereo.sgm_disparity(cost(a, b), p1, p2))
    left = data["left"] @ GRAY
    right = data["right"] @ GRAY
    out = {m: [] for m in METHODS if m != "raft" or raft is not None}
    for i in range(len(left)):
        if raft is not None:
            out["raft"].append(
                np.asarray(
                    raft(data["left"][i].astype(np.float32), data["right"][i].astype(np.float32))
                )
            )
        a, b = jnp.asarray(left[i], jnp.float32), jnp.asarray(right[i], jnp.float32)
        out["bm"].append(np.asarray(bm(a, b)))
        out["sgm_jaxlab"].append(np.asarray(sgm(a, b)))
        out["sgbm_opencv"].append(opencv_sgbm(left[i], right[i], n, win, p1, p2))
    return {m: np.stack(v).astype(np.float64) for m, v in out.items()}


def fill_invalid(disp: np.ndarray) -> np.ndarray:
    """Disparities <= 0.5 px or NaN (no estimate) become the map's median valid disparity,
    so every method is scored on every face pixel."""
    out = disp.copy()
    for i in range(len(out)):
        bad = ~np.isfinite(out[i]) | (out[i] <= 0.5)
        out[i][bad] = np.median(out[i][~bad]) if (~bad).any() else 1.0
    return out


def bilinear(img: np.ndarray, u: np.ndarray, v: np.ndarray) -> np.ndarray:
    h, w = img.shape
    u = np.clip(u, 0, w - 1.001)
    v = np.clip(v, 0, h - 1.001)
    u0, v0 = np.floor(u).astype(int), np.floor(v).astype(int)
    a, b = u - u0, v - v0
    return (
        (1 - a) * (1 - b) * img[v0, u0]
        + a * (1 - b) * img[v0, u0 + 1]
        + (1 - a) * b * img[v0 + 1, u0]
        + a * b * img[v0 + 1, u0 + 1]
    )


def landmarks_from_disparity(disp: np.ndarray, data, px: np.ndarray | None = None) -> np.ndarray:
    """Predicted 3-D landmarks (N, K, 3): disparity interpolated at each landmark's left
    pixel, converted to depth Z = f B / d and back-projected through that pixel.

    `px` (N, K, 3), columns (u_left, u_right, v), replaces the true landmark pixels
    `data["landmarks_px"]` (e.g. a detector's, or `noisy_landmark_px`)."""
    px_all = data["landmarks_px"] if px is None else px
    out = np.zeros(data["landmarks_3d"].shape)
    for i in range(len(disp)):
        f, cx, cy, b = data["camera"][i]
        p = px_all[i]
        d = bilinear(disp[i], p[:, 0], p[:, 2])
        z = f * b / d
        out[i] = np.stack([z * (p[:, 0] - cx) / f, z * (p[:, 2] - cy) / f, z], -1)
    return out


def detector_sigma(rate: float, threshold: float = 0.05) -> float:
    """Per-coordinate Gaussian sigma (in units of the inter-ocular distance) of a pupil
    detector that localises both pupils within `threshold` x IOD on a fraction `rate` of
    faces (the normalised worst-eye error `e = max(|dl|, |dr|) / IOD` of Jesorsky et al.
    2001, BioID). Each eye's radial error is Rayleigh(sigma), so
    `P(e <= t) = (1 - exp(-t^2 / (2 sigma^2)))^2`; solved for sigma."""
    if not 0 < rate < 1:
        raise ValueError(f"rate: expected a fraction in (0, 1), received {rate!r}")
    if not threshold > 0:
        raise ValueError(f"threshold: expected a positive number, received {threshold!r}")
    return float(threshold / np.sqrt(-2.0 * np.log(1.0 - np.sqrt(rate))))


def noisy_landmark_px(px: np.ndarray, sigma_iod: float, *, key, pupils=(0, 1)) -> np.ndarray:
    """Landmark pixels (N, K, 3) (u_left, u_right, v) with isotropic Gaussian localisation
    noise on each landmark's left-image position (u_left, v): per-coordinate sigma
    `sigma_iod` x that face's inter-ocular distance in pixels (pupils `pupils`), i.e. a
    detector whose error scales with the face's size in the image. u_right is unchanged
    (the depth comes from the disparity map, not from a right-image detection)."""
    px = np.asarray(px, np.float64)
    iod = np.hypot(*(px[:, pupils[0], [0, 2]] - px[:, pupils[1], [0, 2]]).T)  # (N,)
    noise = np.asarray(jax.random.normal(key, px.shape[:2] + (2,)), np.float64)
    out = px.copy()
    out[..., [0, 2]] += sigma_iod * iod[:, None, None] * noise
    return out
