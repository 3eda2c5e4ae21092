# ---
# jupyter:
#   jupytext:
#     comment_magics: false
# ---

# %% [markdown]
# # sensing: multimodal uncertainty-reduction maps of a foraging hawkmoth (P4)
#
# A hawkmoth probes a flower with its proboscis, sensing visual and mechanosensory
# signals. A multimodal VAE (a product of per-modality Gaussian experts over a shared
# flower latent) learns simulated flowers; the expected information gain of every
# possible next probe, $\tfrac12 \log\det(I + J \Sigma J^\top / \sigma^2)$, gives an
# *information map* per modality, and a lexicographic policy probes where uncertainty
# drops most until it is low enough to exploit. Below: train a small model briefly and
# draw one flower's nectar-guide pattern with its visual, mechanosensory and joint
# information maps after three probes.

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
# !pip install -q -c keep.txt "./jaxlab"

# %%
import os

import equinox as eqx
import jax
import matplotlib.pyplot as plt
import numpy as np

from jaxlab import sensing

FULL = os.environ.get("JAXLAB_FULL") == "1"  # or True by hand on a GPU/TPU
N_FLOWERS, STEPS, GRID = (32768, 50000, 61) if FULL else (256, 200, 15)
OUT = os.environ.get("JAXLAB_EXAMPLE_OUT", ".")

# %% tags=["core"]
kd, km, kt, kf, ka, ko = jax.random.split(jax.random.key(0), 6)
# flowers x probes, two modalities (jitted: one compiled program instead of many small ops)
data = eqx.filter_jit(sensing.simulate_probes)(N_FLOWERS, 16, key=kd)
model = sensing.MultimodalVAE(latent_dim=6, width=64, key=km)
model, history = sensing.train_model(model, data, key=kt, steps=STEPS)
losses = history.losses

flower = sensing.sample_flower(key=kf, kinds=(0,), contrast_range=(0.8, 1.0))
probes = sensing.random_actions(flower, 3, key=ka, near_nectary=0.0)
observe = eqx.filter_jit(jax.vmap(lambda a, k: sensing.observe(flower, a, key=k)))
visual, mechano = observe(probes, jax.random.split(ko, 3))
post = eqx.filter_jit(model.posterior)(visual, mechano, probes)  # experts after 3 probes
grid = sensing.action_grid(GRID)
maps = {
    m: eqx.filter_jit(sensing.information_map)(model, post, grid, m)
    for m in ("visual", "mechano", "joint")
}
print(f"-ELBO {float(losses[0]):.1f} -> {float(losses[-1]):.1f}")

# %%
mask = sensing.grid_mask(GRID)
pattern = jax.vmap(lambda a: sensing.pattern_intensity(flower, a[:2]))(grid)
fig, axes = plt.subplots(1, 4, figsize=(12, 3))
panels = [("nectar-guide pattern", pattern), *maps.items()]
for ax, (title, values) in zip(axes, panels, strict=True):
    img = np.full((GRID, GRID), np.nan)
    img[mask] = np.asarray(values)
    ax.imshow(img, origin="lower", cmap="viridis")
    ax.set_title(title if title == "nectar-guide pattern" else f"information: {title}")
    ax.axis("off")
fig.tight_layout()
fig.savefig(os.path.join(OUT, "sensing.png"))
plt.show()
