"""`RoutingTable`: what every candidate model did on every query, saved without pickle.

A routing table is the data routers learn from and are scored on (RouterBench, Hu et
al. 2024; VL-RouterBench, Huang et al. 2025): for N queries and M candidates, the
quality `Y[i, j]` (correctness in {0, 1} or a score in [0, 1]), the cost `C[i, j]`,
input/output token counts, latency, per-query features and a task group.

Stored as `<path>.npz` (numeric arrays, deflate-compressed by `np.savez_compressed`,
read with `allow_pickle=False`; uncompressed archives of earlier versions read the same) plus
`<path>.json` (candidate names, group names, query ids, free-form metadata).
"""

from __future__ import annotations

import dataclasses
import io
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import jax
import numpy as np

from jaxlab._core import (
    atomic_write,
    available_memory,
    check_ids,
    check_strings,
    read_json,
    read_npz,
    short_repr,
    write_json,
)

__all__ = ["RoutingTable"]

_ARRAYS = ("quality", "cost", "input_tokens", "output_tokens", "latency", "features", "groups")
_FORMAT = "jaxlab.routing.RoutingTable/1"


def _as_matrix(name, x, shape, dtype):
    a = np.asarray(x)
    if a.shape != shape:
        raise ValueError(f"{name}: expected shape {shape}, received shape {a.shape}")
    if not (np.issubdtype(a.dtype, np.number) or a.dtype == bool):
        raise ValueError(f"{name}: expected a numeric array, received dtype {a.dtype}")
    a = a.astype(dtype)
    if np.issubdtype(a.dtype, np.floating) and not np.all(np.isfinite(a)):
        raise ValueError(f"{name}: expected finite values, received NaN or inf")
    return a


@dataclasses.dataclass(frozen=True, eq=False)
class RoutingTable:
    """Queries x candidates outcomes of a model pool (the data of a routing benchmark).

    **Arguments:**

    - `quality`: (N, M) float in [0, 1]: correctness (0/1) or a quality score of
      candidate j on query i.
    - `cost`: (N, M) float >= 0: the cost of asking candidate j query i.
    - `candidates`: M candidate names.
    - `input_tokens`, `output_tokens`: (N, M) int >= 0 (default zeros).
    - `latency`: (N, M) float seconds >= 0 (default zeros).
    - `features`: (N, F) float query features the routers see (default (N, 0)).
    - `groups`: (N,) int index into `group_names` (default all 0).
    - `group_names`: names of the task groups (default `("all",)`).
    - `query_ids`: N strings (default "0", "1", ...).
    - `meta`: JSON-serialisable metadata (how the table was built, cost formula, ...).

    **Raises:** `ValueError` naming the field on a wrong shape, a non-finite value, a
    quality outside [0, 1], a negative cost/token count/latency or a group index out of range.
    """

    __repr__ = short_repr  # arrays as dtype[shape], long sequences cut

    quality: np.ndarray
    cost: np.ndarray
    candidates: tuple[str, ...]
    input_tokens: np.ndarray = None  # type: ignore[assignment]  # filled in __post_init__
    output_tokens: np.ndarray = None  # type: ignore[assignment]  # filled in __post_init__
    latency: np.ndarray = None  # type: ignore[assignment]  # filled in __post_init__
    features: np.ndarray = None  # type: ignore[assignment]  # filled in __post_init__
    groups: np.ndarray = None  # type: ignore[assignment]  # filled in __post_init__
    group_names: tuple[str, ...] = ("all",)
    query_ids: tuple[str, ...] = None  # type: ignore[assignment]  # filled in __post_init__
    meta: Mapping[str, Any] = dataclasses.field(default_factory=dict)

    def __post_init__(self):
        q = np.asarray(self.quality)
        if q.ndim != 2 or q.shape[0] < 1 or q.shape[1] < 1:
            raise ValueError(
                f"quality: expected a non-empty (N, M) array, received shape {q.shape}"
            )
        n, m = q.shape
        for name in ("candidates", "group_names", "query_ids"):
            v = getattr(self, name)
            if isinstance(v, str | bytes):  # "abc" would iterate as three names
                check_strings(name, v)
        cands = tuple(str(c) for c in self.candidates)
        if len(cands) != m or len(set(cands)) != m:
            raise ValueError(
                f"candidates: expected {m} distinct names (quality has {m} columns), "
                f"received {len(cands)} ({len(set(cands))} distinct)"
            )
        s = object.__setattr__
        s(self, "candidates", cands)
        s(self, "quality", _as_matrix("quality", q, (n, m), np.float64))
        s(self, "cost", _as_matrix("cost", self.cost, (n, m), np.float64))
        for name, dtype in (("input_tokens", np.int64), ("output_tokens", np.int64)):
            v = getattr(self, name)
            s(
                self,
                name,
                np.zeros((n, m), dtype) if v is None else _as_matrix(name, v, (n, m), dtype),
            )
        lat = self.latency
        s(
            self,
            "latency",
            np.zeros((n, m)) if lat is None else _as_matrix("latency", lat, (n, m), np.float64),
        )
        f = np.zeros((n, 0)) if self.features is None else np.asarray(self.features)
        if f.ndim != 2:
            raise ValueError(f"features: expected an (N, F) array, received shape {f.shape}")
        s(self, "features", _as_matrix("features", f, (n, f.shape[1]), np.float64))
        s(self, "group_names", tuple(str(g) for g in self.group_names))
        g = (
            np.zeros(n, np.int64)
            if self.groups is None
            else _as_matrix("groups", self.groups, (n,), np.int64)
        )
        s(self, "groups", g)
        qid = (
            tuple(str(i) for i in range(n))
            if self.query_ids is None
            else tuple(map(str, self.query_ids))
        )
        if len(qid) != n:
            raise ValueError(f"query_ids: expected {n} ids, received {len(qid)}")
        s(self, "query_ids", qid)
        s(self, "meta", dict(self.meta))
        if np.any((self.quality < 0) | (self.quality > 1)):
            raise ValueError("quality: expected values in [0, 1], received values outside")
        for name in ("cost", "input_tokens", "output_tokens", "latency"):
            if np.any(getattr(self, name) < 0):
                raise ValueError(f"{name}: expected values >= 0, received a negative value")
        if np.any((g < 0) | (g >= len(self.group_names))):
            raise ValueError(
                f"groups: expected indices in [0, {len(self.group_names)}), received "
                f"[{g.min()}, {g.max()}]"
            )
        for a in _ARRAYS:
            getattr(self, a).flags.writeable = False

    @property
    def n_queries(self) -> int:
        """N."""
        return self.quality.shape[0]

    @property
    def n_candidates(self) -> int:
        """M."""
        return self.quality.shape[1]

    def rows(self, index) -> RoutingTable:
        """The table restricted to queries `index`: int ids in [0, N) (never wrapped) or a
        boolean mask of length N (never a shorter one); `ValueError` naming `index`
        otherwise."""
        idx = np.asarray(index)
        if idx.dtype == bool:
            if idx.shape != (self.n_queries,):
                raise ValueError(
                    f"index: expected a boolean mask of shape ({self.n_queries},), "
                    f"received shape {idx.shape}"
                )
            idx = np.flatnonzero(idx)
        idx = check_ids("index", idx, self.n_queries, what="query indices")
        if idx.ndim != 1:
            raise ValueError(f"index: expected a 1-D array of query indices, received {idx.shape}")
        return dataclasses.replace(
            self,
            **{a: getattr(self, a)[idx] for a in _ARRAYS},
            query_ids=tuple(self.query_ids[i] for i in idx),
        )

    def columns(self, index: Sequence[int]) -> RoutingTable:
        """The table restricted to candidates `index` (in that order)."""
        idx = [int(i) for i in index]
        kw = {a: getattr(self, a)[:, idx] for a in _ARRAYS if getattr(self, a).ndim == 2}
        kw["features"] = self.features
        return dataclasses.replace(self, **kw, candidates=tuple(self.candidates[i] for i in idx))

    def split(
        self, test_fraction: float = 0.3, *, key: jax.Array, clusters=None
    ) -> tuple[RoutingTable, RoutingTable]:
        """A random (train, test) split of the queries, stratified by task group.

        **Arguments:** `test_fraction` in (0, 1); `key` a PRNG key; `clusters` (N,) ints or
        None: queries sharing a cluster (e.g. questions about one image) go to the same
        side; then the split draws whole clusters (a `test_fraction` share of them, not
        stratified by group).

        **Returns:** `(train, test)` tables.
        """
        if not 0 < test_fraction < 1:
            raise ValueError(f"test_fraction: expected a value in (0, 1), received {test_fraction}")
        if clusters is not None:
            cl = np.asarray(clusters)
            if cl.shape != (self.n_queries,) or cl.dtype.kind not in "iu":
                raise ValueError(
                    f"clusters: expected ({self.n_queries},) integers, received "
                    f"shape {cl.shape} dtype {cl.dtype}"
                )
            ids, inverse = np.unique(cl, return_inverse=True)
            if ids.size < 2:
                raise ValueError(f"clusters: expected at least 2 clusters, received {ids.size}")
            u = np.asarray(jax.random.uniform(key, (ids.size,)))
            n_test = min(max(int(round(test_fraction * ids.size)), 1), ids.size - 1)
            test_ids = np.zeros(ids.size, bool)
            test_ids[np.argsort(u)[:n_test]] = True
            test = test_ids[inverse]
            return self.rows(~test), self.rows(test)
        u = np.asarray(jax.random.uniform(key, (self.n_queries,)))
        test = np.zeros(self.n_queries, bool)
        for g in np.unique(self.groups):
            members = np.flatnonzero(self.groups == g)
            order = members[np.argsort(u[members])]
            test[order[: int(round(test_fraction * members.size))]] = True
        return self.rows(~test), self.rows(test)

    def save(self, path: str | os.PathLike) -> Path:
        """Write `<path>.npz` (compressed) and `<path>.json` atomically; returns the .npz
        path."""
        base = Path(path).with_suffix("")
        buf = io.BytesIO()
        np.savez_compressed(buf, **{a: getattr(self, a) for a in _ARRAYS})
        npz = base.with_suffix(".npz")
        with atomic_write(npz, "wb") as fh:
            fh.write(buf.getvalue())
        write_json(
            base.with_suffix(".json"),
            {
                "format": _FORMAT,
                "candidates": list(self.candidates),
                "group_names": list(self.group_names),
                "query_ids": list(self.query_ids),
                "meta": self.meta,
            },
        )
        return npz

    @classmethod
    def load(cls, path: str | os.PathLike) -> RoutingTable:
        """Read a table written by `save` (no pickle); a malformed file raises `ValueError`
        naming it, as does an archive whose members would inflate to more than half the
        memory available (MemAvailable in /proc/meminfo, else physical memory), checked
        before inflating."""
        base = Path(path).with_suffix("")
        npz, manifest = base.with_suffix(".npz"), base.with_suffix(".json")
        try:
            info = read_json(manifest)
        except (OSError, ValueError) as e:
            raise ValueError(f"{manifest}: not a readable RoutingTable manifest ({e})") from e
        if not isinstance(info, dict) or info.get("format") != _FORMAT:
            raise ValueError(f"{manifest}: expected format {_FORMAT!r}")
        for name in ("candidates", "group_names", "query_ids"):
            if not isinstance(info.get(name), list):
                raise ValueError(
                    f"{manifest}: {name}: expected a JSON list of strings, received "
                    f"{type(info.get(name)).__name__}"
                )
        # decompression bounded by what the machine can hold, not the 16 GiB default
        stored = read_npz(npz, "RoutingTable .npz file", max_bytes=available_memory() // 2)
        arrays = {a: stored[a] for a in _ARRAYS if a in stored}
        missing = [a for a in _ARRAYS if a not in arrays]
        if missing:
            raise ValueError(f"{npz}: missing arrays {missing}")
        try:
            return cls(
                **arrays,
                candidates=tuple(info["candidates"]),
                group_names=tuple(info["group_names"]),
                query_ids=tuple(info["query_ids"]),
                meta=info.get("meta", {}),
            )
        except (KeyError, TypeError) as e:
            raise ValueError(f"{manifest}: missing or malformed field ({e})") from e
        except ValueError as e:
            raise ValueError(f"{npz}: {e}") from e
