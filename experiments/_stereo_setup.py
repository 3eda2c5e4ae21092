"""Shared pieces of the P15 face experiments: render (and reload) a face stereo set, run
the stereo methods, convert disparities to depth and read depth at landmark pixels."""

from __future__ import annotations

import tempfile

import jax
import jax.numpy as jnp
import numpy as np

from experiments._api import log
from experiments.stereo_middlebury import opencv_sgbm
from jaxlab import stereo

METHODS = ("bm", "sgm_jaxlab", "sgbm_opencv")
GRAY = np.array([0.299, 0.587, 0.114])


def face_set(config, key) -> dict[str, np.ndarray]:
    """Render the set, write it as npz shards and read it back through the loader."""
    data = stereo.render_dataset(key, config["n_pairs"], config["height"], config["width"],
                                 batch=config["batch"], n_steps=config["n_steps"])
    with tempfile.TemporaryDirectory() as tmp:
        stereo.write_face_shards(tmp, data, shard_size=config["shard_size"],
                                 configs=stereo.rig_configurations(config["width"]))
        ds = stereo.FaceStereoDataset(tmp)
        out = ds.arrays()
    log.info("rendered %d face pairs %dx%d", len(ds), config["height"], config["width"])
    return out


def predict_disparities(data, config) -> dict[str, np.ndarray]:
    """Disparity maps (N, H, W) of each method on the gray images (NaN = no estimate)."""
    n, win, p1, p2 = config["n_disp"], config["window"], config["p1"], config["p2"]
    cost = jax.jit(lambda a, b: stereo.census_cost_volume(a, b, n, win))
    bm = jax.jit(lambda a, b: stereo.block_matching(cost(a, b), config["bm_radius"]))
    sgm = jax.jit(lambda a, b: stereo.sgm_disparity(cost(a, b), p1, p2))
    left = data["left"] @ GRAY
    right = data["right"] @ GRAY
    out = {m: [] for m in METHODS}
    for i in range(len(left)):
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
    return ((1 - a) * (1 - b) * img[v0, u0] + a * (1 - b) * img[v0, u0 + 1]
            + (1 - a) * b * img[v0 + 1, u0] + a * b * img[v0 + 1, u0 + 1])


def landmarks_from_disparity(disp: np.ndarray, data) -> np.ndarray:
    """Predicted 3-D landmarks (N, K, 3): disparity interpolated at each landmark's left
    pixel, converted to depth Z = f B / d and back-projected through that pixel."""
    out = np.zeros(data["landmarks_3d"].shape)
    for i in range(len(disp)):
        f, cx, cy, b = data["camera"][i]
        px = data["landmarks_px"][i]
        d = bilinear(disp[i], px[:, 0], px[:, 2])
        z = f * b / d
        out[i] = np.stack([z * (px[:, 0] - cx) / f, z * (px[:, 2] - cy) / f, z], -1)
    return out
