"""Exact edge, wedge, triangle and 4-cycle counts of a sparse undirected graph.

Paper P3 (sparse size-varying temporal networks) summarises every snapshot by
its low-order cycle counts. For an adjacency matrix `A` with degrees `d` and `m`
edges, the counts follow from trace formulas corrected for degenerate closed
walks:

    triangles   = tr(A^3) / 6
    4-cycles    = (tr(A^4) - 2 * sum_i d_i^2 + 2 m) / 8

(a closed 4-walk either runs along one edge and back twice, `sum_i d_i^2 + sum_j
d_j (d_j - 1)` of them, or around a 4-cycle, 8 per cycle). Nothing dense is
formed: the graph lives in a padded neighbour table built from an edge list by
sorting, `tr(A^3)` is summed over edges as the number of common neighbours of
their endpoints, and `tr(A^4) = sum_i d_i^2 + sum_{i != k} c_ik^2` with the
co-degrees `c_ik = (A^2)_ik` obtained by sorting the ordered wedges
`i - j - k` by their end points. Cost `O(E D log D)` for triangles and
`O(E D log(E D))` for 4-cycles, with `D` the degree capacity.
"""

from __future__ import annotations

import equinox as eqx
import jax
import jax.core
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Bool, Int

from .._core import as_array, check_memory

__all__ = ["CycleCounts", "NeighbourTable", "neighbour_table", "cycle_counts", "max_nodes_for_keys"]

#: `i * N + k` keys are int32: the node capacity is bounded by sqrt(2^31 - 1).
max_nodes_for_keys = 46340


class NeighbourTable(eqx.Module):
    """Sorted padded adjacency lists of a simple undirected graph.

    - `table`: `(N, D)` int32; row `i` holds the neighbours of `i` in increasing
      order, padded with `N`.
    - `degree`: `(N,)` int32 degrees (may exceed `D`; then `overflow` is set).
    - `keys`: `(2E,)` int32 sorted directed-edge keys `i * N + k`, padded with `N * N`.
    - `overflow`: bool scalar, some degree exceeded the capacity `D`.
    """

    table: Int[Array, "N D"]
    degree: Int[Array, " N"]
    keys: Int[Array, " twoE"]
    overflow: Bool[Array, ""]


class CycleCounts(eqx.Module):
    """Counts of one snapshot (int32 scalars, or arrays with leading batch axes).

    - `edges`: number of edges `m`.
    - `wedges`: paths of length two, `sum_i C(d_i, 2)` (closed ones included).
    - `triangles`: 3-cycles.
    - `four_cycles`: 4-cycles (zero when not requested).
    """

    edges: Int[Array, "*batch"]
    wedges: Int[Array, "*batch"]
    triangles: Int[Array, "*batch"]
    four_cycles: Int[Array, "*batch"]

    def __repr__(self) -> str:
        names = ("edges", "wedges", "triangles", "four_cycles")
        try:  # concrete values print as numbers; traced ones as equinox prints them
            vals = [np.asarray(getattr(self, n)) for n in names]
        except (TypeError, jax.errors.ConcretizationTypeError):
            return eqx.tree_pformat(self)
        shown = [str(v.item()) if v.ndim == 0 else np.array2string(v) for v in vals]
        return f"CycleCounts({', '.join(f'{n}={v}' for n, v in zip(names, shown, strict=True))})"


def _position_in_run(sorted_values: Array) -> Array:
    """Index of each element within its run of equal values (input sorted)."""
    idx = jnp.arange(sorted_values.shape[0], dtype=jnp.int32)
    first = jnp.concatenate([jnp.ones((1,), bool), sorted_values[1:] != sorted_values[:-1]])
    return idx - jax.lax.cummax(jnp.where(first, idx, 0))


def neighbour_table(
    edges: Int[Array, "E 2"], edge_mask: Bool[Array, " E"], *, num_nodes: int, max_degree: int
) -> NeighbourTable:
    """Build the padded neighbour table of the graph given as an edge list.

    Self-loops, masked-out rows and duplicate edges (in either orientation) are
    ignored: the result is the simple graph on nodes `0..num_nodes-1`.

    **Arguments:**

    - `edges`: `(E, 2)` integer node ids in `[0, num_nodes)` (an unmasked edge outside
      raises `ValueError` naming `edges`; under `jit` through `equinox.error_if`).
    - `edge_mask`: `(E,)` bool, which rows are edges.
    - `num_nodes`, `max_degree`: static capacities `N`, `D`.

    **Returns:** a `NeighbourTable`.
    """
    n = num_nodes
    sentinel = n * n
    edges = edges.astype(jnp.int32)
    u, v = edges[:, 0], edges[:, 1]
    valid = edge_mask & (u != v) & (u >= 0) & (v >= 0) & (u < n) & (v < n)
    src = jnp.concatenate([u, v])
    dst = jnp.concatenate([v, u])
    ok = jnp.concatenate([valid, valid])
    keys = jnp.sort(jnp.where(ok, src * n + dst, sentinel))
    first = jnp.concatenate([jnp.ones((1,), bool), keys[1:] != keys[:-1]])
    keys = jnp.sort(jnp.where(first, keys, sentinel))
    real = keys < sentinel
    rows = jnp.where(real, keys // n, n)
    cols = jnp.where(real, keys % n, n)
    pos = _position_in_run(rows)
    degree = jax.ops.segment_sum(real.astype(jnp.int32), rows, num_segments=n + 1)[:n]
    row_idx = jnp.where(real & (pos < max_degree), rows, n)  # out of range -> dropped
    table = jnp.full((n, max_degree), n, dtype=jnp.int32)
    table = table.at[row_idx, pos].set(cols, mode="drop")
    overflow = jnp.any(degree > max_degree)
    return NeighbourTable(table=table, degree=degree, keys=keys, overflow=overflow)


def _triangles(nt: NeighbourTable, num_nodes: int) -> Int[Array, ""]:
    n = num_nodes
    real = nt.keys < n * n
    i = jnp.where(real, nt.keys // n, 0)
    k = jnp.where(real, nt.keys % n, 0)
    once = real & (i < k)  # each undirected edge once

    def common(a, b):
        ra, rb = nt.table[a], nt.table[b]
        idx = jnp.clip(jnp.searchsorted(rb, ra), 0, rb.shape[0] - 1)
        return jnp.sum((rb[idx] == ra) & (ra < n), dtype=jnp.int32)

    per_edge = jax.vmap(common)(i, k)
    # tr(A^3) = 2 * sum_edges common; triangles = tr(A^3) / 6
    return jnp.sum(jnp.where(once, per_edge, 0), dtype=jnp.int32) // 3


#: up to this many node pairs the co-degrees are accumulated in a dense buffer by a
#: scatter-add (cheap on CPU); beyond it the wedge keys are sorted instead.
dense_codegree_limit = 1 << 22


def _offdiag_codegree_square_sum(nt: NeighbourTable, num_nodes: int) -> tuple[Array, Array]:
    """`sum_{i != k} c_ik^2` and `sum_{i != k} C(c_ik, 2)` over ordered wedges.

    Ordered wedges `i - j - k` are enumerated from the directed edges `(j, i)`
    and the neighbours `k != i` of `j` (`2E x D` candidates); their end-point
    multiplicities `c_ik` are the run lengths of the sorted keys (large `N`; small
    `N` uses the scatter-add in `_dense_tri_c4`).
    """
    n = num_nodes
    real_edge = nt.keys < n * n
    j = jnp.where(real_edge, nt.keys // n, 0)
    i = jnp.where(real_edge, nt.keys % n, n)
    k = nt.table[j]  # (2E, D)
    valid = real_edge[:, None] & (k < n) & (k != i[:, None])
    wkeys = jnp.sort(jnp.where(valid, i[:, None] * n + k, n * n).reshape(-1))
    real = wkeys < n * n
    within = jnp.where(real, _position_in_run(wkeys), 0)
    pairs = jnp.sum(within, dtype=jnp.int32)  # sum over (i, k) of C(c_ik, 2)
    # sum c^2 = sum (2 C(c, 2) + c)
    squares = 2 * pairs + jnp.sum(real, dtype=jnp.int32)
    return squares, pairs


def _wedge_ends(nt: NeighbourTable, n: int) -> tuple[Array, Array]:
    """Flat end-point keys `i * N + k` of all ordered wedges `i - j - k` (`N * N` if none)."""
    real_edge = nt.keys < n * n
    j = jnp.where(real_edge, nt.keys // n, 0)
    i = jnp.where(real_edge, nt.keys % n, n)
    k = nt.table[j]  # (2E, D)
    valid = real_edge[:, None] & (k < n) & (k != i[:, None])
    return jnp.where(valid, i[:, None] * n + k, n * n).reshape(-1), valid.reshape(-1)


def _dense_tri_c4(nt: NeighbourTable, n: int, four_cycles: bool) -> tuple[Array, Array]:
    """Triangles and `sum_{i != k} C(c_ik, 2)` with `N^2` buffers (small `N`).

    `tr(A^3) = sum over ordered wedges of A_ik`; the co-degrees `c_ik` are a
    scatter-add of the ordered wedges' end points.
    """
    flat, valid = _wedge_ends(nt, n)
    adj = jnp.zeros((n * n,), bool).at[nt.keys].set(True, mode="drop")
    closed = valid & adj[jnp.where(valid, flat, 0)]
    tri = jnp.sum(closed, dtype=jnp.int32) // 6
    if not four_cycles:
        return tri, jnp.zeros((), jnp.int32)
    c = jnp.zeros((n * n,), jnp.int32).at[flat].add(1, mode="drop")
    return tri, jnp.sum(c * (c - 1) // 2, dtype=jnp.int32)


def _counts(
    edges: Array, edge_mask: Array, num_nodes: int, max_degree: int, four_cycles: bool
) -> tuple[CycleCounts, Array]:
    nt = neighbour_table(edges, edge_mask, num_nodes=num_nodes, max_degree=max_degree)
    deg = nt.degree
    m = jnp.sum(deg, dtype=jnp.int32) // 2
    wedges = jnp.sum(deg * (deg - 1) // 2, dtype=jnp.int32)
    sum_d2 = jnp.sum(deg * deg, dtype=jnp.int32)
    if num_nodes * num_nodes <= dense_codegree_limit:
        tri, pairs = _dense_tri_c4(nt, num_nodes, four_cycles)
        offdiag_sq = 2 * pairs + (sum_d2 - 2 * m)  # sum c^2 = sum 2 C(c, 2) + sum c
    else:
        tri = _triangles(nt, num_nodes)
        offdiag_sq = _offdiag_codegree_square_sum(nt, num_nodes)[0] if four_cycles else 0
    if four_cycles:
        trace_a4 = sum_d2 + offdiag_sq
        c4 = (trace_a4 - 2 * sum_d2 + 2 * m) // 8
    else:
        c4 = jnp.zeros((), jnp.int32)
    counts = CycleCounts(
        edges=m.astype(jnp.int32),
        wedges=wedges.astype(jnp.int32),
        triangles=tri.astype(jnp.int32),
        four_cycles=c4.astype(jnp.int32),
    )
    return counts, nt.overflow


_counts_jit = jax.jit(_counts, static_argnums=(2, 3, 4))


def cycle_counts(
    edges: Int[Array, "E 2"],
    edge_mask: Bool[Array, " E"] | None = None,
    *,
    num_nodes: int,
    max_degree: int,
    four_cycles: bool = True,
) -> CycleCounts:
    """Exact edge, wedge, triangle and 4-cycle counts of a sparse graph (P3).

    Jit- and vmap-compatible (capacities are static); the graph is the simple
    undirected graph of the masked edge list (self-loops and repeated edges are
    ignored). Raises (through `equinox.error_if`) when a degree exceeds
    `max_degree`, since the counts would then be wrong.

    **Arguments:**

    - `edges`: `(E, 2)` integer node ids in `[0, num_nodes)` (an unmasked edge outside
      raises `ValueError` naming `edges`; under `jit` through `equinox.error_if`).
    - `edge_mask`: `(E,)` bool; `None` means all rows are edges.
    - `num_nodes`: static node capacity `N` (at most 46340, int32 keys).
    - `max_degree`: static degree capacity `D` (a value above `num_nodes` acts as
      `num_nodes`: no node of a simple graph has more neighbours).
    - `four_cycles`: also count 4-cycles (costs `O(E D log(E D))`).

    **Returns:** a `CycleCounts` of int32 scalars.
    """
    if (
        isinstance(num_nodes, bool)
        or not isinstance(num_nodes, int | np.integer)
        or not 1 <= num_nodes <= max_nodes_for_keys
    ):
        raise ValueError(
            f"num_nodes: expected an int in [1, {max_nodes_for_keys}], received {num_nodes!r}"
        )
    if (
        isinstance(max_degree, bool)
        or not isinstance(max_degree, int | np.integer)
        or max_degree < 1
    ):
        raise ValueError(f"max_degree: expected a positive int, received {max_degree!r}")
    # a simple graph's degree is below num_nodes: a larger capacity only costs memory
    # (the (num_nodes, max_degree) neighbour table), so it is clamped, never allocated
    max_degree = min(int(max_degree), int(num_nodes))
    check_memory("max_degree", 4.0 * 4 * int(num_nodes) * max_degree)  # int32 tables
    edges = as_array("edges", edges, shape=(None, 2), dtype=jnp.integer)
    if edge_mask is None:
        edge_mask = jnp.ones(edges.shape[0], bool)
    if edge_mask.shape != edges.shape[:1]:
        raise ValueError(f"edge_mask: expected shape {edges.shape[:1]}, received {edge_mask.shape}")
    # node ids of the real (unmasked) edges are never wrapped or clamped into another node
    bad = jnp.any((edges < 0) | (edges >= num_nodes), axis=1) & jnp.asarray(edge_mask, bool)
    msg = f"edges: node ids must lie in [0, {int(num_nodes)})"
    if isinstance(bad, jax.core.Tracer):
        edges = eqx.error_if(edges, jnp.any(bad), msg)
    elif bool(jnp.any(bad)):
        raise ValueError(f"{msg}, received rows {np.flatnonzero(np.asarray(bad))[:5].tolist()}")
    counts, overflow = _counts_jit(
        edges, edge_mask, int(num_nodes), int(max_degree), bool(four_cycles)
    )
    return eqx.error_if(
        counts, overflow, "cycle_counts: a degree exceeds max_degree; increase max_degree"
    )
