# ---
# jupyter:
#   jupytext:
#     comment_magics: false
# ---

# %% [markdown]
# # illusions: illusory pattern perception in small LLMs (P14)
#
# Do language models see patterns where there are none, as people do? `illusions`
# builds the classic designs as text — Hamilton & Gifford's (1976) illusory
# correlation (18/8 vs 9/4 statements, $\phi = 0$ exactly), random sequences (the
# gambler's fallacy and the hot hand), causal narratives over unrelated events — reads
# a model's answers by option likelihood with `jaxlab.lm.score`, compares them with a
# table of human baselines, and ablates SAE features. Below: the illusory-correlation
# design's contingency table, and SmolLM2-135M predicting the next of 12 fair coin
# flips: does its belief that a streak continues change with the streak's length?

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
# !pip install -q -c keep.txt "./jaxlab[illusions]"
# !python -m jaxlab.data install --only smollm2

# %%
import os

import jax
import matplotlib.pyplot as plt
import numpy as np

from jaxlab import illusions as il
from jaxlab import lm

FULL = os.environ.get("JAXLAB_FULL") == "1"  # or True by hand on a GPU/TPU
NAME = "qwen2.5-coder-0.5b-instruct" if FULL else "smollm2-135m-instruct"
N_SEQUENCES = 400 if FULL else 24
OUT = os.environ.get("JAXLAB_EXAMPLE_OUT", ".")

# %% tags=["core"]
stimuli = il.make_stimuli(key=jax.random.key(0))  # Hamilton & Gifford 18/8 vs 9/4
table = il.contingency_table(stimuli.minority, stimuli.desirable)
print(table, "phi =", float(il.phi_coefficient(table)), "|", stimuli.texts[0])

model, tokenizer = lm.load(NAME)
keys = jax.random.split(jax.random.key(1), N_SEQUENCES)
seqs = [il.random_sequence("coin", 12, key=k) for k in keys]
contexts = [il.render_sequence("coin", s) for s in seqs]
next_flip = il.randomness_queries("coin")[1]  # "What will next flip be?" Heads / Tails
layout = il.layout_queries(tokenizer, contexts, [[next_flip] for _ in contexts])
logliks = il.query_logliks(
    lm.score(model, tokenizer, layout.prompts, layout.continuations).sum, layout
)
p = np.stack([il.option_probabilities(ll) for ll in logliks])  # (sequences, 2)
last = np.array([int(s[-1]) for s in seqs])  # 0 heads, 1 tails
p_repeat = p[np.arange(len(seqs)), last]
runs = np.array([il.final_run_length(s) for s in seqs])
slope = il.streak_slope(runs, p_repeat)
print(f"slope of p(repeat) on streak length: {slope:+.3f} (< 0 gambler's fallacy, > 0 hot hand)")

# %%
fig, ax = plt.subplots(figsize=(5, 3.2))
ax.scatter(runs + np.random.default_rng(0).uniform(-0.1, 0.1, len(runs)), p_repeat, s=12)
grid = np.arange(1, runs.max() + 1)
ax.plot(grid, np.mean(p_repeat) + slope * (grid - runs.mean()), "C3-", label=f"slope {slope:+.3f}")
ax.axhline(0.5, color="k", lw=0.8, ls="--", label="unbiased")
ax.set(
    xlabel="length of the final streak",
    ylabel="p(next flip repeats it)",
    title=f"{NAME}, 12 fair coin flips",
)
ax.legend(fontsize=7)
fig.tight_layout()
fig.savefig(os.path.join(OUT, "illusions.png"))
plt.show()
