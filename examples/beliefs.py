# ---
# jupyter:
#   jupytext:
#     comment_magics: false
# ---

# %% [markdown]
# # beliefs: belief directions and their dominance over generation (P13, HOT-3)
#
# A *belief* here is a direction in a model's residual stream that separates items whose
# evidence favours hypothesis A from items favouring B; the *belief state* of a token is
# its signed distance from the separating hyperplane, and *dominance* summarises the
# margin of one belief over a generated sequence (its mean, final value and the fraction
# of positions it leads). Below: the balanced scenario design (k_A, k_B evidence
# sentences per side), then the fitting and the metric on stand-in activations with a
# planted belief direction, so that the example runs in seconds without a model. The
# experiments `beliefs_modulation`, `beliefs_causal` and `beliefs_monitoring` do the
# same on SmolLM2-135M and Qwen2.5-Coder-0.5B activations (`generation_states`) and
# steer along the fitted direction (`option_logprobs`).

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
# !pip install -q -c keep.txt "./jaxlab[beliefs]"
# !python -m jaxlab.data install --only smollm2

# %%
import os

import jax
import jax.numpy as jnp
import matplotlib.pyplot as plt
import numpy as np

from jaxlab import beliefs

FULL = os.environ.get("JAXLAB_FULL") == "1"  # or True by hand on a GPU/TPU
N_PER_CELL = 8 if FULL else 2
OUT = os.environ.get("JAXLAB_EXAMPLE_OUT", ".")

# %% tags=["core"]
items = beliefs.make_scenarios(N_PER_CELL, key=jax.random.key(0))
print(items[7].context, "|", items[7].question, items[7].options, "evidence", items[7].evidence)
counts = beliefs.evidence_counts(items)  # balanced: every (k_A, k_B) cell equally often
print("items per (k_A, k_B) cell:", np.unique(counts))

# stand-in activations (L = 3 layers, d = 16): layer 2 carries the evidence balance along
# a planted direction, the others are noise
balance = np.array([it.evidence[0] - it.evidence[1] for it in items], np.float32)
key_noise, key_dir = jax.random.split(jax.random.key(1))
planted = jax.random.normal(key_dir, (16,))
acts = jax.random.normal(key_noise, (3, len(items), 16))
acts = acts.at[2].add(0.8 * jnp.asarray(balance)[:, None] * planted)
keep = balance != 0  # tied items have no A/B label
labels = jnp.asarray(balance[keep] > 0)
train = jnp.asarray(np.arange(int(keep.sum())) % 2 == 0)
dirs = beliefs.fit_directions(acts[:, keep], labels, train=train)
print("held-out AUROC per layer", np.round(np.asarray(dirs.test_auroc), 2))

# belief states of a "generated" sequence of 12 tokens drifting from B towards A
tokens = 0.3 * jax.random.normal(jax.random.key(2), (12, 16)) + jnp.linspace(-1, 2, 12)[:, None] * (
    planted / jnp.linalg.norm(planted)
)
state = beliefs.belief_state(tokens, dirs.directions[2], dirs.thresholds[2])
dom = beliefs.dominance(state)
print(
    f"dominance of A: mean {float(dom.mean):.2f}, final {float(dom.final):.2f}, "
    f"fraction {float(dom.fraction):.2f}"
)

# %%
fig, axes = plt.subplots(1, 2, figsize=(8, 3.2))
item_states = beliefs.belief_state(acts[2], dirs.directions[2], dirs.thresholds[2])
axes[0].scatter(balance, np.asarray(item_states), s=10)
axes[0].set(xlabel="evidence balance k_A - k_B", ylabel="belief state (layer 2)")
axes[0].set_title("belief state vs evidence")
axes[1].axhline(0, c="k", lw=0.5)
axes[1].plot(np.asarray(dom.margin), "o-")
axes[1].set(xlabel="generated position", ylabel="margin of A", title="dominance over generation")
fig.tight_layout()
fig.savefig(os.path.join(OUT, "beliefs.png"))
plt.show()
