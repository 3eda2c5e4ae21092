"""Padded array form of a complex: features, encodings and message routes per rank.

One `ComplexArrays` holds one complex (unbatched); complexes padded to common
sizes stack along a leading axis (`stack_complex_arrays`) and models are
`jax.vmap`ped over it. Padded cells carry `mask = 0`; padded message edges carry
`edge_mask = 0` and point at cell 0.
"""

from __future__ import annotations

from collections.abc import Sequence

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float, Int
from numpy.typing import DTypeLike

from jaxlab._core import as_array, check_nonnegative_int

from ._complex import Complex
from ._hasse import rank_routes, route_edges

__all__ = [
    "ComplexArrays",
    "complex_arrays",
    "lift_features",
    "stack_complex_arrays",
    "max_sizes",
    "encoding_stats",
    "standardize_encodings",
]


class ComplexArrays(eqx.Module):
    """Arrays of one (possibly padded) complex of dimension `max_rank`.

    Fields (per rank `r`, per route `i` of `rank_routes(r, max_rank)`):
        x: `x[r]` cell features `[n_r, f_r]`.
        mask: `mask[r]` 1 for real cells, 0 for padding, `[n_r]`.
        enc: `enc[r][i]` precomputed route encodings `[n_r, d]` (`d` may be 0).
        senders, receivers: `[e_ri]` int message edges of the route (receivers
            index rank `r`; senders index the route's source rank).
        edge_mask: `[e_ri]` 1 for real edges, 0 for padding.
        max_rank: static top rank `R`.
    """

    x: tuple[Float[Array, "n f"], ...]
    mask: tuple[Float[Array, " n"], ...]
    enc: tuple[tuple[Float[Array, "n d"], ...], ...]
    senders: tuple[tuple[Int[Array, " e"], ...], ...]
    receivers: tuple[tuple[Int[Array, " e"], ...], ...]
    edge_mask: tuple[tuple[Float[Array, " e"], ...], ...]
    max_rank: int = eqx.field(static=True)

    @property
    def sizes(self) -> tuple[int, ...]:
        return tuple(int(m.shape[-1]) for m in self.mask)


_ROUTE_OFFSET = {"up": 0, "down": 0, "boundary": -1, "coboundary": 1}


def source_rank(rank: int, route: str) -> int:
    """Rank of the cells that send messages along `route` into `rank`.

    `rank` an integer >= 0 (>= 1 for `"boundary"`: rank-0 cells have no boundary) and
    `route` one of `"up"`, `"down"`, `"boundary"`, `"coboundary"`; anything else raises a
    `ValueError` naming the argument (a rank of -1 came back for a node's boundary).
    """
    rank = check_nonnegative_int("rank", rank)
    if route not in _ROUTE_OFFSET:
        raise ValueError(f"route: expected one of {tuple(_ROUTE_OFFSET)}, received {route!r:.60}")
    if route == "boundary" and rank == 0:
        raise ValueError("rank: expected >= 1 for the 'boundary' route (nodes have no boundary)")
    return rank + _ROUTE_OFFSET[route]


def lift_features(
    cx: Complex, node_features: np.ndarray, edge_features: np.ndarray | None = None
) -> tuple[np.ndarray, ...]:
    """Features of every rank by projection-sum from the nodes up.

    `x_0` = node features; `x_1 = [edge_features, |B_1|^T x_0]`; `x_r = |B_r|^T x_{r-1}`.

    **Arguments:**
        cx: the complex.
        node_features: `[n_0, f]`.
        edge_features: optional `[n_1, g]` aligned with `cx.cells[1]` (None: none).
        Both must be finite real arrays (a `ValueError` naming the argument otherwise).

    **Returns:**
        One float64 array `[n_r, f_r]` per rank.
    """
    # validated at the boundary (None, strings, complex, NaN/inf name the argument), then
    # taken as float64 NumPy from the caller's value (a JAX copy may be float32)
    as_array("node_features", node_features, ndim=2, finite=True)
    x0 = np.asarray(node_features, np.float64)
    if x0.ndim != 2 or x0.shape[0] != cx.sizes[0]:
        raise ValueError(f"node_features: expected shape [{cx.sizes[0]}, f], received {x0.shape}")
    if not np.all(np.isfinite(x0)):
        raise ValueError("node_features: expected finite values")
    xs = [x0]
    for r in range(1, cx.max_rank + 1):
        x = np.asarray(cx.incidence(r).T @ xs[-1])
        if r == 1 and edge_features is not None:
            as_array("edge_features", edge_features, ndim=2, finite=True)
            ef = np.asarray(edge_features, np.float64)
            if ef.ndim != 2 or ef.shape[0] != cx.sizes[1]:
                raise ValueError(
                    f"edge_features: expected shape [{cx.sizes[1]}, g], received {ef.shape}"
                )
            x = np.concatenate([ef, x], axis=1)
        xs.append(x)
    return tuple(xs)


def max_sizes(complexes: Sequence[Complex]) -> tuple[tuple[int, ...], tuple[tuple[int, ...], ...]]:
    """Cell counts per rank and edge counts per (rank, route) that fit every complex."""
    if not complexes:
        raise ValueError("complexes: expected at least one complex")
    big = max(cx.max_rank for cx in complexes)
    if any(cx.max_rank != big for cx in complexes):
        raise ValueError("complexes: all complexes must have the same max_rank")
    cells = tuple(max(1, max(cx.sizes[r] for cx in complexes)) for r in range(big + 1))
    edges = tuple(
        tuple(
            max(1, max(len(route_edges(cx, r, route)[0]) for cx in complexes))
            for route in rank_routes(r, big)
        )
        for r in range(big + 1)
    )
    return cells, edges


def _pad(a: np.ndarray, n: int, name: str) -> np.ndarray:
    if a.shape[0] > n:
        raise ValueError(f"{name}: {a.shape[0]} rows do not fit the padding size {n}")
    pad = [(0, n - a.shape[0])] + [(0, 0)] * (a.ndim - 1)
    return np.pad(a, pad)


def complex_arrays(
    cx: Complex,
    features: Sequence[np.ndarray],
    encodings: Sequence[Sequence[np.ndarray]] | None = None,
    *,
    cell_sizes: Sequence[int] | None = None,
    edge_sizes: Sequence[Sequence[int]] | None = None,
    dtype: DTypeLike | None = None,
    as_numpy: bool = False,
) -> ComplexArrays:
    """Pack one complex into (padded) arrays.

    **Arguments:**
        cx: the complex (dimension `R`).
        features: per rank `[n_r, f_r]` (e.g. from `lift_features`), finite real values.
        encodings: per rank per route `[n_r, d]` (from `complex_encodings`), finite real
            values, or None for no encodings (`d = 0`).
        Other values raise a `ValueError` naming the entry (`features[r]`,
        `encodings[r][i]`).
        cell_sizes: padded cell count per rank (default: exact sizes).
        edge_sizes: padded edge count per rank per route (default: exact).
        dtype: float dtype (default: JAX's default float dtype).
        as_numpy: keep NumPy leaves (for fast stacking of many complexes).

    **Returns:**
        A `ComplexArrays`.
    """
    fdtype = np.dtype(jnp.result_type(float) if dtype is None else dtype)
    R = cx.max_rank
    if len(features) != R + 1:
        raise ValueError(
            f"features: expected {R + 1} arrays (one per rank), received {len(features)}"
        )
    cell_sizes = tuple(cx.sizes) if cell_sizes is None else tuple(cell_sizes)
    xs, masks, encs, snd, rcv, emask = [], [], [], [], [], []
    for r in range(R + 1):
        n = cell_sizes[r]
        # finite real numbers (NaN/inf were packed silently; a string was an unnamed error),
        # checked at the boundary, then taken as float64 from the caller's value (a JAX
        # copy may be float32)
        as_array(f"features[{r}]", features[r], finite=True)
        f = np.asarray(features[r], np.float64)
        if f.ndim != 2 or f.shape[0] != cx.sizes[r]:
            raise ValueError(f"features[{r}]: expected [{cx.sizes[r]}, f], received {f.shape}")
        xs.append(np.asarray(_pad(f, n, f"features[{r}]"), fdtype))
        masks.append(np.asarray(_pad(np.ones(cx.sizes[r]), n, "cells"), fdtype))
        routes = rank_routes(r, R)
        e_r, s_r, r_r, m_r = [], [], [], []
        for i, route in enumerate(routes):
            if encodings is None:
                e = np.zeros((cx.sizes[r], 0))
            else:
                as_array(f"encodings[{r}][{i}]", encodings[r][i], finite=True)
                e = np.asarray(encodings[r][i], np.float64)
                if e.ndim != 2 or e.shape[0] != cx.sizes[r]:
                    raise ValueError(
                        f"encodings[{r}][{i}]: expected [{cx.sizes[r]}, d], received {e.shape}"
                    )
            e_r.append(np.asarray(_pad(e, n, f"encodings[{r}][{i}]"), fdtype))
            s, t = route_edges(cx, r, route)
            ne = len(s) if edge_sizes is None else edge_sizes[r][i]
            s_r.append(np.asarray(_pad(s, ne, f"edges[{r}][{route}]"), np.int32))
            r_r.append(np.asarray(_pad(t, ne, f"edges[{r}][{route}]"), np.int32))
            m_r.append(np.asarray(_pad(np.ones(len(s)), ne, "edges"), fdtype))
        encs.append(tuple(e_r))
        snd.append(tuple(s_r))
        rcv.append(tuple(r_r))
        emask.append(tuple(m_r))
    out = ComplexArrays(
        tuple(xs), tuple(masks), tuple(encs), tuple(snd), tuple(rcv), tuple(emask), R
    )
    return out if as_numpy else jax.tree_util.tree_map(jnp.asarray, out)


def stack_complex_arrays(items: Sequence[ComplexArrays]) -> ComplexArrays:
    """Stack equally padded `ComplexArrays` along a new leading axis."""
    if not items:
        raise ValueError("items: expected at least one ComplexArrays")
    shapes = {tuple(a.shape for a in jax.tree_util.tree_leaves(it)) for it in items}
    if len(shapes) != 1:
        raise ValueError("items: all ComplexArrays must share padded shapes (use max_sizes)")
    return jax.tree_util.tree_map(lambda *a: jnp.asarray(np.stack(a)), *items)


def encoding_stats(data: ComplexArrays) -> tuple[tuple[tuple[np.ndarray, np.ndarray], ...], ...]:
    """Per-feature mean and std of every route encoding over the real cells of `data`.

    `data` may be stacked (leading graph axis) or a single complex. Use the
    training set's statistics for `standardize_encodings` of every split.
    """
    out = []
    for r in range(data.max_rank + 1):
        m = np.asarray(data.mask[r]).reshape(-1).astype(bool)
        per = []
        for e in data.enc[r]:
            flat = np.asarray(e, np.float64).reshape(-1, e.shape[-1])[m]
            if flat.shape[0] == 0:
                per.append((np.zeros(e.shape[-1]), np.ones(e.shape[-1])))
                continue
            sd = flat.std(axis=0)
            per.append((flat.mean(axis=0), np.where(sd > 1e-8, sd, 1.0)))
        out.append(tuple(per))
    return tuple(out)


def _feature_row(v, e) -> Array:
    """A per-feature statistic as `[1, ..., 1, d]` of `e`'s rank and dtype (explicit,
    so a stacked `e` never relies on rank promotion)."""
    return jnp.asarray(v, e.dtype).reshape((1,) * (e.ndim - 1) + (-1,))


def standardize_encodings(data: ComplexArrays, stats) -> ComplexArrays:
    """`(enc - mean) / std` per feature on real cells (padding stays 0), from `encoding_stats`."""
    enc = []
    for r in range(data.max_rank + 1):
        m = data.mask[r][..., None]
        enc.append(
            tuple(
                ((e - _feature_row(mu, e)) / _feature_row(sd, e)) * m
                for e, (mu, sd) in zip(data.enc[r], stats[r], strict=True)
            )
        )
    return eqx.tree_at(lambda d: d.enc, data, tuple(enc))
