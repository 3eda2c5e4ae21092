"""observers.coverage_bound refuses a complex confidence with a ValueError naming it (the
contract fuzz of issue #59 met a TypeError from float() before)."""

from __future__ import annotations

import jax
import numpy as np
import pytest

import jaxlab.observers as ob


def test_coverage_bound_refuses_a_complex_confidence():
    # no failures: (1 - confidence)^(1/N), the documented closed form
    assert ob.coverage_bound(100, 0, 0.99) == pytest.approx(0.01 ** (1 / 100))
    with pytest.raises(ValueError, match="confidence: expected (real values|dtype floating)"):
        ob.coverage_bound(100, 0, 0.99 + 1j)


# issue #59: the functions newly declared in the fuzz table refuse bad inputs by name
# (before: AttributeError/TypeError from inside, or a silent NaN/inf result)


def test_lmi_penalty_refuses_nan_and_a_string_margin():
    # eigenvalues -0.5 + margin 0.1 = -0.4: three log-barrier terms -1e-3 log(0.4)
    assert float(ob.lmi_penalty(-0.5 * np.eye(3), margin=0.1)) == pytest.approx(
        -3e-3 * np.log(0.4), rel=1e-5
    )
    with pytest.raises(ValueError, match="H: expected finite"):
        ob.lmi_penalty(np.array([[np.nan, 0.0], [0.0, -1.0]]), margin=0.1)
    with pytest.raises(ValueError, match="H: expected a square"):
        ob.lmi_penalty(np.zeros((2, 3)), margin=0.1)
    with pytest.raises(ValueError, match="margin"):
        ob.lmi_penalty(-np.eye(2), margin="abc")


def test_extended_error_model_refuses_none_and_mismatched_shapes():
    A, C, E = np.array([[0.0, 1.0], [-2.0, -0.5]]), np.array([[1.0, 0.0]]), np.eye(2)[:, 1:]
    A_eps, C_eps, D = ob.extended_error_model(A, C, E, 0.1)
    assert A_eps.shape == (3, 3)
    assert C_eps.shape == (1, 3)
    assert D.shape == (3, 1)
    with pytest.raises(ValueError, match="A: expected an array"):
        ob.extended_error_model(None, C, E, 0.1)
    with pytest.raises(ValueError, match="E"):
        ob.extended_error_model(A, C, np.ones((3, 1)), 0.1)
    with pytest.raises(ValueError, match="epsilon"):
        ob.extended_error_model(A, C, E, float("nan"))


def test_sample_errors_refuses_bad_sizes_and_radii():
    key = jax.random.key(0)
    assert ob.sample_errors(4, 3, key=key, radius=1.0, min_radius=0.1).shape == (4, 3)
    with pytest.raises(ValueError, match="num"):
        ob.sample_errors(0, 3, key=key, radius=1.0, min_radius=0.1)
    with pytest.raises(ValueError, match="dim"):
        ob.sample_errors(4, 2.5, key=key, radius=1.0, min_radius=0.1)
    with pytest.raises(ValueError, match="num x dim: needs about"):  # before: abort in XLA
        ob.sample_errors(10**9, 10**9, key=key, radius=1.0, min_radius=0.1)
    with pytest.raises(ValueError, match="radius"):
        ob.sample_errors(4, 3, key=key, radius=float("inf"), min_radius=0.1)
    with pytest.raises(ValueError, match="min_radius"):
        ob.sample_errors(4, 3, key=key, radius=1.0, min_radius=2.0)


def test_x29_refuses_a_string_uncertainty_and_a_nan_reference():
    with pytest.raises(ValueError, match="uncertainty"):
        ob.x29_lateral("abc")
    with pytest.raises(ValueError, match="ref_amp"):
        ob.x29_longitudinal(ref_amp=float("nan"))
    with pytest.raises(ValueError, match="ref_amp"):
        ob.x29_lateral(ref_amp=None)
    with pytest.raises(ValueError, match="ref_freq: expected a scalar or shape"):
        ob.x29_lateral(ref_freq=(0.1, 0.2, 0.3))


# issue #59, second round: the certificate, decrease and rollout functions


def _observer():
    # Van der Pol: n = 2, nd = 1 (ne = 3), one hidden layer of 2 (nh = 2)
    return ob.NeuralObserver.from_plant(
        ob.VanDerPol(), (2,), epsilon=0.1, key=jax.random.key(0), gain=-np.ones((3, 1))
    )


_ETAS = np.array([[0.1, -0.2, 0.3], [1.0, 0.0, 0.5]])


def test_certificate_functions_name_a_nan_or_misshapen_p_and_multipliers():
    """A NaN P gave a silent NaN matrix (lmi_matrix) or a LinAlgError (check_certificate,
    local_stability_radius); a (3, 2) P a broadcasting error from inside."""
    obs = _observer()
    P, t = np.eye(3), np.ones(2)
    assert np.all(np.isfinite(ob.lmi_matrix(obs, P, t)))
    assert np.isfinite(ob.check_certificate(obs, P, t))
    assert np.isfinite(ob.local_stability_radius(obs, P, _ETAS, np.array([-1.0, 0.5])))
    bad_p = (np.full((3, 3), np.nan), np.eye(3)[:, :2], None, "P")
    for bad in bad_p:
        for f in (
            lambda p: ob.lmi_matrix(obs, p, t),
            lambda p: ob.check_certificate(obs, p, t),
            lambda p: ob.local_stability_radius(obs, p, _ETAS, np.zeros(2)),
        ):
            with pytest.raises(ValueError, match="^P"):
                f(bad)
    for bad in (np.array([1.0, np.nan]), np.ones(3), np.array([1.0, -1.0])):
        with pytest.raises(ValueError, match="^multipliers"):
            ob.lmi_matrix(obs, P, bad)
    for bad in (np.array([np.nan, 0.0]), np.zeros(3), None):
        with pytest.raises(ValueError, match="^values"):
            ob.local_stability_radius(obs, P, _ETAS, bad)
    with pytest.raises(ValueError, match="^P"):  # -I gave a NaN radius
        ob.local_stability_radius(obs, -np.eye(3), _ETAS, np.zeros(2))


def test_decrease_functions_refuse_nan_errors_and_rates():
    """NaN/inf in eta, P or the rates gave a silent NaN bound/hinge."""
    obs = _observer()
    P = np.eye(3)
    kw = {"rate": 0.1, "disturbance_bound": 1.0}
    assert np.isfinite(ob.decrease_bound(obs, P, _ETAS[0], **kw))
    assert np.isfinite(ob.lyapunov_hinge(obs, P, _ETAS, margin=0.01, **kw))
    with pytest.raises(ValueError, match="^eta"):
        ob.decrease_bound(obs, P, np.array([0.1, np.nan, 0.3]), **kw)
    with pytest.raises(ValueError, match="^eta"):
        ob.decrease_bound(obs, P, _ETAS[0, :2], **kw)
    with pytest.raises(ValueError, match="^rate"):
        ob.decrease_bound(obs, P, _ETAS[0], rate=np.nan, disturbance_bound=1.0)
    with pytest.raises(ValueError, match="^disturbance_bound"):
        ob.lyapunov_hinge(obs, P, _ETAS, rate=0.1, disturbance_bound=np.inf, margin=0.0)
    with pytest.raises(ValueError, match="^etas"):
        ob.lyapunov_hinge(obs, P, np.zeros((0, 3)), margin=0.0, **kw)
    with pytest.raises(ValueError, match="^margin"):
        ob.lyapunov_hinge(obs, P, _ETAS, margin="0.1", **kw)


def test_sampled_and_searched_decrease_refuse_bad_arguments_and_huge_sizes():
    obs = _observer()
    P, key = np.eye(3), jax.random.key(1)
    etas, vals = ob.sampled_decrease(obs, P, key=key, radius=1.0, num_samples=4)
    assert etas.shape == (4, 3)
    assert np.all(np.isfinite(vals))
    for radius in (np.inf, None, "1"):  # inf: NaN samples; None/str: TypeError
        with pytest.raises(ValueError, match="^radius"):
            ob.sampled_decrease(obs, P, key=key, radius=radius, num_samples=4)
    with pytest.raises(ValueError, match="num_samples"):  # refused before allocation
        ob.sampled_decrease(obs, P, key=key, radius=1.0, num_samples=10**9)
    kw = {"steps": 2, "step_size": 0.1, "max_norm": 2.0}
    out = ob.search_decrease_violations(obs, P, _ETAS, free=np.array([True, True, False]), **kw)
    assert np.all(np.isfinite(out[1]))
    for name, bad in (("step_size", None), ("max_norm", np.inf), ("max_norm", "2")):
        with pytest.raises(ValueError, match=f"^{name}"):
            ob.search_decrease_violations(obs, P, _ETAS, **{**kw, name: bad})
    with pytest.raises(ValueError, match="^etas"):
        ob.search_decrease_violations(obs, P, np.full((2, 3), np.nan), **kw)
    with pytest.raises(ValueError, match="^P"):
        ob.search_decrease_violations(obs, None, _ETAS, **kw)
    with pytest.raises(ValueError, match="^steps"):  # 10**9 ascent steps: days, refused
        ob.search_decrease_violations(obs, P, _ETAS, **{**kw, "steps": 10**9})


def test_rollout_total_disturbance_and_ekf_refuse_nan_and_bad_shapes():
    obs, plant = _observer(), ob.VanDerPol()
    x0 = np.array([0.1, -0.2])
    traj = ob.rollout(plant, obs, x0, np.zeros(2), dt=0.01, steps=2)
    assert bool(traj.ok)
    with pytest.raises(ValueError, match="^x0"):  # a NaN start gave a NaN trajectory
        ob.rollout(plant, obs, np.array([np.nan, 0.0]), np.zeros(2), dt=0.01, steps=2)
    with pytest.raises(ValueError, match="^dt"):
        ob.rollout(plant, obs, x0, np.zeros(2), dt=np.inf, steps=2)
    with pytest.raises(ValueError, match="steps"):
        ob.rollout(plant, obs, x0, np.zeros(2), dt=0.01, steps=10**9)
    assert np.all(np.isfinite(ob.total_disturbance(plant, 0.3, x0)))
    for t, x, name in ((np.nan, x0, "t"), (None, x0, "t"), (0.3, [0.1], "x"), (0.3, None, "x")):
        with pytest.raises(ValueError, match=f"^{name}"):
            ob.total_disturbance(plant, t, x)
    with pytest.raises(ValueError, match="^state_noise"):  # inf gave an infinite Q
        ob.disturbance_ekf(plant, state_noise=np.inf)


def test_rollout_losses_refuse_nan_starts_and_huge_batches():
    """A NaN start or weight gave a silent NaN loss; a (2, 3) x_hat0s or a string spread a
    TypeError from inside; a batch of 10**9 was allocated."""
    obs, plant = _observer(), ob.VanDerPol()
    x0s = np.array([[0.1, -0.2], [0.3, 0.0]])
    kw = {"dt": 0.01, "steps": 2}
    assert np.isfinite(ob.rollout_mse(plant, obs, x0s, np.zeros((2, 2)), **kw))
    for name, bad in (
        ("x0s", np.full((2, 2), np.nan)),
        ("x_hat0s", np.zeros((2, 3))),
        ("weights", np.array([1.0, np.nan])),
        ("t0s", np.array([0.0, np.inf])),
    ):
        args = {"x0s": x0s, "x_hat0s": np.zeros((2, 2)), name: bad}
        with pytest.raises(ValueError, match=f"^{name}"):
            ob.rollout_mse(plant, obs, **args, **kw)
    est = ob.rollout_estimation(plant, initial_spread=1.0, batch=2, **kw)
    assert np.isfinite(est(obs, jax.random.key(0)))
    for name, bad in (("initial_spread", "1"), ("initial_spread", [np.nan, 1.0]), ("period", None)):
        with pytest.raises(ValueError, match=f"^{name}"):
            ob.rollout_estimation(plant, batch=2, **{"initial_spread": 1.0, name: bad}, **kw)
    with pytest.raises(ValueError, match="batch"):
        ob.rollout_estimation(plant, initial_spread=1.0, batch=10**9, **kw)
    config = ob.ObserverTrainConfig(rollout_steps=2)
    with pytest.raises(ValueError, match="^etas"):
        ob.estimation_loss(obs, np.full((2, 3), np.nan), config, key=jax.random.key(0))


def test_lyapunov_p_and_gain_are_checked_where_they_are_built():
    """A NaN, misshapen or indefinite P gave a NaN Cholesky factor (silent NaN certificates)
    or a TypeError from a broadcast; a string gain/P a numpy conversion error not naming
    it (issue #59)."""
    obs = _observer()
    for bad in (np.full((3, 3), np.nan), np.eye(2), np.eye(3)[None, None], -np.eye(3), "abc"):
        with pytest.raises(ValueError, match="^P"):
            ob.CertifiedObserver.from_observer(obs, P=bad)
    with pytest.raises(ValueError, match="^P"):
        ob.LyapunovMatrix.from_matrix(-np.eye(3))
    for bad in ("abc", np.full((3, 1), np.inf), np.ones((3, 2))):
        with pytest.raises(ValueError, match="^gain"):
            ob.NeuralObserver.from_plant(
                ob.VanDerPol(), (2,), epsilon=0.1, key=jax.random.key(0), gain=bad
            )


def test_train_config_score_and_certify_name_bad_values():
    """`ObserverTrainConfig(batch=0)` failed later as `num` (sample_errors' name); a NaN
    certified_score margin made every score inf; certify_lmi compared a None/NaN tol and a
    string floor with `<` (TypeError, or silently not certified)."""
    for field, bad in (
        ("batch", 0),
        ("rollout_steps", 2.5),
        ("rollout_dt", 0.0),
        ("p_floor", np.nan),
    ):
        with pytest.raises(ValueError, match=f"^{field}"):
            ob.ObserverTrainConfig(**{field: bad})
    obs = _observer()
    big = ob.ObserverTrainConfig(batch=10**9)
    with pytest.raises(ValueError, match="batch"):
        ob.point_loss(ob.CertifiedObserver.from_observer(obs), big, key=jax.random.key(0))
    with pytest.raises(ValueError, match="^margin"):
        ob.certified_score(lambda p, d: d, np.nan)
    for name, bad in (("tol", None), ("tol", np.nan), ("floor", "0.1")):
        with pytest.raises(ValueError, match=f"^{name}"):
            ob.certify_lmi(obs, **{name: bad})
    with pytest.raises(ValueError, match="^max_steps"):
        ob.train_direct_sdp(obs, key=jax.random.key(0), config=big, max_steps=10**9)
    with pytest.raises(ValueError, match="^stage1_steps"):
        ob.train_two_stage(
            ob.CertifiedObserver.from_observer(obs),
            key=jax.random.key(0),
            config=ob.ObserverTrainConfig(),
            stage1_steps=10**15,
            stage2_steps=1,
        )


def test_simulate_and_state_mse_refuse_bad_inputs():
    """simulate integrated a NaN x0 or a NaN/zero tolerance into a NaN trajectory (or a
    diffrax error); state_mse broadcast mismatched x/x_hat (a numpy error not naming them)
    and turned a NaN in a trajectory marked ok into inf (issue #59)."""
    obs, plant = _observer(), ob.VanDerPol()
    ts = np.array([0.0, 0.05, 0.1])
    x0 = np.array([0.1, -0.2])
    for name, bad in (
        ("x0", np.array([np.nan, 0.0])),
        ("ts", np.array([0.0, np.nan])),
        ("ts", np.array([0.1, 0.0])),
        ("rtol", 0.0),
        ("atol", np.nan),
        ("max_steps", 0),
    ):
        args = {"x0": x0, "x_hat0": np.zeros(2), "ts": ts, name: bad}
        with pytest.raises(ValueError, match=f"^{name}"):
            ob.simulate(plant, obs, **args)

    def traj(x, x_hat, ok=True):
        return ob.Trajectory(ts=np.arange(3.0), x=x, x_hat=x_hat, d_hat=np.zeros((3, 1)), ok=ok)

    assert np.isfinite(ob.state_mse(traj(np.ones((3, 2)), np.zeros((3, 2))), start=1))
    with pytest.raises(ValueError, match="^traj.x_hat"):
        ob.state_mse(traj(np.ones((3, 2)), np.zeros((2, 2))))
    with pytest.raises(ValueError, match="^traj.x"):
        ob.state_mse(traj(np.full((3, 2), np.nan), np.zeros((3, 2))))
    with pytest.raises(ValueError, match="^start"):
        ob.state_mse(traj(np.ones((3, 2)), np.zeros((3, 2))), start=3)
    # a failed solve (ok False) keeps its documented inf
    assert ob.state_mse(traj(np.full((3, 2), np.nan), np.zeros((3, 2)), ok=False)) == np.inf


def test_simulate_under_jit_with_constant_save_times():
    """The ts check ran jnp ops on a closed-over constant ts under an outer jit (as
    observers_ablation's evaluate does): a TracerBoolConversionError (smoke tier, #59
    fix). The check now reads a concrete ts with NumPy; the result equals the eager one."""
    obs, plant = _observer(), ob.VanDerPol()
    ts = jax.numpy.asarray([0.0, 0.05, 0.1])

    @jax.jit
    def run(x0):
        return ob.simulate(plant, obs, x0, np.zeros(2), ts).x

    x0 = np.array([0.1, -0.2])
    np.testing.assert_allclose(run(x0), ob.simulate(plant, obs, x0, np.zeros(2), ts).x)
