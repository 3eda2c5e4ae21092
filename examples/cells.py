# ---
# jupyter:
#   jupytext:
#     comment_magics: false
# ---

# %% [markdown]
# # cells: LeCellModel — JEPA with SIGReg on single-cell expression (P5)
#
# LeCellModel embeds cells with a joint-embedding predictive architecture: two augmented
# views of a cell's counts (binomial thinning, library-size jitter, dropout) must
# predict each other's embedding, and SIGReg — the Epps–Pulley normality statistic
# over random 1-D projections — keeps the embedding isotropic Gaussian instead of
# collapsing. JEPA-SCORE, the sum of log singular values of the encoder's Jacobian at
# a cell, scores how atypical it is, and its gradient x input attributes that to genes.
# AnnData in, AnnData out. Below: the real PBMC68k cells that ship with scanpy, a
# short fit, the embedding coloured by annotated cell type, and JEPA-SCORE per type.

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
# !pip install -q -c keep.txt "./jaxlab[cells]"

# %%
import os

import jax
import matplotlib.pyplot as plt
import numpy as np

from jaxlab import cells

FULL = os.environ.get("JAXLAB_FULL") == "1"  # or True by hand on a GPU/TPU
STEPS, WIDTH = (1500, 256) if FULL else (60, 64)
OUT = os.environ.get("JAXLAB_EXAMPLE_OUT", ".")

# %% tags=["core"]
adata = cells.load_pbmc68k()  # 700 real PBMCs (10x Genomics) with pseudo-exact counts in X
model, out = cells.fit(
    adata, key=jax.random.key(0), steps=STEPS, width=WIDTH, batch_size=128, attributions=False
)
z = out.obsm["X_lecell"]  # (cells, 16) embedding
print(z.shape, "SIGReg-regularised embedding; mean JEPA-SCORE", out.obs["jepa_score"].mean())

# %%
types = out.obs["bulk_labels"].astype(str).to_numpy()
u, s, vt = np.linalg.svd(z - z.mean(0), full_matrices=False)
xy = u[:, :2] * s[:2]
fig, (ax0, ax1) = plt.subplots(1, 2, figsize=(10, 3.6))
for t in np.unique(types):
    ax0.scatter(*xy[types == t].T, s=5, label=t)
ax0.set(title="LeCellModel embedding (first 2 PCs)")
ax0.legend(fontsize=6, markerscale=2)
order = sorted(np.unique(types), key=lambda t: np.median(out.obs["jepa_score"][types == t]))
ax1.boxplot([out.obs["jepa_score"][types == t] for t in order], orientation="horizontal")
ax1.set_yticks(range(1, len(order) + 1), order, fontsize=7)
ax1.set(xlabel="JEPA-SCORE", title="atypicality per cell type")
fig.tight_layout()
fig.savefig(os.path.join(OUT, "cells.png"))
plt.show()
