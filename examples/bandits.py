# ---
# jupyter:
#   jupytext:
#     comment_magics: false
# ---

# %% [markdown]
# # bandits: task-dimension-guided exploration (TDGE, P16)
#
# TDGE explores a contextual bandit top-down: first a *dimension* of the items
# (genre, decade, ...), then a feature inside it, then an item, each level a linear
# bandit. When reward depends on only a few dimensions, this finds them quickly.
# Below: a synthetic world where 2 of 4 dimensions matter; TDGE over LinUCB against
# flat LinUCB, cumulative regret, and the relevance TDGE assigns to each dimension.
# The real-data versions (MovieLens-100k, Open Bandit) are the experiments
# `bandits_movielens` and `bandits_obd`.

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
# !python -m jaxlab.data install --only movielens

# %%
import os

import jax
import jax.numpy as jnp
import matplotlib.pyplot as plt

import jaxlab.bandits as B

FULL = os.environ.get("JAXLAB_FULL") == "1"  # or True by hand on a GPU/TPU
ROUNDS = 5000 if FULL else 300
OUT = os.environ.get("JAXLAB_EXAMPLE_OUT", ".")

# %% tags=["core"]
key = jax.random.key(0)
k_world, k_rewards, k_play = jax.random.split(key, 3)
world = B.make_dimension_world(60, (3, 3, 3, 3), (0, 2), key=k_world, noise=0.5)
rewards = world.sample_rewards(ROUNDS, key=k_rewards)  # (T, items)

tdge = B.TDGE(B.LinUCB(alpha=0.5), world.feature_dim, probe_rounds=2)
flat = B.LinUCB(alpha=0.5)
runs = {
    name: B.play(p, world.features, rewards, key=k_play)
    for name, p in [("TDGE(LinUCB)", tdge), ("LinUCB", flat)]
}
relevance = B.dimension_relevance(tdge, runs["TDGE(LinUCB)"].state)
print("relevant dimensions:", world.relevant, "TDGE's relevance:", relevance)

# %%
best = world.mean_rewards.max()
fig, (ax0, ax1) = plt.subplots(1, 2, figsize=(9, 3.2))
for name, tr in runs.items():
    regret = jnp.cumsum(best - world.mean_rewards[tr.arms])
    ax0.plot(regret, label=name)
ax0.set(xlabel="round", ylabel="cumulative regret", title="synthetic world")
ax0.legend()
ax1.bar(range(len(relevance)), relevance, color=["C3" if r else "C7" for r in world.relevant])
ax1.set(xlabel="dimension", ylabel="relevance", title="red: dimensions reward depends on")
fig.tight_layout()
fig.savefig(os.path.join(OUT, "bandits.png"))
plt.show()
