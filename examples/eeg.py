# ---
# jupyter:
#   jupytext:
#     comment_magics: false
# ---

# %% [markdown]
# # eeg: the L-FAME meditation-EEG benchmark (P10)
#
# The benchmark's pipeline as library code: recordings (real EDF/BDF/BIDS through MNE,
# or jaxlab's documented simulator of the L-FAME design while the real data set is
# unreleased), notch/band-pass/re-reference preprocessing with optional ICA, epochs
# with amplitude rejection, spectral and covariance features, leave-subjects-out
# folds and classical and deep baselines. Below: a small simulated cohort, its
# resting vs meditation spectra, and rest-vs-meditation decoding by two classical
# baselines. **All numbers here come from the simulator, not real EEG.**

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
# !pip install -q -c keep.txt "./jaxlab[eeg]"

# %%
import os

import jax
import matplotlib.pyplot as plt
import numpy as np

from jaxlab import eeg

FULL = os.environ.get("JAXLAB_FULL") == "1"  # or True by hand on a GPU/TPU
N_SUBJECTS, SECONDS = (74, 300.0) if FULL else (6, 10.0)
OUT = os.environ.get("JAXLAB_EXAMPLE_OUT", ".")

# %% tags=["core"]
k_sim, k_fold = jax.random.split(jax.random.key(0))
# effects enlarged from the defaults so that a 6-subject cohort shows them
config = eeg.SimulationConfig(
    n_subjects=N_SUBJECTS, block_seconds=SECONDS, theta_effect=1.0, alpha_effect=0.8
)
data = eeg.preprocess_dataset(eeg.simulate(config, key=k_sim))  # notch, 1-40 Hz, average ref
table = eeg.make_epochs(data, seconds=2.0, reject_uv=150.0)
table = table.select(table.keep)  # (N, C, L) epochs with subject/session/condition rows
features = np.asarray(eeg.spectral_features(table.x, table.sfreq, table.ch_names))
y = np.asarray(table.condition)  # 0 rest, 1 meditation
folds = eeg.leave_subjects_out(np.asarray(table.subject), 3, key=k_fold)
for name in ("lda", "logreg"):
    scores = eeg.cross_validate(name, features, y, folds)
    print(name, "balanced accuracy {:.3f} [{:.3f}, {:.3f}]".format(*eeg.fold_ci(scores["bacc"])))

# %%
freqs, psd = eeg.welch(np.asarray(table.x), table.sfreq)
fig, ax = plt.subplots(figsize=(5.5, 3.2))
for c, label in enumerate(eeg.CONDITIONS):
    ax.semilogy(freqs, psd[y == c].mean(axis=(0, 1)), label=label)
ax.set(xlabel="Hz", ylabel="mean PSD", xlim=(1, 40), title="simulated EEG: rest vs meditation")
ax.legend()
fig.tight_layout()
fig.savefig(os.path.join(OUT, "eeg.png"))
plt.show()
