# ---
# jupyter:
#   jupytext:
#     comment_magics: false
# ---

# %% [markdown]
# # lowrank: learning dynamics of low-rank RNNs in overlap space (P1)
#
# Gradient descent on the connectivity vectors $\{m, n, I, w\}$ of a rank-1 RNN with
# $N$ neurons closes on their overlap (Gram) matrix $G = V V^\top / N$:
# $\dot G = -(D \hat S G + G \hat S D)$, a 10-dimensional system independent of $N$.
# Below: the same linear network trained by plain gradient descent in neuron space
# ($4 \times N$ numbers) and in overlap space ($4 \times 4$), step for step, and the
# overlaps the loss cannot see (`classify_overlaps`).

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

import jax
import jax.numpy as jnp
import matplotlib.pyplot as plt

from jaxlab import lowrank as lr

FULL = os.environ.get("JAXLAB_FULL") == "1"  # or True by hand on a GPU/TPU
N = 100_000 if FULL else 500
STEPS = 200 if FULL else 40
OUT = os.environ.get("JAXLAB_EXAMPLE_OUT", ".")

# %% tags=["core"]
layout = lr.OverlapLayout(rank=1, n_inputs=1)  # rows (m, n, I, w)
task = lr.fixed_point_task()
act = lr.Linear()
trained = layout.trained_mask()
cov = jnp.eye(4).at[0, 3].set(0.4).at[3, 0].set(0.4).at[1, 2].set(0.4).at[2, 1].set(0.4)
v0 = lr.gaussian_vectors(cov, N, key=jax.random.key(0))  # (4, N)

# neuron space: optax SGD on the vectors; overlap space: the same step on G alone
_, g_net, losses = lr.network_gd(
    lr.NetworkLoss(task, layout, act), v0, trained, eta=0.05, n_steps=STEPS
)
g_ode = lr.overlap_gd(
    lr.OverlapLoss(task, layout, act), lr.gram(v0), trained, eta=0.05, n_steps=STEPS
)
print("max |G_net - G_overlap| =", float(jnp.abs(g_net - g_ode).max()))
print("loss-visible overlaps:", lr.linear_rank1_visibility()["visible"])

# %%
names = layout.overlap_names()
iu = jnp.triu_indices(4)
fig, (ax0, ax1) = plt.subplots(1, 2, figsize=(9, 3.2))
ax0.plot(losses)
ax0.set(xlabel="step", ylabel="loss", yscale="log", title=f"N = {N}")
for k, (i, j) in enumerate(zip(*iu, strict=True)):
    (line,) = ax1.plot(g_net[:, i, j], lw=2, alpha=0.5)
    ax1.plot(g_ode[:, i, j], "--", color=line.get_color(), label=names[k])
ax1.set(xlabel="step", ylabel="overlap", title="neuron space (solid) = overlap space (dashed)")
ax1.legend(fontsize=6, ncol=2)
fig.tight_layout()
fig.savefig(os.path.join(OUT, "lowrank.png"))
plt.show()
