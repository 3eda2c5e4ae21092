"""RoutingTable save/load round trip, validation, splits and the benchmark-layout loaders
(on small files written here in RouterBench's and VL-RouterBench's formats)."""

from __future__ import annotations

import csv
import json

import numpy as np
import pytest

from jaxlab import routing


def _table(n=6, m=3):
    rng = np.random.default_rng(1)
    return routing.RoutingTable(
        quality=(rng.uniform(size=(n, m)) > 0.5).astype(float),
        cost=rng.uniform(0.1, 2, (n, m)),
        candidates=[f"m{j}" for j in range(m)],
        input_tokens=rng.integers(1, 50, (n, m)),
        output_tokens=rng.integers(1, 9, (n, m)),
        latency=rng.uniform(0, 1, (n, m)),
        features=rng.normal(size=(n, 4)),
        groups=np.arange(n) % 2,
        group_names=("a", "b"),
        meta={"cost": "test"},
    )


def test_save_load_round_trip(tmp_path):
    t = _table()
    npz = t.save(tmp_path / "t")
    assert npz.name == "t.npz"
    assert (tmp_path / "t.json").is_file()
    u = routing.RoutingTable.load(tmp_path / "t")
    for a in ("quality", "cost", "input_tokens", "output_tokens", "latency", "features", "groups"):
        np.testing.assert_array_equal(getattr(u, a), getattr(t, a))
    assert u.candidates == t.candidates
    assert u.group_names == t.group_names
    assert u.query_ids == t.query_ids
    assert u.meta == {"cost": "test"}


def test_compressed_save_reads_uncompressed_tables(tmp_path):
    """`save` deflates every member; an uncompressed archive of the earlier format (as
    `np.savez` wrote) loads, re-saves and loads again with identical arrays and dtypes,
    and the manifest bytes do not change."""
    import zipfile

    from jaxlab.routing._table import _ARRAYS

    t = _table(n=40)
    t.save(tmp_path / "old")
    manifest = (tmp_path / "old.json").read_bytes()
    np.savez(tmp_path / "old.npz", **{a: getattr(t, a) for a in _ARRAYS})
    with zipfile.ZipFile(tmp_path / "old.npz") as z:
        assert {i.compress_type for i in z.infolist()} == {zipfile.ZIP_STORED}
    old = routing.RoutingTable.load(tmp_path / "old")
    old.save(tmp_path / "new")
    assert (tmp_path / "new.json").read_bytes() == manifest
    with zipfile.ZipFile(tmp_path / "new.npz") as z:
        assert {i.compress_type for i in z.infolist()} == {zipfile.ZIP_DEFLATED}
    new = routing.RoutingTable.load(tmp_path / "new")
    for a in _ARRAYS:
        assert getattr(new, a).dtype == getattr(t, a).dtype
        np.testing.assert_array_equal(getattr(new, a), getattr(t, a))
    assert (tmp_path / "new.npz").stat().st_size < (tmp_path / "old.npz").stat().st_size


def test_malformed_files_rejected(tmp_path):
    t = _table()
    t.save(tmp_path / "t")
    (tmp_path / "t.npz").write_bytes(b"not a zip")
    with pytest.raises(ValueError, match="t.npz"):
        routing.RoutingTable.load(tmp_path / "t")
    t.save(tmp_path / "t")
    info = json.loads((tmp_path / "t.json").read_text())
    info["candidates"] = ["only-one"]
    (tmp_path / "t.json").write_text(json.dumps(info))
    with pytest.raises(ValueError, match="candidates"):
        routing.RoutingTable.load(tmp_path / "t")
    # an object array would need pickle: refused
    np.savez(tmp_path / "p.npz", quality=np.array([object()]))
    (tmp_path / "p.json").write_text(json.dumps({**info, "candidates": ["a"]}))
    with pytest.raises(ValueError, match="p.npz"):
        routing.RoutingTable.load(tmp_path / "p")


def test_validation_names_the_field():
    with pytest.raises(ValueError, match="quality"):
        routing.RoutingTable(
            quality=np.full((2, 2), 1.5), cost=np.ones((2, 2)), candidates=("a", "b")
        )
    with pytest.raises(ValueError, match="cost"):
        routing.RoutingTable(quality=np.ones((2, 2)), cost=-np.ones((2, 2)), candidates=("a", "b"))
    with pytest.raises(ValueError, match="cost"):
        routing.RoutingTable(quality=np.ones((2, 2)), cost=np.ones((2, 3)), candidates=("a", "b"))
    with pytest.raises(ValueError, match="candidates"):
        routing.RoutingTable(quality=np.ones((2, 2)), cost=np.ones((2, 2)), candidates=("a", "a"))
    with pytest.raises(ValueError, match="groups"):
        routing.RoutingTable(
            quality=np.ones((2, 2)), cost=np.ones((2, 2)), candidates=("a", "b"), groups=[0, 1]
        )


def test_split_rows_columns(getkey):
    t = _table(n=20)
    tr, te = t.split(0.3, key=getkey())
    assert tr.n_queries + te.n_queries == 20
    assert set(tr.query_ids).isdisjoint(te.query_ids)
    assert te.n_queries == 6  # 3 of each group of 10
    c = t.columns([2, 0])
    assert c.candidates == ("m2", "m0")
    np.testing.assert_array_equal(c.cost, t.cost[:, [2, 0]])


def test_split_keeps_clusters_together(getkey):
    t = _table(n=20)
    clusters = np.arange(20) // 4  # 5 clusters of 4 queries
    tr, te = t.split(0.4, key=getkey(), clusters=clusters)
    side = {q: 0 for q in tr.query_ids} | {q: 1 for q in te.query_ids}
    for c in range(5):
        members = [t.query_ids[i] for i in np.flatnonzero(clusters == c)]
        assert len({side[q] for q in members}) == 1
    assert te.n_queries == 8  # 2 of 5 clusters
    with pytest.raises(ValueError, match="clusters"):
        t.split(0.4, key=getkey(), clusters=np.zeros(20, int))
    with pytest.raises(ValueError, match="clusters"):
        t.split(0.4, key=getkey(), clusters=np.zeros(19, int))


def test_routerbench_csv(tmp_path):
    path = tmp_path / "rb.csv"
    cols = ["sample_id", "prompt", "eval_name", "oracle_model_to_route_to"]
    models = ["gpt-4", "mistral-7b"]
    cols += [x for m in models for x in (m, f"{m}|model_response", f"{m}|total_cost")]
    rows = [
        ["mmlu.1", "What is 2+2?", "mmlu", "gpt-4", 1, "4", 0.003, 0, "5", 0.0001],
        ["gsm8k.7", "Tom has 3 apples", "gsm8k", "mistral-7b", 1, "3", 0.004, 1, "3", 0.0002],
        ["mmlu.2", "Capital of France?", "mmlu", "gpt-4", 0.5, "P", 0.002, 0, "L", 0.0001],
    ]
    with open(path, "w", newline="") as f:
        csv.writer(f).writerows([cols, *rows])
    t = routing.from_routerbench(path, feature_dim=16)
    assert t.candidates == ("gpt-4", "mistral-7b")
    np.testing.assert_allclose(t.quality, [[1, 0], [1, 1], [0.5, 0]])
    np.testing.assert_allclose(t.cost, [[0.003, 0.0001], [0.004, 0.0002], [0.002, 0.0001]])
    assert t.group_names == ("gsm8k", "mmlu")
    assert list(t.groups) == [1, 0, 1]
    assert t.features.shape == (3, 16)
    assert t.query_ids[1] == "gsm8k.7"
    rows[1][4] = "n/a"
    with open(path, "w", newline="") as f:
        csv.writer(f).writerows([cols, *rows])
    with pytest.raises(ValueError, match="row 1, column 'gpt-4'"):
        routing.from_routerbench(path)
    with open(path, "w", newline="") as f:
        csv.writer(f).writerows([["sample_id", "prompt"], ["a", "b"]])
    with pytest.raises(ValueError, match="eval_name"):
        routing.from_routerbench(path)


def test_vl_routerbench_folder(tmp_path):
    mats, reg = tmp_path / "data" / "matrices", tmp_path / "data" / "registry"
    mats.mkdir(parents=True)
    reg.mkdir(parents=True)
    y = np.array([[1.0, 0, 1], [0, 0, 1]])
    # scipy.sparse.save_npz's CSR layout, written by hand
    np.savez(
        mats / "Y.npz",
        data=np.array([1.0, 1, 1]),
        indices=np.array([0, 2, 2]),
        indptr=np.array([0, 2, 3]),
        format=np.array("csr"),
        shape=np.array([2, 3]),
    )
    np.save(mats / "C.npy", np.array([[1.0, 2, 3], [1, 2, 3]]))
    (reg / "models.txt").write_text("SmolVLM2\nJanus-Pro-1B\nQwen2.5-VL-72B\n")
    with open(reg / "meta.csv", "w", newline="") as f:
        csv.writer(f).writerows(
            [
                ["sample_id", "dataset", "question"],
                ["s1", "ChartQA", "what bar"],
                ["s2", "MMBench", "x"],
            ]
        )
    t = routing.from_vl_routerbench(tmp_path, feature_dim=8)
    np.testing.assert_array_equal(t.quality, y)
    assert t.candidates[2] == "Qwen2.5-VL-72B"
    assert t.group_names == ("ChartQA", "MMBench")
    np.save(mats / "C.npy", np.ones((3, 3)))
    with pytest.raises(ValueError, match="C.npy"):
        routing.from_vl_routerbench(tmp_path)
    (reg / "models.txt").unlink()
    with pytest.raises(ValueError, match="models.txt"):
        routing.from_vl_routerbench(tmp_path)


def test_hashed_bow_by_hand():
    import zlib

    f = routing.hashed_bow(["Red red fox", ""], dim=32)
    ref = np.zeros(32)
    for t in ("red", "red", "fox", "red red", "red fox"):
        h = zlib.crc32(t.encode())
        ref[h % 32] += 1.0 if (h >> 31) & 1 else -1.0
    ref = np.sign(ref) * np.log1p(np.abs(ref))
    np.testing.assert_allclose(f[0], ref / np.linalg.norm(ref))
    np.testing.assert_array_equal(f[1], 0.0)
    with pytest.raises(ValueError, match="texts"):
        routing.hashed_bow("a string", dim=4)
    with pytest.raises(ValueError, match="dim"):
        routing.hashed_bow(["a"], dim=0)
