# ---
# jupyter:
#   jupytext:
#     comment_magics: false
# ---

# %% [markdown]
# # lengthprobe: is the remaining output length linearly decodable? (P17)
#
# While a model writes, does its residual stream already say how many tokens are left?
# `lengthprobe` generates completions of families whose length is known by
# construction (count from a to b, list N items, ...) or natural (LogiQA explanations,
# summaries), stores the states of every generated token (`lm.collect` shards), and
# fits cross-validated ridge probes across layers against baselines that know only the
# position, the family mean or the prompt's words. Below: SmolLM2-135M repeats a word
# k times; a ridge probe on one layer's per-token states predicts the remaining
# length out of fold (prompts held out), against the position-only baseline.

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
# !pip install -q -c keep.txt "./jaxlab[lengthprobe]"
# !python -m jaxlab.data install --only smollm2

# %%
import os
import tempfile
from pathlib import Path

import jax
import jax.numpy as jnp
import matplotlib.pyplot as plt
import numpy as np

from jaxlab import interp, lm
from jaxlab import lengthprobe as lp

FULL = os.environ.get("JAXLAB_FULL") == "1"  # or True by hand on a GPU/TPU
N_PROMPTS, MAX_NEW = (64, 128) if FULL else (12, 48)
OUT = os.environ.get("JAXLAB_EXAMPLE_OUT", ".")
CACHE = Path(tempfile.mkdtemp())  # completions and states are cached (resumable) here

# %% tags=["core"]
model, tokenizer = lm.load("smollm2")
prompts = lp.make_prompts("repeat_word", N_PROMPTS, key=jax.random.key(0))
ids = [lp.encode_prompt(tokenizer, p.text) for p in prompts]
done = lp.generate_completions(
    model,
    tokenizer,
    ids,
    families=["repeat_word"] * len(ids),
    max_new_tokens=MAX_NEW,
    path=CACHE / "gen",
    key=jax.random.key(1),
)
print(done.reasons)  # 'max_tokens' rows (cut at the budget) are left out below
print(tokenizer.decode(done.completions[0]))

layer = model.config.n_layers // 2
_, states = lp.completion_states(model, done, layers=[layer], path=CACHE / "states")
keep = ~np.asarray(done.truncated)[np.asarray(states.text_index)]  # complete completions only
x = jnp.asarray(np.asarray(states.array("resid_post", layer), np.float32)[keep])  # (tokens, d)
text, pos = np.asarray(states.text_index)[keep], np.asarray(states.positions)[keep]
remaining = lp.remaining_length(done, text, pos)
fit = lp.cross_fit(
    x, np.log1p(remaining).astype(np.float32), groups=text, key=jax.random.key(2), n_folds=4
)
probe = np.expm1(fit["prediction"])
since_start = pos - np.asarray([len(ids[t]) for t in text])
baseline = np.zeros_like(probe)
for f in np.unique(fit["fold"]):  # position-only baseline, same folds
    test = fit["fold"] == f
    baseline[test] = lp.position_only(remaining, since_start, ~test)[test]
rho = {
    name: float(interp.spearman(jnp.asarray(remaining, jnp.float32), jnp.asarray(p, jnp.float32)))
    for name, p in [("probe", probe), ("position only", baseline)]
}
print("Spearman with the true remaining length:", rho)

# %%
fig, ax = plt.subplots(figsize=(5, 3.6))
ax.scatter(remaining, probe, s=8, label=f"ridge probe, layer {layer}")
ax.scatter(remaining, baseline, s=8, marker="x", label="position only")
ax.plot([0, remaining.max()], [0, remaining.max()], "k--", lw=0.8)
ax.set(
    xlabel="true remaining tokens",
    ylabel="predicted (out of fold)",
    title="SmolLM2-135M repeating a word",
)
ax.legend(fontsize=7)
fig.tight_layout()
fig.savefig(os.path.join(OUT, "lengthprobe.png"))
plt.show()
