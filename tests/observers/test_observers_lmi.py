"""LMI certificate, cvxpy re-check, hinge, barrier gradients, coverage and radius."""

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest
import scipy.linalg
import scipy.stats

import jaxlab.observers as O


def _small_observer(key, hidden=(3, 2), eps=0.1, readout_scale=0.05, plant=None):
    plant = O.Duffing() if plant is None else plant
    A, _, C, E = O.linear_model(plant)
    A_eps, C_eps, _ = O.extended_error_model(A, C, E, eps)
    L = O.place_gain(A_eps, C_eps, [-1.0, -1.5, -2.0])
    return O.NeuralObserver.from_plant(
        plant, hidden, epsilon=eps, key=key, gain=L, readout_scale=readout_scale
    )


def _diagonal_observer(a):
    """ne = 2, no disturbance channel, no hidden layer, A_cl = -a I."""
    A = jnp.zeros((2, 2))
    return O.NeuralObserver(
        A=A,
        B=jnp.zeros((2, 1)),
        C=jnp.eye(2),
        E=jnp.zeros((2, 0)),
        gain=-a * jnp.eye(2),
        hidden=(),
        readout=jnp.zeros((2, 0)),
        epsilon=1.0,
    )


def test_implicit_form_reproduces_error_field(getkey):
    obs = _small_observer(getkey(), hidden=(4, 3, 2), readout_scale=1.0)
    A_cl, N_x, N_w, N_pw = (np.asarray(m) for m in O.implicit_blocks(obs))
    field = jax.jit(lambda e: obs.error_field(e))
    for _ in range(3):
        eta = np.asarray(jax.random.normal(getkey(), (3,)))
        w = np.zeros(N_w.shape[0])
        for _ in range(3):  # N_w is strictly lower block-triangular: 3 sweeps solve w = tanh(v)
            w = np.tanh(N_x @ eta + N_w @ w)
        np.testing.assert_allclose(A_cl @ eta + N_pw @ w, field(eta), rtol=1e-12)
    # the numpy assembly used by the cvxpy check is independent and must agree
    for a, b in zip(O.implicit_blocks(obs), O.numpy_lmi_blocks(obs), strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-14)


def test_lmi_quadratic_form_identity(getkey):
    """[eta; w]^T H [eta; w] = 2 eta^T P f(eta) + 2 w^T T (v - w) for the true w = tanh(v)."""
    obs = _small_observer(getkey(), readout_scale=1.0)
    P = O.LyapunovMatrix(jax.random.normal(getkey(), (3, 3))).matrix()
    t = jnp.exp(jax.random.normal(getkey(), (5,)))
    H = O.lmi_matrix(obs, P, t)
    _, N_x, N_w, _ = O.implicit_blocks(obs)
    eta = jax.random.normal(getkey(), (3,))
    w = jnp.zeros(5)
    for _ in range(2):
        w = jnp.tanh(N_x @ eta + N_w @ w)
    v = N_x @ eta + N_w @ w
    z = jnp.concatenate([eta, w])
    lhs = z @ H @ z
    rhs = 2 * eta @ P @ obs.error_field(eta) + 2 * w @ (t * (v - w))
    np.testing.assert_allclose(lhs, rhs, rtol=1e-10)
    assert float(w @ (t * (v - w))) >= 0  # the sector condition the multipliers exploit
    # jit equals eager; the numpy eigen check sees the same matrix
    np.testing.assert_allclose(jax.jit(O.lmi_matrix)(obs, P, t), H, rtol=1e-13)
    np.testing.assert_allclose(
        O.check_certificate(obs, P, t), np.linalg.eigvalsh(np.asarray(H))[-1], rtol=1e-10
    )


def test_known_solution_linear_case():
    """A_cl = -a I, ne = 2: max s s.t. -2aP <= -sI, tr P = 1 gives s = 2a/2 at P = I/2."""
    for a in (0.25, 2.0):
        obs = _diagonal_observer(a)
        for solver in ("CLARABEL", "SCS"):
            cert = O.certify_lmi(obs, solver=solver)
            assert cert.certified, cert
            np.testing.assert_allclose(cert.margin, a, rtol=1e-3)
        np.testing.assert_allclose(cert.P, 0.5 * np.eye(2), atol=1e-3)
    obs = _diagonal_observer(-0.1)  # unstable: no certificate exists
    assert not O.certify_lmi(obs).certified


def test_lyapunov_equation_solution_certifies_linear_eso(getkey):
    """No hidden layer: P from the Lyapunov equation makes H = -I exactly."""
    obs = _small_observer(getkey())
    lin = eqx.tree_at(lambda o: (o.hidden, o.readout), obs, ((), jnp.zeros((3, 0))))
    A_cl = np.asarray(O.implicit_blocks(lin)[0])
    P = scipy.linalg.solve_continuous_lyapunov(A_cl.T, -np.eye(3))
    H = O.lmi_matrix(lin, jnp.asarray(P), jnp.zeros((0,)))
    np.testing.assert_allclose(H, -np.eye(3), atol=1e-10)
    assert O.certify_lmi(lin).certified


def test_certificate_rejects_destabilised_observer(getkey):
    obs = _small_observer(getkey())
    cert = O.certify_lmi(obs)
    assert cert.certified
    assert cert.margin > 0
    assert O.check_certificate(obs, cert.P, cert.multipliers) < 0
    # push one closed-loop pole into the right half-plane: the Jacobian at 0 is then
    # unstable, so no quadratic Lyapunov certificate can exist
    A, _, C, E = O.linear_model(O.Duffing())
    A_eps, C_eps, _ = O.extended_error_model(A, C, E, obs.epsilon)
    bad = eqx.tree_at(
        lambda o: o.gain, obs, jnp.asarray(O.place_gain(A_eps, C_eps, [-1.0, -1.5, -2.0])) * -1
    )
    J = jax.jacfwd(bad.error_field)(jnp.zeros(3))
    assert np.linalg.eigvals(np.asarray(J)).real.max() > 0
    cert_bad = O.certify_lmi(bad)
    assert not cert_bad.certified
    assert O.check_certificate(bad, cert.P, cert.multipliers) > 0


def test_hinge_zero_on_certified_observer(getkey):
    obs = _small_observer(getkey())
    cert = O.certify_lmi(obs)
    assert cert.certified
    P = jnp.asarray(cert.P)
    etas = O.sample_errors(256, 3, key=getkey(), radius=10.0, min_radius=1e-3, dtype=jnp.float64)
    # H <= -s I implies dV/dtau <= -s |eta|^2 everywhere
    vals = jax.vmap(lambda e: O.decrease_bound(obs, P, e, rate=0.0, disturbance_bound=0.0))(etas)
    assert np.all(np.asarray(vals) <= -cert.margin * np.sum(np.asarray(etas) ** 2, 1) * (1 - 1e-6))
    hinge = O.lyapunov_hinge(
        obs, P, etas, rate=0.0, disturbance_bound=0.0, margin=0.99 * cert.margin
    )
    assert float(hinge) == 0.0
    # a margin larger than what the certificate guarantees may be violated somewhere
    bad = O.lyapunov_hinge(obs, P, etas, rate=0.0, disturbance_bound=0.0, margin=100.0)
    assert float(bad) > 0


def test_decrease_bound_vmap_equals_loop(getkey):
    obs = _small_observer(getkey())
    P = jnp.eye(3)
    etas = jax.random.normal(getkey(), (4, 3))
    f = lambda e: O.decrease_bound(obs, P, e, rate=0.3, disturbance_bound=0.7)  # noqa: E731
    np.testing.assert_allclose(jax.vmap(f)(etas), jnp.stack([f(e) for e in etas]), rtol=1e-12)
    # direct formula
    _, _, D = obs.error_model()
    e = etas[0]
    expect = (
        2 * e @ P @ obs.error_field(e)
        + 0.3 * e @ P @ e
        + 2 * obs.epsilon * 0.7 * jnp.linalg.norm(D.T @ P @ e)
    )
    np.testing.assert_allclose(f(e), expect, rtol=1e-12)


def test_barrier_gradient_matches_finite_differences(getkey):
    obs = _small_observer(getkey(), readout_scale=0.5)
    G = jax.random.normal(getkey(), (3, 3))
    params = O.CertifiedObserver.from_observer(obs, P=G @ G.T + jnp.eye(3))  # distinct eigenvalues
    cfg = O.ObserverTrainConfig(lmi_est_weight=0.0, lmi_margin=0.05)

    @jax.jit
    def loss_of(readout, factor, logt):
        p = eqx.tree_at(
            lambda q: (q.observer.readout, q.lyapunov.factor, q.log_multipliers),
            params,
            (readout, factor, logt),
        )
        return O.lmi_loss(p, cfg, key=jax.random.PRNGKey(0))

    args = (params.observer.readout, params.lyapunov.factor, params.log_multipliers)
    grads = jax.grad(loss_of, argnums=(0, 1, 2))(*args)
    loss0 = float(loss_of(*args))
    assert np.isfinite(loss0)
    h = 1e-6
    rng = np.random.default_rng(0)
    for which in range(3):
        base = np.asarray(args[which])
        for _ in range(3):
            idx = tuple(rng.integers(0, s) for s in base.shape)
            up, dn = base.copy(), base.copy()
            up[idx] += h
            dn[idx] -= h
            a_up = list(args)
            a_up[which] = jnp.asarray(up)
            a_dn = list(args)
            a_dn[which] = jnp.asarray(dn)
            fd = (float(loss_of(*a_up)) - float(loss_of(*a_dn))) / (2 * h)
            np.testing.assert_allclose(grads[which][idx], fd, rtol=1e-4, atol=1e-5)


def test_sdp_margin_gradient_is_envelope_of_dual(getkey):
    """d s*/dW = -<Z, dH/dW> (what the direct-SDP baseline steps along), vs finite differences."""
    import cvxpy as cp

    obs = _small_observer(getkey(), hidden=(2,), readout_scale=0.5)

    def margin_and_dual(readout):
        o = eqx.tree_at(lambda q: q.readout, obs, readout)
        A_cl, N_x, N_w, N_pw = O.numpy_lmi_blocks(o)
        P = cp.Variable((3, 3), symmetric=True)
        t = cp.Variable(2, nonneg=True)
        s = cp.Variable()
        T = cp.diag(t)
        off = P @ N_pw + N_x.T @ T
        H = cp.bmat([[A_cl.T @ P + P @ A_cl, off], [off.T, T @ N_w + N_w.T @ T - 2 * T]])
        c = 0.5 * (H + H.T) << -s * np.eye(5)
        cp.Problem(cp.Maximize(s), [c, P >> (1e-2 / 3) * np.eye(3), cp.trace(P) == 1]).solve(
            solver="CLARABEL"
        )
        return float(s.value), P.value, t.value, c.dual_value

    s0, P, t, Z = margin_and_dual(obs.readout)
    grad = jax.grad(
        lambda r: (
            -jnp.sum(
                jnp.asarray(Z)
                * O.lmi_matrix(
                    eqx.tree_at(lambda q: q.readout, obs, r), jnp.asarray(P), jnp.asarray(t)
                )
            )
        )
    )(obs.readout)
    h = 1e-4
    for idx in [(0, 0), (2, 1)]:
        up = obs.readout.at[idx].add(h)
        dn = obs.readout.at[idx].add(-h)
        fd = (margin_and_dual(up)[0] - margin_and_dual(dn)[0]) / (2 * h)
        np.testing.assert_allclose(grad[idx], fd, rtol=2e-2, atol=1e-5)


def test_coverage_bound_matches_binomial_oracle():
    # no failures: closed form (1 - c)^(1/N)
    np.testing.assert_allclose(O.coverage_bound(1000, 0, 0.99), 0.01 ** (1 / 1000), rtol=1e-10)
    # k failures: the Clopper-Pearson bound p_u satisfies P(Bin(N, p_u) <= k) = 1 - c
    for k in (1, 5, 40):
        cov = O.coverage_bound(500, k, 0.95)
        np.testing.assert_allclose(scipy.stats.binom.cdf(k, 500, 1 - cov), 0.05, rtol=1e-6)
    assert O.coverage_bound(100, 100, 0.9) == 0.0
    assert O.coverage_bound(2000, 0, 0.99) > O.coverage_bound(200, 0, 0.99)


def test_local_stability_radius_oracles(getkey):
    # synthetic: P = I, failures exactly outside |eta| > 0.6 -> radius = smallest failing norm
    etas = O.sample_errors(4000, 3, key=getkey(), radius=1.0, min_radius=0.0, dtype=jnp.float64)
    norms = np.linalg.norm(np.asarray(etas), axis=1)
    vals = np.where(norms > 0.6, 1.0, -1.0)
    r = O.local_stability_radius(None, np.eye(3), etas, vals)
    np.testing.assert_allclose(r, norms[norms > 0.6].min(), rtol=1e-12)
    # certified observer: no violations, radius = largest ball inside the capped sublevel set
    obs = _small_observer(getkey())
    cert = O.certify_lmi(obs)
    etas, vals = O.sampled_decrease(
        obs, jnp.asarray(cert.P), key=getkey(), radius=2.0, num_samples=500
    )
    assert np.all(np.asarray(vals) < 0)
    lam = np.linalg.eigvalsh(cert.P)
    rmax = np.linalg.norm(np.asarray(etas), axis=1).max()
    np.testing.assert_allclose(
        O.local_stability_radius(obs, cert.P, etas, vals),
        rmax * np.sqrt(lam[0] / lam[-1]),
        rtol=1e-10,
    )


def test_bad_inputs_raise(getkey):
    obs = _small_observer(getkey())
    with pytest.raises(ValueError, match="floor"):
        O.certify_lmi(obs, floor=2.0)
    with pytest.raises(ValueError, match="solver"):
        O.certify_lmi(obs, solver="MOSEK")
    with pytest.raises(ValueError, match="multipliers"):
        O.check_certificate(obs, np.eye(3), -np.ones(5))
    with pytest.raises(ValueError, match="P"):
        O.check_certificate(obs, -np.eye(3), np.ones(5))
    with pytest.raises(ValueError, match="num_failures"):
        O.coverage_bound(10, 11)
    with pytest.raises(ValueError, match="confidence"):
        O.coverage_bound(10, 0, 1.0)
    with pytest.raises(ValueError, match="num_samples"):
        O.coverage_bound(0, 0)
    with pytest.raises(ValueError, match="radius"):
        O.sampled_decrease(obs, jnp.eye(3), key=getkey(), radius=-1.0, num_samples=4)
