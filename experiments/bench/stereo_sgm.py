"""Benchmark: jaxlab census+SGM vs OpenCV StereoSGBM on the same image and disparity range."""

from __future__ import annotations

import jax
import jax.numpy as jnp

from experiments._harness import Bench
from experiments.stereo._setup import opencv_sgbm
from jaxlab import stereo

NAME = "stereo_sgm"
PAPER = "P15"
DESCRIPTION = "census + 8-path SGM (jaxlab, jitted) vs OpenCV StereoSGBM (MODE_HH)"
QUICK = {"scale": 2, "n_disp": 48, "warmup": 1, "repeats": 5}
FULL = {"scale": 1, "n_disp": 80, "warmup": 2, "repeats": 10}


def setup(config, key):
    left, right, _ = stereo.load_motorcycle(config["scale"])
    n = config["n_disp"]
    lj, rj = jnp.asarray(left, jnp.float32), jnp.asarray(right, jnp.float32)
    sgm = jax.jit(lambda a, b: stereo.sgm_disparity(stereo.census_cost_volume(a, b, n), 8.0, 32.0))
    return Bench(
        impls={
            "jaxlab": lambda: sgm(lj, rj),
            "opencv": lambda: opencv_sgbm(left, right, n, 5, 8.0, 32.0),
        },
        ours=("jaxlab",),
        size={
            "height": left.shape[0],
            "width": left.shape[1],
            "n_disp": n,
            "device": jax.default_backend(),
        },
        fields={
            "jaxlab_s": lambda m: m["jaxlab"],
            "opencv_s": lambda m: m["opencv"],
            "ratio": lambda m: m["jaxlab"] / m["opencv"],
        },
        notes="ratio = jaxlab_s / opencv_s (>1: OpenCV faster). "
        "Same census window (5) and P1/P2; OpenCV is multi-threaded C++ on the CPU.",
    )
