"""`read_npz`: the one .npz reader; every way a file can be wrong is one ValueError naming it."""

from __future__ import annotations

import numpy as np
import pytest

from jaxlab._core import read_npz


def _npz(tmp_path, **arrays):
    path = tmp_path / "x.npz"
    np.savez(path, **arrays)
    return path


def test_read_npz_roundtrip(tmp_path):
    path = _npz(tmp_path, a=np.arange(3.0), b=np.ones((2, 2), np.int32))
    got = read_npz(path)
    assert sorted(got) == ["a", "b"]
    np.testing.assert_array_equal(got["a"], np.arange(3.0))
    assert got["b"].dtype == np.int32


def test_read_npz_refuses_what_is_not_a_plain_npz(tmp_path):
    np.save(tmp_path / "one.npy", np.arange(3))
    obj = tmp_path / "obj.npz"
    np.savez(obj, a=np.array([{"x": 1}], dtype=object))  # needs pickle to read
    data = _npz(tmp_path, a=np.arange(4.0)).read_bytes()
    encrypted = bytearray(data)
    encrypted[6] |= 0x01  # the local header's "encrypted" flag bit
    encrypted[data.rindex(b"PK\x01\x02") + 8] |= 0x01  # and the central directory's
    (tmp_path / "enc.npz").write_bytes(bytes(encrypted))
    method = bytearray(data)
    method[data.rindex(b"PK\x01\x02") + 10] = 99  # an unknown compression method
    (tmp_path / "method.npz").write_bytes(bytes(method))
    for name in ("missing.npz", "one.npy", "obj.npz", "enc.npz", "method.npz"):
        with pytest.raises(ValueError, match=name):
            read_npz(tmp_path / name, "test archive")
