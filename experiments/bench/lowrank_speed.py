"""Wall time of full N-space gradient descent vs the overlap ODE, same training horizon.

Both integrate gradient flow with the same diffrax solver and tolerance; the
N-space one simulates the N-neuron network for every loss gradient (cost ~N),
the overlap ODE works on the P x P Gram matrix (cost independent of N).
Ratio `ode_N{max}_vs_full_gd_N{max}` is the speedup at the largest N.
"""

from __future__ import annotations

import diffrax
import jax
import jax.numpy as jnp

from experiments._harness import Bench
from jaxlab import lowrank as lr

NAME = "lowrank_speed"
PAPER = "P1"
DESCRIPTION = "Full N-space gradient flow vs overlap ODE (diffrax, same horizon) at N = 1e3..1e5"

QUICK = {"ns": [1000, 10000, 100000], "horizon": 1.0, "rtol": 1e-6, "warmup": 1, "repeats": 3}
# the smoke tier (the lowrank tests' tiny size)
TINY = {"ns": [20, 40], "horizon": 0.2, "rtol": 1e-4, "warmup": 0, "repeats": 1}
FULL = {
    "ns": [1000, 3000, 10000, 30000, 100000, 300000],
    "horizon": 5.0,
    "rtol": 1e-8,
    "warmup": 2,
    "repeats": 7,
}


def setup(config: dict, key: jax.Array) -> Bench:
    layout = lr.OverlapLayout(1, 1)
    task = lr.fixed_point_task()
    act = lr.Linear()
    trained = layout.trained_mask()
    net_loss = lr.NetworkLoss(task, layout, act)
    ov_loss = lr.OverlapLoss(task, layout, act)
    ctrl = diffrax.PIDController(rtol=config["rtol"], atol=config["rtol"] * 1e-2)
    ts = jnp.array([0.0, config["horizon"]], jnp.float32)
    cov = jnp.eye(4).at[0, 3].set(0.4).at[3, 0].set(0.4).at[1, 2].set(0.4).at[2, 1].set(0.4)
    impls = {}
    for n in config["ns"]:
        v0 = lr.gaussian_vectors(cov, n, key=jax.random.fold_in(key, n))
        g0 = lr.gram(v0)
        impls[f"ode_N{n}"] = lambda g0=g0: lr.solve_overlap_flow(
            ov_loss, g0, trained, ts, stepsize_controller=ctrl
        )
        impls[f"full_gd_N{n}"] = lambda v0=v0: lr.solve_network_flow(
            net_loss, v0, trained, ts, stepsize_controller=ctrl
        )
    ns = list(config["ns"])
    return Bench(
        impls=impls,
        ours=tuple(f"ode_N{n}" for n in ns),
        pairs=tuple((f"ode_N{n}", f"full_gd_N{n}") for n in ns),
        size={
            "ns": ns,
            "max_n": max(ns),
            "horizon": config["horizon"],
            "rank": 1,
            "n_inputs": 1,
            "trials": 5,
            "time_steps": 40,
            "speedup_at_max_n": f"ratios.ode_N{max(ns)}_vs_full_gd_N{max(ns)}",
        },
        notes="float32, linear rank-1 RNN, fixed-point task; Tsit5 with PID step control at "
        "equal tolerance for both. Per-N times: timings.ode_N* (flat in N) and "
        "timings.full_gd_N* (grow ~N).",
    )
