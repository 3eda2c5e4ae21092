"""em's pixel (un)shuffle and relabel_connected at the boundary (issue #59: declared in
the public-API fuzz tables, they met None/lists with an AttributeError, passed NaN/inf
and empty arrays through, and an empty image was a NumPy error naming nothing)."""

from __future__ import annotations

import numpy as np
import pytest

import jaxlab.em as em


@pytest.mark.parametrize("fn", [em.pixel_shuffle, em.pixel_unshuffle])
def test_pixel_shuffle_checks_x(fn):
    x = np.arange(32.0).reshape(2, 2, 8)
    assert fn(x.tolist(), 2).shape == fn(x, 2).shape  # a list converts (was AttributeError)
    bad = x.copy()
    bad[1, 0, 3] = np.inf
    with pytest.raises(ValueError, match="x: expected finite"):
        fn(bad, 2)  # was passed through
    with pytest.raises(ValueError, match="x: expected an array"):
        fn(None, 2)
    with pytest.raises(ValueError, match="x: expected a non-empty"):
        fn(x[:0], 2)


def test_pixel_unshuffle_inverts_shuffle():
    x = np.random.default_rng(0).standard_normal((3, 4, 4, 8))
    np.testing.assert_allclose(em.pixel_unshuffle(em.pixel_shuffle(x, 2), 2), x)


def test_relabel_connected_of_an_empty_image_is_empty():
    out = em.relabel_connected(np.zeros((0, 5), dtype=np.int64))
    assert out.shape == (0, 5)  # was a "zero-size array" ValueError naming nothing
    assert out.dtype == np.int32
    np.testing.assert_array_equal(em.relabel_connected([[1, 2], [1, 1]]), [[1, 2], [1, 1]])
    with pytest.raises(ValueError, match="labels: "):
        em.relabel_connected(np.ones((2, 2)))
