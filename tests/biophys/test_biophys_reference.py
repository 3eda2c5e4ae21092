"""hh_reference_voltage (adaptive Tsit5) vs SciPy's DOP853 on the same HH vector field."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy.integrate import solve_ivp

from jaxlab import biophys as bp

HH = bp.HodgkinHuxley()


def test_matches_scipy_dop853_through_a_spike():
    dt, steps, currents = 0.025, 400, np.array([0.0, 10.0])  # 10 ms: the 10 uA/cm^2 one spikes
    with jax.enable_x64(True):
        ref = np.asarray(bp.hh_reference_voltage(HH, jnp.asarray(currents), steps=steps, dt=dt))
        field = jax.jit(HH.vector_field)
        ts = np.arange(1, steps + 1) * dt
        peer = []
        for i in currents:
            sol = solve_ivp(
                lambda t, y, i=i: np.asarray(field(t, jnp.asarray(y), jnp.asarray(i))),
                (0.0, ts[-1]),
                np.asarray(HH.init_state()),
                method="DOP853",
                t_eval=ts,
                rtol=1e-11,
                atol=1e-11,
            )
            peer.append(sol.y[0])
    assert ref.shape == (2, steps)
    assert ref.dtype == np.float64
    assert ref[1].max() > 30  # the 10 uA/cm^2 neuron spikes
    assert ref[0].max() < -60  # the unstimulated one stays near rest
    np.testing.assert_allclose(ref, np.stack(peer), atol=1e-5)


@pytest.mark.parametrize(
    ("kwargs", "name"),
    [
        ({"hh": bp.LIF()}, "hh"),
        ({"currents": [[1.0]]}, "currents"),
        ({"currents": [np.nan]}, "currents"),
        ({"currents": None}, "currents"),
        ({"currents": np.zeros(0)}, "currents"),
        ({"steps": 0}, "steps"),
        ({"dt": -0.1}, "dt"),
        ({"dt": float("nan")}, "dt"),
        ({"tol": 0.0}, "tol"),
        ({"max_steps": 2.5}, "max_steps"),
    ],
)
def test_bad_input_raises_naming_the_argument(kwargs, name):
    call = {"hh": HH, "currents": np.array([5.0]), "steps": 4, "dt": 0.025} | kwargs
    with jax.enable_x64(True), pytest.raises(ValueError, match=rf"^{name}: "):
        bp.hh_reference_voltage(**call)


def test_float32_currents_are_refused_not_run_to_max_steps():
    with pytest.raises(ValueError, match=r"^currents: expected float64"):
        bp.hh_reference_voltage(HH, jnp.array([5.0], jnp.float32), steps=4, dt=0.025)
