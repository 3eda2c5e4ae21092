import operator

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

from jaxlab import Driver, sensing
from jaxlab._core import Checkpointer
from jaxlab.sensing import GaussianExpert, _train
from tests.step_checks import check_step


def _flower(**kw):
    base = dict(
        curvature=jnp.asarray(0.8),
        radius=jnp.asarray(0.8),
        nectary=jnp.asarray([0.2, -0.1]),
        kind=jnp.asarray(0),
        phase=jnp.asarray(0.3),
        contrast=jnp.asarray(0.9),
    )
    base.update(kw)
    return sensing.Flower(**base)


def test_environment_geometry_contact_on_surface():
    f = _flower()
    for p, contact, tube in [
        ((0.5, 0.3), 1.0, 0.0),
        ((0.21, -0.12), 1.0, 1.0),
        ((0.85, 0.0), 0.0, 0.0),
    ]:
        a = jnp.asarray([*p, 0.0])
        _, mech = sensing.observe_mean(f, a)
        r2 = (p[0] ** 2 + p[1] ** 2) / 0.8**2
        want_h = 0.0 if contact == 0 else (-0.5 if tube else 0.8 * 0.4 * r2)
        assert float(mech[0]) == contact
        assert float(mech[5]) == tube
        np.testing.assert_allclose(float(mech[1]), want_h, rtol=1e-12)
        np.testing.assert_allclose(float(sensing.surface_height(f, a[:2])), want_h, rtol=1e-12)
        assert float(sensing.nectar_reward(f, a)) == tube
    # Surface normal of the paraboloid at (0.5, 0.3): -grad / sqrt(1 + |grad|^2).
    g = 2 * 0.8 * 0.4 * np.array([0.5, 0.3]) / 0.8**2
    _, mech = sensing.observe_mean(f, jnp.asarray([0.5, 0.3, 0.0]))
    np.testing.assert_allclose(np.asarray(mech[2:4]), -g / np.sqrt(1 + g @ g), rtol=1e-10)
    np.testing.assert_allclose(float(mech[4]), float(mech[2]), rtol=1e-12)  # angle 0 -> x


def test_environment_deterministic_and_vmap(getkey):
    key = getkey()
    flowers = jax.vmap(lambda k: sensing.sample_flower(key=k))(jax.random.split(key, 3))
    a = jnp.asarray([0.1, 0.2, 1.0])
    k = getkey()
    batched = jax.vmap(lambda f: sensing.observe(f, a, key=k))(flowers)
    for i in range(3):
        fi = jax.tree_util.tree_map(operator.itemgetter(i), flowers)
        one = sensing.observe(fi, a, key=k)
        np.testing.assert_array_equal(np.asarray(one[0]), np.asarray(batched[0][i]))
        np.testing.assert_array_equal(np.asarray(one[1]), np.asarray(batched[1][i]))


def test_product_of_experts_matches_sequential_bayes_and_quadrature():
    mu = jnp.asarray([[0.5], [-1.0], [2.0]])
    prec = jnp.asarray([[2.0], [0.5], [1.5]])
    post = sensing.product_of_experts(GaussianExpert(mean=mu, precision=prec))
    m, v = 0.0, 1.0  # prior N(0, 1), then combine one Gaussian factor at a time
    for mk, pk in zip(mu[:, 0], prec[:, 0], strict=True):
        vk = 1 / pk
        m, v = (m * vk + mk * v) / (v + vk), v * vk / (v + vk)
    np.testing.assert_allclose(float(post.mean[0]), float(m), rtol=1e-12)
    np.testing.assert_allclose(float(1 / post.precision[0]), float(v), rtol=1e-12)
    x = np.linspace(-10, 10, 200001)
    logd = -0.5 * x**2 + sum(
        -0.5 * float(p) * (x - float(u)) ** 2 for u, p in zip(mu[:, 0], prec[:, 0], strict=True)
    )
    d = np.exp(logd - logd.max())
    d /= d.sum()
    np.testing.assert_allclose((d * x).sum(), float(post.mean[0]), rtol=1e-8)
    np.testing.assert_allclose((d * (x - (d * x).sum()) ** 2).sum(), float(v), rtol=1e-6)
    masked = sensing.product_of_experts(
        GaussianExpert(mean=mu, precision=prec), jnp.asarray([1.0, 0.0, 0.0])
    )
    np.testing.assert_allclose(float(masked.mean[0]), 0.5 * 2 / 3, rtol=1e-12)


def _model(key):
    return sensing.MultimodalVAE(latent_dim=3, width=16, key=key)


def _posterior(key, dim=3):
    k1, k2 = jax.random.split(key)
    return GaussianExpert(
        mean=jax.random.normal(k1, (dim,)), precision=1 + jax.random.uniform(k2, (dim,))
    )


def test_information_gain_nonnegative_and_jit(getkey):
    model, post = _model(getkey()), _posterior(getkey())
    grid = sensing.action_grid(7)
    for mod in ("visual", "mechano", "joint"):
        m = sensing.information_map(model, post, grid, mod)
        assert m.shape == (grid.shape[0],)
        assert bool(jnp.all(m >= 0))
        mj = jax.jit(lambda p, g, mod=mod: sensing.information_map(model, p, g, mod))(post, grid)
        np.testing.assert_allclose(np.asarray(mj), np.asarray(m), rtol=1e-9, atol=1e-12)
    joint = sensing.information_map(model, post, grid, "joint")
    vis = sensing.information_map(model, post, grid, "visual")
    assert bool(jnp.all(joint >= vis - 1e-9))  # more observations never carry less information


def test_information_gain_zero_when_observation_ignores_latents(getkey):
    model, post = _model(getkey()), _posterior(getkey())
    for m in ("visual", "mechano"):  # zero the decoder weights that read z
        w = model.decoders[m].layers[0].weight
        model = eqx.tree_at(
            lambda mdl, m=m: mdl.decoders[m].layers[0].weight, model, w.at[:, :3].set(0.0)
        )
    a = jnp.asarray([0.1, 0.2, 0.0])
    assert float(sensing.linearized_information_gain(model, post, a)) == pytest.approx(0, abs=1e-12)
    mc = sensing.mc_information_gain(model, post, a, key=getkey(), n_samples=64)
    assert float(mc) == pytest.approx(0, abs=1e-9)


def test_linearized_gain_matches_monte_carlo_for_linear_decoder(getkey):
    model = sensing.MultimodalVAE(latent_dim=2, width=4, sigma=(0.5, 0.5), key=getkey())
    for m in ("visual", "mechano"):  # make decoders linear in (z, action)
        lin = eqx.nn.MLP(5, model.decoders[m].out_size, 4, 0, key=getkey())
        lin = eqx.tree_at(lambda x: x.layers[0].weight, lin, 0.3 * lin.layers[0].weight)
        model = eqx.tree_at(lambda mdl, m=m: mdl.decoders[m], model, lin)
    post = GaussianExpert(mean=jnp.zeros(2), precision=jnp.asarray([1.0, 2.0]))
    a = jnp.asarray([0.3, -0.2, 0.5])
    lin_ig = float(sensing.linearized_information_gain(model, post, a, "visual"))
    mc = float(sensing.mc_information_gain(model, post, a, "visual", key=getkey(), n_samples=4000))
    assert lin_ig > 0.05
    assert mc == pytest.approx(lin_ig, abs=0.05)


def test_information_gain_grad_matches_finite_differences(getkey):
    model, post = _model(getkey()), _posterior(getkey())
    a = jnp.asarray([0.3, 0.1, 0.4])

    def f(mean):
        return sensing.linearized_information_gain(
            model, GaussianExpert(mean=mean, precision=post.precision), a
        )

    g = jax.grad(f)(post.mean)
    eps = 1e-6
    fd = [
        (f(post.mean.at[i].add(eps)) - f(post.mean.at[i].add(-eps))) / (2 * eps) for i in range(3)
    ]
    np.testing.assert_allclose(np.asarray(g), np.asarray(fd), rtol=1e-5, atol=1e-8)


def test_elbo_improves_with_training(getkey):
    # jitted data and model construction: one compilation each instead of one per eager op
    data = jax.jit(lambda k: sensing.simulate_probes(64, 8, key=k))(getkey())
    model = eqx.filter_jit(_model)(getkey())

    @eqx.filter_jit  # one compilation serves the untrained and the trained model
    def _mean_elbo(mdl):
        keys = jax.random.split(jax.random.key(0), 64)
        return jnp.mean(
            jax.vmap(lambda v, m, a, k: sensing.elbo(mdl, v, m, a, key=k))(
                data.visual, data.mechano, data.actions, keys
            )
        )

    def mean_elbo(mdl):
        return float(_mean_elbo(mdl))

    before = mean_elbo(model)
    trained, hist = sensing.train_model(
        model, data, key=getkey(), steps=200, driver=Driver(chunk=100), batch_size=16
    )
    assert hist.losses.shape == (200,)
    assert mean_elbo(trained) > before + 0.5 * abs(before)


def test_vae_step_passes_the_shared_step_checks(getkey, tmp_path):
    data = sensing.simulate_probes(8, 4, key=getkey())
    model = _model(getkey())
    step = sensing.VAEStep(model, data, optimizer=optax.adam(1e-3), batch_size=4)
    check_step(step, step.init(model, getkey()), key=getkey(), steps=6, tmp_path=tmp_path)


class _KillOnSave(Checkpointer):
    """Raises on the n-th save (that save is not written): a kill between checkpoints."""

    def save(self, tree):
        _KillOnSave.saves += 1
        if _KillOnSave.saves == _KillOnSave.kill_at:
            raise KeyboardInterrupt
        super().save(tree)


@pytest.mark.parametrize("kill_at", [2, None])  # mid-training; after the last checkpoint
def test_train_model_resume_equals_uninterrupted(getkey, tmp_path, kill_at):
    """sensing_maps' bugs: a resume after the last checkpoint crashed on an empty loss
    array, and after a mid-training resume the losses lacked the first part."""
    data = sensing.simulate_probes(8, 4, key=getkey())
    model, key = _model(getkey()), getkey()
    kw = dict(key=key, steps=6, batch_size=4)
    ref_model, ref = sensing.train_model(model, data, driver=Driver(chunk=2), **kw)
    ref = ref.losses
    _KillOnSave.saves, _KillOnSave.kill_at = 0, kill_at
    ck = _KillOnSave(tmp_path / "vae.eqx", resume=True)
    if kill_at is None:
        sensing.train_model(model, data, driver=Driver(chunk=2, checkpointer=ck), **kw)
    else:
        with pytest.raises(KeyboardInterrupt):
            sensing.train_model(model, data, driver=Driver(chunk=2, checkpointer=ck), **kw)
    res_model, res = sensing.train_model(model, data, driver=Driver(chunk=2, checkpointer=ck), **kw)
    res = res.losses
    assert res.shape == (6,)
    np.testing.assert_array_equal(res, ref)
    for a, b in zip(
        jax.tree_util.tree_leaves(eqx.filter(res_model, eqx.is_array)),
        jax.tree_util.tree_leaves(eqx.filter(ref_model, eqx.is_array)),
        strict=True,
    ):
        np.testing.assert_array_equal(a, b)


def test_policies_gate_and_choices(getkey):
    info = jnp.asarray([0.1, 0.9, 0.85, 0.2])
    reward = jnp.asarray([0.8, 0.1, 0.3, 0.7])
    lex = sensing.LexicographicPolicy(gate=0.3, tolerance=0.1)
    assert int(lex.choose(info, reward, jnp.asarray(0.1), key=getkey())) == 0  # exploit
    # Above the gate: information first; 0.85 is within 10% of the range of 0.9 -> reward breaks.
    assert int(lex.choose(info, reward, jnp.asarray(0.9), key=getkey())) == 2
    assert int(sensing.ExploitPolicy().choose(info, reward, 1.0, key=getkey())) == 0
    assert (
        int(sensing.EpsilonGreedyPolicy(epsilon=0.0).choose(info, reward, 1.0, key=getkey())) == 0
    )
    assert int(sensing.WeightedPolicy(beta=1.0).choose(info, reward, 1.0, key=getkey())) == 2


def test_episode_vmap_equals_loop(getkey):
    model = _model(getkey())
    flowers = jax.vmap(lambda k: sensing.sample_flower(key=k))(jax.random.split(getkey(), 2))
    grid = sensing.action_grid(5)
    keys = jax.random.split(getkey(), 2)
    pol = sensing.LexicographicPolicy(gate=0.5)
    batched = jax.vmap(lambda f, k: sensing.run_episode(model, f, pol, grid, 4, key=k))(
        flowers, keys
    )
    for i in range(2):
        fi = jax.tree_util.tree_map(operator.itemgetter(i), flowers)
        one = sensing.run_episode(model, fi, pol, grid, 4, key=keys[i])
        np.testing.assert_allclose(np.asarray(one.actions), np.asarray(batched.actions[i]))
        np.testing.assert_allclose(
            np.asarray(one.uncertainty), np.asarray(batched.uncertainty[i]), rtol=1e-9
        )
    assert float(batched.uncertainty[0, 0]) == pytest.approx(1.0)  # prior before any probe


def test_bad_inputs_raise(getkey):
    f = _flower()
    model, post = _model(getkey()), _posterior(getkey())
    with pytest.raises(ValueError, match="action: expected shape"):
        sensing.observe(f, jnp.zeros(2), key=getkey())
    with pytest.raises(ValueError, match="modality: expected one of"):
        sensing.information_map(model, post, sensing.action_grid(3), "smell")
    with pytest.raises(ValueError, match="epsilon: expected values in"):
        sensing.EpsilonGreedyPolicy(epsilon=1.5)
    with pytest.raises(ValueError, match="n_steps: expected a positive integer"):
        sensing.run_episode(
            model, f, sensing.ExploitPolicy(), sensing.action_grid(3), 0, key=getkey()
        )
    with pytest.raises(ValueError, match="n_flowers: expected a positive integer"):
        sensing.simulate_probes(0, 4, key=getkey())


def test_simulate_probes_is_one_compiled_program_with_the_eager_values(getkey):
    # simulate_probes ran eagerly (a vmap compiled ~170 primitives one by one, ~10 s of the
    # sensing experiments' smoke runs); it is now jitted with the flower keywords static
    key = getkey()
    kw = {"kinds": [1], "curvature_range": np.asarray([1.0, 1.6])}  # list / array: made static
    got = sensing.simulate_probes(6, 3, key=key, **kw)
    want = jax.tree.map(
        np.asarray,
        _train._simulate_probes(jax.random.split(key, 6), 3, kw),
    )
    for a, b in zip(jax.tree.leaves(got), jax.tree.leaves(want), strict=True):
        np.testing.assert_allclose(np.asarray(a), b, rtol=1e-5, atol=1e-6)
    assert np.all(np.asarray(got.flowers.kind) == 1)
    # a traced range cannot be static: the eager path still takes it
    traced = jax.jit(
        lambda lo: sensing.simulate_probes(2, 3, key=key, curvature_range=(lo, lo + 0.1))
    )(jnp.asarray(1.2))
    assert np.all(np.asarray(traced.flowers.curvature) >= 1.2 - 1e-6)
