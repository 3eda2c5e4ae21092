# ---
# jupyter:
#   jupytext:
#     comment_magics: false
# ---

# %% [markdown]
# # biophys: differentiable biophysics on a Neuropixels probe (P12)
#
# Hodgkin–Huxley ball-and-stick neurons integrated with diffrax, their transmembrane
# currents projected through a volume conductor ($\sigma = 0.3$ S/m) onto the sites of a
# Neuropixels 1.0 probe, realistic noise, and an inverse fit of each neuron's input
# current and 3-D position from the extracellular trace. Below: two neurons beside the
# probe, their somatic voltage and extracellular spikes, and where monopolar
# triangulation (SpikeInterface's method, the paper's baseline) places them. The
# gradient-based inverse fit (`biophys.fit`) is run by the `biophys_*` experiments.

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

# %%
import os

import jax
import jax.numpy as jnp
import matplotlib.pyplot as plt
import numpy as np

from jaxlab import biophys as bp

FULL = os.environ.get("JAXLAB_FULL") == "1"  # or True by hand on a GPU/TPU
DURATION_MS = 1000.0 if FULL else 40.0
DT = 1.0 / 30.0  # ms: 30 kHz
OUT = os.environ.get("JAXLAB_EXAMPLE_OUT", ".")

# %% tags=["core"]
cell = bp.BallAndStick()
probe = bp.neuropixels_1(dtype=jnp.float32)
probe = probe.select(probe.sites_between(150.0, 450.0))  # the sites near the cells
positions = jnp.array([[20.0, 250.0, 25.0], [50.0, 330.0, 35.0]])  # soma (x, y, z) um
n_steps = int(DURATION_MS / DT)
currents = jnp.full((2, n_steps), 0.45).at[1].set(0.6)  # constant somatic drive, nA
rec = bp.record(
    cell, positions, currents, probe, dt=DT, noise=bp.NoiseModel(), key=jax.random.key(0)
)  # traces (T, sites) uV, voltage (2, T) mV

spikes = [bp.spike_indices(v) for v in np.asarray(rec.voltage)]
estimates = []
for s in spikes:
    ptp = bp.template_ptp(np.asarray(rec.traces), s, before=30, after=45)
    estimates.append(bp.monopolar_triangulation(ptp, np.asarray(probe.positions))[:3])
estimates = np.asarray(estimates)
print("spikes per neuron:", [len(s) for s in spikes])
print("triangulation error (um):", np.linalg.norm(estimates - np.asarray(positions), axis=1))

# %%
t_ms = np.arange(n_steps) * DT
fig, (ax0, ax1, ax2) = plt.subplots(1, 3, figsize=(12, 3.2))
ax0.plot(t_ms, np.asarray(rec.voltage).T)
ax0.set(xlabel="ms", ylabel="soma mV", title="Hodgkin-Huxley ball-and-stick")
best = int(np.argmax(np.ptp(np.asarray(rec.clean), axis=0)))
ax1.plot(t_ms, np.asarray(rec.traces)[:, best], lw=0.6)
ax1.set(xlabel="ms", ylabel="uV", title=f"extracellular, site {best}")
site_xy = np.asarray(probe.positions)
ax2.scatter(site_xy[:, 0], site_xy[:, 1], s=4, c="0.6", label="probe sites")
ax2.scatter(*np.asarray(positions)[:, :2].T, marker="*", s=120, label="true soma")
ax2.scatter(*estimates[:, :2].T, marker="x", s=60, label="triangulation")
ax2.set(xlabel="x um", ylabel="y um", title="localisation")
ax2.legend(fontsize=7)
fig.tight_layout()
fig.savefig(os.path.join(OUT, "biophys.png"))
plt.show()
