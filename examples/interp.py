# ---
# jupyter:
#   jupytext:
#     comment_magics: false
# ---

# %% [markdown]
# # interp: probes, sparse autoencoders and steering
#
# Interpretability tools over `jaxlab.lm` activations: ridge/logistic probes fitted in
# closed form or by Newton steps for every layer in one jitted call (`probe_sweep`),
# grouped splits with bootstrap intervals, TopK/ReLU/BatchTopK sparse autoencoders
# trained through the `_core` driver, SAELens' metrics, and steering by
# difference-of-means directions spliced into the forward pass. Below: SmolLM2-135M
# reads short positive and negative sentences; a ridge probe per layer (penalty by GCV)
# on the last token's residual stream with its held-out accuracy, and the
# difference-of-means direction added back into the forward pass as a steering vector.
# The `interp_sae` experiment trains the sparse autoencoders (QUICK: 200k tokens of
# SmolLM2 layer 15, 24k of Qwen-0.5B layer 12).

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
# !pip install -q -c keep.txt "./jaxlab[interp]"
# !python -m jaxlab.data install --only smollm2

# %%
import os

import jax
import jax.numpy as jnp
import matplotlib.pyplot as plt
import numpy as np

from jaxlab import interp, lm

FULL = os.environ.get("JAXLAB_FULL") == "1"  # or True by hand on a GPU/TPU
NAME = "qwen2.5-coder-0.5b-instruct" if FULL else "smollm2-135m-instruct"
OUT = os.environ.get("JAXLAB_EXAMPLE_OUT", ".")

# %% tags=["core"]
model, tokenizer = lm.load(NAME)
things = [
    "movie",
    "book",
    "meal",
    "song",
    "hotel",
    "game",
    "show",
    "trip",
    "class",
    "phone",
    "play",
    "car",
]
texts = [f"The {t} was {w}." for t in things for w in ("wonderful", "terrible")]
y = jnp.asarray([1, 0] * len(things))  # 1 = positive
tokens, mask = lm.pad_prompts([tokenizer.encode(t) for t in texts])  # left-padded
_, acts = lm.forward_batched(
    model, jnp.asarray(tokens), mask=jnp.asarray(mask), capture=["resid_post"]
)
x = acts["resid_post"][:, :, -1].transpose(1, 0, 2)  # (layers, texts, d): last token
group = jnp.repeat(jnp.arange(len(things)), 2)  # both texts about one thing on one side
train = interp.group_split(group, key=jax.random.key(0), test_fraction=0.34)
sweep = interp.probe_sweep(x, y.astype(jnp.float32), train=train, kind="ridge")  # GCV penalty
correct = (sweep["prediction"] > 0.5) == (y == 1)[None, :]  # (layers, texts)
accuracy = np.asarray(correct[:, ~train].mean(1))  # held-out accuracy per layer
best = int(np.argmax(accuracy))
print("held-out accuracy per layer:", np.round(accuracy, 2))

# steering: add the positive-minus-negative direction at that layer, watch the next token
direction = interp.mean_difference(x[best], y.astype(bool), train=train).direction
prompt = jnp.asarray(tokenizer.encode("Honestly, the food was"))
good, bad = tokenizer.encode(" great")[-1], tokenizer.encode(" awful")[-1]
alphas = [-8.0, -4.0, 0.0, 4.0, 8.0]
gap = []
for a in alphas:
    logits, _ = lm.forward(model, prompt, intervene=interp.steer(direction, a, layers=[best]))
    gap.append(float(logits[-1, good] - logits[-1, bad]))
print("logit(' great') - logit(' awful') by steering strength:", np.round(gap, 2))

# %%
fig, (ax0, ax1) = plt.subplots(1, 2, figsize=(9, 3.2))
ax0.plot(accuracy, "o-")
ax0.axhline(0.5, color="k", lw=0.8, ls="--", label="chance")
ax0.set(xlabel="layer", ylabel="held-out accuracy", ylim=(0, 1.05), title="sentiment probe")
ax0.legend()
ax1.plot(alphas, gap, "o-")
ax1.set(xlabel="steering strength", ylabel="logit gap", title=f"steering at layer {best}")
fig.tight_layout()
fig.savefig(os.path.join(OUT, "interp.png"))
plt.show()
