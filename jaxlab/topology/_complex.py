"""Combinatorial complexes lifted from graphs: clique (simplicial) and cycle (cell) lifts.

A `Complex` lists its cells per rank (rank 0 nodes, rank 1 edges, rank 2 triangles
or rings, rank 3 tetrahedra for deeper clique lifts) and holds the signed boundary
matrices `B_r` (shape `[n_{r-1}, n_r]`) as `scipy.sparse` arrays, from which every
neighbourhood (incidence, adjacency, coadjacency) of HOPSE (P18) is derived.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import cast

import numpy as np
import scipy.sparse as sp

from jaxlab._core import check_memory, short_repr

__all__ = [
    "Complex",
    "clique_lift",
    "cycle_lift",
    "chordless_cycles",
    "betti_numbers",
    "validate_graph",
]


@dataclasses.dataclass(frozen=True)
class Complex:
    """A finite simplicial or regular cell complex of dimension `max_rank`.

    **Fields:**
        kind: `"simplicial"` (clique lift) or `"cell"` (cycle lift).
        cells: per rank `r = 0..max_rank`, a tuple of cells; a cell is a tuple of
            node ids (sorted for simplices; the canonical cyclic order for rings).
        boundaries: `boundaries[r - 1]` is the signed boundary matrix `B_r` of
            shape `[n_{r-1}, n_r]` (CSR, float64) for `r = 1..max_rank`, with
            `B_{r-1} @ B_r = 0`.

    Neighbourhood matrices per rank: `incidence(r)` (`|B_r|`), `up_adjacency(r)`
    (adjacency through cofaces) and `down_adjacency(r)` (coadjacency through
    faces), all `scipy.sparse` CSR arrays; `hodge_laplacian(r)` is signed.
    """

    __repr__ = short_repr  # arrays as dtype[shape], long sequences cut

    kind: str
    cells: tuple[tuple[tuple[int, ...], ...], ...]
    boundaries: tuple[sp.csr_array, ...]

    @property
    def max_rank(self) -> int:
        return len(self.cells) - 1

    @property
    def sizes(self) -> tuple[int, ...]:
        """Number of cells per rank, `(n_0, ..., n_R)`."""
        return tuple(len(c) for c in self.cells)

    def boundary(self, rank: int) -> sp.csr_array:
        """Signed boundary matrix `B_rank` of shape `[n_{rank-1}, n_rank]` (rank >= 1)."""
        if not 1 <= rank <= self.max_rank:
            raise ValueError(f"rank: expected 1..{self.max_rank}, received {rank}")
        return self.boundaries[rank - 1]

    def incidence(self, rank: int) -> sp.csr_array:
        """Unsigned incidence `|B_rank|`, shape `[n_{rank-1}, n_rank]`."""
        return abs(self.boundary(rank)).tocsr()

    def up_adjacency(self, rank: int) -> sp.csr_array:
        """Cells of `rank` sharing a coface of rank+1 (0/1, zero diagonal), `[n_r, n_r]`."""
        if rank >= self.max_rank:
            n = self.sizes[rank]
            return sp.csr_array((n, n))
        b = self.incidence(rank + 1)
        return _binary_offdiag(b @ b.T)

    def down_adjacency(self, rank: int) -> sp.csr_array:
        """Cells of `rank` sharing a face of rank-1 (0/1, zero diagonal), `[n_r, n_r]`."""
        if rank == 0:
            n = self.sizes[0]
            return sp.csr_array((n, n))
        b = self.incidence(rank)
        return _binary_offdiag(b.T @ b)

    def hodge_laplacian(self, rank: int) -> sp.csr_array:
        """`L_r = B_r^T B_r + B_{r+1} B_{r+1}^T`, shape `[n_r, n_r]`."""
        n = self.sizes[rank]
        out = sp.csr_array((n, n))
        if rank >= 1:
            b = self.boundary(rank)
            out = out + b.T @ b
        if rank < self.max_rank:
            b = self.boundary(rank + 1)
            out = out + b @ b.T
        return sp.csr_array(out)


def _binary_offdiag(m: sp.sparray) -> sp.csr_array:
    coo = sp.coo_array(m, dtype=np.float64)
    off = coo.row != coo.col  # drop the diagonal (CSR's setdiag warns on older scipy)
    m = sp.csr_array((coo.data[off], (coo.row[off], coo.col[off])), shape=coo.shape)
    m.eliminate_zeros()
    m.data[:] = 1.0
    return m


def validate_graph(num_nodes: int, edges: object) -> np.ndarray:
    """Check a simple undirected graph and return its edges as sorted `[E, 2]` int64.

    Raises `ValueError` (naming the argument) for a non-integer or negative node
    count (or one whose per-node sets would not fit in memory), a wrong shape,
    out-of-range ids, self-loops or duplicate edges.
    """
    if isinstance(num_nodes, bool) or not isinstance(num_nodes, int | np.integer) or num_nodes < 0:
        raise ValueError(f"num_nodes: expected a non-negative integer, received {num_nodes!r}")
    # the lifts keep Python sets and tuples per node (a few hundred bytes each)
    check_memory("num_nodes", 512.0 * int(num_nodes))
    e = np.asarray(edges)
    if e.size == 0:
        return np.zeros((0, 2), np.int64)
    if e.ndim != 2 or e.shape[1] != 2:
        raise ValueError(f"edges: expected shape [E, 2], received {e.shape}")
    if not np.issubdtype(e.dtype, np.integer):
        raise ValueError(f"edges: expected integer node ids, received dtype {e.dtype}")
    if e.min() < 0 or e.max() >= num_nodes:
        raise ValueError(
            f"edges: node ids must lie in [0, {num_nodes}), received {e.min()}..{e.max()}"
        )
    if np.any(e[:, 0] == e[:, 1]):
        raise ValueError("edges: self-loops are not allowed")
    e = np.sort(e.astype(np.int64), axis=1)
    if len(np.unique(e, axis=0)) != len(e):
        raise ValueError("edges: duplicate edges are not allowed")
    return e


def _neighbours(num_nodes: int, edges: np.ndarray) -> list[set[int]]:
    nbrs: list[set[int]] = [set() for _ in range(num_nodes)]
    for u, v in edges:
        nbrs[int(u)].add(int(v))
        nbrs[int(v)].add(int(u))
    return nbrs


def _simplex_boundary(
    faces: Sequence[tuple[int, ...]], cofaces: Sequence[tuple[int, ...]]
) -> sp.csr_array:
    index = {f: i for i, f in enumerate(faces)}
    rows, cols, vals = [], [], []
    for j, s in enumerate(cofaces):
        for k in range(len(s)):
            rows.append(index[s[:k] + s[k + 1 :]])
            cols.append(j)
            vals.append((-1.0) ** k)
    return sp.csr_array(
        (np.asarray(vals, np.float64), (np.asarray(rows, np.int64), np.asarray(cols, np.int64))),
        shape=(len(faces), len(cofaces)),
    )


def _edge_boundary(num_nodes: int, edges: Sequence[tuple[int, ...]]) -> sp.csr_array:
    rows, cols, vals = [], [], []
    for j, (u, v) in enumerate(edges):
        rows += [u, v]
        cols += [j, j]
        vals += [-1.0, 1.0]
    return sp.csr_array(
        (np.asarray(vals, np.float64), (np.asarray(rows, np.int64), np.asarray(cols, np.int64))),
        shape=(num_nodes, len(edges)),
    )


def clique_lift(num_nodes: int, edges: object, *, max_rank: int = 2) -> Complex:
    """Lift a graph to its clique (flag) complex truncated at dimension `max_rank`.

    Every `(k+1)`-clique becomes a `k`-simplex, `k <= max_rank`.

    **Arguments:**
        num_nodes: number of nodes `n_0`.
        edges: `[E, 2]` integer array of undirected edges (no loops/duplicates).
        max_rank: highest simplex dimension kept (>= 1).

    **Returns:**
        A simplicial `Complex` with `max_rank + 1` ranks (empty ranks allowed).
    """
    if isinstance(max_rank, bool) or not isinstance(max_rank, int) or max_rank < 1:
        raise ValueError(f"max_rank: expected an integer >= 1, received {max_rank!r}")
    # every rank, empty or not, keeps a cell list and a sparse boundary matrix
    check_memory("max_rank", 4096.0 * max_rank)
    e = validate_graph(num_nodes, edges)
    nbrs = _neighbours(num_nodes, e)
    cells: list[list[tuple[int, ...]]] = [[(v,) for v in range(num_nodes)]]
    cells.append(sorted(tuple(int(x) for x in row) for row in e))
    for _ in range(2, max_rank + 1):
        # extend each k-clique by a larger common neighbour: every clique appears once, sorted
        nxt = []
        for s in cells[-1]:
            common = set.intersection(*(nbrs[v] for v in s))
            nxt.extend(s + (w,) for w in sorted(common) if w > s[-1])
        cells.append(sorted(nxt))
    boundaries = [_edge_boundary(num_nodes, cells[1])]
    for r in range(2, max_rank + 1):
        boundaries.append(_simplex_boundary(cells[r - 1], cells[r]))
    return Complex("simplicial", tuple(tuple(c) for c in cells), tuple(boundaries))


def chordless_cycles(num_nodes: int, edges: object, *, max_length: int) -> list[tuple[int, ...]]:
    """All chordless (induced) cycles of length 3..`max_length` of a simple graph.

    Each cycle is returned once, in canonical order: it starts at its smallest node
    and its second node is smaller than its last.

    **Arguments:**
        num_nodes: number of nodes.
        edges: `[E, 2]` integer edges.
        max_length: longest cycle kept (>= 3).

    **Returns:**
        A sorted list of node tuples.
    """
    if isinstance(max_length, bool) or not isinstance(max_length, int) or max_length < 3:
        raise ValueError(f"max_length: expected an integer >= 3, received {max_length!r}")
    e = validate_graph(num_nodes, edges)
    nbrs = _neighbours(num_nodes, e)
    found: list[tuple[int, ...]] = []

    def extend(path: list[int], blocked: set[int]) -> None:
        # `blocked`: nodes adjacent to an interior path node; they would create a chord
        start, last = path[0], path[-1]
        for w in nbrs[last]:
            if w <= start or w in path:
                continue
            if w in nbrs[start] and len(path) >= 2:
                if w not in blocked and path[1] < w:
                    found.append(tuple(path) + (w,))
                continue
            if w in blocked or len(path) + 1 >= max_length:
                continue
            new_block = blocked | (nbrs[last] if len(path) >= 2 else set())
            extend(path + [w], new_block)

    for s in range(num_nodes):
        for v in nbrs[s]:
            if v > s:
                extend([s, v], set())
    return sorted(found)


def cycle_lift(num_nodes: int, edges: object, *, max_length: int = 8) -> Complex:
    """Lift a graph to a 2-dimensional regular cell complex by attaching its rings.

    Every chordless cycle of length <= `max_length` becomes a 2-cell (the rings of a
    molecule), oriented along its canonical node order.

    **Arguments:**
        num_nodes: number of nodes.
        edges: `[E, 2]` integer edges.
        max_length: longest ring attached (>= 3).

    **Returns:**
        A cell `Complex` with ranks 0, 1, 2.
    """
    e = validate_graph(num_nodes, edges)
    edge_list = sorted(tuple(int(x) for x in row) for row in e)
    rings = chordless_cycles(num_nodes, e, max_length=max_length)
    index = {edge: i for i, edge in enumerate(edge_list)}
    rows, cols, vals = [], [], []
    for j, ring in enumerate(rings):
        for a, b in zip(ring, ring[1:] + ring[:1], strict=True):
            rows.append(index[(min(a, b), max(a, b))])
            cols.append(j)
            vals.append(1.0 if a < b else -1.0)
    b2 = sp.csr_array(
        (np.asarray(vals, np.float64), (np.asarray(rows, np.int64), np.asarray(cols, np.int64))),
        shape=(len(edge_list), len(rings)),
    )
    cells = (tuple((v,) for v in range(num_nodes)), tuple(edge_list), tuple(rings))
    return Complex("cell", cells, (_edge_boundary(num_nodes, edge_list), b2))


def betti_numbers(cx: Complex) -> tuple[int, ...]:
    """Betti numbers over the reals, `b_r = n_r - rank(B_r) - rank(B_{r+1})`."""
    ranks = [0] + [_matrix_rank(b) for b in cx.boundaries] + [0]
    return tuple(int(n - ranks[r] - ranks[r + 1]) for r, n in enumerate(cx.sizes))


def _matrix_rank(b: sp.csr_array) -> int:
    if min(cast(tuple[int, int], b.shape)) == 0:  # scipy infers a sparse shape as Optional
        return 0
    return int(np.linalg.matrix_rank(b.toarray()))
