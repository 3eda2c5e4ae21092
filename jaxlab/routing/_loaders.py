"""Readers of the RouterBench and VL-RouterBench table layouts into `RoutingTable`.

- RouterBench (Hu et al. 2024; github.com/withmartian/routerbench): one row per prompt with
  `sample_id`, `prompt`, `eval_name` and, per model `m`, the columns `m` (performance in
  [0, 1]), `m|model_response` and `m|total_cost`. The benchmark ships it as a pickled
  DataFrame; pickle is never read here: export it once to CSV
  (`pd.read_pickle(f).to_csv(g, index=False)`) and read the CSV.
- VL-RouterBench (Huang et al. 2025): its output folder, `data/matrices/Y.npz` (quality),
  `data/matrices/C.npy` (cost), `data/matrices/sample_ids.pkl` (row order),
  `data/registry/model_index.pkl` (column order) and `data/registry/meta.parquet` (one row
  per sample: `sample_id`, `dataset`, `task`, ...); the pickles are read by an unpickler
  that admits only lists of strings and ints (see `from_vl_routerbench`).

Query features are `hashed_bow` of the prompt text unless `features` is given.
"""

from __future__ import annotations

import csv
import json
import os
import pickle
import zipfile
from pathlib import Path

import numpy as np

from jaxlab._core import as_array, check_positive_int

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


def _check_feature_args(features, feature_dim) -> None:
    """The loaders' feature arguments, checked before any file is read: `features` None or
    a finite real (N, F) array, `feature_dim` a positive int (checked even when
    `features` is given)."""
    check_positive_int("feature_dim", feature_dim)
    if features is not None:
        as_array("features", features, ndim=2, finite=True, real=True)


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
    _check_feature_args(features, feature_dim)
    path = Path(path)
    try:
        with open(path, "rb") as f:
            head = f.read(2)
    except OSError as e:
        raise ValueError(f"{path}: not a readable CSV file ({e})") from e
    if head[:1] == b"\x80" or path.suffix.lower() in (".pkl", ".pickle"):
        raise ValueError(
            f"path: {path} is a pickle (RouterBench ships its table as a pickled DataFrame); "
            "pickle is never read here (it can run code): export to CSV once, "
            "`pd.read_pickle(f).to_csv(g, index=False)` in a session that trusts the file, "
            "and pass the CSV"
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


#: Largest matrix (cells) a loader allocates unless `max_cells` says otherwise: the
#: released VL-RouterBench has ~30k samples x 17 models (5e5 cells).
MAX_CELLS = 50_000_000
_MAX_PICKLE_BYTES = 64 << 20
_MAX_TEXT_BYTES = 512 << 20


class _ListUnpickler(pickle.Unpickler):
    """Unpickles lists/tuples of str and int only: every global (class, function) is
    refused, so no pickle can construct an object or call anything."""

    def find_class(self, module, name):
        raise pickle.UnpicklingError(
            f"refused global {module}.{name} (only lists of strings and ints are read)"
        )


def _read_id_pickle(path: Path, n: int | None = None) -> list:
    """A pickled list of str/int (VL-RouterBench's `model_index.pkl`, `sample_ids.pkl`)
    through `_ListUnpickler`; anything else is a ValueError naming the file."""
    try:
        size = path.stat().st_size
        if size > _MAX_PICKLE_BYTES:
            raise ValueError(f"{path}: {size} bytes, more than an id list needs")
        with open(path, "rb") as f:
            obj = _ListUnpickler(f).load()
    except (pickle.UnpicklingError, EOFError, ValueError, TypeError, IndexError) as e:
        if str(e).startswith(str(path)):
            raise
        raise ValueError(
            f"{path}: not a pickled list of strings/ints (only those are read; "
            f"never arbitrary objects): {e}"
        ) from None
    except OSError as e:
        raise ValueError(f"{path}: unreadable ({e})") from e
    if not isinstance(obj, (list, tuple)) or not all(
        isinstance(v, (str, int)) and not isinstance(v, bool) for v in obj
    ):
        raise ValueError(f"{path}: expected a list of strings/ints, received {type(obj).__name__}")
    if n is not None and len(obj) != n:
        raise ValueError(f"{path}: {len(obj)} entries, the matrices have {n}")
    return list(obj)


def _npy_header(f) -> tuple[tuple[int, ...], np.dtype]:
    version = np.lib.format.read_magic(f)
    if version == (1, 0):
        shape, _, dtype = np.lib.format.read_array_header_1_0(f)
    else:
        shape, _, dtype = np.lib.format.read_array_header_2_0(f)
    return tuple(int(s) for s in shape), np.dtype(dtype)


def _check_cells(path, what, shape, max_cells):
    cells = int(np.prod(shape, dtype=object)) if len(shape) else 1
    if cells > max_cells:
        raise ValueError(
            f"{path}: {what} declares shape {shape} ({cells} cells), more than max_cells="
            f"{max_cells}; raise max_cells if the file is what you expect"
        )


def _npz_headers(path: Path, max_cells: int) -> dict[str, tuple[tuple[int, ...], np.dtype]]:
    """Each member's declared (shape, dtype), read from the .npy headers inside the zip
    before anything is decompressed in full; each bounded by `max_cells`."""
    out = {}
    try:
        with zipfile.ZipFile(path) as zf:
            for info in zf.infolist():
                if not info.filename.endswith(".npy"):
                    continue
                with zf.open(info) as f:
                    shape, dtype = _npy_header(f)
                _check_cells(path, f"member {info.filename!r}", shape, max_cells)
                out[info.filename[:-4]] = (shape, dtype)
    except (zipfile.BadZipFile, OSError, ValueError, EOFError) as e:
        if str(e).startswith(str(path)):
            raise
        raise ValueError(f"{path}: not a readable .npz file ({e})") from e
    return out


def _read_quality(path: Path, max_cells: int) -> np.ndarray:
    headers = _npz_headers(path, max_cells)
    try:
        with np.load(path, allow_pickle=False) as z:
            if "Y" in headers:
                return np.asarray(z["Y"], np.float64)
            if {"data", "shape", "format"} <= set(headers):
                fmt = z["format"].item()
                fmt = fmt.decode() if isinstance(fmt, bytes) else str(fmt)
                shape = tuple(int(s) for s in z["shape"])
                if len(shape) != 2 or min(shape) < 0:
                    raise ValueError(f"{path}: implausible matrix shape {shape}")
                _check_cells(path, "the sparse matrix", shape, max_cells)
                dense = np.zeros(shape)
                data = z["data"]
                if fmt == "csr":
                    indptr, indices = z["indptr"], z["indices"]
                    if (
                        indptr.size != shape[0] + 1
                        or indices.size != data.size
                        or np.any(np.diff(indptr) < 0)
                        or indptr[0] != 0
                        or indptr[-1] != data.size
                    ):
                        raise ValueError(f"{path}: inconsistent CSR arrays")
                    rows = np.repeat(np.arange(shape[0]), np.diff(indptr))
                    cols = indices
                elif fmt == "coo":
                    rows, cols = z["row"], z["col"]
                    if not rows.size == cols.size == data.size:
                        raise ValueError(f"{path}: inconsistent COO arrays")
                else:
                    raise ValueError(f"{path}: sparse format {fmt!r} not supported (csr, coo)")
                if rows.size and (
                    np.any((rows < 0) | (rows >= shape[0]))
                    or np.any((cols < 0) | (cols >= shape[1]))
                ):
                    raise ValueError(f"{path}: sparse indices outside the shape {shape}")
                dense[rows, cols] = data
                return dense
            raise ValueError(
                f"{path}: expected key 'Y' or a scipy.sparse matrix, found {sorted(headers)}"
            )
    except (OSError, EOFError, IndexError, KeyError) as e:
        raise ValueError(f"{path}: not a readable quality matrix ({e})") from e


def _read_cost(matrices: Path, max_cells: int) -> tuple[Path, np.ndarray]:
    npy, npz = matrices / "C.npy", matrices / "C.npz"
    if npy.is_file():
        try:
            with open(npy, "rb") as f:
                shape, _ = _npy_header(f)
            _check_cells(npy, "the cost matrix", shape, max_cells)
            return npy, np.asarray(np.load(npy, allow_pickle=False), np.float64)
        except (OSError, EOFError) as e:
            raise ValueError(f"{npy}: not a readable .npy cost matrix ({e})") from e
        except ValueError as e:
            if str(e).startswith(str(npy)):
                raise
            raise ValueError(f"{npy}: not a readable .npy cost matrix ({e})") from e
    if npz.is_file():
        headers = _npz_headers(npz, max_cells)
        if "C" not in headers:
            raise ValueError(f"{npz}: expected key 'C', found {sorted(headers)}")
        with np.load(npz, allow_pickle=False) as z:
            return npz, np.asarray(z["C"], np.float64)
    raise ValueError(f"{npy}: missing (and no C.npz): not a VL-RouterBench data folder")


def _read_meta(registry: Path) -> list[dict]:
    parquet = registry / "meta.parquet"
    csv_path, jsonl_path = registry / "meta.csv", registry / "meta.jsonl"
    try:
        if parquet.is_file():
            try:
                import pandas as pd
            except ImportError as e:  # pragma: no cover - the routing extra has pandas
                raise ValueError(
                    f"{parquet}: reading parquet needs pandas and pyarrow "
                    "(pip install 'jaxlab[routing]')"
                ) from e
            try:
                df = pd.read_parquet(parquet)
            except ImportError as e:
                raise ValueError(
                    f"{parquet}: reading parquet needs pyarrow (pip install 'jaxlab[routing]')"
                ) from e
            except Exception as e:  # noqa: BLE001 - pyarrow raises its own error types
                raise ValueError(f"{parquet}: not a readable parquet file ({e})") from e
            df = df.astype(object).where(pd.notna(df), None)  # NaN / pd.NA -> None
            return df.to_dict(orient="records")
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
    raise ValueError(f"{registry}: expected meta.parquet, meta.csv or meta.jsonl")


_TEXT_KEYS = ("question", "prompt", "text")


def _first(row: dict, keys, default=""):
    for k in keys:
        if k in row and row[k] not in (None, ""):
            return str(row[k])
    return default


def _benchmark_texts(root: Path, wanted: set[str]) -> dict[str, str]:
    """Prompts by sample id from VL-RouterBench's `BENCHMARKS/<task>/<dataset>_samples.jsonl`
    (the meta parquet carries no text); bounded in total bytes read."""
    out: dict[str, str] = {}
    bench = root / "BENCHMARKS"
    if not bench.is_dir():
        return out
    budget = _MAX_TEXT_BYTES
    for p in sorted(bench.rglob("*.jsonl")):
        size = p.stat().st_size
        if size > budget:
            raise ValueError(f"{p}: more text than the loader reads ({_MAX_TEXT_BYTES} bytes)")
        budget -= size
        try:
            lines = p.read_text(encoding="utf-8").splitlines()
        except (OSError, UnicodeDecodeError) as e:
            raise ValueError(f"{p}: unreadable ({e})") from e
        for i, line in enumerate(lines):
            if not line.strip():
                continue
            try:
                rec = json.loads(line)
            except json.JSONDecodeError as e:
                raise ValueError(f"{p}: line {i + 1} is not JSON ({e})") from e
            sid = str(rec.get("sample_id", "")) if isinstance(rec, dict) else ""
            if sid in wanted and sid not in out:
                out[sid] = _first(rec, _TEXT_KEYS)
    return out


def _data_dir(folder: Path) -> Path:
    for d in (folder / "data", folder):
        if (d / "matrices").is_dir():
            return d
    raise ValueError(
        f"folder: {folder} holds no data/matrices/ (not a VL-RouterBench output folder)"
    )


def from_vl_routerbench(
    folder: str | os.PathLike,
    *,
    features=None,
    feature_dim: int = 256,
    max_cells: int = MAX_CELLS,
) -> RoutingTable:
    """Read a VL-RouterBench output folder (Huang et al. 2025).

    The layout its build scripts write (under `folder/data/`, or `folder` itself):

    - `matrices/Y.npz`: quality (N, M), dense under key `Y` or a scipy.sparse CSR/COO
      `.npz`; `matrices/C.npy` (or `C.npz` with key `C`): cost (N, M);
    - `matrices/sample_ids.pkl`: the matrices' row order, a pickled list of sample ids;
    - `registry/model_index.pkl`: the column order, a pickled list of model names
      (`registry/models.txt`, one per line, is read when the pickle is absent);
    - `registry/meta.parquet` (or `meta.csv` / `meta.jsonl`): one row per sample with
      `sample_id`, the task in `dataset` / `task` / `benchmark` and, if present, the text
      in `question` / `prompt` / `text`. Without a text column the prompts are read from
      `BENCHMARKS/**/*.jsonl` (`sample_id`, `prompt`) next to `data/`.

    The two pickles are read by an unpickler that admits only lists of strings and ints
    (no class or function is ever resolved, so a pickle cannot run code). Meta rows are
    aligned to the matrices by sample id (`sample_ids.pkl`; without it they are taken in
    file order). Every array's declared shape is checked against `max_cells` before it is
    allocated.

    **Arguments:** `folder`; `features` optional (N, F) in the matrices' row order
    (default `hashed_bow` of each sample's text, `feature_dim` wide); `max_cells` the
    largest matrix read.

    **Returns:** a `RoutingTable` with quality Y, cost C, the registry's model names,
    task groups and sample ids from the meta file.

    **Raises:** `ValueError` naming the file on a missing file, a pickle that is not a
    list of ids, mismatched shapes or ids, a matrix above `max_cells`, values out of
    range, or query features that are the same for every query (no text found: pass
    `features=`, e.g. VL-RouterBench's `EMBEDDINGS/*.parquet` in row order).
    """
    _check_feature_args(features, feature_dim)
    max_cells = check_positive_int("max_cells", max_cells)
    root = Path(folder)
    data = _data_dir(root)
    matrices, registry = data / "matrices", data / "registry"
    y_path = matrices / "Y.npz"
    if not y_path.is_file():
        raise ValueError(f"{y_path}: missing (not a VL-RouterBench data folder)")
    index_pkl, models_txt = registry / "model_index.pkl", registry / "models.txt"
    if not (index_pkl.is_file() or models_txt.is_file()):
        raise ValueError(f"{index_pkl}: missing (and no models.txt): no model names")
    y = _read_quality(y_path, int(max_cells))
    if y.ndim != 2:
        raise ValueError(f"{y_path}: expected a 2-D quality matrix, received shape {y.shape}")
    c_path, c = _read_cost(matrices, int(max_cells))
    if c.shape != y.shape:
        raise ValueError(f"{c_path}: cost shape {c.shape} differs from quality shape {y.shape}")
    n, m = y.shape
    if index_pkl.is_file():
        models = [str(v) for v in _read_id_pickle(index_pkl, m)]
    else:
        models = [
            s.strip() for s in models_txt.read_text(encoding="utf-8").splitlines() if s.strip()
        ]
        if len(models) != m:
            raise ValueError(f"{models_txt}: {len(models)} models listed, matrices have {m}")
    meta = _read_meta(registry)
    ids_pkl = matrices / "sample_ids.pkl"
    if ids_pkl.is_file():
        ids = [str(v) for v in _read_id_pickle(ids_pkl, n)]
        if len(set(ids)) != n:
            raise ValueError(f"{ids_pkl}: sample ids repeat")
        by_id = {}
        for r in meta:
            sid = _first(r, ("sample_id", "id"), "")
            if not sid:
                raise ValueError(f"{registry}: a meta row has no sample_id to align by")
            by_id.setdefault(sid, r)
        missing = [s for s in ids if s not in by_id]
        if missing:
            raise ValueError(
                f"{registry}: no meta row for {len(missing)} of the matrices' sample ids "
                f"(first: {missing[:3]})"
            )
        meta = [by_id[s] for s in ids]  # the matrices' row order
    else:
        if len(meta) != n:
            raise ValueError(f"{registry}: {len(meta)} meta rows, matrices have {n} rows")
        ids = [_first(r, ("sample_id", "id"), str(i)) for i, r in enumerate(meta)]
    groups, names = _groups([_first(r, ("dataset", "task", "benchmark"), "all") for r in meta])
    texts = [_first(r, _TEXT_KEYS) for r in meta]
    source = "meta file"
    if features is None and not any(texts):
        found = _benchmark_texts(root, set(ids))
        texts = [found.get(s, "") for s in ids]
        source = "BENCHMARKS/*.jsonl"
    feats = _features(registry, features, texts, feature_dim)
    if n > 1 and np.all(feats == feats[:1]):
        why = "as given" if features is not None else f"no text in the {source}"
        raise ValueError(
            f"features: every query has the same features ({why}); "
            "a router would see no difference between queries: pass features= (e.g. "
            "VL-RouterBench's EMBEDDINGS/*.parquet in the matrices' row order)"
        )
    try:
        return RoutingTable(
            quality=y,
            cost=c,
            candidates=tuple(models),
            features=feats,
            groups=groups,
            group_names=names,
            query_ids=tuple(ids),
            meta={"source": f"VL-RouterBench folder {root.name}"},
        )
    except ValueError as e:
        raise ValueError(f"{data}: {e}") from e
