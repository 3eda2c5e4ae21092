"""Dense adaptive reference solution of Hodgkin–Huxley neurons under constant currents.

The accuracy oracle of the fixed-step HH simulators (`simulate`,
`simulate_hh_population`): diffrax `Tsit5` with a PID step-size controller at tight
tolerances, integrated from rest under a constant current density and sampled at the
end of every fixed step `dt, 2 dt, ..., steps dt` (the columns the fixed-step
simulators return). One solve per current (adaptive steps are per neuron).
"""

from __future__ import annotations

import diffrax
import jax.numpy as jnp
from jaxtyping import Array, ArrayLike, Float

from jaxlab._core import as_array, check_memory, check_positive_int

from ._neurons import HodgkinHuxley

__all__ = ["hh_reference_voltage"]


def hh_reference_voltage(
    hh: HodgkinHuxley,
    currents: Float[ArrayLike, " N"],
    *,
    steps: int,
    dt: float,
    tol: float = 1e-10,
    max_steps: int = 200_000,
) -> Float[Array, "N steps"]:
    """Membrane potential of `N` HH neurons under constant currents, by adaptive Tsit5.

    **Arguments:**

    - `hh`: the `HodgkinHuxley` parameters; every neuron starts from `hh.init_state()`.
    - `currents`: `(N,)` constant input current densities (uA/cm^2), finite.
    - `steps`, `dt`: sample times `dt, 2 dt, ..., steps dt` (ms), the fixed-step grid.
    - `tol`: the controller's rtol = atol (default 1e-10).
    - `max_steps`: the solver's step budget per neuron.

    The solve runs in float64: call it under `jax.enable_x64(True)` (float32 cannot meet
    the tolerance; a float32 `currents` raises rather than exhausting `max_steps`).

    **Returns:** `(N, steps)` float64 voltage (mV). Paper: P12.
    """
    if not isinstance(hh, HodgkinHuxley):
        raise ValueError(f"hh: expected a HodgkinHuxley, received {type(hh).__name__}")
    currents = as_array(
        "currents", currents, ndim=1, dtype=jnp.floating, finite=True, nonempty=True
    )
    if currents.dtype != jnp.float64:
        raise ValueError(
            f"currents: expected float64 (call under jax.enable_x64(True)), received "
            f"{currents.dtype}"
        )
    steps = check_positive_int("steps", steps)
    # the saved grid (steps,), each neuron's 4-variable trajectory and the voltages
    check_memory("steps", 8.0 * steps * (1 + 5 * currents.shape[0]))
    max_steps = check_positive_int("max_steps", max_steps)
    for name, v in (("dt", dt), ("tol", tol)):
        if isinstance(v, bool) or not isinstance(v, int | float) or not 0 < v < float("inf"):
            raise ValueError(f"{name}: expected a positive finite number, received {v!r}")
    dtype = currents.dtype
    ts = jnp.arange(1, steps + 1, dtype=dtype) * jnp.asarray(dt, dtype)
    y0 = hh.init_state().astype(dtype)

    def one(i):
        sol = diffrax.diffeqsolve(
            diffrax.ODETerm(hh.vector_field),
            diffrax.Tsit5(),
            0.0,
            float(ts[-1]),
            dt / 4,
            y0,
            args=i,
            saveat=diffrax.SaveAt(ts=ts),
            stepsize_controller=diffrax.PIDController(rtol=tol, atol=tol),
            max_steps=max_steps,
        )
        assert sol.ys is not None  # SaveAt(ts=...) saves
        return sol.ys[:, 0]  # the state is [v, m, h, n]

    return jnp.stack([one(i) for i in currents])
