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


# ------------------------------------------------------------------ TIFF (issue 30, item 9)


def _stack_tiff(path, compression=None, pages=3, side=16):
    import tifffile

    raw = (np.arange(pages * side * side) % 251).astype(np.uint8).reshape(pages, side, side)
    tifffile.imwrite(path, raw, photometric="minisblack", compression=compression)
    return raw


def _patch_tag(path, tag, value):
    """Overwrite the value of `tag` of the first page in place (a LONG or SHORT tag)."""
    import tifffile

    with tifffile.TiffFile(path) as tif:
        t = tif.pages[0].tags[tag]
        offset, fmt = t.valueoffset, {3: "<H", 4: "<I"}[int(t.dtype)]
    data = bytearray(path.read_bytes())
    data[offset : offset + np.dtype(fmt[1:]).itemsize] = np.array(value, fmt).tobytes()
    path.write_bytes(bytes(data))


@pytest.mark.parametrize("compression", [None, "zlib"])
def test_truncated_tiff_raises_naming_the_file_or_reads_the_same_stack(tmp_path, compression):
    # every truncation either reads exactly the intact stack (the cut only removed bytes
    # the reader does not need) or raises one ValueError naming the file; never a stack
    # that silently lost pages (tifffile only logs a broken IFD chain)
    full = tmp_path / "full.tif"
    _stack_tiff(full, compression)
    want, _ = em.load_em_volume(full)
    data = full.read_bytes()
    cut = tmp_path / "cut.tif"
    outcomes = {"same": 0, "error": 0}
    for n in range(0, len(data), 9):
        cut.write_bytes(data[:n])
        try:
            got, _ = em.load_em_volume(cut)
        except ValueError as err:
            message = str(err)
        else:
            assert got.shape == want.shape, n
            np.testing.assert_array_equal(got, want, err_msg=str(n))
            outcomes["same"] += 1
            continue
        assert str(cut) in message, (n, message)
        outcomes["error"] += 1
    assert outcomes["error"] > 0.5 * len(range(0, len(data), 9)), outcomes


@pytest.mark.parametrize("compression", [None, "zlib"])
def test_tiff_declaring_huge_pages_is_refused_before_allocating(tmp_path, compression):
    path = tmp_path / "huge.tif"
    _stack_tiff(path, compression, pages=1)
    _patch_tag(path, "ImageWidth", 1 << 17)  # 16 GiB declared by a file of a few hundred bytes
    _patch_tag(path, "ImageLength", 1 << 17)
    assert path.stat().st_size < 4096
    with pytest.raises(ValueError, match=f"{path}.*refusing to allocate|{path}.*beyond its size"):
        em.load_em_volume(path)


def test_tiff_strip_beyond_the_end_of_the_file_is_refused(tmp_path):
    path = tmp_path / "offset.tif"
    _stack_tiff(path, pages=1)
    _patch_tag(path, "StripOffsets", path.stat().st_size + 100)
    with pytest.raises(ValueError, match=f"{path}.*beyond its size"):
        em.load_em_volume(path)


def test_ordinary_tiff_stacks_still_load(tmp_path):
    for compression in (None, "zlib"):
        path = tmp_path / f"ok_{compression}.tif"
        raw = _stack_tiff(path, compression, pages=4, side=32)
        got, lab = em.load_em_volume(path)
        assert lab is None
        np.testing.assert_allclose(got, raw / 255.0, rtol=1e-6)
