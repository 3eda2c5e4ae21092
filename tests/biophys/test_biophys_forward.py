import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxlab import biophys as bp

DT = 1 / 30


def test_neuropixels_layout():
    probe = bp.neuropixels_1(dtype=jnp.float64)
    pos = np.asarray(probe.positions)
    assert pos.shape == (384, 2)
    assert len({tuple(p) for p in pos}) == 384
    np.testing.assert_allclose(pos[1, 0] - pos[0, 0], 32.0)  # column pitch
    np.testing.assert_allclose(pos[2, 1] - pos[0, 1], 20.0)  # row pitch
    np.testing.assert_allclose(pos[2, 0] - pos[0, 0], 16.0)  # stagger of alternate rows
    np.testing.assert_allclose(pos[4, 0], pos[0, 0])
    assert pos[:, 1].max() - pos[:, 1].min() == pytest.approx(191 * 20.0)
    sub = probe.select(probe.sites_between(100.0, 200.0))
    assert sub.n_sites == 12
    assert np.all(np.asarray(sub.electrodes())[:, 2] == 0.0)
    with pytest.raises(ValueError, match="positions"):
        bp.Probe(jnp.asarray([[0.0, jnp.nan]]))
    with pytest.raises(ValueError, match="indices"):
        probe.select([400])


def test_noise_model_statistics(getkey):
    probe = bp.neuropixels_1(48, dtype=jnp.float64)
    model = bp.NoiseModel(white_uv=0.0, pink_uv=0.0, correlated_uv=4.0, length_scale_um=60.0)
    key = getkey()
    x = np.asarray(model.sample(probe, 8192, fs=30000.0, key=key))
    np.testing.assert_array_equal(x, np.asarray(model.sample(probe, 8192, fs=30000.0, key=key)))
    np.testing.assert_allclose(x.std(), 4.0, rtol=0.1)
    c = np.corrcoef(x.T)
    d = np.linalg.norm(
        np.asarray(probe.positions)[:, None] - np.asarray(probe.positions)[None], axis=-1
    )
    assert c[d < 30].mean() > c[(d > 150) & (d < 300)].mean() + 0.2
    # 1/f spectrum: log-log slope of the power close to -1
    pink = np.asarray(bp.pink_noise(2**15, 8, fs=30000.0, key=getkey(), dtype=jnp.float64))
    f = np.fft.rfftfreq(2**15, 1 / 30000.0)
    p = (np.abs(np.fft.rfft(pink, axis=0)) ** 2).mean(1)
    band = (f > 10) & (f < 3000)
    slope = np.polyfit(np.log(f[band]), np.log(p[band]), 1)[0]
    assert -1.2 < slope < -0.8
    white = np.asarray(
        bp.NoiseModel(white_uv=3.0, pink_uv=0.0, correlated_uv=0.0).sample(
            probe, 4096, fs=30000.0, key=getkey()
        )
    )
    assert abs(np.corrcoef(white.T)[0, 1]) < 0.1
    with pytest.raises(ValueError, match="white_uv"):
        bp.NoiseModel(white_uv=-1.0)


def _population(getkey, n=2, t=240):
    pos = jnp.asarray([[20.0, 100.0, 25.0], [50.0, 180.0, 35.0]])[:n]
    cur = 0.6 + 0.2 * jax.random.normal(getkey(), (n, t))
    el = bp.neuropixels_1(32, dtype=jnp.float64).electrodes()
    return pos, cur, el


def test_population_traces_superpose_single_cells_and_match_explicit_sources(getkey):
    cell = bp.BallAndStick()
    pos, cur, el = _population(getkey, t=150)
    traces, volts, spikes = bp.population_traces(cell, pos, cur, el, dt=DT)
    assert traces.shape == (150, 32)
    assert volts.shape == (2, 150)
    assert spikes.shape == (2, 150)
    assert float(volts.max()) > 0.0
    membrane = jax.jit(
        lambda c: jax.vmap(cell.transmembrane_currents)(bp.simulate(cell, c, dt=DT).states)
    )
    total = 0.0
    for n in range(2):
        i_m = membrane(cur[n])
        centre, starts, ends = cell.geometry(pos[n])
        total = total + bp.point_source_potential(centre[None], i_m[:, :1], el)
        total = total + bp.line_source_potential(starts, ends, i_m[:, 1:], el)
    np.testing.assert_allclose(traces, total, rtol=1e-9, atol=1e-9)


def test_population_traces_jit_equals_eager(getkey):
    cell = bp.BallAndStick()
    pos, cur, el = _population(getkey, t=90)
    f = lambda p, c: bp.population_traces(cell, p, c, el, dt=DT)[0]  # noqa: E731
    np.testing.assert_allclose(jax.jit(f)(pos, cur), f(pos, cur), rtol=1e-10, atol=1e-10)


def test_trace_loss_gradients_match_finite_differences(getkey):
    cell = bp.BallAndStick()
    pos, cur, el = _population(getkey, n=1, t=90)
    target = 1.1 * bp.population_traces(cell, pos + 3.0, cur, el, dt=DT)[0]

    @jax.jit
    def loss(p, c):
        tr = bp.population_traces(cell, p, c, el, dt=DT)[0]
        return jnp.mean((tr - target) ** 2)

    gp, gc = jax.jit(jax.grad(loss, argnums=(0, 1)))(pos, cur)
    eps = 1e-5
    for i in range(3):
        d = jnp.zeros_like(pos).at[0, i].set(eps)
        fd = (loss(pos + d, cur) - loss(pos - d, cur)) / (2 * eps)
        np.testing.assert_allclose(gp[0, i], fd, rtol=1e-5, atol=1e-10)
    direction = jax.random.normal(getkey(), cur.shape)
    fd = (loss(pos, cur + eps * direction) - loss(pos, cur - eps * direction)) / (2 * eps)
    np.testing.assert_allclose(jnp.sum(gc * direction), fd, rtol=1e-5, atol=1e-10)


def test_record_adds_seeded_noise(getkey):
    cell = bp.BallAndStick()
    pos, cur, _ = _population(getkey, t=120)
    probe = bp.neuropixels_1(32, dtype=jnp.float64)
    noise = bp.NoiseModel(white_uv=2.0, pink_uv=0.0, correlated_uv=0.0)
    key = getkey()
    a = bp.record(cell, pos, cur, probe, dt=DT, noise=noise, key=key)
    b = bp.record(cell, pos, cur, probe, dt=DT, noise=noise, key=key)
    np.testing.assert_array_equal(a.traces, b.traces)
    np.testing.assert_allclose(np.std(np.asarray(a.traces - a.clean)), 2.0, rtol=0.1)
    with pytest.raises(ValueError, match="key"):
        bp.record(cell, pos, cur, probe, dt=DT, noise=noise)


def test_forward_bad_inputs(getkey):
    cell = bp.BallAndStick()
    pos, cur, el = _population(getkey, t=30)
    with pytest.raises(ValueError, match="currents"):
        bp.population_traces(cell, pos, cur[:1], el, dt=DT)
    with pytest.raises(ValueError, match="positions"):
        bp.population_traces(cell, pos.at[0, 1].set(jnp.nan), cur, el, dt=DT)
    with pytest.raises(ValueError, match="sigma"):
        bp.population_traces(cell, pos, cur, el, dt=DT, sigma=-0.3)
