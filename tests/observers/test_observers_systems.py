"""Plants, observers and simulation against analytic / independent oracles."""

import diffrax  # noqa: F401  (the simulator's backend must import)
import jax
import jax.numpy as jnp
import numpy as np
import pytest
import scipy.linalg

import jaxlab.observers as O


def test_x29_matrices_match_issue():
    lon = O.x29_longitudinal(0.0)
    lat = O.x29_lateral(0.0)
    np.testing.assert_allclose(lon.A[0], [-0.04272, -8.541, -0.4451, -32.16])
    np.testing.assert_allclose(lon.B[2], [0.02718, -0.005744, -0.01351])
    np.testing.assert_allclose(lat.A[1], [-3.569, -1.704, 0.9045, -5.531e-7])
    np.testing.assert_allclose(lat.B[1], [0.3713, 0.05486])
    A, B, C, E = O.linear_model(lon)
    np.testing.assert_allclose(A, lon.A, atol=1e-14)
    np.testing.assert_allclose(B, lon.B, atol=1e-14)
    # the inner LQR loop stabilises the (open-loop unstable) airframe
    assert np.linalg.eigvals(np.asarray(lon.A)).real.max() > 1.0
    assert np.linalg.eigvals(np.asarray(lon.A - lon.B @ lon.feedback)).real.max() < 0


def test_total_disturbance_x29_and_pendulum():
    plant = O.x29_longitudinal(0.2)
    x = jnp.array([3.0, 0.1, -0.05, 0.2])
    t = jnp.asarray(0.7)
    d = jax.jit(O.total_disturbance)(plant, t, x)
    expect = 0.2 * plant.A @ x + plant.dist_amp * jnp.sin(plant.dist_freq * t)
    np.testing.assert_allclose(d, expect, rtol=1e-10, atol=1e-12)
    pend = O.DisturbedPendulum()
    x = jnp.array([0.4, -0.3])
    d = jax.jit(O.total_disturbance)(pend, t, x)
    g, b = pend.g_over_l, pend.damping
    true_acc = (
        -g * np.sin(0.4)
        - b * (-0.3)
        + float(pend.control(t, x)[0])
        + float(pend.disturbance(t, x)[0])
    )
    lin_acc = -g * 0.4 - b * (-0.3) + float(pend.control(t, x)[0])
    np.testing.assert_allclose(d, [true_acc - lin_acc], rtol=1e-10)


def test_extended_error_model_matches_observer_error(getkey):
    """The observer's scaled error obeys eps eta' = A_eps eta + v(C_eps eta) + eps D d'."""
    plant = O.x29_longitudinal(0.1)
    obs = O.NeuralObserver.from_plant(plant, (3, 4), epsilon=0.05, key=getkey())
    x = jax.random.normal(getkey(), (4,))
    z_hat = jax.random.normal(getkey(), (8,))
    t = jnp.asarray(0.3)
    u = plant.control(t, x)

    @jax.jit
    def both_sides(x, z_hat, t, u):
        d = O.total_disturbance(plant, t, x)
        d_dot = jax.jacfwd(lambda s: O.total_disturbance(plant, s, x))(t) + jax.jacfwd(
            lambda xx: O.total_disturbance(plant, t, xx)
        )(x) @ plant.true_field(t, x)
        eta = jnp.concatenate([(x - z_hat[:4]) / obs.epsilon, d - z_hat[4:]])
        dz = obs.vector_field(t, z_hat, plant.output(x), u)
        dx = plant.true_field(t, x)
        eta_dot = jnp.concatenate([(dx - dz[:4]) / obs.epsilon, d_dot - dz[4:]])
        _, _, D = obs.error_model()
        return obs.epsilon * eta_dot, obs.error_field(eta) + obs.epsilon * D @ d_dot

    lhs, rhs = both_sides(x, z_hat, t, u)
    np.testing.assert_allclose(lhs, rhs, rtol=1e-9, atol=1e-9)


def _still_plant():
    p = O.x29_lateral(0.0, dist_amp=0.0, ref_amp=0.0)
    return O.LinearPlant(
        A=p.A,
        B=p.B,
        C=p.C,
        E=p.E,
        delta_A=p.delta_A,
        feedback=p.feedback,
        reference_amp=p.reference_amp,
        reference_freq=p.reference_freq,
        dist_amp=p.dist_amp,
        dist_freq=p.dist_freq,
    )


def test_simulate_matches_matrix_exponential():
    """Plant (LQR loop, no disturbance) + Luenberger observer is linear: compare with expm."""
    plant = _still_plant()
    obs = O.LuenbergerObserver.from_plant(plant, [-1.0, -1.5, -2.0, -2.5])
    A, B, C, K, L = (np.asarray(m) for m in (plant.A, plant.B, plant.C, plant.feedback, obs.gain))
    M = np.block([[A - B @ K, np.zeros((4, 4))], [-B @ K - L @ C, A + L @ C]])
    x0 = np.array([0.1, -0.2, 0.05, 0.3])
    xh0 = np.zeros(4)
    ts = jnp.linspace(0.0, 3.0, 7)
    traj = O.simulate(plant, obs, jnp.asarray(x0), jnp.asarray(xh0), ts, rtol=1e-10, atol=1e-12)
    assert bool(traj.ok)
    for k, t in enumerate(np.asarray(ts)):
        ref = scipy.linalg.expm(M * t) @ np.concatenate([x0, xh0])
        np.testing.assert_allclose(traj.x[k], ref[:4], rtol=1e-7, atol=1e-9)
        np.testing.assert_allclose(traj.x_hat[k], ref[4:], rtol=1e-7, atol=1e-9)
    assert np.all(np.isnan(np.asarray(traj.d_hat)))


def test_simulate_jit_and_vmap(getkey):
    plant = O.VanDerPol()
    obs = O.NeuralObserver.from_plant(
        plant,
        (3,),
        epsilon=0.2,
        key=getkey(),
        gain=O.place_gain(*_vdp_eps(plant, 0.2), [-1.0, -1.5, -2.0]),
    )
    ts = jnp.linspace(0.0, 1.0, 5)
    x0s = jax.random.normal(getkey(), (3, 2))
    xh0 = jnp.zeros(2)
    # diffeqsolve jits internally, so the "eager" oracle is a Python loop of single calls
    single = jax.jit(O.simulate)
    eager = [single(plant, obs, x0, xh0, ts) for x0 in x0s]
    batched = jax.vmap(lambda x0: O.simulate(plant, obs, x0, xh0, ts))(x0s)
    for i in range(3):
        np.testing.assert_allclose(batched.x_hat[i], eager[i].x_hat, rtol=1e-8, atol=1e-10)
    assert np.isfinite(float(O.state_mse(eager[0])))


def _vdp_eps(plant, eps):
    A, _, C, E = O.linear_model(plant)
    A_eps, C_eps, _ = O.extended_error_model(A, C, E, eps)
    return A_eps, C_eps


def test_place_gain_places_poles():
    A_eps, C_eps = _vdp_eps(O.Duffing(), 0.1)
    poles = np.array([-1.0, -2.0, -3.0])
    L = O.place_gain(A_eps, C_eps, poles)
    got = np.sort(np.linalg.eigvals(np.asarray(A_eps) + L @ np.asarray(C_eps)).real)
    np.testing.assert_allclose(got, np.sort(poles), rtol=1e-8)


def test_place_gain_with_redundant_outputs():
    """X-29 longitudinal: 5 outputs (one redundant); the paper's 8 observer poles are placed."""
    plant = O.x29_longitudinal(0.0)
    A, _, C, E = O.linear_model(plant)
    A_eps, C_eps, _ = O.extended_error_model(A, C, E, 0.01)
    poles = np.array(
        [-0.5, -1 + 0.2j, -1 - 0.2j, -1.5 + 0.5j, -1.5 - 0.5j, -2 + 0.2j, -2 - 0.2j, -2.5]
    )
    L = O.place_gain(A_eps, C_eps, poles)
    got = np.sort_complex(np.linalg.eigvals(np.asarray(A_eps) + L @ np.asarray(C_eps)))
    np.testing.assert_allclose(got, np.sort_complex(poles), atol=1e-8)


def test_ekf_covariance_converges_to_filter_riccati():
    """On a linear plant the EKF is the Kalman-Bucy filter: S(t) -> the filter ARE solution."""
    plant = _still_plant()
    ne = 8
    Q = 0.1 * np.eye(ne)
    R = 0.5 * np.eye(4)
    ekf = O.ExtendedKalmanFilter(
        plant=plant,
        process_noise=jnp.asarray(Q),
        measurement_noise=jnp.asarray(R),
        initial_cov=jnp.eye(ne),
    )
    A, _, C, E = (np.asarray(m) for m in O.linear_model(plant))
    Ae = np.block([[A, E], [np.zeros((4, 8))]])
    He = np.hstack([C, np.zeros((4, 4))])
    S_are = scipy.linalg.solve_continuous_are(Ae.T, He.T, Q, R)
    state = ekf.init(jnp.zeros(4))
    sol = diffrax.diffeqsolve(
        diffrax.ODETerm(lambda t, s, a: ekf.vector_field(t, s, jnp.zeros(4), jnp.zeros(2))),
        diffrax.Tsit5(),
        0.0,
        60.0,
        None,
        state,
        stepsize_controller=diffrax.PIDController(rtol=1e-9, atol=1e-11),
        max_steps=100_000,
    )
    S_end = np.asarray(sol.ys[1][-1])
    np.testing.assert_allclose(S_end, S_are, rtol=1e-5, atol=1e-7)


def test_bad_inputs_raise(getkey):
    plant = O.VanDerPol()
    with pytest.raises(ValueError, match="epsilon"):
        O.NeuralObserver.from_plant(plant, (3,), epsilon=-1.0, key=getkey())
    with pytest.raises(ValueError, match="hidden_sizes"):
        O.NeuralObserver.from_plant(plant, (0,), epsilon=0.1, key=getkey())
    with pytest.raises(ValueError, match="gain"):
        O.NeuralObserver.from_plant(plant, (3,), epsilon=0.1, key=getkey(), gain=np.zeros((2, 1)))
    with pytest.raises(ValueError, match="gain"):
        O.NeuralObserver.from_plant(
            plant, (3,), epsilon=0.1, key=getkey(), gain=np.array([[np.nan], [0.0], [0.0]])
        )
    with pytest.raises(ValueError, match="poles"):
        O.place_gain(np.eye(2), np.eye(2)[:1], [1.0, -1.0])
    with pytest.raises(ValueError, match="poles"):
        O.place_gain(np.eye(2), np.eye(2)[:1], [-1.0])
    with pytest.raises(ValueError, match="uncertainty"):
        O.x29_longitudinal(np.zeros((3, 3)))
    obs = O.LuenbergerObserver.from_plant(plant, [-1.0, -2.0])
    with pytest.raises(ValueError, match="x0"):
        O.simulate(plant, obs, jnp.zeros(3), jnp.zeros(2), jnp.linspace(0, 1, 3))
    with pytest.raises(ValueError, match="x_hat0"):
        O.simulate(plant, obs, jnp.zeros(2), jnp.zeros(5), jnp.linspace(0, 1, 3))
