# ---
# jupyter:
#   jupytext:
#     comment_magics: false
# ---

# %% [markdown]
# # laplex: exact trainable Laplace-kernel operators (P9)
#
# A LAPLEX operator is the $M \times N$ matrix
# $$K_{ij} = \sum_h c_h \exp\big(-(a_h + i\,b_h)\,|t_h[i] - s_h[j]|\big)$$
# with learnable 1-D anchors $t$ (outputs) and $s$ (inputs) per head. `matvec`
# computes $K v$ exactly in $O((M+N)\log(M+N))$ — sort the anchors, two one-sided
# recursive scans, merge — and is differentiable in $v, t, s, a, b, c$. Below: the
# product against the dense matrix, its gradient against dense autodiff, and the time
# of both as $N$ grows.

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
# !pip install -q -c keep.txt "./jaxlab[laplex]"

# %%
import os
import time

import jax
import jax.numpy as jnp
import matplotlib.pyplot as plt

from jaxlab import laplex

FULL = os.environ.get("JAXLAB_FULL") == "1"  # or True by hand on a GPU/TPU
SIZES = (10**4, 10**5, 10**6, 10**7, 10**8) if FULL else (1000, 3000, 8000)
OUT = os.environ.get("JAXLAB_EXAMPLE_OUT", ".")

# %% tags=["core"]
H, N = 2, 512
kt, ks, kv = jax.random.split(jax.random.key(0), 3)
t = jax.random.uniform(kt, (H, N))  # output anchors, one row per head
s = jax.random.uniform(ks, (H, N))  # input anchors
a, b, c = jnp.array([3.0, 10.0]), jnp.array([0.0, 6.0]), jnp.array([1.0, 0.5])
v = jax.random.normal(kv, (N,))

fast = laplex.matvec(v, t, s, a, b, c)  # exact, O(N log N)
dense = laplex.dense_matrix(t, s, a, b, c) @ v  # O(N^2) oracle
print(
    "max |fast - dense| / max |dense| =", float(jnp.abs(fast - dense).max() / jnp.abs(dense).max())
)

# gradients with respect to the decays, through the custom VJP, against dense autodiff
g_fast = jax.grad(lambda a: jnp.sum(laplex.matvec(v, t, s, a, b, c).real))(a)
g_dense = jax.grad(lambda a: jnp.sum((laplex.dense_matrix(t, s, a, b, c) @ v).real))(a)
print("d/da:", g_fast, "dense:", g_dense)


# %%
def timed(fn, *args):
    jax.block_until_ready(fn(*args))  # compile
    t0 = time.perf_counter()
    jax.block_until_ready(fn(*args))
    return time.perf_counter() - t0


mv = jax.jit(lambda v, t, s: laplex.matvec(v, t, s, a[:1], None, c[:1]))
dn = jax.jit(lambda v, t, s: laplex.dense_matrix(t, s, a[:1], None, c[:1]) @ v)
fast_s, dense_s = [], []
for n in SIZES:
    tn, sn = jnp.sort(jax.random.uniform(kt, (1, n))), jnp.sort(jax.random.uniform(ks, (1, n)))
    vn = jax.random.normal(kv, (n,))
    fast_s.append(timed(mv, vn, tn, sn))
    dense_s.append(timed(dn, vn, tn, sn) if n <= 8000 else float("nan"))
fig, ax = plt.subplots(figsize=(5, 3.2))
ax.loglog(SIZES, fast_s, "o-", label="laplex.matvec")
ax.loglog(SIZES, dense_s, "s--", label="dense matrix @ v")
ax.set(xlabel="N = M", ylabel="seconds", title="one product, one head")
ax.legend()
fig.tight_layout()
fig.savefig(os.path.join(OUT, "laplex.png"))
plt.show()
