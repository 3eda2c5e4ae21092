# ---
# jupyter:
#   jupytext:
#     comment_magics: false
# ---

# %% [markdown]
# # cslm: token complexity and reliability laws of small LMs (P7)
#
# The position paper P7 proposes *token complexity* — the smallest reasoning budget
# $B^*(n, p)$ at which a model solves size-$n$ instances with probability $p$ — as the
# core quantity of LM computation. `cslm` makes it measurable: sized task families
# with programmatic verifiers, budget truncation with a forced answer, $B^*$ with
# bootstrap intervals, growth-class fits, generate-solve-verify strategies, and the
# reliability law $\mathrm{acc} \approx (1-\epsilon)^{\mathrm{steps}}$. Below (no
# generation, so it runs in seconds): chain-sum tasks of growing size, SmolLM2-135M
# choosing the true sum among distractors by option likelihood right after the answer
# cue, and the per-step error rate fitted to its accuracy.

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
import matplotlib.pyplot as plt
import numpy as np

from jaxlab import cslm, lm

FULL = os.environ.get("JAXLAB_FULL") == "1"  # or True by hand on a GPU/TPU
NAME = "qwen2.5-coder-0.5b-instruct" if FULL else "smollm2-135m-instruct"
SIZES, ITEMS = ((2, 3, 4, 6, 8, 12), 64) if FULL else ((2, 4, 8), 4)
OUT = os.environ.get("JAXLAB_EXAMPLE_OUT", ".")

# %% tags=["core"]
model, tokenizer = lm.load(NAME)
task = cslm.make_task("chain_sum", 3, key=jax.random.key(0))
print(task.prompt, "->", task.answer, "| verifier:", cslm.verify(task, "so Answer: 40"))

prompts, options, steps = [], [], []
for n in SIZES:
    for i, t in enumerate(cslm.make_tasks("chain_sum", n, ITEMS, key=jax.random.key(n))):
        wrong = cslm.perturbed_answers(t, 3, key=jax.random.key(1000 * n + i))
        ids = cslm.prompt_ids(tokenizer, t.prompt) + tokenizer.encode(
            cslm.ANSWER_CUE, add_bos=False
        )
        prompts.append(ids)
        options.append([cslm.answer_continuation(a) for a in [t.answer, *wrong]])
        steps.append(t.steps)
scores = np.stack(lm.score(model, tokenizer, prompts, options).sum)  # (items, 4)
correct = cslm.budget_accuracy(scores)  # the true option strictly best
acc = correct.reshape(len(SIZES), ITEMS).mean(1)
fit = cslm.fit_step_error(np.asarray(steps).reshape(len(SIZES), ITEMS)[:, 0], acc)
print("accuracy by size:", dict(zip(SIZES, acc, strict=True)), "epsilon =", fit.epsilon)

# %%
fig, ax = plt.subplots(figsize=(5, 3.2))
ax.plot(SIZES, acc, "o-", label=f"{NAME} (option likelihood)")
ax.plot(SIZES, fit.predicted, "--", label=f"(1 - {fit.epsilon:.2f})^steps")
ax.axhline(0.25, color="k", lw=0.8, ls=":", label="chance (4 options)")
ax.set(xlabel="chain length n", ylabel="accuracy", ylim=(0, 1.05), title="chain sums")
ax.legend(fontsize=7)
fig.tight_layout()
fig.savefig(os.path.join(OUT, "cslm.png"))
plt.show()
