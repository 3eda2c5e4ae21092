# ---
# jupyter:
#   jupytext:
#     comment_magics: false
# ---

# %% [markdown]
# # topology: HOPSE, message-passing-free higher-order encodings (P18)
#
# HOPSE lifts a graph to a cell complex (rings attached as 2-cells) or a clique
# complex, decomposes the complex into one Hasse graph per neighbourhood route,
# encodes every route once (Laplacian eigenvectors, random-walk and heat-kernel
# diagonals, electrostatics, cycle counts) and then learns with plain per-cell MLPs —
# no message passing at training time, so an epoch costs like an MLP's. `HOMP` is the
# higher-order message-passing baseline. Below: the real MUTAG molecules, one lifted
# complex, and HOPSE trained on 150 of them, tested on the other 38.

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
# !pip install -q -c keep.txt "./jaxlab[topology]"
# !python -m jaxlab.data install --only mutag

# %%
import os

import jax
import jax.numpy as jnp
import matplotlib.pyplot as plt
import numpy as np

from jaxlab import topology as tp

FULL = os.environ.get("JAXLAB_FULL") == "1"  # or True by hand on a GPU/TPU
EPOCHS, WIDTH = (200, 128) if FULL else (15, 32)
OUT = os.environ.get("JAXLAB_EXAMPLE_OUT", ".")

# %% tags=["core"]
graphs, labels = tp.load_mutag()  # 188 molecules, one-hot atoms and bonds; mutagenic or not
cx = tp.lift_graph(graphs[0], tp.LiftSpec(kind="cycle", max_length=8))
print("cells per rank:", cx.sizes, "Betti numbers:", tp.betti_numbers(cx))

data, complexes = tp.prepare_dataset("mutag", graphs, dtype=np.float32)  # lifts + encodings
data = tp.standardize_encodings(data, tp.encoding_stats(data))
train = jnp.asarray(np.arange(len(graphs)) % 5 != 0, jnp.float32)  # 4/5 train, 1/5 test
model = tp.HOPSE(
    [x.shape[-1] for x in data.x],
    data.enc[0][0].shape[-1],
    2,
    width=WIDTH,
    key=jax.random.key(0),
    dtype=jnp.float32,
)
trainer = tp.Trainer(model, loss="cross_entropy", batch_size=32, learning_rate=3e-3)
state, hist = tp.fit(
    trainer, model, data, jnp.asarray(labels), train, key=jax.random.key(1), steps=EPOCHS
)
pred = jnp.argmax(tp.predict(trainer.model(state), data), -1)
test = np.asarray(train) == 0
print("test accuracy:", float(np.mean(np.asarray(pred)[test] == labels[test])))

# %%
fig, (ax0, ax1) = plt.subplots(1, 2, figsize=(9, 3.2))
g = graphs[0]
pos = np.stack([np.cos(np.arange(g.num_nodes) * 2.4), np.sin(np.arange(g.num_nodes) * 2.4)], 1)
try:  # a planar-ish layout when networkx can compute one
    import networkx as nx

    nxg = nx.Graph([tuple(e) for e in np.asarray(g.edges)])
    layout = nx.kamada_kawai_layout(nxg)
    pos = np.array([layout[i] for i in range(g.num_nodes)])
except ImportError:
    pass
for i, j in np.asarray(g.edges):
    ax0.plot(*pos[[i, j]].T, "k-", lw=1)
ax0.scatter(*pos.T, c=np.argmax(g.node_features, 1), cmap="tab10", zorder=3)
ax0.set(title=f"MUTAG[0]: {cx.sizes[2]} rings become 2-cells")
ax0.axis("off")
ax1.plot(hist.losses)
ax1.set(xlabel="epoch", ylabel="training loss", title="HOPSE on MUTAG")
fig.tight_layout()
fig.savefig(os.path.join(OUT, "topology.png"))
plt.show()
