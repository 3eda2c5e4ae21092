"""Forward pipeline: population -> membrane dynamics -> extracellular traces at every site.

For each neuron (a `BallAndStick` cell at a soma position) the transmembrane
currents of its compartments are projected onto the probe through the volume
conductor (soma as a point source, dendrite compartments as line sources,
Holt 1998); the traces of all neurons add (linearity of the quasi-static
field). Simulation is `vmap`ped over neurons. P12's forward model.
"""

from __future__ import annotations

import diffrax
import equinox as eqx
import jax
import jax.numpy as jnp
from jaxtyping import Array, ArrayLike, Float, PRNGKeyArray

from jaxlab._core import as_array, check_instance, check_range, check_real

from ._conductor import SIGMA_CORTEX, line_source_gain, point_source_gain
from ._neurons import BallAndStick
from ._noise import NoiseModel
from ._probe import Probe
from ._simulate import check_stable, simulate

__all__ = ["Recording", "cell_gain", "population_traces", "population_sources", "record"]


def cell_gain(
    cell: BallAndStick,
    position: Float[Array, " 3"],
    electrodes: Float[Array, "S 3"],
    *,
    sigma: float = SIGMA_CORTEX,
    r_min: float = 1.0,
) -> Float[Array, "S C"]:
    """Potential (uV) at each electrode per nA of transmembrane current in each compartment."""
    check_instance("cell", cell, BallAndStick)
    position = as_array("position", position, shape=(3,), dtype=jnp.floating, finite=True)
    electrodes = as_array("electrodes", electrodes, shape=(None, 3), dtype=jnp.floating)
    centre, starts, ends = cell.geometry(position)
    soma = point_source_gain(centre[None, :], electrodes, sigma=sigma, r_min=max(r_min, 1e-3))
    dend = line_source_gain(starts, ends, electrodes, sigma=sigma, r_min=r_min)
    return jnp.concatenate([soma, dend], axis=1)


def population_traces(
    cell: BallAndStick,
    positions: Float[ArrayLike, "N 3"],
    currents: Float[ArrayLike, "N T"],
    electrodes: Float[ArrayLike, "S 3"],
    *,
    dt: float,
    solver: diffrax.AbstractSolver | None = None,
    sigma: float = SIGMA_CORTEX,
    r_min: float = 1.0,
) -> tuple[Float[Array, "T S"], Float[Array, "N T"], Float[Array, "N T"]]:
    """Noise-free traces of a population of identical cells.

    **Arguments:**

    - `cell`: the `BallAndStick` model shared by all neurons.
    - `positions`: `(N, 3)` soma positions (um); the probe is the plane z = 0.
    - `currents`: `(N, T)` somatic input currents (nA), one sample per step.
    - `electrodes`: `(S, 3)` site positions (um), e.g. `probe.electrodes()`.
    - `dt`: step (ms); the traces have one row per step.

    **Returns:** `(traces (T, S) uV, soma voltage (N, T) mV, spikes (N, T) 0/1)`.
    """
    i_m, gains, volts, spikes = population_sources(
        cell, positions, currents, electrodes, dt=dt, solver=solver, sigma=sigma, r_min=r_min
    )
    traces = jnp.einsum("ntc,nsc->ts", i_m, gains.astype(i_m.dtype))
    return traces, volts, spikes


def population_sources(
    cell: BallAndStick,
    positions: Float[ArrayLike, "N 3"],
    currents: Float[ArrayLike, "N T"],
    electrodes: Float[ArrayLike, "S 3"],
    *,
    dt: float,
    solver: diffrax.AbstractSolver | None = None,
    sigma: float = SIGMA_CORTEX,
    r_min: float = 1.0,
) -> tuple[Float[Array, "N T C"], Float[Array, "N S C"], Float[Array, "N T"], Float[Array, "N T"]]:
    """Per-neuron transmembrane currents `(N, T, C)` nA, gains `(N, S, C)` uV/nA, soma
    voltage `(N, T)` and spikes `(N, T)`: the factors of `population_traces`
    (neuron n's own traces are `i_m[n] @ gains[n].T`). Inputs as `population_traces`."""
    check_instance("cell", cell, BallAndStick)
    sizes: dict[str, int] = {}
    positions = as_array(
        "positions", positions, shape=("N", 3), dtype=jnp.floating, sizes=sizes, finite=True
    )
    currents = as_array(
        "currents", currents, shape=("N", "T"), dtype=jnp.floating, sizes=sizes, finite=True
    )
    electrodes = as_array(
        "electrodes", electrodes, shape=(None, 3), dtype=jnp.floating, finite=True
    )
    if sizes["T"] == 0:
        raise ValueError("currents: expected at least one step, received shape (N, 0)")
    dt = check_real("dt", dt, low=0.0, low_inclusive=False)
    check_range("sigma", sigma, low=0.0, low_inclusive=False)

    def one(pos, cur):
        traj = simulate(cell, cur, dt=dt, solver=solver)
        i_m = jax.vmap(cell.transmembrane_currents)(traj.states)  # (T, C)
        gain = cell_gain(cell, pos, electrodes, sigma=sigma, r_min=r_min)  # (S, C)
        return i_m, gain, traj.voltage, traj.spikes

    i_m, gains, volts, spikes = jax.vmap(one)(positions, currents)
    check_stable(volts, dt)
    return i_m, gains, volts, spikes


class Recording(eqx.Module):
    """A synthetic recording with its ground truth.

    - `traces`: `(T, S)` uV, noisy; `clean`: `(T, S)` uV, noise-free.
    - `voltage`: `(N, T)` somatic potentials (mV); `spikes`: `(N, T)` 0/1.
    - `dt`: step (ms).
    """

    traces: Float[Array, "T S"]
    clean: Float[Array, "T S"]
    voltage: Float[Array, "N T"]
    spikes: Float[Array, "N T"]
    dt: float = eqx.field(static=True)


def record(
    cell: BallAndStick,
    positions: Float[ArrayLike, "N 3"],
    currents: Float[ArrayLike, "N T"],
    probe: Probe,
    *,
    dt: float,
    noise: NoiseModel | None = None,
    key: PRNGKeyArray | None = None,
    solver: diffrax.AbstractSolver | None = None,
    sigma: float = SIGMA_CORTEX,
) -> Recording:
    """Simulate a population and record it on `probe` (sampling rate `1/dt`), plus noise.

    `noise=None` gives a noise-free recording; otherwise `key` seeds the noise.
    """
    if noise is not None and key is None:
        raise ValueError("key: a PRNG key is required when noise is given")
    check_instance("probe", probe, Probe)
    if noise is not None:
        check_instance("noise", noise, NoiseModel)
    dt = check_real("dt", dt, low=0.0, low_inclusive=False)
    clean, volts, spikes = population_traces(
        cell, positions, currents, probe.electrodes(), dt=dt, solver=solver, sigma=sigma
    )
    traces = clean
    if noise is not None:
        assert key is not None
        fs = 1000.0 / dt
        traces = clean + noise.sample(probe, clean.shape[0], fs=fs, key=key).astype(clean.dtype)
    return Recording(traces=traces, clean=clean, voltage=volts, spikes=spikes, dt=dt)
