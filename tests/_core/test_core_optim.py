import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

from jaxlab._core import optimizer_update


def test_adam_update_runs_under_strict_promotion_and_matches_standard():
    params = {"w": jnp.arange(3.0), "b": jnp.ones(())}
    grads = jax.tree_util.tree_map(lambda x: 0.5 * x + 1.0, params)
    opt = optax.adam(1e-2)
    state = opt.init(params)
    # The failure this helper exists for (conftest sets strict promotion).
    with pytest.raises(jax.dtypes.TypePromotionError):
        opt.update(grads, state, params)
    ours, new_state = optimizer_update(opt, grads, state, params)
    with jax.numpy_dtype_promotion("standard"):
        ref, _ = opt.update(grads, state, params)
    for k in params:
        np.testing.assert_array_equal(np.asarray(ours[k]), np.asarray(ref[k]))
    jitted, _ = jax.jit(lambda g, s, p: optimizer_update(opt, g, s, p))(grads, state, params)
    np.testing.assert_allclose(np.asarray(jitted["w"]), np.asarray(ref["w"]), rtol=1e-12)
    assert int(new_state[0].count) == 1
