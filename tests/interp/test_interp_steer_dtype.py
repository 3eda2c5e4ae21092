"""interp.steer / interp.project_out edit an activation in its own dtype (issue #59 fuzz:
a float64 activation raised a TypePromotionError from inside `Steer.__call__`, as the
float32 vector was added to it under strict promotion)."""

from __future__ import annotations

from typing import Any

import jax.numpy as jnp
import numpy as np
import pytest

import jaxlab.interp as _ip

ip: Any = _ip  # bad inputs on purpose: no static types at these calls


@pytest.mark.parametrize("dtype", [jnp.float64, jnp.float32, jnp.bfloat16])
def test_steer_and_project_out_keep_the_activation_dtype(dtype):
    d = np.array([1.0, 0.0, 0.0, 0.0])
    x = jnp.ones((3, 4), dtype)
    s = ip.steer(d, 2.0, layers=(0,))[("resid_post", 0)](x)
    assert s.dtype == dtype
    np.testing.assert_allclose(np.asarray(s, np.float64)[:, 0], 3.0)
    p = ip.project_out(d, layers=(0,))[("resid_post", 0)](x)
    assert p.dtype == dtype
    np.testing.assert_allclose(np.asarray(p, np.float64)[:, 0], 0.0)
    np.testing.assert_allclose(np.asarray(p, np.float64)[:, 1:], 1.0)
