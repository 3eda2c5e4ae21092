# ---
# jupyter:
#   jupytext:
#     comment_magics: false
# ---

# %% [markdown]
# # temporal: sparse size-varying temporal networks (P3)
#
# A Markov model of a contact network whose node set changes over time (arrivals at
# rate $\lambda$, departures with probability $q$, edge persistence $p$, formation
# $\alpha$ and triadic closure $\gamma$), fitted by the method of moments from the
# edge and triangle counts of consecutive snapshots, with sandwich confidence
# intervals. Below: the estimator on a real SocioPatterns contact network (a hospital
# ward, 60 s snapshots); `FULL` fits all three shipped networks. The experiment
# `temporal_consistency` checks consistency and coverage on simulated chains.

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
# !python -m jaxlab.data install --only sociopatterns

# %%
import os

import jax.numpy as jnp
import matplotlib.pyplot as plt
import numpy as np

from jaxlab import temporal as tn

FULL = os.environ.get("JAXLAB_FULL") == "1"  # or True by hand on a GPU/TPU
NETWORKS = tuple(tn.SOCIOPATTERNS) if FULL else ("hospital",)
OUT = os.environ.get("JAXLAB_EXAMPLE_OUT", ".")

# %% tags=["core"]
fits = {}
for name in NETWORKS:
    contacts = tn.read_contacts(tn.sociopatterns_path(name))
    graphs, window_index = tn.contacts_to_snapshots(contacts, window=60)
    data = tn.graphs_to_sequence(graphs, window_index=window_index)
    stats = tn.sequence_transition_stats(
        data.snapshots, max_degree=data.max_degree, valid=jnp.asarray(data.valid)
    )
    est = tn.estimate_moments(stats)
    ci = tn.confidence_intervals(est.theta, tn.sandwich_covariance(est.theta, stats))
    fits[name] = (np.asarray(est.theta), np.asarray(ci), stats)
    print(name, {p: round(float(v), 3) for p, v in zip(tn.PARAM_NAMES, est.theta, strict=True)})

# %%
theta, ci, stats = fits[NETWORKS[0]]
fig, (ax0, ax1) = plt.subplots(1, 2, figsize=(9, 3.2))
ax0.plot(np.asarray(stats.next_size), lw=0.6, label="nodes present")
ax0.plot(np.asarray(stats.next_edges), lw=0.6, label="edges")
ax0.set(xlabel="snapshot (60 s)", title=f"{NETWORKS[0]}: observed counts")
ax0.legend()
x = np.arange(len(theta))
ax1.errorbar(x, theta, yerr=np.abs(ci.T - theta), fmt="o", capsize=4)
ax1.set_xticks(x, tn.PARAM_NAMES, rotation=20)
ax1.set(title="method-of-moments estimates, 95% CI")
fig.tight_layout()
fig.savefig(os.path.join(OUT, "temporal.png"))
plt.show()
