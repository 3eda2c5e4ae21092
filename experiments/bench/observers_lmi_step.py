"""P2 benchmark: one LMI training step — jaxlab's eigenvalue barrier vs an SDP solve per step.

The two-stage method's stage 2 enforces the certificate through a differentiable
eigenvalue barrier (one `eigvalsh` + its gradient per step); the direct LMI-based
approach solves the certificate SDP with a conic solver at every step. Same
X-29 observer, same LMI (size ne + nh), same process.
"""

from __future__ import annotations

import equinox as eqx
import jax
import jax.numpy as jnp

import jaxlab.observers as O
from experiments._harness import Bench

NAME = "observers_lmi_step"
PAPER = "P2"
DESCRIPTION = "X-29 LMI step: jaxlab barrier value+grad (jit) vs cvxpy Clarabel / SCS SDP solve"
QUICK = {"hidden": [16, 16], "warmup": 1, "repeats": 3, "scs": False}  # SCS: ~1 min a solve
TINY = {"hidden": [4], "warmup": 0, "repeats": 1, "scs": True}  # the smoke tier: every solver
FULL = {"hidden": [32, 64, 32], "warmup": 1, "repeats": 5, "scs": True}


def setup(config, key) -> Bench:
    dtype = jnp.float64 if jax.config.jax_enable_x64 else jnp.float32
    plant = O.x29_longitudinal(0.1, dtype=dtype)
    obs = O.NeuralObserver.from_plant(plant, tuple(config["hidden"]), epsilon=0.01, key=key)
    params = O.CertifiedObserver.from_observer(obs)
    tc = O.ObserverTrainConfig(lmi_est_weight=0.0)
    trainable, frozen = eqx.partition(params, eqx.is_inexact_array)

    @jax.jit
    def barrier_step(tr):
        return jax.value_and_grad(lambda t: O.lmi_loss(eqx.combine(t, frozen), tc, key=key))(tr)

    def ours():
        return barrier_step(trainable)

    def clarabel():
        return O.certify_lmi(obs, solver="CLARABEL").margin

    def scs():
        return O.certify_lmi(obs, solver="SCS").margin

    impls = {"jaxlab_barrier_step": ours, "cvxpy_clarabel_sdp": clarabel}
    if config.get("scs", False):
        impls["cvxpy_scs_sdp"] = scs
    return Bench(
        impls=impls,
        ours=("jaxlab_barrier_step",),
        size={"hidden": config["hidden"], "lmi_dim": obs.extended_dim + obs.hidden_dim},
        notes="cvxpy timings include problem construction/canonicalisation, as a per-step SDP "
        "training loop that rebuilds the problem pays it (train_direct_sdp caches it with DPP "
        "parameters instead).",
    )
