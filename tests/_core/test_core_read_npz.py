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


def _npy_bytes(shape, data: bytes) -> bytes:
    import io

    buf = io.BytesIO()
    header = {"descr": "<f8", "fortran_order": False, "shape": shape}
    np.lib.format.write_array_header_1_0(buf, header)
    return buf.getvalue() + data


def test_read_npz_refuses_a_header_that_claims_more_than_the_member_holds(tmp_path):
    import zipfile

    # a tiny compressed member whose .npy header claims 8 TB: numpy would allocate the
    # header's shape before reading, so the reader must refuse it first
    path = tmp_path / "bomb.npz"
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED) as z:
        z.writestr("a.npy", _npy_bytes((10**12,), np.zeros(2).tobytes()))
    with pytest.raises(ValueError, match=r"bomb\.npz.*claims 8000000000000 bytes"):
        read_npz(path)
    # the same member with an honest header reads
    ok = tmp_path / "ok.npz"
    with zipfile.ZipFile(ok, "w", compression=zipfile.ZIP_DEFLATED) as z:
        z.writestr("a.npy", _npy_bytes((2,), np.arange(2.0).tobytes()))
    np.testing.assert_array_equal(read_npz(ok)["a"], np.arange(2.0))


def test_read_npz_refuses_archives_over_the_byte_limit(tmp_path):
    path = tmp_path / "big.npz"
    np.savez_compressed(path, a=np.zeros(1000))  # 8 kB inflated, a few bytes on disk
    assert read_npz(path, max_bytes=10_000)["a"].shape == (1000,)
    with pytest.raises(ValueError, match=r"big\.npz.*more than the limit 4000"):
        read_npz(path, max_bytes=4000)
