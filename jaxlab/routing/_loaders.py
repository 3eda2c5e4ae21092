"""Readers of the RouterBench and VL-RouterBench table layouts into `RoutingTable`.

- RouterBench (Hu et al. 2024; github.com/withmartian/routerbench): one row per prompt with
  `sample_id`, `prompt`, `eval_name` and, per model `m`, the columns `m` (performance in
  [0, 1]), `m|model_response` and `m|total_cost`. The benchmark ships it as a pickled
  DataFrame; pickle is never read here: export it once to CSV
  (`pd.read_pickle(f).to_csv(g, index=False)`) and read the CSV.
- VL-RouterBench (Huang et al. 2025): a folder with `data/matrices/Y.npz` (the quality
  matrix, dense under key `Y` or a scipy.sparse CSR/COO `.npz`), `data/matrices/C.npy` (the
  cost matrix), `data/registry/models.txt` (one model per line) and
  `data/registry/meta.csv` or `meta.jsonl` (one row per sample: `sample_id`, the task in
  `dataset` / `task` / `benchmark`, the text in `question` / `prompt` / `text`).

Query features are `hashed_bow` of the prompt text unless `features` is given.
"""

from __future__ import annotations

import csv
import json
import os
from pathlib import Path

import numpy as np

from ._features import hashed_bow
from ._table import RoutingTable

__all__ = ["from_routerbench", "from_vl_routerbench"]


def _float(path, row, col, text):
    try:
        v = float(text)
    except (TypeError, ValueError):
        raise ValueError(
            f"{path}: row {row}, column {col!r}: expected a number, received {text!r}"
        ) from None
    if not np.isfinite(v):
        raise ValueError(
            f"{path}: row {row}, column {col!r}: expected a finite number, received {text!r}"
        )
    return v


def _groups(names):
    order = sorted(set(names))
    return np.array([order.index(g) for g in names], np.int64), tuple(order)


def _features(path, features, texts, dim):
    if features is None:
        return hashed_bow(texts, dim=dim)
    f = np.asarray(features, np.float64)
    if f.ndim != 2 or f.shape[0] != len(texts):
        raise ValueError(
            f"features: expected shape ({len(texts)}, F) for {path}, received {f.shape}"
        )
    return f


def from_routerbench(
    path: str | os.PathLike, *, features=None, feature_dim: int = 256
) -> RoutingTable:
    """Read a RouterBench table exported to CSV (Hu et al. 2024; withmartian/routerbench).

    The layout: one row per prompt with `sample_id`, `prompt`, `eval_name` and, per model
    `m`, the columns `m` (performance in [0, 1]), `m|model_response` and `m|total_cost`.
    The benchmark ships it as a pickled DataFrame; pickle is never read here: export it
    once (`pd.read_pickle(f).to_csv(g, index=False)`) and read the CSV.

    **Arguments:** `path` the CSV; `features` optional (N, F) query features in row
    order (default `hashed_bow(prompt, dim=feature_dim)`).

    **Returns:** a `RoutingTable`: quality = the models' performance columns, cost =
    `total_cost`, groups = `eval_name`, candidates in column order.

    **Raises:** `ValueError` naming the file on a missing column, a non-numeric or
    out-of-range value, or no rows.
    """
    path = Path(path)
    try:
        with open(path, "rb") as f:
            head = f.read(2)
    except OSError as e:
        raise ValueError(f"{path}: not a readable CSV file ({e})") from e
    if head[:1] == b"\x80" or path.suffix.lower() in (".pkl", ".pickle"):
        raise ValueError(
            f"path: {path} is a pickle (RouterBench ships its table as a pickled DataFrame); "
            "pickle is never read here (it can run code): export it once with "
            "`pd.read_pickle(f).to_csv(g, index=False)` and pass the CSV"
        )
    try:
        with open(path, newline="", encoding="utf-8") as f:
            reader = csv.DictReader(f)
            cols = reader.fieldnames or []
            rows = list(reader)
    except (OSError, UnicodeDecodeError, csv.Error) as e:
        raise ValueError(f"{path}: not a readable CSV file ({e})") from e
    missing = [c for c in ("sample_id", "prompt", "eval_name") if c not in cols]
    if missing:
        raise ValueError(f"{path}: missing RouterBench columns {missing}; found {cols[:8]}")
    models = [c for c in cols if "|" not in c and f"{c}|total_cost" in cols]
    named = dict.fromkeys(c.split("|")[0] for c in cols if "|" in c)
    incomplete = [m for m in named if m not in cols or f"{m}|total_cost" not in cols]
    if incomplete:
        lacks = {m: [c for c in (m, f"{m}|total_cost") if c not in cols] for m in incomplete}
        raise ValueError(
            f"{path}: models with an incomplete column set (every model needs 'm' and "
            f"'m|total_cost'): missing {lacks}"
        )
    if not models:
        raise ValueError(f"{path}: no model columns (expected 'm' and 'm|total_cost' pairs)")
    if not rows:
        raise ValueError(f"{path}: no rows")
    q = np.array([[_float(path, i, m, r[m]) for m in models] for i, r in enumerate(rows)])
    c = np.array(
        [
            [_float(path, i, f"{m}|total_cost", r[f"{m}|total_cost"]) for m in models]
            for i, r in enumerate(rows)
        ]
    )
    groups, names = _groups([r["eval_name"] for r in rows])
    texts = [r["prompt"] for r in rows]
    try:
        return RoutingTable(
            quality=q,
            cost=c,
            candidates=tuple(models),
            features=_features(path, features, texts, feature_dim),
            groups=groups,
            group_names=names,
            query_ids=tuple(r["sample_id"] for r in rows),
            meta={"source": f"RouterBench CSV {path.name}"},
        )
    except ValueError as e:
        raise ValueError(f"{path}: {e}") from e


def _read_quality(path: Path) -> np.ndarray:
    try:
        with np.load(path, allow_pickle=False) as z:
            if "Y" in z.files:
                return np.asarray(z["Y"])
            if {"data", "shape", "format"} <= set(z.files):
                fmt = z["format"].item()
                fmt = fmt.decode() if isinstance(fmt, bytes) else str(fmt)
                shape = tuple(int(s) for s in z["shape"])
                if len(shape) != 2 or shape[0] * shape[1] > 10**9:
                    raise ValueError(f"{path}: implausible matrix shape {shape}")
                dense = np.zeros(shape)
                if fmt == "csr":
                    indptr, indices = z["indptr"], z["indices"]
                    if indptr.size != shape[0] + 1 or indices.size != z["data"].size:
                        raise ValueError(f"{path}: inconsistent CSR arrays")
                    rows = np.repeat(np.arange(shape[0]), np.diff(indptr))
                    dense[rows, indices] = z["data"]
                elif fmt == "coo":
                    dense[z["row"], z["col"]] = z["data"]
                else:
                    raise ValueError(f"{path}: sparse format {fmt!r} not supported (csr, coo)")
                return dense
            raise ValueError(f"{path}: expected key 'Y' or a scipy.sparse matrix, found {z.files}")
    except (OSError, EOFError, IndexError) as e:
        raise ValueError(f"{path}: not a readable quality matrix ({e})") from e


def _read_meta(registry: Path) -> list[dict]:
    csv_path, jsonl_path = registry / "meta.csv", registry / "meta.jsonl"
    try:
        if csv_path.is_file():
            with open(csv_path, newline="", encoding="utf-8") as f:
                return list(csv.DictReader(f))
        if jsonl_path.is_file():
            return [
                json.loads(x)
                for x in jsonl_path.read_text(encoding="utf-8").splitlines()
                if x.strip()
            ]
    except (OSError, UnicodeDecodeError, csv.Error, json.JSONDecodeError) as e:
        raise ValueError(f"{registry}: unreadable meta file ({e})") from e
    raise ValueError(
        f"{registry}: expected meta.csv or meta.jsonl (export VL-RouterBench's meta.parquet "
        "with pandas: pd.read_parquet(p).to_csv(registry / 'meta.csv', index=False))"
    )


def _first(row: dict, keys, default=""):
    for k in keys:
        if k in row and row[k] not in (None, ""):
            return str(row[k])
    return default


def from_vl_routerbench(
    folder: str | os.PathLike, *, features=None, feature_dim: int = 256
) -> RoutingTable:
    """Read a VL-RouterBench data folder (Huang et al. 2025).

    The layout: `data/matrices/Y.npz` (quality, dense under key `Y` or a scipy.sparse
    CSR/COO `.npz`), `data/matrices/C.npy` (cost), `data/registry/models.txt` (one model
    per line) and `data/registry/meta.csv` or `meta.jsonl` (one row per sample:
    `sample_id`, the task in `dataset` / `task` / `benchmark`, the text in `question` /
    `prompt` / `text`).

    **Arguments:** `folder` (holding `data/`); `features` optional (N, F) (default
    `hashed_bow` of each sample's text).

    **Returns:** a `RoutingTable` with quality Y, cost C, the registry's model names and
    task groups from the meta file.

    **Raises:** `ValueError` naming the file on a missing file, mismatched shapes, or
    values out of range.
    """
    data = Path(folder) / "data"
    y_path, c_path = data / "matrices" / "Y.npz", data / "matrices" / "C.npy"
    models_path, registry = data / "registry" / "models.txt", data / "registry"
    for p in (y_path, c_path, models_path):
        if not p.is_file():
            raise ValueError(f"{p}: missing (not a VL-RouterBench data folder)")
    y = _read_quality(y_path)
    try:
        c = np.load(c_path, allow_pickle=False)
    except (OSError, ValueError, EOFError) as e:
        raise ValueError(f"{c_path}: not a readable .npy cost matrix ({e})") from e
    if c.shape != y.shape:
        raise ValueError(f"{c_path}: cost shape {c.shape} differs from quality shape {y.shape}")
    models = [m.strip() for m in models_path.read_text(encoding="utf-8").splitlines() if m.strip()]
    if len(models) != y.shape[1]:
        raise ValueError(
            f"{models_path}: {len(models)} models listed, matrices have {y.shape[1]} columns"
        )
    meta = _read_meta(registry)
    if len(meta) != y.shape[0]:
        raise ValueError(f"{registry}: {len(meta)} meta rows, matrices have {y.shape[0]} rows")
    groups, names = _groups([_first(r, ("dataset", "task", "benchmark"), "all") for r in meta])
    texts = [_first(r, ("question", "prompt", "text")) for r in meta]
    try:
        return RoutingTable(
            quality=y,
            cost=c,
            candidates=tuple(models),
            features=_features(registry, features, texts, feature_dim),
            groups=groups,
            group_names=names,
            query_ids=tuple(_first(r, ("sample_id", "id"), str(i)) for i, r in enumerate(meta)),
            meta={"source": f"VL-RouterBench folder {Path(folder).name}"},
        )
    except ValueError as e:
        raise ValueError(f"{data}: {e}") from e
