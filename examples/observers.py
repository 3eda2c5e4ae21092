# ---
# jupyter:
#   jupytext:
#     comment_magics: false
# ---

# %% [markdown]
# # observers: provably stable neural-network observers (P2)
#
# A high-gain extended-state observer estimates a plant's state and its unknown
# disturbance from the measured output; a small tanh network adds a learned
# output-injection correction. Training has two stages: point-guided Lyapunov
# pre-training, then fine-tuning on a differentiable penalty of the linear matrix
# inequality (LMI) whose feasibility certifies global stability. The certificate is
# re-checked independently with cvxpy. Below: a Van der Pol oscillator with a
# sinusoidal disturbance, an observer trained until certified, and its estimate
# against the plant.

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
# !pip install -q -c keep.txt "./jaxlab[observers]"

# %%
import os

import jax
import jax.numpy as jnp
import matplotlib.pyplot as plt

from jaxlab import Driver
from jaxlab import observers as O

jax.config.update("jax_enable_x64", True)  # the observers and their LMIs are float64

FULL = os.environ.get("JAXLAB_FULL") == "1"  # or True by hand on a GPU/TPU
HIDDEN, STEPS1 = ((32, 64, 32), 2000) if FULL else ((4,), 150)
OUT = os.environ.get("JAXLAB_EXAMPLE_OUT", ".")

# %% tags=["core"]
k_obs, k1, k2 = jax.random.split(jax.random.key(3), 3)
plant = O.VanDerPol()
observer = O.NeuralObserver.from_plant(plant, HIDDEN, epsilon=0.1, key=k_obs)
params = O.CertifiedObserver.from_observer(observer)
cfg = O.ObserverTrainConfig(batch=16, rollout_steps=5, lmi_margin=1e-3)

# stage 1: point-guided Lyapunov pre-training; stage 2: LMI fine-tuning until certified
params, _ = O.fit(
    O.point_loss, params, key=k1, config=cfg, steps=STEPS1, driver=Driver(chunk=STEPS1)
)
params, info = O.fit(
    O.lmi_loss,
    params,
    key=k2,
    config=cfg,
    steps=3000,
    driver=Driver(chunk=150, stop=lambda p: O.max_lmi_eigenvalue(p) < -cfg.lmi_margin),
)
print(
    "stage 2 stopped after",
    info["steps"],
    "steps; independent cvxpy check:",
    O.certify_lmi(params.observer).certified,
)

ts = jnp.linspace(0.0, 15.0, 600)
traj = O.simulate(plant, params.observer, jnp.array([1.5, 0.0]), jnp.zeros(2), ts)
print("state MSE:", float(O.state_mse(traj, start=100)))

# %%
fig, axes = plt.subplots(1, 2, figsize=(9, 3.2))
for i, ax in enumerate(axes):
    ax.plot(ts, traj.x[:, i], label="plant")
    ax.plot(ts, traj.x_hat[:, i], "--", label="certified neural observer")
    ax.set(xlabel="t", title=f"Van der Pol, state x{i + 1}")
axes[0].legend()
fig.tight_layout()
fig.savefig(os.path.join(OUT, "observers.png"))
plt.show()
