# ---
# jupyter:
#   jupytext:
#     comment_magics: false
# ---

# %% [markdown]
# # em: EM super-resolution and neuron segmentation (P11)
#
# Synthetic electron-microscopy images of neural tissue with instance ground truth,
# the low-resolution acquisition model (blur, downsampling, noise), the bicubic
# baseline, seeded-watershed instance segmentation and the metrics of the paper (PSNR,
# SSIM, variation of information, adapted Rand error, CREMI score). Below: one image,
# its x4 degradation and bicubic reconstruction, and a segmentation of the true
# boundary map scored against the ground truth. The learned super-resolution,
# segmentation and diffusion-refinement models are trained by the `em_*` experiments.

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
# !pip install -q -c keep.txt "./jaxlab[em]"

# %%
import os

import jax
import matplotlib.pyplot as plt
import numpy as np

from jaxlab import em

FULL = os.environ.get("JAXLAB_FULL") == "1"  # or True by hand on a GPU/TPU
SIZE = 512 if FULL else 128
OUT = os.environ.get("JAXLAB_EXAMPLE_OUT", ".")

# %% tags=["core"]
k_img, k_lr = jax.random.split(jax.random.key(0))
sample = em.generate_em("cremi_like", SIZE, key=k_img)  # image, labels, boundaries
low = em.degrade(sample.image, 4, key=k_lr)  # (SIZE/4, SIZE/4)
up = em.upsample_bicubic(low, 4)
print(f"bicubic x4: PSNR {em.psnr(up, sample.image):.2f} dB, SSIM {em.ssim(up, sample.image):.3f}")

instances = em.segment_watershed(np.asarray(sample.boundaries))
print({k: round(v, 3) for k, v in em.segmentation_scores(instances, sample.labels).items()})

# %%
fig, axes = plt.subplots(1, 4, figsize=(12, 3))
for ax, (title, img, cmap) in zip(
    axes,
    [
        ("high resolution", sample.image, "gray"),
        ("x4 low resolution", low, "gray"),
        ("bicubic x4", up, "gray"),
        ("watershed instances", instances, "tab20"),
    ],
    strict=True,
):
    ax.imshow(np.asarray(img), cmap=cmap, interpolation="nearest")
    ax.set_title(title)
    ax.axis("off")
fig.tight_layout()
fig.savefig(os.path.join(OUT, "em.png"))
plt.show()
