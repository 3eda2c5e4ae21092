"""`search_decrease_violations`: gradient ascent on the normalised decrease bound."""

import jax
import jax.numpy as jnp
import numpy as np

import jaxlab.observers as O


def test_search_reaches_the_rayleigh_maximum_of_a_linear_error_field():
    # a linear ESO (no MLP term) with P = I: decrease_bound(eta) = eta^T (J + J^T) eta, so
    # max over eta of bound / |eta|^2 is lambda_max(J + J^T) (independent oracle: eigvalsh)
    with jax.enable_x64(True):
        plant = O.VanDerPol()
        eso = O.high_gain_eso(plant, epsilon=0.05, poles=[-1.0, -1.5, -2.0], key=jax.random.key(0))
        ne = eso.extended_dim
        e = jnp.array([0.3, -0.2, 0.5])
        np.testing.assert_allclose(eso.error_field(2 * e), 2 * eso.error_field(e), rtol=1e-12)
        J = np.asarray(jax.jacfwd(eso.error_field)(jnp.zeros(ne)))
        lam = np.linalg.eigvalsh(J + J.T).max()
        assert lam > 0  # P = I is no Lyapunov matrix here: violations exist
        P = jnp.eye(ne)
        starts = jax.random.normal(jax.random.key(1), (16, ne))
        v0 = jax.vmap(lambda x: O.decrease_bound(eso, P, x, rate=0.0, disturbance_bound=0.0))(
            starts
        )
        g0 = np.asarray(v0) / np.sum(np.asarray(starts) ** 2, axis=1)
        etas, vals = O.search_decrease_violations(
            eso, P, starts, steps=300, step_size=0.05, max_norm=10.0
        )
        g = np.asarray(vals) / np.sum(np.asarray(etas) ** 2, axis=1)
        assert g0.max() < lam - 1e-2  # the random starts are not already at the maximum
        np.testing.assert_allclose(g.max(), lam, rtol=1e-3)
        assert np.all(g >= g0 - 1e-9)  # ascent never ends below its start here
        assert np.all(np.linalg.norm(np.asarray(etas), axis=1) <= 10.0 + 1e-9)


def test_search_keeps_the_fixed_coordinates_and_the_norm_bound():
    with jax.enable_x64(True):
        plant = O.VanDerPol()
        obs = O.NeuralObserver.from_plant(plant, (4,), epsilon=0.05, key=jax.random.key(0))
        ne = obs.extended_dim
        free = jnp.array([True, True, False])
        starts = jax.random.normal(jax.random.key(2), (8, ne))
        etas, _ = O.search_decrease_violations(
            obs, jnp.eye(ne), starts, steps=50, max_norm=0.5, free=free
        )
        np.testing.assert_array_equal(np.asarray(etas)[:, 2], np.asarray(starts)[:, 2])
        assert np.all(np.linalg.norm(np.asarray(etas)[:, :2], axis=1) <= 0.5 + 1e-12)
        assert not np.allclose(np.asarray(etas)[:, :2], np.asarray(starts)[:, :2])
