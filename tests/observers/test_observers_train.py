"""Stage steps, the two-stage pipeline and the direct-SDP baseline."""

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

import jaxlab.observers as O
from jaxlab import Driver
from tests.step_checks import check_step


def _params(key, hidden=(4,), gain=None):
    obs = O.NeuralObserver.from_plant(O.VanDerPol(), hidden, epsilon=0.1, key=key, gain=gain)
    return O.CertifiedObserver.from_observer(obs)


def test_losses_jit_equal_eager(getkey):
    params = _params(getkey(), hidden=(2,))
    cfg = O.ObserverTrainConfig(batch=2, rollout_steps=1, lmi_est_weight=0.0)
    k = getkey()
    for loss in (O.point_loss, O.lmi_loss):
        np.testing.assert_allclose(
            loss(params, cfg, key=k),
            jax.jit(loss, static_argnums=1)(params, cfg, key=k),
            rtol=1e-10,
        )


@pytest.mark.slow  # eager autodiff + optax op by op: ~30 s on a loaded 2-core machine
def test_stage_step_jit_equals_eager(getkey, tree_allclose):
    params = _params(getkey(), hidden=(2,))
    cfg = O.ObserverTrainConfig(batch=2, rollout_steps=1)
    opt = optax.adam(cfg.learning_rate)
    for loss in (O.point_loss, O.lmi_loss):
        state = O.stage_init(params, opt)
        step = O.stage_step(loss, opt, cfg)
        k = getkey()
        s_eager, l_eager = step(state, k)
        s_jit, l_jit = eqx.filter_jit(step)(state, k)
        np.testing.assert_allclose(l_eager, l_jit, rtol=1e-10)
        assert tree_allclose(s_eager.trainable, s_jit.trainable, rtol=1e-8, atol=1e-10)
        assert int(s_jit.step) == 1
        # only trainable leaves move: the nominal model stays fixed
        np.testing.assert_array_equal(s_jit.params.observer.A, params.observer.A)


def test_estimation_loss_vmap_consistency(getkey):
    obs = _params(getkey()).observer
    cfg = O.ObserverTrainConfig(rollout_steps=4)
    etas = O.sample_errors(6, 3, key=getkey(), radius=1.0, min_radius=0.1, dtype=jnp.float64)
    k = getkey()
    full = O.estimation_loss(obs, etas, cfg, key=k)
    # a 0-disturbance rollout of a linear-only observer equals the matrix-power formula
    lin = eqx.tree_at(lambda o: (o.hidden, o.readout), obs, ((), jnp.zeros((3, 0))))
    cfg0 = O.ObserverTrainConfig(rollout_steps=4, disturbance_bound=0.0)
    A_eps, C_eps, _ = lin.error_model()
    M = np.linalg.matrix_power(np.eye(3) + 0.1 * np.asarray(A_eps + lin.gain @ C_eps), 4)
    e = np.asarray(etas)
    expect = np.mean(np.log1p(np.sum((e @ M.T) ** 2, 1) / np.sum(e**2, 1)))
    np.testing.assert_allclose(O.estimation_loss(lin, etas, cfg0, key=k), expect, rtol=1e-10)
    assert np.isfinite(float(full))


def test_sample_errors_annulus(getkey):
    e = O.sample_errors(500, 5, key=getkey(), radius=2.0, min_radius=0.5, dtype=jnp.float64)
    n = np.linalg.norm(np.asarray(e), axis=1)
    assert e.shape == (500, 5)
    assert n.min() >= 0.5 - 1e-12
    assert n.max() <= 2.0 + 1e-12


def test_two_stage_certifies_small_observer(getkey):
    """Stage 1 then stage 2 on Van der Pol; the result passes the independent cvxpy check."""
    params = _params(jax.random.PRNGKey(3), hidden=(4,))
    cfg = O.ObserverTrainConfig(batch=16, rollout_steps=5, lmi_margin=1e-3)
    p1, info1 = O.fit(
        O.point_loss, params, key=getkey(), config=cfg, steps=300, driver=Driver(chunk=150)
    )
    assert info1["losses"][-50:].mean() < info1["losses"][:50].mean()
    p2, info2 = O.fit(
        O.lmi_loss,
        p1,
        key=getkey(),
        config=cfg,
        steps=3000,
        driver=Driver(chunk=150, stop=lambda p: O.max_lmi_eigenvalue(p) < -cfg.lmi_margin),
    )
    assert info2["stopped"], info2["steps"]
    assert float(O.max_lmi_eigenvalue(p2)) < 0
    # the trained (P, T) is a certificate by an independent numpy eigen check ...
    assert O.check_certificate(p2.observer, p2.P, p2.multipliers) < 0
    # ... and cvxpy finds a strictly feasible point for the weights alone
    assert O.certify_lmi(p2.observer).certified


def test_direct_sdp_stops_when_certified(getkey):
    A, _, C, E = O.linear_model(O.VanDerPol())
    A_eps, C_eps, _ = O.extended_error_model(A, C, E, 0.1)
    L = O.place_gain(A_eps, C_eps, [-1.0, -1.5, -2.0])
    good = _params(getkey(), hidden=(3,), gain=L).observer
    good = eqx.tree_at(lambda o: o.readout, good, 0.01 * good.readout)
    cfg = O.ObserverTrainConfig(batch=8, rollout_steps=3)
    trained, info = O.train_direct_sdp(good, key=getkey(), config=cfg, max_steps=3)
    assert info["certified"]
    assert info["steps"] == 1
    assert info["margins"][0] > 0
    # an unstable start: steps are taken along the SDP dual and the margin improves
    bad = eqx.tree_at(lambda o: o.gain, good, -good.gain)
    trained, info = O.train_direct_sdp(bad, key=getkey(), config=cfg, max_steps=4)
    m = info["margins"]
    assert len(m) == 4 or info["certified"]
    assert m[-1] > m[0]


def test_direct_sdp_stepper_steps_as_train_direct_sdp(getkey):
    """One `DirectSDPStepper` step is one step of `train_direct_sdp` (the experiments time
    it): the same weights after the same number of steps, margins in the same order."""
    A, _, C, E = O.linear_model(O.VanDerPol())
    A_eps, C_eps, _ = O.extended_error_model(A, C, E, 0.1)
    L = O.place_gain(A_eps, C_eps, [-1.0, -1.5, -2.0])
    good = _params(getkey(), hidden=(3,), gain=L).observer
    bad = eqx.tree_at(lambda o: o.gain, good, -good.gain)
    bad = eqx.tree_at(lambda o: o.readout, bad, 0.01 * bad.readout)
    cfg = O.ObserverTrainConfig(batch=8, rollout_steps=3)
    key = getkey()
    trained, info = O.train_direct_sdp(bad, key=key, config=cfg, max_steps=3)
    stepper = O.DirectSDPStepper(bad, key=key, config=cfg)
    margins = [stepper() for _ in range(int(info["steps"]) - 1)]
    np.testing.assert_allclose(margins, info["margins"][: len(margins)], rtol=1e-6, atol=1e-9)
    if not info["certified"]:
        stepper()
    np.testing.assert_allclose(
        np.asarray(stepper.observer.gain), np.asarray(trained.gain), rtol=1e-6, atol=1e-9
    )
    with pytest.raises(ValueError, match="observer"):
        O.DirectSDPStepper(_params(getkey()), key=key, config=cfg)  # type: ignore[arg-type]


def test_stage_step_passes_the_shared_step_checks(getkey, tmp_path):
    params = _params(getkey(), hidden=(2,))
    cfg = O.ObserverTrainConfig(batch=2, rollout_steps=1)
    step = O.StageStep(O.lmi_loss, optax.adam(cfg.learning_rate), cfg)
    # steps=6 (chunks 6, 2, 3): with steps=4 check_step also runs one-step scans, which
    # XLA compiles without the loop; lmi_loss then differs in the last bit (6e-16).
    check_step(step, step.init(params, getkey()), key=getkey(), steps=6, tmp_path=tmp_path)


def test_fit_stops_when_certified_after_min_steps(getkey):
    """Certification is the driver's stop: checked per chunk, not before `min_steps`."""
    params = _params(getkey(), hidden=(2,))
    cfg = O.ObserverTrainConfig(batch=2, rollout_steps=1)
    kw = dict(key=getkey(), config=cfg, steps=12)
    _, info = O.fit(
        O.point_loss, params, driver=Driver(chunk=3, stop=lambda p: True), min_steps=5, **kw
    )
    assert info["stopped"]
    assert info["steps"] == 6
    assert info["losses"].shape == (6,)
    _, full = O.fit(O.point_loss, params, driver=Driver(chunk=3), **kw)
    assert not full["stopped"]
    assert full["steps"] == 12
    np.testing.assert_array_equal(info["losses"], full["losses"][:6])


def test_fit_rejects_bad_steps(getkey):
    with pytest.raises(ValueError, match="steps"):
        O.fit(
            O.point_loss, _params(getkey()), key=getkey(), config=O.ObserverTrainConfig(), steps=0
        )
    with pytest.raises(ValueError, match="max_steps"):
        O.train_direct_sdp(
            _params(getkey()).observer, key=getkey(), config=O.ObserverTrainConfig(), max_steps=0
        )


def test_lyapunov_warm_start(getkey):
    A, _, C, E = O.linear_model(O.VanDerPol())
    A_eps, C_eps, _ = O.extended_error_model(A, C, E, 0.1)
    L = O.place_gain(A_eps, C_eps, [-1.0, -1.5, -2.0])
    params = _params(getkey(), hidden=(3,), gain=L)
    warm = O.lyapunov_warm_start(params)
    J = np.asarray(jax.jacfwd(warm.observer.error_field)(jnp.zeros(3)))
    P = np.asarray(warm.P)
    lyap = J.T @ P + P @ J
    # a negative multiple of the identity (P was rescaled to mean eigenvalue 1)
    np.testing.assert_allclose(lyap, lyap[0, 0] * np.eye(3), atol=1e-8)
    assert lyap[0, 0] < 0
    np.testing.assert_allclose(np.trace(P) / 3, 1.0, rtol=1e-8)
    # an unstable linearisation leaves the parameters untouched
    bad = eqx.tree_at(lambda p: p.observer.gain, params, -params.observer.gain)
    assert O.lyapunov_warm_start(bad) is bad
