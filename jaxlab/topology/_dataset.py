"""Lift a list of graphs, encode every Hasse route once (cached on disk), pad and stack.

The encodings are the expensive, once-only preprocessing of HOPSE (P18); they
are cached as one `.npz` per (data set, lift, encoding spec, graph structure)
under `cache_dir` (default `$JAXLAB_CACHE_DIR/topology` or `~/.cache/jaxlab/topology`)
and loaded with `allow_pickle=False`.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import DTypeLike

from jaxlab._core import atomic_write, read_npz

from ._arrays import ComplexArrays, complex_arrays, lift_features, max_sizes, stack_complex_arrays
from ._complex import Complex, clique_lift, cycle_lift
from ._data import MolGraph
from ._encodings import EncodingSpec, complex_encodings
from ._hasse import rank_routes

__all__ = ["LiftSpec", "lift_graph", "encode_complexes", "prepare_dataset", "default_cache_dir"]


@dataclasses.dataclass(frozen=True)
class LiftSpec:
    """How graphs become complexes.

    **Fields:**
        kind: `"cycle"` (rings as 2-cells, `cycle_lift`) or `"clique"` (`clique_lift`).
        max_length: longest ring for the cycle lift.
        max_rank: top simplex dimension for the clique lift (2 = triangles).
    """

    kind: str = "cycle"
    max_length: int = 8
    max_rank: int = 2

    def __post_init__(self) -> None:
        if self.kind not in ("cycle", "clique"):
            raise ValueError(f"kind: expected 'cycle' or 'clique', received {self.kind!r}")


def lift_graph(graph: MolGraph, lift: LiftSpec) -> Complex:
    """Lift one graph with `lift`."""
    if lift.kind == "cycle":
        return cycle_lift(graph.num_nodes, graph.edges, max_length=lift.max_length)
    return clique_lift(graph.num_nodes, graph.edges, max_rank=lift.max_rank)


def default_cache_dir() -> Path:
    """Where `prepare_dataset` caches encodings: `$JAXLAB_CACHE_DIR/topology`, else
    `~/.cache/jaxlab/topology` (the one cache root of jaxlab and its experiments)."""
    root = os.environ.get("JAXLAB_CACHE_DIR") or os.path.join("~", ".cache", "jaxlab")
    return Path(root).expanduser() / "topology"


def _fingerprint(name: str, graphs: Sequence[MolGraph], lift: LiftSpec, spec: EncodingSpec) -> str:
    h = hashlib.sha256()
    h.update(
        json.dumps(
            {
                "name": name,
                "lift": dataclasses.asdict(lift),
                "spec": spec.to_json(),
                "n": len(graphs),
            },
            sort_keys=True,
        ).encode()
    )
    for g in graphs:
        h.update(np.int64(g.num_nodes).tobytes())
        h.update(np.ascontiguousarray(g.edges, np.int64).tobytes())
    return h.hexdigest()[:24]


def encode_complexes(
    complexes: Sequence[Complex],
    spec: EncodingSpec,
    *,
    cache_file: Path | None = None,
) -> list[tuple[tuple[np.ndarray, ...], ...]]:
    """`complex_encodings` for every complex, loaded from / saved to `cache_file`.

    **Returns:**
        Per complex, per rank, per route: float64 `[n_r, spec.dim]`.
    """
    R = complexes[0].max_rank if complexes else 0
    keys = [(r, i) for r in range(R + 1) for i in range(len(rank_routes(r, R)))]
    if cache_file is not None and cache_file.exists():
        try:
            z = read_npz(cache_file, "encoding cache")
            counts = z["counts"]
            flat = {k: z[f"enc_{k[0]}_{k[1]}"] for k in keys}
            if counts.shape == (len(complexes), R + 1) and all(
                tuple(counts[g]) == cx.sizes for g, cx in enumerate(complexes)
            ):
                offsets = np.concatenate([np.zeros((1, R + 1), np.int64), np.cumsum(counts, 0)])
                return [
                    tuple(
                        tuple(
                            flat[(r, i)][offsets[g, r] : offsets[g + 1, r]]
                            for i in range(len(rank_routes(r, R)))
                        )
                        for r in range(R + 1)
                    )
                    for g in range(len(complexes))
                ]
        except (KeyError, ValueError):
            pass  # a corrupt (truncated, empty) or stale cache is recomputed and overwritten
    out = [complex_encodings(cx, spec) for cx in complexes]
    if cache_file is not None:
        cache_file.parent.mkdir(parents=True, exist_ok=True)
        empty = np.zeros((0, spec.dim))
        arrays: dict[str, Any] = {  # Any: numpy types **kwds of savez like allow_pickle
            f"enc_{r}_{i}": np.concatenate([e[r][i] for e in out]) if out else empty
            for r, i in keys
        }
        arrays["counts"] = np.asarray([cx.sizes for cx in complexes], np.int64).reshape(-1, R + 1)
        with atomic_write(cache_file, "wb") as fh:
            np.savez(fh, **arrays)
    return out


_SAFE_NAME = re.compile(r"(?!\.)[A-Za-z0-9._-]{1,100}")


def prepare_dataset(
    name: str,
    graphs: Sequence[MolGraph],
    *,
    lift: LiftSpec = LiftSpec(),
    spec: EncodingSpec = EncodingSpec(),
    cache_dir: str | os.PathLike | None = None,
    sizes: tuple | None = None,
    dtype: DTypeLike | None = None,
) -> tuple[ComplexArrays, list[Complex]]:
    """Lift, encode (cached), pad and stack a data set of graphs.

    **Arguments:**
        name: data-set name (part of the cache key).
        graphs: the graphs.
        lift, spec: lifting and encoding settings.
        cache_dir: where encodings are cached (default `default_cache_dir()`).
        sizes: `(cell_sizes, edge_sizes)` padding (default: `max_sizes` of these graphs).
        dtype: float dtype of the arrays.

    **Returns:**
        `(data, complexes)`: stacked `ComplexArrays` (leading axis = graph) and the
        lifted complexes.
    """
    if not graphs:
        raise ValueError("graphs: expected at least one graph")
    complexes = [lift_graph(g, lift) for g in graphs]
    if not isinstance(name, str) or not _SAFE_NAME.fullmatch(name):
        raise ValueError(
            "name: expected a data-set name of letters, digits, '.', '_' and '-' (it names "
            f"a cache file, so no path separators or '..'), received {name!r}"
        )
    cache = Path(cache_dir) if cache_dir is not None else default_cache_dir()
    cache_file = cache / f"{name}-{_fingerprint(name, graphs, lift, spec)}.npz"
    encs = encode_complexes(complexes, spec, cache_file=cache_file)
    cell_sizes, edge_sizes = sizes if sizes is not None else max_sizes(complexes)
    items = [
        complex_arrays(
            cx,
            lift_features(cx, g.node_features, g.edge_features),
            e,
            cell_sizes=cell_sizes,
            edge_sizes=edge_sizes,
            dtype=dtype,
            as_numpy=True,
        )
        for cx, g, e in zip(complexes, graphs, encs, strict=True)
    ]
    return stack_complex_arrays(items), complexes
