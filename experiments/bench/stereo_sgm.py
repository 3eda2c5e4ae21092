"""Benchmark: jaxlab census+SGM vs OpenCV StereoSGBM on the same image and disparity range.

"jaxlab" is the default CPU path (the eight path aggregations in the C++ kernel
`kernels/stereo/stereo_sgm.cc`, census costs and the sub-pixel argmin in XLA);
"jaxlab_jax" the same pipeline with the pure-JAX `lax.scan` aggregation
(`impl="jax"`, the portable, differentiable fallback), timed in the same run.

Fields: ratio_vs_opencv = opencv_s / jaxlab_s (speed relative to OpenCV, >1: jaxlab
faster), ratio (its inverse, kept from before), ratio_jax_path_vs_opencv,
kernel_speedup_vs_jax_path, and the Middlebury bad-2 of both disparity maps on
OpenCV's valid pixels (bad2_jaxlab, bad2_opencv; the stereo_middlebury claim) and on
every ground-truth pixel with OpenCV's holes as disparity 0 (bad2_*_all).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from experiments._harness import Bench
from experiments.stereo._setup import opencv_sgbm
from jaxlab import stereo

NAME = "stereo_sgm"
PAPER = "P15"
DESCRIPTION = "census + 8-path SGM (jaxlab, jitted; C++ kernel and JAX path) vs OpenCV StereoSGBM"
QUICK = {"scale": 2, "n_disp": 48, "warmup": 1, "repeats": 5}
# the smoke tier: the pair box-downsampled 8 x, every implementation once
TINY = {"scale": 8, "n_disp": 16, "warmup": 0, "repeats": 1}
FULL = {"scale": 1, "n_disp": 80, "warmup": 2, "repeats": 10}


def _bad2(disp, gt, mask=None) -> float:
    return float(stereo.bad_pixel_rate(jnp.asarray(disp), jnp.asarray(gt), 2.0, mask))


def setup(config, key):
    left, right, gt = stereo.load_motorcycle(config["scale"])
    n = config["n_disp"]
    lj, rj = jnp.asarray(left, jnp.float32), jnp.asarray(right, jnp.float32)

    def pipeline(impl):
        return jax.jit(
            lambda a, b: stereo.sgm_disparity(
                stereo.census_cost_volume(a, b, n), 8.0, 32.0, impl=impl
            )
        )

    sgm, sgm_jax = pipeline("auto"), pipeline("jax")
    ours, ours_jax = np.asarray(sgm(lj, rj)), np.asarray(sgm_jax(lj, rj))
    cv = opencv_sgbm(left, right, n, 5, 8.0, 32.0)
    cv_valid = np.isfinite(cv)
    cv_filled = np.where(cv_valid, cv, 0.0)
    both = jnp.asarray(cv_valid)
    bad2 = {
        "bad2_jaxlab": _bad2(ours, gt, both),
        "bad2_jaxlab_jax_path": _bad2(ours_jax, gt, both),
        "bad2_opencv": _bad2(cv_filled, gt, both),
        "bad2_jaxlab_all": _bad2(ours, gt),
        "bad2_opencv_all": _bad2(cv_filled, gt),
        "max_abs_diff_kernel_vs_jax_path": float(np.max(np.abs(ours - ours_jax))),
    }
    fields = {
        "jaxlab_s": lambda m: m["jaxlab"],
        "jaxlab_jax_path_s": lambda m: m["jaxlab_jax"],
        "opencv_s": lambda m: m["opencv"],
        "ratio_vs_opencv": lambda m: m["opencv"] / m["jaxlab"],
        "ratio": lambda m: m["jaxlab"] / m["opencv"],
        "ratio_jax_path_vs_opencv": lambda m: m["opencv"] / m["jaxlab_jax"],
        "kernel_speedup_vs_jax_path": lambda m: m["jaxlab_jax"] / m["jaxlab"],
    }
    fields.update({k: (lambda m, v=v: v) for k, v in bad2.items()})
    return Bench(
        impls={
            "jaxlab": lambda: sgm(lj, rj),
            "jaxlab_jax": lambda: sgm_jax(lj, rj),
            "opencv": lambda: opencv_sgbm(left, right, n, 5, 8.0, 32.0),
        },
        ours=("jaxlab", "jaxlab_jax"),
        size={
            "height": left.shape[0],
            "width": left.shape[1],
            "n_disp": n,
            "device": jax.default_backend(),
        },
        fields=fields,
        notes="ratio_vs_opencv = opencv_s / jaxlab_s (>1: jaxlab faster); ratio = its "
        "inverse. Same census window (5) and P1/P2; OpenCV is multi-threaded C++ on the CPU. "
        "bad2_jaxlab / bad2_opencv: bad-2 on OpenCV's valid pixels (the stereo_middlebury "
        "claim); *_all: on every ground-truth pixel, OpenCV's holes as disparity 0.",
    )
