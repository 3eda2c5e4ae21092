"""Issue 30 finding 8 (stereo): `index.json` entries cannot leave the shard folder; a
malformed index or shard raises one ValueError naming the file."""

from __future__ import annotations

import json

import numpy as np
import pytest

from jaxlab import stereo

from ..corruption import cuts, data_flips, flips, report, subset, sweep, zip_fields


@pytest.fixture
def shards(tmp_path):
    data = {"left": np.arange(10 * 4, dtype=np.float32).reshape(10, 4), "k": np.arange(10)}
    d = tmp_path / "faces"
    stereo.write_face_shards(d, data, shard_size=4)
    return d, data


def _edit_index(d, fn):
    idx = json.loads((d / "index.json").read_text())
    fn(idx)
    (d / "index.json").write_text(json.dumps(idx))


def test_face_index_roundtrip(shards):
    d, data = shards
    ds = stereo.FaceStereoDataset(d)
    np.testing.assert_array_equal(ds.arrays()["left"], data["left"])
    np.testing.assert_array_equal(ds[7]["k"], 7)


@pytest.mark.parametrize("bad", ["../../outside.npz", "../faces2/shard_00000.npz", "/etc/passwd"])
def test_face_index_path_traversal_is_refused(shards, tmp_path, bad):
    d, _ = shards
    np.savez(tmp_path / "outside.npz", left=np.zeros((4, 4), np.float32), k=np.zeros(4, int))
    _edit_index(d, lambda idx: idx["shards"][0].__setitem__("file", bad))
    with pytest.raises(ValueError, match=r"index.json: shards\[0\].file .* not a file inside"):
        stereo.FaceStereoDataset(d)


def test_face_index_symlink_out_of_the_folder_is_refused(shards, tmp_path):
    d, _ = shards
    np.savez(tmp_path / "outside.npz", left=np.zeros((4, 4), np.float32), k=np.zeros(4, int))
    (d / "evil.npz").symlink_to(tmp_path / "outside.npz")
    _edit_index(d, lambda idx: idx["shards"][0].__setitem__("file", "evil.npz"))
    with pytest.raises(ValueError, match="not a file inside"):
        stereo.FaceStereoDataset(d)


@pytest.mark.parametrize(
    "edit",
    [
        lambda idx: idx.__setitem__("n_pairs", 11),
        lambda idx: idx.__setitem__("n_pairs", "10"),
        lambda idx: idx["shards"][1].__setitem__("start", 5),
        lambda idx: idx["shards"][1].__setitem__("count", -4),
        lambda idx: idx.__setitem__("shards", {"a": 1}),
    ],
)
def test_face_index_inconsistent_entries(shards, edit):
    d, _ = shards
    _edit_index(d, edit)
    with pytest.raises(ValueError, match="index.json"):
        stereo.FaceStereoDataset(d)


def test_face_index_not_json_and_corrupt_shard(shards):
    d, _ = shards
    (d / "index.json").write_text("{not json")
    with pytest.raises(ValueError, match="index.json: not a valid index.json"):
        stereo.FaceStereoDataset(d)


def test_corrupt_shard_names_the_file(shards):
    d, _ = shards
    whole = (d / "shard_00001.npz").read_bytes()
    for content in (b"", whole[: len(whole) // 2], b"\x93NUMPY garbage"):
        (d / "shard_00001.npz").write_bytes(content)
        ds = stereo.FaceStereoDataset(d)
        with pytest.raises(ValueError, match="shard_00001.npz: not a readable face shard"):
            ds[5]


def _shard_sweep(shards):
    d, data = shards
    path = d / "shard_00001.npz"
    raw = path.read_bytes()
    fields = zip_fields(raw)

    def read(p):
        return stereo.FaceStereoDataset(d)[5]  # a fresh dataset: no cached shard

    def accept(damage, got, caught):
        same = (
            sorted(got) == ["k", "left"]
            and np.array_equal(got["left"], data["left"][5])
            and int(got["k"]) == 5
        )
        return "a zip header byte the reader ignores (pair unchanged)" if same else None

    header = [f for f in fields if f.kind != "data"]
    return (
        path,
        read,
        accept,
        (cuts(fields, len(raw), spread=16), flips(header), data_flips(fields)),
    )


def test_shard_corruption_sweep_subset(shards, record_property):
    # issue 30: truncations, header flips and data flips (under the zip CRC) of a face
    # shard end in one ValueError naming it, or in an unchanged read
    path, read, accept, (c, fl, dfl) = _shard_sweep(shards)
    damages = subset(c, 6) + subset(fl, 12) + subset(dfl, 4)
    report(record_property, "face shard (subset)", sweep(path, read, damages, accept))


@pytest.mark.slow
def test_shard_corruption_sweep_full(shards, record_property):
    path, read, accept, (c, fl, dfl) = _shard_sweep(shards)
    report(record_property, "face shard", sweep(path, read, c + fl + dfl, accept))
