"""Benchmark: a population of single-compartment Hodgkin–Huxley neurons, jaxlab vs peers.

The same HH population (classic squid-axon parameters, rest -65 mV, each
neuron driven by its own constant current density from 6 to 14 uA/cm^2) for
`duration_ms` at dt = 25 us: jaxlab (`simulate`, diffrax Heun, and diffrax Euler
as `jaxlab_euler` (one vector-field evaluation per step, like Jaxley),
vmapped over neurons, jitted; `jaxlab_expeuler`: `simulate_hh_population`,
exponential Euler for gates and voltage in one fused `lax.scan` step over the
`(N,)` state) vs Jaxley (a Network of one-compartment HH cells; implicit
Euler for the voltage, exponential Euler for the gates) vs Brian2 (rk2) when
it imports. Throughput: neuron-steps/s = size["neuron_steps"] / median time.
Timings run in float32; the voltage agreement over the first 100 ms at
matched dt runs in float64, is computed once in `setup` and stored in
`size` (the runner's record has no other free field): vs a dense
reference (diffrax Tsit5, adaptive, rtol = atol = 1e-10), vs Jaxley, and
vs Brian2.
"""

from __future__ import annotations

import diffrax
import jax
import jax.numpy as jnp
import numpy as np

from experiments._harness import Bench, log
from jaxlab import biophys as bp

NAME = "biophys_sim"
PAPER = "P12"
DESCRIPTION = "HH population at dt=25us: jaxlab (diffrax, vmap) vs Jaxley vs Brian2"

QUICK = {"n_neurons": 100, "duration_ms": 1000.0, "dt_ms": 0.025, "warmup": 1, "repeats": 3}
# the smoke tier: every implementation once on a small population
TINY = {"n_neurons": 2, "duration_ms": 20.0, "warmup": 0, "repeats": 1}
FULL = {"n_neurons": 1000, "duration_ms": 1000.0, "dt_ms": 0.025, "warmup": 1, "repeats": 5}

_AREA_CM2 = 2 * np.pi * 1.0 * 10.0 * 1e-8  # Jaxley's default compartment: r 1 um, L 10 um


def _densities(n: int) -> np.ndarray:
    return 6.0 + 8.0 * np.arange(n) / max(n, 1)


def _jaxlab(dens: np.ndarray, steps: int, dt: float, dtype=jnp.float32, solver=None):
    hh = bp.HodgkinHuxley()
    cur = jnp.asarray(np.repeat(dens[:, None], steps, axis=1), dtype=dtype)
    f = jax.jit(jax.vmap(lambda c: bp.simulate(hh, c, dt=dt, solver=solver).voltage))
    return lambda: f(cur)


def _expeuler(dens: np.ndarray, steps: int, dt: float, dtype=jnp.float32):
    hh = bp.HodgkinHuxley()
    cur = jnp.asarray(np.repeat(dens[:, None], steps, axis=1), dtype=dtype)
    f = jax.jit(lambda c: bp.simulate_hh_population(hh, c, dt).voltage)
    return lambda: f(cur)


def _jaxley(dens: np.ndarray, steps: int, dt: float):
    import jaxley as jx
    from jaxley.channels import HH

    comp = jx.Compartment()
    cell = jx.Cell(jx.Branch(comp, ncomp=1), parents=[-1])
    cell.insert(HH())
    net = jx.Network([cell] * len(dens))
    net.set("v", -65.0)
    net.set("HH_eLeak", -54.387)  # jaxlab's value (rest exactly -65 mV)
    net.init_states()
    net.cell("all").branch(0).comp(0).record("v", verbose=False)
    amps = jnp.asarray(
        np.repeat((dens * _AREA_CM2 * 1e3)[:, None], steps, axis=1), dtype=jnp.float32
    )  # nA

    def integrate(amps):
        data = None
        for i in range(len(dens)):
            data = net.cell(i).branch(0).comp(0).data_stimulate(amps[i], data)
        return jx.integrate(net, delta_t=dt, t_max=(steps - 1) * dt, data_stimuli=data)

    f = jax.jit(integrate)
    return lambda: f(amps)  # (N, steps) with column 0 the initial state


def _brian2(dens: np.ndarray, steps: int, dt: float):
    import brian2 as b2

    b2.prefs.codegen.target = "numpy"
    eqs = """
    dv/dt = (I - gna*m**3*h*(v - ena) - gk*n**4*(v - ek) - gl*(v - el)) / cm : 1
    dm/dt = am*(1 - m) - bm*m : 1
    dh/dt = ah*(1 - h) - bh*h : 1
    dn/dt = an*(1 - n) - bn*n : 1
    am = 0.1*(v + 40)/(1 - exp(-(v + 40)/10)) / ms : Hz
    bm = 4*exp(-(v + 65)/18) / ms : Hz
    ah = 0.07*exp(-(v + 65)/20) / ms : Hz
    bh = 1/(1 + exp(-(v + 35)/10)) / ms : Hz
    an = 0.01*(v + 55)/(1 - exp(-(v + 55)/10)) / ms : Hz
    bn = 0.125*exp(-(v + 65)/80) / ms : Hz
    I : 1
    """
    ns = {
        "gna": 120.0,
        "gk": 36.0,
        "gl": 0.3,
        "ena": 50.0,
        "ek": -77.0,
        "el": -54.387,
        "cm": 1.0 * b2.ms,
    }

    def run():
        b2.start_scope()
        g = b2.NeuronGroup(len(dens), eqs, method="rk2", namespace=ns, dt=dt * b2.ms)
        g.v = -65.0
        rest = bp.HodgkinHuxley().gates_at_rest(-65.0)
        g.m, g.h, g.n = (float(x) for x in rest)
        g.I = dens
        mon = b2.StateMonitor(g, "v", record=True)
        b2.run(steps * dt * b2.ms)
        return np.asarray(mon.v)

    return run


def setup(config: dict, key: jax.Array) -> Bench:
    n = int(config["n_neurons"])
    dt = float(config["dt_ms"])
    steps = int(round(config["duration_ms"] / dt))
    dens = _densities(n)
    impls = {
        "jaxlab": _jaxlab(dens, steps, dt),
        "jaxlab_euler": _jaxlab(dens, steps, dt, solver=diffrax.Euler()),
        "jaxlab_expeuler": _expeuler(dens, steps, dt),
    }
    notes = []
    # voltage agreement over 100 ms on 8 neurons of the population
    sub = dens[:: max(n // 8, 1)][:8]
    agree_steps = int(round(100.0 / dt))
    hh = bp.HodgkinHuxley()

    with jax.enable_x64(True):  # the agreement runs in float64, like Brian2
        ref = np.asarray(
            bp.hh_reference_voltage(hh, jnp.asarray(sub, jnp.float64), steps=agree_steps, dt=dt)
        )
        ours = np.asarray(_jaxlab(sub, agree_steps, dt, jnp.float64)())
        ours5 = np.asarray(_jaxlab(sub, agree_steps, dt, jnp.float64, diffrax.Tsit5())())
    # the exponential-Euler arm's accuracy in the dtype it is timed in (float32)
    ours_ee = np.asarray(_expeuler(sub, agree_steps, dt)(), dtype=np.float64)
    size = {
        "n_neurons": n,
        "steps": steps,
        "dt_ms": dt,
        "neuron_steps": n * steps,
        "max_abs_dv_mv_vs_reference": float(np.abs(ours - ref).max()),
        "max_abs_dv_mv_tsit5_vs_reference": float(np.abs(ours5 - ref).max()),
        # jaxlab_expeuler (float32) vs the reference
        "max_abs_dv_mv": float(np.abs(ours_ee - ref).max()),
    }
    try:
        impls["jaxley"] = _jaxley(dens, steps, dt)
        vj = np.asarray(_jaxley(sub, agree_steps + 1, dt)())[:, 1:]
        size["max_abs_dv_mv_vs_jaxley"] = float(np.abs(ours - vj).max())
        size["max_abs_dv_mv_jaxley_vs_reference"] = float(np.abs(vj - ref).max())
        # Jaxley's own float32 run (the timed dtype) vs the same reference
        size["max_abs_dv_mv_jaxley"] = size["max_abs_dv_mv_jaxley_vs_reference"]
    except ImportError as err:
        notes.append(f"Jaxley not importable ({err}); install the biophys-peers extra.")
    try:
        b2_run = _brian2(sub, agree_steps, dt)
        vb = b2_run()
        size["max_abs_dv_mv_vs_brian2"] = float(np.abs(ours - vb).max())
        impls["brian2"] = _brian2(dens, steps, dt)
    except (ImportError, AttributeError) as err:
        size["max_abs_dv_mv_vs_brian2"] = None
        notes.append(
            f"Brian2 unavailable ({type(err).__name__}: {err}); Brian2 2.9.0, the last "
            "release for Python 3.11, does not import with NumPy 2 (ndarray.ptp)."
        )
    log.info("biophys_sim agreement: %s", size)
    notes.append(
        "neuron-steps/s = size.neuron_steps / timings[impl].median_s. Jaxley integrates "
        "with a first-order implicit scheme, so its spike times drift from the "
        "second-order jaxlab/reference solutions over 100 ms; the reference column "
        "is the accuracy oracle."
    )
    fields = {"max_abs_dv_mv": lambda m, v=size["max_abs_dv_mv"]: v}
    if "jaxley" in impls:
        fields["speedup_vs_jaxley"] = lambda m: m["jaxley"] / m["jaxlab_expeuler"]
        fields["max_abs_dv_mv_jaxley"] = lambda m, v=size["max_abs_dv_mv_jaxley"]: v
    return Bench(
        impls=impls,
        fields=fields,
        ours=("jaxlab", "jaxlab_euler", "jaxlab_expeuler"),
        size=size,
        notes=" ".join(notes),
    )
