import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxlab import Driver
from jaxlab import biophys as bp
from jaxlab._core import Checkpointer, StepLoop
from tests.step_checks import check_step

DT = 1 / 30


def test_current_basis_interpolates_and_projects(getkey):
    basis = bp.CurrentBasis(n_steps=300, dt=DT, knot_spacing_ms=2.0)
    assert basis.n_knots == 6
    c = jax.random.normal(getkey(), (basis.n_knots,))
    cur = basis.evaluate(c)
    knot_steps = np.arange(5) * 60
    np.testing.assert_allclose(cur[knot_steps], c[:5], rtol=1e-12)
    np.testing.assert_allclose(basis.project(cur)[:5], c[:5], rtol=1e-8, atol=1e-8)


def test_spike_indices_and_matching():
    v = np.full(100, -65.0)
    v[10:13] = [5.0, 30.0, 10.0]
    v[50:52] = [20.0, 1.0]
    np.testing.assert_array_equal(bp.spike_indices(v), [11, 50])
    assert bp.match_fraction([11, 50, 80], [12, 49], tolerance=2) == pytest.approx(2 / 3)
    assert bp.match_fraction([10, 12], [11], tolerance=2) == pytest.approx(0.5)  # one-to-one
    assert bp.match_fraction([], [], tolerance=1) == 1.0


def test_monopolar_triangulation_recovers_a_monopole():
    probe = bp.neuropixels_1(96, dtype=jnp.float64)
    pos = np.asarray(probe.positions)
    truth = np.array([30.0, 400.0, 35.0])
    d = np.sqrt(((pos - truth[:2]) ** 2).sum(1) + truth[2] ** 2)
    ptp = 3000.0 / d
    est = bp.monopolar_triangulation(ptp, pos)
    np.testing.assert_allclose(est[:3], truth, atol=0.5)
    np.testing.assert_allclose(est[3], 3000.0, rtol=1e-3)
    with pytest.raises(ValueError, match="ptp"):
        bp.monopolar_triangulation(ptp[:5], pos)


def _problem(getkey, steps=300):
    cell = bp.BallAndStick()
    probe = bp.neuropixels_1(24, dtype=jnp.float64)
    pos = jnp.asarray([[30.0, 120.0, 25.0]])
    basis = bp.CurrentBasis(steps, DT, 5.0)
    c_true = 0.9 + 0.1 * jax.random.normal(getkey(), (1, basis.n_knots))
    cur = jax.vmap(basis.evaluate)(c_true)
    rec = bp.record(
        cell,
        pos,
        cur,
        probe,
        dt=DT,
        noise=bp.NoiseModel(white_uv=1.0, pink_uv=0.0, correlated_uv=0.0),
        key=getkey(),
    )
    spikes = [bp.spike_indices(v) for v in np.asarray(rec.voltage)]
    assert spikes[0].size >= 1
    problem = bp.make_fit_problem(
        cell, probe.electrodes(), rec.traces, spikes, dt=DT, noise_std=1.0, knot_spacing_ms=5.0
    )
    return problem, pos, spikes


def test_anchor_term_gives_gradient_in_the_subthreshold_regime(getkey):
    problem, pos, spikes = _problem(getkey)
    k = problem.basis.n_knots
    u = bp.FitParams(
        pos / problem.position_unit_um, jnp.full((1, k), 0.1 / problem.current_unit_na)
    )  # 0.1 nA: no spike

    def part(u):
        return bp.fit_loss(u, problem, bp.SpikeAnchor())[1]["anchor_peak"]

    g_anchor = jax.jit(jax.grad(part))(u).coeffs  # one compilation, not one per eager op
    first = int(spikes[0][0] * DT // 5.0)
    assert float(jnp.abs(g_anchor[0, : first + 1]).max()) > 0.0
    # gradient of the anchor term only reaches knots at or before the anchors (causality)
    last = int(spikes[0][-1] * DT // 5.0)
    np.testing.assert_array_equal(np.asarray(g_anchor[0, last + 2 :]), 0.0)


def test_fit_loss_jit_equals_eager_and_grad_matches_fd(getkey):
    problem, pos, _ = _problem(getkey, steps=180)
    u = bp.FitParams(
        pos / problem.position_unit_um + 0.3,
        jnp.full((1, problem.basis.n_knots), 0.5 / problem.current_unit_na),
    )
    f = lambda u: bp.fit_loss(u, problem, bp.SpikeAnchor())[0]  # noqa: E731
    jf = jax.jit(f)
    np.testing.assert_allclose(jf(u), f(u), rtol=1e-10)
    g = jax.jit(jax.grad(f))(u)
    eps = 1e-5
    d = bp.FitParams(jnp.zeros_like(u.positions).at[0, 2].set(eps), jnp.zeros_like(u.coeffs))
    plus = jax.tree.map(jnp.add, u, d)
    minus = jax.tree.map(jnp.subtract, u, d)
    np.testing.assert_allclose(g.positions[0, 2], (jf(plus) - jf(minus)) / (2 * eps), rtol=1e-4)


def test_fit_reduces_loss_and_resume_is_exact(getkey, tmp_path):
    problem, pos, _ = _problem(getkey, steps=180)
    k = problem.basis.n_knots
    p0 = bp.FitParams(pos + jnp.asarray([[4.0, -3.0, 5.0]]), jnp.full((1, k), 0.45))
    opt = bp.default_optimizer(8, 0.1, position_start=0.0)
    full = bp.fit(problem, p0, steps=8, anchor=bp.SpikeAnchor(), optimizer=opt)
    assert float(full.losses[-1]) < float(full.losses[0])
    # the same steps through the shared checks (chunk sizes, kill + resume)
    step = bp.FitStep(problem, opt, bp.SpikeAnchor())
    check_step(
        step, step.init(p0, getkey()), key=getkey(), steps=8, tmp_path=tmp_path, loop=StepLoop()
    )
    # the wrapper resumes from its checkpointer: killed after step 4, then resumed to 8
    ckpt = Checkpointer(tmp_path / "fit.eqx", every=4, resume=True)

    def kill(state):
        if int(state.step) > 4:
            raise KeyboardInterrupt
        return False

    with pytest.raises(KeyboardInterrupt):
        bp.fit(
            problem,
            p0,
            steps=8,
            anchor=bp.SpikeAnchor(),
            optimizer=opt,
            driver=Driver(checkpointer=ckpt, chunk=4, stop=kill),
        )
    resumed = bp.fit(
        problem,
        p0,
        steps=8,
        anchor=bp.SpikeAnchor(),
        optimizer=opt,
        driver=Driver(checkpointer=ckpt),
    )
    np.testing.assert_array_equal(resumed.params.positions, full.params.positions)
    np.testing.assert_array_equal(resumed.losses, full.losses)


def test_make_fit_problem_bad_inputs():
    el = jnp.zeros((4, 3))
    tr = jnp.zeros((50, 4))
    cell = bp.BallAndStick()
    with pytest.raises(ValueError, match="electrodes"):
        bp.make_fit_problem(cell, jnp.zeros((5, 3)), tr, [np.array([3])], dt=DT, noise_std=1.0)
    with pytest.raises(ValueError, match="spike_idx"):
        bp.make_fit_problem(cell, el, tr, [np.array([60])], dt=DT, noise_std=1.0)
    with pytest.raises(ValueError, match="noise_std"):
        bp.make_fit_problem(cell, el, tr, [np.array([3])], dt=DT, noise_std=-1.0)
    with pytest.raises(ValueError, match="traces"):
        bp.make_fit_problem(
            cell, el, tr.at[0, 0].set(jnp.nan), [np.array([3])], dt=DT, noise_std=1.0
        )
