"""Loader for real EM stacks (HDF5 CREMI layout, TIFF): round trips through tmp files."""

from __future__ import annotations

import h5py
import numpy as np
import pytest
import tifffile

from jaxlab.em import load_em_volume


def _cremi_file(path, raw, labels=None):
    with h5py.File(path, "w") as f:
        f.create_dataset("volumes/raw", data=raw)
        if labels is not None:
            f.create_dataset("volumes/labels/neuron_ids", data=labels)


def test_hdf5_cremi_round_trip(tmp_path):
    rng = np.random.default_rng(0)
    raw = rng.integers(0, 256, (3, 16, 20), dtype=np.uint8)
    labels = rng.integers(1, 2**40, (3, 16, 20), dtype=np.uint64)
    path = tmp_path / "sample_A.hdf"
    _cremi_file(path, raw, labels)
    got_raw, got_labels = load_em_volume(path)
    assert got_raw.dtype == np.float32
    assert got_raw.shape == (3, 16, 20)
    np.testing.assert_allclose(got_raw, raw / 255.0, rtol=1e-6)
    assert got_labels.dtype == np.uint64
    np.testing.assert_array_equal(got_labels, labels)
    # custom keys and no labels
    with h5py.File(tmp_path / "custom.h5", "w") as f:
        f.create_dataset("em/img", data=raw[0].astype(np.float32) / 255.0)
        f.create_dataset("em/seg", data=labels[0].astype(np.int32))
    got_raw, got_labels = load_em_volume(
        tmp_path / "custom.h5", raw_key="em/img", labels_key="em/seg"
    )
    assert got_raw.shape == (1, 16, 20)
    assert got_labels.shape == (1, 16, 20)
    np.testing.assert_allclose(got_raw[0], raw[0] / 255.0, rtol=1e-6)
    _, none = load_em_volume(tmp_path / "custom.h5", raw_key="em/img", labels_key=None)
    assert none is None


def test_hdf5_without_labels(tmp_path):
    raw = np.linspace(0, 1, 2 * 8 * 8).reshape(2, 8, 8)
    path = tmp_path / "test_volume.h5"
    _cremi_file(path, raw)
    got_raw, labels = load_em_volume(path)  # default key absent (a CREMI test volume)
    assert labels is None
    np.testing.assert_allclose(got_raw, raw, rtol=1e-6)
    with pytest.raises(ValueError, match="labels_key"):
        load_em_volume(path, labels_key="volumes/labels/neuron_ids")  # explicit -> error


def test_tiff_round_trip(tmp_path):
    rng = np.random.default_rng(1)
    raw = rng.integers(0, 2**16, (2, 12, 12), dtype=np.uint16)
    labels = rng.integers(1, 9, (2, 12, 12), dtype=np.uint32)
    tifffile.imwrite(tmp_path / "raw.tif", raw)
    tifffile.imwrite(tmp_path / "labels.tiff", labels)
    got_raw, none = load_em_volume(tmp_path / "raw.tif")
    assert none is None
    np.testing.assert_allclose(got_raw, raw / 65535.0, rtol=1e-6)
    got_raw, got_labels = load_em_volume(tmp_path / "raw.tif", labels_path=tmp_path / "labels.tiff")
    np.testing.assert_array_equal(got_labels, labels)
    # a single 2-D float image outside [0, 1] becomes one min-max scaled section
    img = rng.normal(100.0, 20.0, (10, 14)).astype(np.float32)
    tifffile.imwrite(tmp_path / "section.tif", img)
    got, _ = load_em_volume(str(tmp_path / "section.tif"))
    assert got.shape == (1, 10, 14)
    np.testing.assert_allclose(got[0], (img - img.min()) / (img.max() - img.min()), atol=1e-6)


def test_loader_bad_inputs(tmp_path):
    raw = np.zeros((2, 8, 8), np.uint8)
    with pytest.raises(ValueError, match="path"):
        load_em_volume(tmp_path / "missing.h5")
    (tmp_path / "image.png").write_bytes(b"not an image")
    with pytest.raises(ValueError, match="extension"):
        load_em_volume(tmp_path / "image.png")
    (tmp_path / "broken.h5").write_bytes(b"this is not HDF5")
    with pytest.raises(ValueError, match="HDF5"):
        load_em_volume(tmp_path / "broken.h5")
    (tmp_path / "broken.tif").write_bytes(b"this is not a TIFF")
    with pytest.raises(ValueError, match="TIFF"):
        load_em_volume(tmp_path / "broken.tif")
    _cremi_file(tmp_path / "a.h5", raw, np.ones((2, 8, 9), np.uint64))
    with pytest.raises(ValueError, match="raw_key"):
        load_em_volume(tmp_path / "a.h5", raw_key=3)
    with pytest.raises(ValueError, match="no dataset"):
        load_em_volume(tmp_path / "a.h5", raw_key="volumes/nope")
    with pytest.raises(ValueError, match="group"):
        load_em_volume(tmp_path / "a.h5", raw_key="volumes")
    with pytest.raises(ValueError, match="labels"):  # shape mismatch
        load_em_volume(tmp_path / "a.h5")
    _cremi_file(tmp_path / "b.h5", raw, np.ones((2, 8, 8), np.float32))
    with pytest.raises(ValueError, match="integer"):
        load_em_volume(tmp_path / "b.h5")
    _cremi_file(tmp_path / "c.h5", np.full((2, 4, 4), np.nan))
    with pytest.raises(ValueError, match="finite"):
        load_em_volume(tmp_path / "c.h5")
    _cremi_file(tmp_path / "d.h5", np.zeros((2, 2, 4, 4), np.uint8))
    with pytest.raises(ValueError, match="3-D"):
        load_em_volume(tmp_path / "d.h5")
    tifffile.imwrite(tmp_path / "raw.tif", raw)
    with pytest.raises(ValueError, match="labels_path"):
        load_em_volume(tmp_path / "raw.tif", labels_path=tmp_path / "nolabels.tif")
