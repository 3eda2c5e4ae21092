import diffrax
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxlab import biophys as bp

DT = 0.025


def _hh(current_density, ms, dt=DT, solver=None):
    n = int(round(ms / dt))
    return bp.simulate(bp.HodgkinHuxley(), jnp.full((n,), current_density), dt=dt, solver=solver)


def test_hh_rest_and_spike_shape_match_published_values():
    # Hodgkin & Huxley (1952), modern convention: rest -65 mV, overshoot to about
    # +40 mV, after-hyperpolarisation near E_K side (~ -75 mV), ~68 Hz at 10 uA/cm^2.
    rest = _hh(0.0, 50.0).voltage
    np.testing.assert_allclose(np.asarray(rest[-1]), -65.0, atol=0.1)
    v = np.asarray(_hh(10.0, 300.0).voltage)
    spikes = bp.spike_indices(v)
    assert 35.0 < v.max() < 45.0
    assert -78.0 < v[int(100 / DT) :].min() < -72.0
    isi = np.diff(spikes[-5:]) * DT
    rate = 1000.0 / isi.mean()
    assert 60.0 < rate < 80.0
    # width at half amplitude of one spike, published about 1 ms at 6.3 degC
    k = spikes[-2]
    half = (v[k] + v[k - int(8 / DT) : k].min()) / 2
    left = np.nonzero(v[:k] < half)[0][-1]
    right = k + np.nonzero(v[k:] < half)[0][0]
    assert 0.5 < (right - left) * DT < 2.0


def test_hh_threshold_for_repetitive_firing():
    # Below the repetitive-firing current (~6.3 uA/cm^2, Rinzel 1978) a step gives one
    # onset spike then rest; above it the neuron fires tonically.
    assert bp.spike_indices(np.asarray(_hh(5.0, 300.0).voltage)).size == 1
    assert bp.spike_indices(np.asarray(_hh(2.0, 300.0).voltage)).size == 0
    assert bp.spike_indices(np.asarray(_hh(8.0, 300.0).voltage)).size >= 15


@pytest.mark.parametrize(
    ("solver", "order"), [(diffrax.Euler(), 1.0), (diffrax.Heun(), 2.0), (diffrax.Tsit5(), 5.0)]
)
def test_solver_convergence_order(solver, order):
    hh = bp.HodgkinHuxley()
    ms = 8.0  # covers the upstroke and peak of the first spike
    ref = diffrax.diffeqsolve(
        diffrax.ODETerm(hh.vector_field),
        diffrax.Tsit5(),
        0.0,
        ms,
        1e-3,
        hh.init_state(),
        args=jnp.asarray(10.0),
        stepsize_controller=diffrax.PIDController(rtol=1e-12, atol=1e-12),
        max_steps=100000,
    ).ys[-1]
    dts = [0.02, 0.01] if order < 5 else [0.04, 0.02]
    errs = [
        float(jnp.abs(_hh(10.0, ms, dt=dt, solver=solver).states[-1] - ref).max()) for dt in dts
    ]
    observed = np.log2(errs[0] / errs[1])
    assert order - 0.35 < observed < order + 1.0, (errs, observed)


def test_lif_matches_analytic_solution():
    lif = bp.LIF()
    n, dt, i = 400, 0.05, 0.15  # r_m I = 15 mV < 20 mV to threshold: no spike
    v = bp.simulate(lif, jnp.full((n,), i), dt=dt, solver=diffrax.Tsit5()).voltage
    t = (np.arange(n) + 1) * dt
    expect = -70.0 + 100.0 * i * (1 - np.exp(-t / 10.0))
    np.testing.assert_allclose(v, expect, atol=1e-8)
    # suprathreshold: interspike interval tau ln(RI / (RI - 20))
    i = 0.3
    tr = bp.simulate(lif, jnp.full((6000,), i), dt=0.01, solver=diffrax.Tsit5())
    idx = np.nonzero(np.asarray(tr.spikes))[0]
    assert idx.size >= 4
    isi = np.diff(idx).mean() * 0.01
    np.testing.assert_allclose(isi, 10.0 * np.log(30.0 / 10.0), rtol=2e-3)


def test_adex_adapts():
    tr = bp.simulate(bp.AdEx(), jnp.full((int(400 / DT),), 1.0), dt=DT)
    idx = np.nonzero(np.asarray(tr.spikes))[0]
    assert idx.size >= 4
    isi = np.diff(idx)
    assert isi[-1] > isi[0]  # spike-frequency adaptation (w grows by b per spike)
    w = np.asarray(tr.states[:, 1])
    np.testing.assert_allclose(w[idx[0]] - w[idx[0] - 1], 80.5, atol=1.0)


def test_surrogate_forward_exact_and_derivative_analytic():
    x = jnp.linspace(-3.0, 3.0, 13)
    np.testing.assert_array_equal(bp.spike_surrogate(x), (x >= 0).astype(x.dtype))
    g = jax.vmap(jax.grad(lambda z: bp.spike_surrogate(z, 2.0)))(x)
    np.testing.assert_allclose(g, 1.0 / (1.0 + 2.0 * np.abs(np.asarray(x))) ** 2, rtol=1e-12)


@pytest.mark.parametrize("model", [bp.LIF(), bp.AdEx()])
def test_surrogate_gradient_nonzero_at_spike_times(model):
    current = jnp.full((1200,), 0.3 if isinstance(model, bp.LIF) else 1.5)
    tr = bp.simulate(model, current, dt=0.05)
    idx = np.nonzero(np.asarray(tr.spikes))[0]
    assert idx.size >= 2
    grad = jax.jit(jax.grad(lambda c, k: bp.simulate(model, c, dt=0.05).spikes[k]))
    for k in idx[:2]:
        g = np.asarray(grad(current, k))
        assert np.all(np.isfinite(g))
        assert np.abs(g[: k + 1]).sum() > 0.0
        assert np.all(g[k + 1 :] == 0.0)  # causality


def test_simulate_jit_equals_eager_and_vmap_equals_loop(getkey):
    cur = 8.0 + jax.random.normal(getkey(), (3, 800))
    hh = bp.HodgkinHuxley()
    f = lambda c: bp.simulate(hh, c, dt=DT).voltage  # noqa: E731
    batched = jax.vmap(f)(cur)
    looped = jnp.stack([f(c) for c in cur])
    np.testing.assert_allclose(batched, looped, rtol=1e-10, atol=1e-10)
    np.testing.assert_allclose(jax.jit(f)(cur[0]), f(cur[0]), rtol=1e-10, atol=1e-10)


def test_hh_gradient_matches_finite_differences():
    hh = bp.HodgkinHuxley()
    n = 400  # 10 ms with a spike

    def loss(scale):
        return jnp.mean(bp.simulate(hh, scale * jnp.full((n,), 10.0), dt=DT).voltage)

    g = jax.grad(loss)(1.0)
    eps = 1e-6
    fd = (loss(1.0 + eps) - loss(1.0 - eps)) / (2 * eps)
    np.testing.assert_allclose(g, fd, rtol=1e-5)


def test_ball_and_stick_current_conservation_and_membrane_balance():
    cell = bp.BallAndStick()
    dt = 1 / 30
    cur = jnp.full((600,), 0.5)
    tr = bp.simulate(cell, cur, dt=dt, solver=diffrax.Euler())
    i_m = jax.vmap(cell.transmembrane_currents)(tr.states)
    assert np.asarray(tr.voltage).max() > 0.0  # it spiked
    np.testing.assert_allclose(i_m.sum(axis=1), 0.0, atol=1e-12 * float(jnp.abs(i_m).max()) + 1e-12)
    # Independent membrane-side balance: C dV/dt + I_ion - I_inj, from the trajectory.
    ys = jnp.concatenate([cell.init_state()[None], tr.states])
    cap = cell.areas_cm2() * 1e3 * cell.soma.c_m
    dvdt = (ys[1:, : cell.n_compartments] - ys[:-1, : cell.n_compartments]) / dt
    inj = jnp.zeros((cell.n_compartments,)).at[0].set(0.5)
    membrane = cap[None] * dvdt + jax.vmap(cell.ionic_currents)(ys[:-1]) - inj[None]
    axial = jax.vmap(cell.transmembrane_currents)(ys[:-1])
    np.testing.assert_allclose(membrane, axial, rtol=1e-8, atol=1e-9)


def test_ball_and_stick_far_field_decays_faster_than_monopole():
    cell = bp.BallAndStick()
    tr = bp.simulate(cell, jnp.full((600,), 0.5), dt=1 / 30)
    k = int(np.argmax(np.asarray(tr.voltage)))
    i_m = cell.transmembrane_currents(tr.states[k])
    el = jnp.asarray([[0.0, 2000.0, 0.0], [0.0, 4000.0, 0.0], [0.0, 8000.0, 0.0]])
    phi = bp.cell_gain(cell, jnp.zeros(3), el) @ i_m
    ratio = np.abs(np.asarray(phi[:-1] / phi[1:]))
    assert np.all(ratio > 3.5)  # dipole: 4 per doubling; a monopole would give 2


def test_simulate_bad_inputs():
    with pytest.raises(ValueError, match="current"):
        bp.simulate(bp.LIF(), jnp.ones((10, 2)), dt=0.1)
    with pytest.raises(ValueError, match="current"):
        bp.simulate(bp.LIF(), jnp.full((10,), jnp.nan), dt=0.1)
    with pytest.raises(ValueError, match="dt"):
        bp.simulate(bp.LIF(), jnp.ones((10,)), dt=-0.1)
    with pytest.raises(ValueError, match="y0"):
        bp.simulate(bp.LIF(), jnp.ones((10,)), dt=0.1, y0=jnp.zeros(3))


def test_wang_buzsaki_is_class_one_and_hh_is_class_two():
    # Class I (Wang & Buzsaki 1996; rheobase ~0.16 uA/cm^2): the rate rises continuously
    # from 0 Hz, so the slowest repetitive rate just above rheobase is a few Hz; HH's
    # Hopf onset jumps to ~50 Hz (Rinzel 1978) however finely the current is stepped.
    dt = 0.05
    wb_grid = jnp.arange(0.10, 0.40, 0.02)
    wb = bp.firing_rate_curve(bp.WangBuzsaki(), wb_grid, dt=dt, duration_ms=2500.0)
    hh_grid = jnp.arange(5.6, 8.0, 0.2)
    hh = bp.firing_rate_curve(bp.HodgkinHuxley(), hh_grid, dt=dt, duration_ms=1000.0)
    wb_on, hh_on = wb[wb > 0], hh[hh > 0]
    assert wb_on.size >= 8
    assert hh_on.size >= 3
    assert 0.1 < float(wb_grid[np.argmax(wb > 0)]) < 0.25  # rheobase
    assert wb_on.min() < 15.0
    assert hh_on.min() > 40.0
    assert np.all(np.diff(wb_on) >= 0)  # monotone f-I curve


def test_wang_buzsaki_gradient_matches_finite_differences():
    wb = bp.WangBuzsaki()
    n = 400  # 10 ms with a spike at 2 uA/cm^2

    def loss(scale):
        return jnp.mean(bp.simulate(wb, scale * jnp.full((n,), 2.0), dt=DT).voltage)

    assert float(jnp.max(bp.simulate(wb, jnp.full((n,), 2.0), dt=DT).voltage)) > 0.0
    g = jax.grad(loss)(1.0)
    eps = 1e-6
    fd = (loss(1.0 + eps) - loss(1.0 - eps)) / (2 * eps)
    np.testing.assert_allclose(g, fd, rtol=1e-5)


def test_ball_and_stick_with_a_wang_buzsaki_soma_fires_and_conserves_current():
    cell = bp.BallAndStick(soma=bp.WangBuzsaki(), dendrite_diameter=1.0)
    assert cell.init_state().shape == (cell.n_compartments + 2,)  # [v..., h, n]
    tr = bp.simulate(cell, jnp.full((1500,), 0.03), dt=1 / 30)
    assert bp.spike_indices(np.asarray(tr.voltage)).size >= 2  # repetitive firing at 30 pA
    i_m = jax.vmap(cell.transmembrane_currents)(tr.states)
    np.testing.assert_allclose(i_m.sum(axis=1), 0.0, atol=1e-12 * float(jnp.abs(i_m).max()))
