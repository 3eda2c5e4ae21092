# ---
# jupyter:
#   jupytext:
#     comment_magics: false
# ---

# %% [markdown]
# # stereo: face stereo — census costs, semi-global matching, IR and L3DE (P15)
#
# Dense stereo as JAX arrays: census-transform Hamming costs, semi-global matching
# (SGM, Hirschmüller 2008) with sub-pixel refinement, and the metrics of the paper
# (bad-pixel rate, end-point error, inlier ratio and 3-D landmark error on faces).
# Below: SGM on the real Middlebury 2014 *Motorcycle* pair that ships with
# scikit-image, at reduced resolution, against block matching and the ground truth.
# The generated-face data set and the learned RAFT-Stereo-lite matcher are used by the
# `stereo_*` experiments.

# %%
# Install (Colab CPU, GPU or TPU runtime, or a fresh venv): uncomment and run once.
# JAXLAB_REPO: the repository's git URL; replace OWNER by the account that hosts it (a
# fork or mirror works; the package metadata names no URL yet). keep.txt pins the jax,
# jaxlib, CUDA/TPU plugin and numpy the runtime ships: jaxlab takes any jax >= 0.5.0
# (pyproject.toml, no upper bound), so they stay and no restart is needed. Only an older
# jax makes pip report a conflict: then drop `-c keep.txt` and restart the runtime once.
# JAXLAB_REPO = "https://github.com/OWNER/jaxlab"
# assert "/OWNER/" not in JAXLAB_REPO, "set JAXLAB_REPO to the repository's git URL"
# !test -d jaxlab || git clone -q --depth 1 {JAXLAB_REPO} jaxlab
# !pip freeze | grep -iE "^(jax|jaxlib|jax[-_]cuda.*|libtpu.*|numpy)==" > keep.txt
# !pip install -q -c keep.txt "./jaxlab[stereo]"

# %%
import os

import jax.numpy as jnp
import matplotlib.pyplot as plt
import numpy as np

from jaxlab import stereo

FULL = os.environ.get("JAXLAB_FULL") == "1"  # or True by hand on a GPU/TPU
SCALE = 2 if FULL else 8  # box-downsampling of the 2964 x 1988 pair
OUT = os.environ.get("JAXLAB_EXAMPLE_OUT", ".")

# %% tags=["core"]
left, right, gt = stereo.load_motorcycle(scale=SCALE)
n_disp = int(np.ceil(np.nanmax(gt[np.isfinite(gt)]) / 8) * 8)
cost = stereo.census_cost_volume(
    jnp.asarray(left, jnp.float32), jnp.asarray(right, jnp.float32), n_disp
)
sgm = stereo.sgm_disparity(cost)  # 8 paths, sub-pixel
bm = stereo.block_matching(cost)  # local winner-take-all baseline
gt_j = jnp.asarray(gt, jnp.float32)
for name, d in [("SGM", sgm), ("block matching", bm)]:
    print(
        f"{name}: EPE {float(stereo.epe(d, gt_j)):.2f} px, "
        f"bad-2 {float(stereo.bad_pixel_rate(d, gt_j, 2.0)):.3f}"
    )

# %%
fig, axes = plt.subplots(1, 4, figsize=(12, 2.6))
panels = [("left image", left), ("ground truth", gt), ("SGM", sgm), ("block matching", bm)]
for ax, (title, img) in zip(axes, panels, strict=True):
    ax.imshow(img, cmap="gray" if title == "left image" else "magma")
    ax.set_title(title)
    ax.axis("off")
fig.tight_layout()
fig.savefig(os.path.join(OUT, "stereo.png"))
plt.show()
