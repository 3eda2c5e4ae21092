"""Issue 30 findings 8 and 9 (em): HDF5 files whose datasets live in other files
(external storage, external links, virtual datasets) are refused, and a dataset that
declares far more bytes than the file stores (a fill-value bomb) is refused before
anything is allocated."""

from __future__ import annotations

import h5py
import numpy as np
import pytest

from jaxlab import em


def test_hdf5_external_storage_is_refused(tmp_path):
    secret = tmp_path / "secret.bin"
    secret.write_bytes(bytes(range(256)) * 4)
    path = tmp_path / "ext.h5"
    with h5py.File(path, "w") as f:
        f.create_dataset("volumes/raw", shape=(4, 16, 16), dtype="u1", external=[(secret, 0, 1024)])
    with pytest.raises(ValueError, match=r"^path: 'volumes/raw' in .*ext.h5.* external files"):
        em.load_em_volume(path)


def test_hdf5_external_link_is_refused(tmp_path):
    other = tmp_path / "other.h5"
    with h5py.File(other, "w") as f:
        f["volumes/raw"] = np.zeros((2, 4, 4), np.uint8)
    path = tmp_path / "link.h5"
    with h5py.File(path, "w") as f:
        f["volumes"] = h5py.ExternalLink(str(other), "/volumes")
    with pytest.raises(ValueError, match=r"^path: 'volumes' in .*link.h5.* external link"):
        em.load_em_volume(path)
    with h5py.File(path, "a") as f:
        del f["volumes"]
        f.create_group("volumes")
        f["volumes/raw"] = h5py.ExternalLink(str(other), "/volumes/raw")
    with pytest.raises(ValueError, match=r"^path: 'volumes/raw' in .* external link"):
        em.load_em_volume(path)


def test_hdf5_virtual_dataset_is_refused(tmp_path):
    other = tmp_path / "src.h5"
    with h5py.File(other, "w") as f:
        f["x"] = np.ones((2, 4, 4), np.uint8)
    layout = h5py.VirtualLayout(shape=(2, 4, 4), dtype="u1")
    layout[:] = h5py.VirtualSource(str(other), "x", shape=(2, 4, 4))
    path = tmp_path / "virtual.h5"
    with h5py.File(path, "w") as f:
        f.create_virtual_dataset("volumes/raw", layout)
    with pytest.raises(ValueError, match="virtual dataset"):
        em.load_em_volume(path)


def test_hdf5_fill_value_bomb_is_refused_before_allocating(tmp_path):
    path = tmp_path / "bomb.h5"
    with h5py.File(path, "w") as f:  # 1 TB of fill values in a file of a few kB
        f.create_dataset("volumes/raw", shape=(10_000, 10_000, 10_000), dtype="u1", chunks=True)
    assert path.stat().st_size < 1 << 20
    with pytest.raises(ValueError, match="refusing to allocate what the file merely claims"):
        em.load_em_volume(path)
    with h5py.File(path, "w") as f:  # 400 MB declared, nothing stored
        f.create_dataset("volumes/raw", shape=(100, 2000, 2000), dtype="u1", chunks=(1, 64, 64))
    with pytest.raises(ValueError, match="declares 400000000 bytes"):
        em.load_em_volume(path)


def test_ordinary_compressed_volume_still_loads(tmp_path):
    path = tmp_path / "ok.h5"
    raw = (np.arange(4 * 32 * 32) % 251).astype(np.uint8).reshape(4, 32, 32)
    labels = np.zeros((4, 32, 32), np.uint64)  # compresses ~1000x: still far below the cap
    with h5py.File(path, "w") as f:
        f.create_dataset("volumes/raw", data=raw, compression="gzip")
        f.create_dataset("volumes/labels/neuron_ids", data=labels, compression="gzip")
    got, lab = em.load_em_volume(path)
    np.testing.assert_allclose(got, raw / 255.0, rtol=1e-6)
    assert lab is not None
    np.testing.assert_array_equal(lab, labels)
