"""Issue 56: the VL-RouterBench loader on the benchmark's real output layout.

The layout is the one VL-RouterBench's build scripts write (github.com/
yichengtan0729-boop/VL-RouterBench; e.g. its dataset conversion writes
`meta.to_parquet(registry_dir / "meta.parquet")` with columns sample_id, dataset, split,
task and no text; `pickle.dump(models, registry_dir / "model_index.pkl")`;
`np.savez_compressed(matrices_dir / "Y.npz", Y=Y)` with Y int8; `np.save(matrices_dir /
"C.npy", C)` with C float32; `pickle.dump(sample_ids, matrices_dir / "sample_ids.pkl")`;
and the prompts in `BENCHMARKS/<task>/<dataset>_samples.jsonl`).
"""

from __future__ import annotations

import io
import json
import os
import pickle
import tracemalloc
import zipfile

import numpy as np
import pandas as pd
import pytest

from jaxlab import routing

MODELS = ["SmolVLM2", "Janus-Pro-1B", "Qwen2.5-VL-72B-Instruct"]
IDS = ["MMStar/3", "MMStar/1", "OCRBench/7", "MMStar/2", "OCRBench/9"]
PROMPTS = {
    "MMStar/3": "how many red cubes",
    "MMStar/1": "which animal is shown",
    "OCRBench/7": "read the plate number",
    "MMStar/2": "what colour is the sky",
    "OCRBench/9": "transcribe the sign",
}


def _write(root, *, benchmarks=True):
    mats, reg = root / "data" / "matrices", root / "data" / "registry"
    mats.mkdir(parents=True)
    reg.mkdir(parents=True)
    rng = np.random.default_rng(0)
    y = rng.integers(0, 2, (len(IDS), len(MODELS))).astype(np.int8)
    c = rng.uniform(0.1, 2.0, (len(IDS), len(MODELS))).astype(np.float32)
    np.savez_compressed(mats / "Y.npz", Y=y)
    np.save(mats / "C.npy", c)
    with open(mats / "sample_ids.pkl", "wb") as f:
        pickle.dump(IDS, f)
    with open(reg / "model_index.pkl", "wb") as f:
        pickle.dump(MODELS, f)
    # the meta file in another order than the matrices (sorted by id), no text column
    meta = pd.DataFrame(
        {
            "sample_id": sorted(IDS),
            "dataset": [s.split("/")[0] for s in sorted(IDS)],
            "split": "test",
            # a nullable text column that is all missing (pd.NA): no text, not an error
            "question": pd.array([None] * len(IDS), dtype="string"),
            "task": ["vqa_mc" if s.startswith("MMStar") else "ocr_qa" for s in sorted(IDS)],
        }
    )
    meta.to_parquet(reg / "meta.parquet", index=False)
    if benchmarks:
        for task, ds in (("vqa_mc", "MMStar"), ("ocr_qa", "OCRBench")):
            d = root / "BENCHMARKS" / task
            d.mkdir(parents=True)
            rows = [
                {"sample_id": s, "dataset": ds, "prompt": PROMPTS[s], "assets": []}
                for s in IDS
                if s.startswith(ds)
            ]
            (d / f"{ds.lower()}_samples.jsonl").write_text(
                "".join(json.dumps(r) + "\n" for r in rows)
            )
    return y, c


def test_reads_the_real_output_folder_aligned_by_sample_id(tmp_path):
    y, c = _write(tmp_path)
    t = routing.from_vl_routerbench(tmp_path, feature_dim=16)
    assert t.candidates == tuple(MODELS)
    assert t.query_ids == tuple(IDS)  # the matrices' row order, not the meta file's
    np.testing.assert_array_equal(t.quality, y.astype(float))
    np.testing.assert_allclose(t.cost, c.astype(float))
    # each row's group is its own sample's dataset, though the meta rows were sorted
    assert [t.group_names[g] for g in t.groups] == [s.split("/")[0] for s in IDS]
    # features: the prompts from BENCHMARKS/, in the matrices' row order
    ref = routing.hashed_bow([PROMPTS[s] for s in IDS], dim=16)
    np.testing.assert_allclose(t.features, ref)
    # `folder` may also be data/ itself
    t2 = routing.from_vl_routerbench(tmp_path / "data", features=np.eye(5), feature_dim=16)
    np.testing.assert_array_equal(t2.quality, t.quality)


def test_no_text_means_constant_features_refused(tmp_path):
    _write(tmp_path, benchmarks=False)
    with pytest.raises(ValueError, match="features: every query has the same features"):
        routing.from_vl_routerbench(tmp_path, feature_dim=16)
    # given features (in the matrices' row order) make it readable
    t = routing.from_vl_routerbench(tmp_path, features=np.arange(10.0).reshape(5, 2))
    assert t.features.shape == (5, 2)
    with pytest.raises(ValueError, match="same features"):
        routing.from_vl_routerbench(tmp_path, features=np.ones((5, 2)))


def test_sample_ids_without_meta_rows_are_refused(tmp_path):
    _write(tmp_path)
    with open(tmp_path / "data" / "matrices" / "sample_ids.pkl", "wb") as f:
        pickle.dump([*IDS[:-1], "MMStar/404"], f)
    with pytest.raises(ValueError, match=r"no meta row for 1 .*MMStar/404"):
        routing.from_vl_routerbench(tmp_path)
    with open(tmp_path / "data" / "matrices" / "sample_ids.pkl", "wb") as f:
        pickle.dump(IDS[:3], f)  # fewer ids than rows
    with pytest.raises(ValueError, match="sample_ids.pkl: 3 entries"):
        routing.from_vl_routerbench(tmp_path)


class _RunsCode:
    """A pickle payload that would call os.system when unpickled by pickle.load."""

    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        return (os.system, (f"touch {self.marker}",))


def test_pickles_are_read_without_running_code(tmp_path):
    _write(tmp_path)
    marker = tmp_path / "pwned"
    index = tmp_path / "data" / "registry" / "model_index.pkl"
    index.write_bytes(pickle.dumps([_RunsCode(marker)]))
    with pytest.raises(ValueError, match=r"model_index.pkl: not a pickled list.*refused global"):
        routing.from_vl_routerbench(tmp_path)
    assert not marker.exists()
    # a NumPy array, a dict: objects / the wrong type, refused too
    index.write_bytes(pickle.dumps(np.array(MODELS)))
    with pytest.raises(ValueError, match="refused global"):
        routing.from_vl_routerbench(tmp_path)
    index.write_bytes(pickle.dumps({m: i for i, m in enumerate(MODELS)}))
    with pytest.raises(ValueError, match="expected a list of strings/ints"):
        routing.from_vl_routerbench(tmp_path)
    ids = tmp_path / "data" / "matrices" / "sample_ids.pkl"
    index.write_bytes(pickle.dumps(MODELS))
    ids.write_bytes(pickle.dumps([_RunsCode(marker)], protocol=0))
    with pytest.raises(ValueError, match="sample_ids.pkl"):
        routing.from_vl_routerbench(tmp_path)
    assert not marker.exists()


def _forged_npz(path, name, shape, dtype="<f8"):
    """An .npz whose member declares `shape` in its .npy header but holds no data."""
    buf = io.BytesIO()
    np.lib.format.write_array_header_1_0(
        buf, {"descr": dtype, "fortran_order": False, "shape": shape}
    )
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as zf:
        zf.writestr(f"{name}.npy", buf.getvalue())  # the header (magic included), no data


def test_declared_shapes_are_bounded_before_allocation(tmp_path):
    _write(tmp_path)
    y_path = tmp_path / "data" / "matrices" / "Y.npz"
    tracemalloc.start()
    try:
        # a dense member declaring 10^6 x 10^5 float64 (800 GB), a few bytes on disk
        _forged_npz(y_path, "Y", (10**6, 10**5))
        with pytest.raises(ValueError, match=r"Y.npz: member 'Y.npy' declares shape.*max_cells"):
            routing.from_vl_routerbench(tmp_path)
        # a tiny sparse CSR whose declared shape is 10^6 x 10^6
        np.savez(
            y_path,
            data=np.array([1.0]),
            indices=np.array([0]),
            indptr=np.r_[0, np.ones(10**6, np.int64)],
            format=np.array("csr"),
            shape=np.array([10**6, 10**6]),
        )
        with pytest.raises(ValueError, match=r"sparse matrix declares shape.*max_cells"):
            routing.from_vl_routerbench(tmp_path)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 64 << 20  # nothing near the declared sizes was allocated
    # the cap is an argument
    _write(tmp_path / "again")
    with pytest.raises(ValueError, match="max_cells=10"):
        routing.from_vl_routerbench(tmp_path / "again", max_cells=10)
