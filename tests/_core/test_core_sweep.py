import textwrap

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxlab._core import sweep
from tests.simulated_devices import run_on_devices


def _fn(x):
    key, scale = x["key"], x["scale"]
    w = jax.random.normal(key, (16, 16))
    return {"y": jnp.tanh(w @ jnp.sin(w[0] * scale)).sum(), "v": w[:3, 0] * scale}


def test_single_device_equals_vmap(getkey):
    batch = {"key": jax.random.split(getkey(), 5), "scale": jnp.linspace(0.1, 1.0, 5)}
    out = sweep(_fn, batch)
    # bit for bit against the same program compiled by hand; against op-by-op (eager)
    # vmap to a few ulp: XLA may fuse differently (the tests compile at -O0, conftest)
    ref = jax.jit(jax.vmap(_fn))(batch)
    eager = jax.vmap(_fn)(batch)
    for k in ("y", "v"):
        np.testing.assert_array_equal(np.asarray(out[k]), np.asarray(ref[k]))
        np.testing.assert_allclose(np.asarray(out[k]), np.asarray(eager[k]), rtol=1e-14)


def test_bad_batches_raise():
    with pytest.raises(ValueError, match="batch: leaves disagree"):
        sweep(lambda x: x, {"a": jnp.zeros(3), "b": jnp.zeros(4)})
    with pytest.raises(ValueError, match="batch: every leaf needs a leading batch axis"):
        sweep(lambda x: x, {"a": jnp.zeros(())})


_SCRIPT = textwrap.dedent(
    """
    import jax, jax.numpy as jnp, numpy as np
    from jaxlab._core import sweep
    from tests._core.test_core_sweep import _fn
    assert len(jax.devices()) == 4, jax.devices()
    for n in (8, 6, 3):
        batch = {"key": jax.random.split(jax.random.key(0), n),
                 "scale": jnp.linspace(0.1, 1.0, n, dtype=jnp.float32)}
        multi = sweep(_fn, batch)
        single = sweep(_fn, batch, devices=jax.devices()[:1])
        for k in ("y", "v"):
            assert multi[k].shape[0] == n, (k, multi[k].shape)
            assert np.array_equal(np.asarray(multi[k]), np.asarray(single[k])), (n, k)
        if n == 8:
            assert len(multi["y"].sharding.device_set) == 4, multi["y"].sharding
    print("OK")
    """
)


def test_sharded_over_four_devices_equals_single_device():
    stdout = run_on_devices(_SCRIPT, devices=4, timeout=300)
    assert "OK" in stdout
