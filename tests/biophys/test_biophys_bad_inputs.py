"""biophys bad inputs found by the fuzz suites of issue #59: hh_reference_voltage refuses
a sample count larger than memory (steps=10**9 ran out of memory inside XLA); the inverse
fit, population, noise, probe and triangulation functions name the argument they refuse."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxlab.biophys as bp


def test_hh_reference_voltage_bounds_steps_before_allocating():
    with jax.enable_x64(True):
        v = bp.hh_reference_voltage(bp.HodgkinHuxley(), np.array([10.0]), steps=4, dt=0.025)
        assert v.shape == (1, 4)
        assert np.isfinite(np.asarray(v)).all()
        with pytest.raises(ValueError, match="^steps: needs about"):
            bp.hh_reference_voltage(bp.HodgkinHuxley(), np.array([10.0]), steps=10**12, dt=0.025)


# ---- the public-API fuzz of issue #59 (biophys table): each case below was silent
# garbage or a confusing error before its fix


def _tiny_problem(**kw):
    probe = bp.neuropixels_1(4, dtype=jnp.float64)
    traces = np.random.default_rng(0).standard_normal((20, 4))
    args = {"dt": 1 / 30, "noise_std": 1.0, "knot_spacing_ms": 1.0} | kw
    return bp.make_fit_problem(
        bp.BallAndStick(), probe.electrodes(), traces, np.array([[5, 15]]), **args
    )


def test_fit_loss_of_a_basis_without_second_differences_is_finite():
    # 20 samples at 1/30 ms with 1 ms knots: 2 knots, no second difference; the
    # smoothness prior was the mean of an empty array (NaN)
    problem = _tiny_problem()
    assert problem.basis.n_knots == 2
    u = bp.FitParams(jnp.array([[20.0, 40.0, 25.0]]), jnp.full((1, 2), 0.5))
    total, parts = bp.fit_loss(u, problem, bp.SpikeAnchor())
    assert np.isfinite(float(total))
    assert float(parts["smooth"]) == 0.0


def test_fit_loss_refuses_bad_parameters_naming_them():
    problem = _tiny_problem()
    with pytest.raises(ValueError, match="u.positions"):  # was a silent NaN loss
        bp.fit_loss(bp.FitParams(jnp.array([[np.nan, 0.0, 1.0]]), jnp.ones((1, 2))), problem, None)
    with pytest.raises(ValueError, match="u.coeffs"):  # was an interp error
        bp.fit_loss(bp.FitParams(jnp.ones((1, 3)), jnp.ones((1, 1, 1, 2))), problem, None)


@pytest.mark.parametrize(
    ("kw", "name"),
    [
        ({"spike_idx": None}, "spike_idx"),  # TypeError: len(None)
        ({"spike_idx": "abc"}, "spike_idx"),  # int('a')
        ({"spike_idx": np.array([[[[5, 15]]]])}, "spike_idx"),  # flattened silently
        ({"spike_idx": [np.array([5.5])]}, "spike_idx"),  # truncated silently
        ({"dt": float("nan")}, "dt"),  # cannot convert float NaN to integer
        ({"dt": None}, "dt"),  # TypeError
        ({"noise_std": np.array([[1.0]])}, "noise_std"),  # a (1, 1) noise variance
        ({"noise_std": float("inf")}, "noise_std"),
    ],
)
def test_make_fit_problem_names_the_bad_argument(kw, name):
    probe = bp.neuropixels_1(4, dtype=jnp.float64)
    args = {
        "electrodes": probe.electrodes(),
        "traces": np.zeros((20, 4)),
        "spike_idx": [np.array([5])],
        "dt": 1 / 30,
        "noise_std": 1.0,
    } | kw
    with pytest.raises(ValueError, match=f"^{name}"):
        bp.make_fit_problem(bp.BallAndStick(), **args)


@pytest.mark.parametrize(
    ("kw", "name"),
    [
        ({"n_steps": 0}, "n_steps"),  # was max(n, 1)
        ({"n_steps": 2.5}, "n_steps"),  # was int(2.5)
        ({"learning_rate": float("nan")}, "learning_rate"),  # a NaN step size
        ({"position_start": 1.5}, "position_start"),  # positions never moved
        ({"position_start": float("nan")}, "position_start"),  # int(nan)
    ],
)
def test_default_optimizer_checks_its_settings(kw, name):
    with pytest.raises(ValueError, match=f"^{name}"):
        bp.default_optimizer(**({"n_steps": 4} | kw))


def test_firing_rate_curve_names_currents_and_a_diverging_step():
    cell = bp.BallAndStick()
    with pytest.raises(ValueError, match="^currents"):  # was "voltage: expected finite"
        bp.firing_rate_curve(cell, np.array([np.nan]), dt=1 / 30, duration_ms=1.0, transient_ms=0)
    with pytest.raises(ValueError, match="^dt: the simulation diverged"):  # was "voltage: ..."
        bp.firing_rate_curve(cell, np.array([0.5]), dt=0.1, duration_ms=2.0, transient_ms=0)
    with pytest.raises(ValueError, match="^duration_ms"):  # was int(nan)
        bp.firing_rate_curve(cell, np.array([0.5]), dt=1 / 30, duration_ms=float("nan"))


def test_rate_initial_current_refuses_out_of_range_spikes_and_curves():
    basis = bp.CurrentBasis(20, 1 / 30, 1.0)
    fi = {"fi_currents": np.array([0.1, 0.5]), "fi_rates": np.array([0.0, 60.0])}
    with pytest.raises(ValueError, match="^spike_idx"):  # -1 wrapped to the last sample
        bp.rate_initial_current(np.array([-1]), basis, **fi)
    with pytest.raises(ValueError, match="^spike_idx"):  # was an IndexError
        bp.rate_initial_current(np.array([20]), basis, **fi)
    with pytest.raises(ValueError, match="^fi_rates"):  # was interpolated silently
        bp.rate_initial_current(np.array([5]), basis, fi["fi_currents"], np.array([0.0, np.nan]))
    with pytest.raises(ValueError, match="^fi_currents"):  # was an IndexError
        bp.rate_initial_current(np.array([5]), basis, np.array([[0.1, 0.5]]), fi["fi_rates"])


def test_population_functions_check_their_inputs_and_the_step():
    cell = bp.BallAndStick()
    el = bp.neuropixels_1(4, dtype=jnp.float64).electrodes()
    pos, cur = np.array([[10.0, 30.0, 25.0]]), np.full((1, 10), 0.5)
    with pytest.raises(ValueError, match="^positions"):  # population_sources: silent NaN
        bp.population_sources(cell, np.array([[np.nan, 0.0, 1.0]]), cur, el, dt=1 / 30)
    with pytest.raises(ValueError, match="^currents"):  # was a vmap size error
        bp.population_sources(cell, pos, np.full((2, 10), 0.5), el, dt=1 / 30)
    with pytest.raises(ValueError, match="^dt: the simulation diverged"):  # silent NaN traces
        bp.population_traces(cell, pos, cur, el, dt=0.1)
    with pytest.raises(ValueError, match="^position"):  # AttributeError: no .dtype
        bp.cell_gain(cell, None, el)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="^current"):  # IndexError on an empty current
        bp.simulate(bp.LIF(), np.zeros(0), dt=0.1)


def test_noise_probe_and_triangulation_sizes_and_values():
    key = jax.random.key(0)
    with pytest.raises(ValueError, match="^n_samples"):  # an MLIR verifier error
        bp.pink_noise(0, 2, fs=1000.0, key=key)
    with pytest.raises(ValueError, match="^n_samples: needs about"):  # allocated first
        bp.pink_noise(10**12, 2, fs=1000.0, key=key)
    with pytest.raises(ValueError, match="^fs"):  # NaN noise
        bp.pink_noise(16, 2, fs=float("nan"), key=key)
    with pytest.raises(ValueError, match="^n_sites: expected at most 960"):  # 10**9 sites
        bp.neuropixels_1(10**9)
    sites = np.asarray(bp.neuropixels_1(8).positions, np.float64)
    with pytest.raises(ValueError, match="^ptp"):  # "could not convert string to float"
        bp.monopolar_triangulation("abc", sites)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="^site_positions"):  # was reported as "ptp"
        bp.monopolar_triangulation(np.ones(8), np.where(np.eye(8, 2) > 0, np.nan, sites))


def test_make_fit_problem_still_takes_ragged_spike_lists():
    probe = bp.neuropixels_1(4, dtype=jnp.float64)
    spikes = [np.array([1, 2]), np.array([3])]
    problem = bp.make_fit_problem(
        bp.BallAndStick(), probe.electrodes(), np.zeros((20, 4)), spikes, dt=1 / 30, noise_std=1.0
    )
    np.testing.assert_array_equal(problem.anchor_valid, [[True, True], [True, False]])


def test_monopolar_triangulation_refuses_complex_sites():
    sites = np.asarray(bp.neuropixels_1(8).positions, np.float64)
    ptp = 3000.0 / np.sqrt(((sites - [30.0, 60.0]) ** 2).sum(1) + 35.0**2)
    with pytest.raises(ValueError, match="^site_positions: expected real"):  # ComplexWarning
        bp.monopolar_triangulation(ptp, sites + 1j)
