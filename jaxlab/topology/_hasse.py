"""Hasse-graph decomposition of a complex into one graph per neighbourhood (P18).

For the cells of rank `r` HOPSE uses four neighbourhoods ("routes"):

- `"up"`: same-rank graph, cells sharing a coface (`|B_{r+1}| |B_{r+1}|^T`);
- `"down"`: same-rank graph, cells sharing a face (`|B_r|^T |B_r|`);
- `"boundary"`: bipartite graph between rank `r-1` and rank `r` (incidence `|B_r|`);
- `"coboundary"`: bipartite graph between rank `r` and rank `r+1` (`|B_{r+1}|`).

Rank 0 has no down/boundary route and the top rank no up/coboundary route, so
the routes of a rank depend only on `(rank, max_rank)`: every complex of a data
set has the same route structure, which is what batching needs.
"""

from __future__ import annotations

from typing import cast

import numpy as np
import scipy.sparse as sp

from ._complex import Complex

__all__ = ["ROUTES", "rank_routes", "hasse_graph", "route_edges"]

ROUTES = ("up", "down", "boundary", "coboundary")
"""HOPSE's four neighbourhoods of a rank: up and down (same-rank graphs), boundary and
coboundary (bipartite with the rank below / above)."""


def rank_routes(rank: int, max_rank: int) -> tuple[str, ...]:
    """The routes that exist for cells of `rank` in a complex of dimension `max_rank`."""
    if not 0 <= rank <= max_rank:
        raise ValueError(f"rank: expected 0..{max_rank}, received {rank}")
    out = []
    if rank < max_rank:
        out.append("up")
    if rank > 0:
        out.append("down")
    if rank > 0:
        out.append("boundary")
    if rank < max_rank:
        out.append("coboundary")
    return tuple(out)


def _bipartite(inc: sp.csr_array) -> sp.csr_array:
    """Adjacency of the bipartite Hasse graph of an incidence `[n_low, n_high]`."""
    b = sp.csr_array(abs(inc), dtype=np.float64)
    n_low, n_high = cast(tuple[int, int], b.shape)  # scipy infers a sparse shape as Optional
    top = sp.hstack([sp.csr_array((n_low, n_low)), b])
    bottom = sp.hstack([b.T, sp.csr_array((n_high, n_high))])
    return sp.csr_array(sp.vstack([top, bottom]))


def hasse_graph(cx: Complex, rank: int, route: str) -> tuple[sp.csr_array, np.ndarray]:
    """The graph of one route and where the rank-`rank` cells sit in it.

    **Arguments:**
        cx: the complex.
        rank: the rank whose cells are being encoded.
        route: one of `rank_routes(rank, cx.max_rank)`.

    **Returns:**
        `(adjacency, rows)`: a symmetric 0/1 CSR adjacency `[m, m]` and the int64
        indices `[n_rank]` of the rank's cells among its `m` nodes.
    """
    if route not in rank_routes(rank, cx.max_rank):
        raise ValueError(
            f"route: expected one of {rank_routes(rank, cx.max_rank)} for rank {rank}, "
            f"received {route!r}"
        )
    n = cx.sizes[rank]
    if route == "up":
        return cx.up_adjacency(rank), np.arange(n)
    if route == "down":
        return cx.down_adjacency(rank), np.arange(n)
    if route == "boundary":
        n_low = cx.sizes[rank - 1]
        return _bipartite(cx.boundary(rank)), n_low + np.arange(n)
    return _bipartite(cx.boundary(rank + 1)), np.arange(n)


def route_edges(cx: Complex, rank: int, route: str) -> tuple[np.ndarray, np.ndarray]:
    """Directed message edges of a route into the cells of `rank` (for HOMP).

    **Returns:**
        `(senders, receivers)`, int64 `[E]` each. `receivers` index rank-`rank`
        cells; `senders` index cells of rank `rank` (up, down), `rank-1`
        (boundary) or `rank+1` (coboundary).
    """
    if route not in rank_routes(rank, cx.max_rank):
        raise ValueError(f"route: {route!r} does not exist for rank {rank}")
    if route in ("up", "down"):
        adj = cx.up_adjacency(rank) if route == "up" else cx.down_adjacency(rank)
        coo = sp.coo_array(adj)
        return coo.col.astype(np.int64), coo.row.astype(np.int64)
    if route == "boundary":
        coo = sp.coo_array(cx.incidence(rank))  # [n_{r-1}, n_r]
        return coo.row.astype(np.int64), coo.col.astype(np.int64)
    coo = sp.coo_array(cx.incidence(rank + 1))  # [n_r, n_{r+1}]
    return coo.col.astype(np.int64), coo.row.astype(np.int64)
