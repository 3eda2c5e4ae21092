# ---
# jupyter:
#   jupytext:
#     comment_magics: false
# ---

# %% [markdown]
# # routing: routing tables, RouterBench metrics and routers (P6 LatentRouter)
#
# A *routing table* holds, for every query and candidate model, the outcome (quality),
# its cost and the query's features. A router predicts each candidate's quality from
# the features and sends the query to the best one for a given cost weight; sweeping
# the cost weight traces a cost-quality curve, and its non-decreasing convex hull gives
# RouterBench's AIQ (average improvement in quality). Below: the real QUICK table
# committed in `data/routing/text_quick` (599 evals items x 6 candidates built on
# SmolLM2-135M and Gemma-3-270M), a held-out split, and the fixed, kNN and linear
# routers against the oracle. LatentRouter (`routing.LatentRouter.fit`) is trained the
# same way by the `routing_text` experiment; HAPS (P19, `routing.fit_haps`) by
# `routing_haps_main`.

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
# !pip install -q -c keep.txt "./jaxlab[routing]"

# %%
import os
from pathlib import Path

import jax
import matplotlib.pyplot as plt
import numpy as np

from jaxlab import routing

FULL = os.environ.get("JAXLAB_FULL") == "1"  # or True by hand on a GPU/TPU
STEPS = 600 if FULL else 150
OUT = os.environ.get("JAXLAB_EXAMPLE_OUT", ".")
# the table sits in the repository: found from this file, the jaxlab package (an editable
# install) or Colab's clone in ./jaxlab
HERE = Path(__file__).resolve().parent if "__file__" in globals() else Path.cwd()
SEARCH = (HERE, *HERE.parents, Path(routing.__file__).resolve().parents[2], Path.cwd() / "jaxlab")
TABLE = next(
    p / "data/routing/text_quick.npz"
    for p in SEARCH
    if (p / "data/routing/text_quick.npz").exists()
)

# %% tags=["core"]
table = routing.RoutingTable.load(TABLE)
train, test = table.split(0.3, key=jax.random.key(0))
routers = {
    "fixed": routing.FixedRouter.fit(train),
    "kNN": routing.KNNRouter.fit(train, k=10),
    "linear": routing.MLPRouter.fit(train, key=jax.random.key(1), hidden=(), steps=STEPS),
}
weights = np.linspace(0.0, 2.0, 9)  # cost weights of the utility quality - w * cost
fixed_c, fixed_q = test.cost.mean(0), test.quality.mean(0)
crange = (float(fixed_c.min()), float(fixed_c.max()))
curves = {}
for name, r in routers.items():
    pts = [
        routing.routed_outcome(
            np.asarray(routing.route(r, test.features, cost_weight=w)), test.quality, test.cost
        )
        for w in weights
    ]
    c, q = np.array(pts).T  # RoutedOutcome(cost, quality), the order of aiq
    curves[name] = (c, q)
    print(f"{name}: AIQ {routing.aiq(c, q, cost_range=crange):.3f}")
oracle = routing.routed_outcome(
    routing.oracle_choice(test.quality, test.cost), test.quality, test.cost
)
oracle_c, oracle_q = oracle.cost, oracle.quality
print(
    f"zero router AIQ {routing.aiq(fixed_c, fixed_q, cost_range=crange):.3f}; "
    f"oracle accuracy {oracle_q:.3f}"
)

# %% [markdown]
# RouteLLM's workflow: pick the threshold of `threshold_route` that sends 20% of queries to
# the strong model (the most expensive candidates, Gemma-3 under its two likelihood
# rules), calibrated on one half of the held-out queries and used on the other half
# (whose share differs from 20% by sampling noise: a few dozen queries here).

# %%
cal, new = test.split(0.5, key=jax.random.key(2))
cand_cost = train.cost.mean(0)
strong = np.flatnonzero(cand_cost == cand_cost.max())
linear = routers["linear"]
t = routing.calibrate_threshold(linear.predict_quality(cal.features), cand_cost, 0.2)
for name, part in (("calibration", cal), ("new", new)):
    choice = routing.threshold_route(linear.predict_quality(part.features), cand_cost, t)
    share = np.isin(np.asarray(choice), strong).mean()
    print(f"threshold {t:.3f}: {share:.0%} of {part.n_queries} {name} queries to the strong model")

# %%
fig, ax = plt.subplots(figsize=(5.5, 3.6))
ax.scatter(fixed_c, fixed_q, c="k", marker="s", label="single candidates")
for name, (c, q) in curves.items():
    hc, hq = routing.cost_quality_hull(c, q)
    ax.plot(hc, hq, "o-", label=name)
ax.scatter([oracle_c], [oracle_q], marker="*", s=150, c="C3", label="oracle")
ax.set(xlabel="mean cost", ylabel="mean quality", title=f"{test.n_queries} held-out queries")
ax.legend(fontsize=7)
fig.tight_layout()
fig.savefig(os.path.join(OUT, "routing.png"))
plt.show()
