"""NumPy / scikit-learn randomness derived from a JAX key."""

import jax
import numpy as np
import pytest

from jaxlab._core import numpy_rng, sklearn_seed


def test_numpy_rng_follows_the_key_bits():
    k = jax.random.key(3)
    a = numpy_rng(k).random(4)
    np.testing.assert_array_equal(a, numpy_rng(jax.random.key(3)).random(4))
    # typed keys and their raw uint32 data give the same stream (the bits are the seed)
    np.testing.assert_array_equal(a, numpy_rng(jax.random.key_data(k)).random(4))
    expect = np.random.default_rng(np.asarray(jax.random.key_data(k)).ravel()).random(4)
    np.testing.assert_array_equal(a, expect)
    assert not np.array_equal(a, numpy_rng(jax.random.key(4)).random(4))
    s = sklearn_seed(k)
    assert isinstance(s, int)
    assert 0 <= s < 2**31 - 1
    assert s == sklearn_seed(jax.random.key(3))


def test_numpy_rng_rejects_integer_seeds():
    with pytest.raises(ValueError, match="key: expected a JAX PRNG key"):
        numpy_rng(3)
    with pytest.raises(ValueError, match="key: expected a PRNG key or uint32"):
        numpy_rng(jax.numpy.zeros(2))
