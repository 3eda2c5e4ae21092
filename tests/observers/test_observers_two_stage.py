"""`train_two_stage` / `train_lmi_only` (the paper's recipe and its LMI-only baseline) and
the ESO / EKF baselines, moved from the P2 experiments' helpers into the library: each
equals the composition the experiments ran before (bit for bit: same keys, same fits),
the ESO's error poles are the requested ones (numpy eigenvalues as the oracle), and bad
arguments raise ValueErrors naming them."""

import functools

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

import jaxlab.observers as O
from jaxlab import Driver

CFG = O.ObserverTrainConfig(batch=4, rollout_steps=2, rollout_dt=0.1, learning_rate=0.01)
OPT = optax.adam(CFG.learning_rate)  # one object: the fits share their compilation


def _params(seed=0, hidden=(3,)):
    obs = O.NeuralObserver.from_plant(O.VanDerPol(), hidden, epsilon=0.1, key=jax.random.key(seed))
    return O.CertifiedObserver.from_observer(obs)


def _leaves_equal(a, b):
    la, lb = jax.tree_util.tree_leaves(a), jax.tree_util.tree_leaves(b)
    assert len(la) == len(lb)
    for x, y in zip(la, lb, strict=True):
        np.testing.assert_array_equal(np.asarray(x), np.asarray(y))


def _old_two_stage(params, key, steps1, steps2, estimation=None):
    """The experiments' former `_setup.two_stage` (no validation), written out."""
    opt = OPT
    k1, k2 = jax.random.split(key)
    point = (
        O.point_loss
        if estimation is None
        else functools.partial(O.point_loss, estimation=estimation)
    )
    lmi = O.lmi_loss if estimation is None else functools.partial(O.lmi_loss, estimation=estimation)
    p1, i1 = O.fit(
        point, params, key=k1, config=CFG, steps=steps1, driver=Driver(chunk=4), optimizer=opt
    )
    stop = lambda p: bool(O.max_lmi_eigenvalue(p) < -CFG.lmi_margin)  # noqa: E731
    p2, i2 = O.fit(
        lmi, p1, key=k2, config=CFG, steps=steps2, driver=Driver(chunk=4, stop=stop), optimizer=opt
    )
    return p1, p2, i1, i2


def test_two_stage_equals_the_two_fits_bit_for_bit():
    params, key = _params(), jax.random.key(3)
    p1, p2, info = O.train_two_stage(
        params,
        key=key,
        config=CFG,
        stage1_steps=8,
        stage2_steps=8,
        driver=Driver(chunk=4),
        optimizer=OPT,
    )
    q1, q2, i1, i2 = _old_two_stage(params, key, 8, 8)
    _leaves_equal(p1, q1)
    _leaves_equal(p2, q2)
    np.testing.assert_array_equal(info["stage1"]["losses"], i1["losses"])
    np.testing.assert_array_equal(info["stage2"]["losses"], i2["losses"])
    assert info["stage2"]["stopped"] == i2["stopped"]
    # stage 2 really trained from stage 1's result (not from the initial parameters)
    assert not np.array_equal(np.asarray(p1.P), np.asarray(params.P))


def test_two_stage_validation_returns_the_best_scored_parameters():
    params, key = _params(1), jax.random.key(4)

    def score(p, data):
        return jnp.sum((p.P - data) ** 2)

    target = params.P
    _, _, info = O.train_two_stage(
        params,
        key=key,
        config=CFG,
        stage1_steps=8,
        stage2_steps=4,
        driver=Driver(chunk=4),
        optimizer=OPT,
        validation=(score, target, 4),
        stage2_validation=(score, target, 4),
    )
    # the initial parameters score 0, the best possible: stage 1 keeps them
    assert info["stage1"]["init_val_loss"] == 0.0
    assert info["stage1"]["best_step"] == 0
    # with a stage-2 score there is no stop at the certificate: all its steps run
    assert info["stage2"]["steps"] == 4
    assert "last" in info["stage2"]


def test_lmi_only_equals_one_stopped_lmi_fit():
    params, key = _params(2), jax.random.key(5)
    p, info = O.train_lmi_only(
        params, key=key, config=CFG, steps=8, driver=Driver(chunk=4), optimizer=OPT
    )
    stop = lambda q: bool(O.max_lmi_eigenvalue(q) < -CFG.lmi_margin)  # noqa: E731
    q, ref = O.fit(
        O.lmi_loss,
        params,
        key=key,
        config=CFG,
        steps=8,
        driver=Driver(chunk=4, stop=stop),
        optimizer=OPT,
    )
    _leaves_equal(p, q)
    np.testing.assert_array_equal(info["losses"], ref["losses"])


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"stage1_steps": 0}, "stage1_steps"),
        ({"stage2_steps": -1}, "stage2_steps"),
        ({"stage2_estimation": "other"}, "stage2_estimation"),
        ({"validation": (1, 2, 3)}, "validation"),
        ({"stage2_validation": (lambda p, d: 0.0, None)}, "stage2_validation"),
        ({"config": {"batch": 4}}, "config"),
    ],
)
def test_two_stage_bad_arguments_raise(kwargs, match):
    args = dict(key=jax.random.key(0), config=CFG, stage1_steps=2, stage2_steps=2)
    with pytest.raises(ValueError, match=f"^{match}"):
        O.train_two_stage(_params(), **{**args, **kwargs})
    if "config" in kwargs:
        with pytest.raises(ValueError, match="^config"):
            O.train_lmi_only(_params(), key=jax.random.key(0), config=kwargs["config"], steps=2)


@pytest.mark.parametrize("plant", [O.VanDerPol(), O.x29_longitudinal(0.0)])
def test_high_gain_eso_places_the_scaled_error_poles(plant):
    n, nd = plant.state_dim, plant.disturbance_dim
    poles = -np.arange(1.0, n + nd + 1.0)
    eso = O.high_gain_eso(plant, epsilon=0.05, poles=poles, key=jax.random.key(0))
    A, _, C, E = O.linear_model(plant)
    A_eps = np.block([[0.05 * np.asarray(A), np.asarray(E)], [np.zeros((nd, n + nd))]])
    C_eps = np.concatenate([np.asarray(C), np.zeros((C.shape[0], nd))], 1)
    eig = np.linalg.eigvals(A_eps + np.asarray(eso.gain) @ C_eps)
    np.testing.assert_allclose(np.sort(eig.real), np.sort(poles), rtol=1e-6)
    np.testing.assert_allclose(eig.imag, 0.0, atol=1e-6)
    assert eso.hidden == ()
    assert eso.epsilon == 0.05


def test_disturbance_ekf_covariances():
    plant = O.x29_longitudinal(0.0)
    ekf = O.disturbance_ekf(plant, state_noise=1e-3, disturbance_noise=10.0, measurement_noise=2e-3)
    n, nd, p = plant.state_dim, plant.disturbance_dim, plant.C.shape[0]
    np.testing.assert_array_equal(np.asarray(ekf.process_noise), np.diag([1e-3] * n + [10.0] * nd))
    np.testing.assert_array_equal(np.asarray(ekf.measurement_noise), 2e-3 * np.eye(p))
    np.testing.assert_array_equal(np.asarray(ekf.initial_cov), np.eye(n + nd))
    assert ekf.plant is plant


@pytest.mark.parametrize(
    ("call", "match"),
    [
        (
            lambda: O.high_gain_eso("plant", epsilon=0.1, poles=[-1.0], key=jax.random.key(0)),
            "plant",
        ),
        (
            lambda: O.high_gain_eso(
                O.VanDerPol(), epsilon=0.0, poles=[-1.0, -2.0, -3.0], key=jax.random.key(0)
            ),
            "epsilon",
        ),
        (
            lambda: O.high_gain_eso(
                O.VanDerPol(), epsilon=0.1, poles=[-1.0], key=jax.random.key(0)
            ),
            "poles",
        ),
        (lambda: O.disturbance_ekf(O.VanDerPol(), state_noise=0.0), "state_noise"),
        (lambda: O.disturbance_ekf(O.VanDerPol(), measurement_noise=-1.0), "measurement_noise"),
        (lambda: O.disturbance_ekf(None), "plant"),
    ],
)
def test_baseline_bad_arguments_raise(call, match):
    with pytest.raises(ValueError, match=f"^{match}"):
        call()


def test_certified_score_is_the_loss_where_certified_and_inf_elsewhere():
    params = _params(6)
    lam = float(O.max_lmi_eigenvalue(params))

    def val(p, data):
        return jnp.sum(p.P**2) + data

    ref = float(val(params, 1.0))
    # the certificate is max_lmi_eigenvalue < -margin: a margin just below / above -lam
    np.testing.assert_allclose(float(O.certified_score(val, -lam - 1e-3)(params, 1.0)), ref)
    assert np.isinf(float(O.certified_score(val, -lam + 1e-3)(params, 1.0)))


def test_stage2_without_a_certified_state_returns_stage1s_result_not_its_last():
    params, key = _params(7), jax.random.key(8)
    assert float(O.max_lmi_eigenvalue(params)) > -CFG.lmi_margin  # not certified at the start

    def val(p, data):
        return jnp.sum((p.P - data) ** 2)

    p1, p2, info = O.train_two_stage(
        params,
        key=key,
        config=CFG,
        stage1_steps=4,
        stage2_steps=4,
        driver=Driver(chunk=4),
        optimizer=OPT,
        stage2_validation=(O.certified_score(val, CFG.lmi_margin), params.P, 2),
    )
    i2 = info["stage2"]
    last_certified = float(O.max_lmi_eigenvalue(i2["last"])) < -CFG.lmi_margin
    assert not last_certified  # 4 steps do not certify: no certified state was scored
    assert np.isinf(i2["best_val_loss"])
    _leaves_equal(p2, p1)
    assert not np.array_equal(np.asarray(i2["last"].P), np.asarray(p1.P))


def test_stage1_patience_stops_when_validation_stops_improving():
    params, key = _params(9), jax.random.key(10)

    def flat(p, data):  # never improves on the initial score
        return jnp.asarray(data)

    kw = dict(key=key, config=CFG, stage2_steps=4, driver=Driver(chunk=4), optimizer=OPT)
    _, _, info = O.train_two_stage(
        params, stage1_steps=200, validation=(flat, 1.0, 4), stage1_patience=2, **kw
    )
    assert info["stage1"]["steps"] < 40
    assert info["stage1"]["best_step"] == 0
    _, _, info = O.train_two_stage(params, stage1_steps=40, validation=(flat, 1.0, 4), **kw)
    assert info["stage1"]["steps"] == 40  # no patience: all steps
