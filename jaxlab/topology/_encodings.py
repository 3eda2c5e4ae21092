"""Positional and structural encodings on (Hasse) graphs, computed once (P18).

All encodings take a symmetric 0/1 adjacency `A` (`scipy.sparse` or dense,
shape `[n, n]`) and return float64 `[n, d]` with `d` fixed by the arguments only,
so graphs of any size give features of the same width:

- `lap_pe`: the `k` smallest non-zero eigenpairs of `L = D - A` (eigenvector entry
  and eigenvalue per node), signs canonicalised, zero padded;
- `rwse`: random-walk return probabilities `[(D^-1 A)^t]_ii`, `t = 1..steps`;
- `hkdiag_se`: heat-kernel diagonals `[exp(-tau L)]_ii` for each time `tau`;
- `elstatic_pe`: statistics of the Laplacian pseudo-inverse (electrostatic
  potentials): diagonal, row min, row max, row std, and neighbour sum `(A L^+)_ii`;
- `cycle_ge`: number of chordless cycles of each length through the node.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any, cast

import numpy as np
import scipy.linalg
import scipy.sparse as sp

from jaxlab._core import check_memory, check_positive_int, check_size

from ._complex import Complex, chordless_cycles
from ._hasse import hasse_graph, rank_routes

__all__ = [
    "EncodingSpec",
    "lap_pe",
    "rwse",
    "hkdiag_se",
    "elstatic_pe",
    "cycle_ge",
    "graph_encodings",
    "complex_encodings",
]

_ZERO_TOL = 1e-8


#: the most random-walk steps `rwse` computes (each is one matrix product)
RWSE_MAX_STEPS = 10_000
# LapPE eigenpairs an `EncodingSpec` may ask for (2 columns each; beyond a graph's size
# they are zero padding)
LAPPE_MAX_K = 10_000


def _as_adjacency(adj: object) -> np.ndarray | sp.csr_array:
    """Validate a symmetric non-negative adjacency; small inputs become dense arrays."""
    if sp.issparse(adj):
        if np.iscomplexobj(adj.data):  # type: ignore[attr-defined]
            raise ValueError("adj: expected real weights, received a complex matrix")
        a = sp.csr_array(adj, dtype=np.float64)
        if _size(a) != cast(tuple[int, int], a.shape)[1]:
            raise ValueError(f"adj: expected a square [n, n] matrix, received shape {a.shape}")
        if _size(a) <= _DENSE_MAX:
            return _as_adjacency(a.toarray())
        if a.nnz and (not np.all(np.isfinite(a.data)) or np.any(a.data < 0)):
            raise ValueError("adj: expected finite non-negative weights")
        if a.nnz and abs(a - a.T).max() > 1e-12:
            raise ValueError("adj: expected a symmetric adjacency matrix")
        return a
    if adj is None or isinstance(adj, str | bytes):
        raise ValueError(f"adj: expected a square [n, n] matrix, received {type(adj).__name__}")
    if np.iscomplexobj(cast(Any, adj)):  # float64 would drop the imaginary part silently
        raise ValueError("adj: expected real weights, received a complex matrix")
    try:
        d = np.asarray(adj, dtype=np.float64)
    except (TypeError, ValueError) as e:
        raise ValueError(f"adj: expected a numeric [n, n] matrix ({e})") from None
    if d.ndim != 2 or d.shape[0] != d.shape[1]:
        raise ValueError(f"adj: expected a square [n, n] matrix, received shape {d.shape}")
    if not np.all(np.isfinite(d)) or np.any(d < 0):
        raise ValueError("adj: expected finite non-negative weights")
    if not np.array_equal(d, d.T):
        raise ValueError("adj: expected a symmetric adjacency matrix")
    return d


_DENSE_MAX = 1024


def _dense(a: np.ndarray | sp.csr_array) -> np.ndarray:
    return a.toarray() if isinstance(a, sp.csr_array) else a


def _size(a: np.ndarray | sp.csr_array) -> int:
    """Rows of a validated adjacency (scipy infers a sparse shape as Optional)."""
    return cast(tuple[int, ...], a.shape)[0]


def _laplacian_eigh(a: np.ndarray | sp.csr_array) -> tuple[np.ndarray, np.ndarray]:
    d = _dense(a)
    if d.shape[0] == 0:
        return np.zeros(0), np.zeros((0, 0))
    return scipy.linalg.eigh(np.diag(d.sum(axis=1)) - d)


def _nonzero(lam: np.ndarray) -> np.ndarray:
    return lam > _ZERO_TOL * max(1.0, float(lam.max(initial=0.0)))


def _canonical_sign(vecs: np.ndarray, tol: float = 1e-8) -> np.ndarray:
    """Choose each eigenvector's sign from the multiset of its entries.

    Compare the descending-sorted entries of `v` and `-v`; keep the sign whose
    first differing entry is larger. The multiset does not depend on the node
    order, so the encoding of a relabelled graph is the relabelled encoding.
    When the entries of `v` are symmetric about 0 (e.g. an automorphism maps `v`
    to `-v`), no node-order-free choice exists; the sign is then left as the
    solver returned it.
    """
    out = vecs.copy()
    for j in range(vecs.shape[1]):
        a = np.sort(vecs[:, j])[::-1]
        b = np.sort(-vecs[:, j])[::-1]
        diff = np.flatnonzero(np.abs(a - b) > tol)
        if diff.size and a[diff[0]] < b[diff[0]]:
            out[:, j] = -vecs[:, j]
    return out


def _lap_pe(lam: np.ndarray, vec: np.ndarray, k: int) -> np.ndarray:
    keep = _nonzero(lam)
    lam, vec = lam[keep][:k], _canonical_sign(vec[:, keep][:, :k])
    out = np.zeros((vec.shape[0], 2 * k))
    out[:, : lam.size] = vec
    out[:, k : k + lam.size] = lam[None, :]
    return out


def _hk(lam: np.ndarray, vec: np.ndarray, times: Sequence[float]) -> np.ndarray:
    t = np.asarray(times, np.float64)
    return (vec**2) @ np.exp(-lam[:, None] * t[None, :])


def _elstatic(a: np.ndarray | sp.csr_array, lam: np.ndarray, vec: np.ndarray) -> np.ndarray:
    if vec.shape[0] == 0:
        return np.zeros((0, 5))
    keep = _nonzero(lam)
    pinv = (vec[:, keep] / lam[keep]) @ vec[:, keep].T
    return np.stack(
        [
            np.diag(pinv),
            pinv.min(axis=1),
            pinv.max(axis=1),
            pinv.std(axis=1),
            np.einsum("ij,ji->i", _dense(a), pinv),
        ],
        axis=1,
    )


def lap_pe(adj: object, k: int) -> np.ndarray:
    """Laplacian eigenvector positional encoding.

    **Arguments:**
        adj: symmetric adjacency `[n, n]`.
        k: number of non-trivial eigenpairs (eigenvalue > 1e-8) of `L = D - A`.

    **Returns:**
        `[n, 2k]`: eigenvector entries (sign-canonicalised) then the eigenvalues
        broadcast to every node; columns beyond the available pairs are zero.
    """
    check_positive_int("k", k)
    a = _as_adjacency(adj)
    check_memory("k", 8.0 * _size(a) * 2 * k)  # the [n, 2k] output
    return _lap_pe(*_laplacian_eigh(a), k)


def rwse(adj: object, steps: int) -> np.ndarray:
    """Random-walk structural encoding `[(D^-1 A)^t]_ii`, `t = 1..steps`, shape `[n, steps]`.

    Large graphs use sparse products, linear in the number of nodes for graphs
    of bounded degree. Isolated nodes get zeros. `steps` is at most `RWSE_MAX_STEPS`
    (one matrix product each; encodings use 8-32).
    """
    check_size("steps", steps, cap=RWSE_MAX_STEPS, why="one matrix product per step")
    a = _as_adjacency(adj)
    n = _size(a)
    check_memory("steps", 8.0 * n * steps)  # the [n, steps] output
    deg = np.asarray(a.sum(axis=1)).ravel()
    inv = np.where(deg > 0, 1.0 / np.where(deg > 0, deg, 1.0), 0.0)
    out = np.zeros((n, steps))
    if sp.issparse(a):
        p = sp.csr_array(sp.diags_array(inv) @ a)
        m = p
        for t in range(steps):
            out[:, t] = m.diagonal()
            if t + 1 < steps:
                m = sp.csr_array(m @ p)
        return out
    p = inv[:, None] * a
    m = p
    for t in range(steps):
        out[:, t] = np.diagonal(m)
        if t + 1 < steps:
            m = m @ p
    return out


def hkdiag_se(adj: object, times: Sequence[float]) -> np.ndarray:
    """Heat-kernel diagonal structural encoding `[exp(-tau L)]_ii`, shape `[n, len(times)]`."""
    return _hk(*_laplacian_eigh(_as_adjacency(adj)), times)


def elstatic_pe(adj: object) -> np.ndarray:
    """Electrostatic encoding from the Laplacian pseudo-inverse `L^+`, shape `[n, 5]`.

    Columns: `L^+_ii`, `min_j L^+_ij`, `max_j L^+_ij`, `std_j L^+_ij`, `(A L^+)_ii`.
    """
    a = _as_adjacency(adj)
    return _elstatic(a, *_laplacian_eigh(a))


def cycle_ge(adj: object, lengths: Sequence[int]) -> np.ndarray:
    """Cycle-count encoding: chordless cycles of each length through each node, `[n, L]`."""
    a = _as_adjacency(adj)
    n = _size(a)
    out = np.zeros((n, len(lengths)))
    if n == 0 or not len(lengths):
        return out
    if isinstance(a, sp.csr_array):  # _as_adjacency: csr_array or ndarray
        coo = sp.triu(a, k=1).tocoo()
        edges = np.stack([coo.row, coo.col], axis=1).astype(np.int64)
    else:
        edges = np.argwhere(np.triu(a, k=1) > 0).astype(np.int64)
    col = {int(ell): i for i, ell in enumerate(lengths)}
    for cyc in chordless_cycles(n, edges, max_length=max(3, int(max(lengths)))):
        j = col.get(len(cyc))
        if j is not None:
            out[list(cyc), j] += 1.0
    return out


@dataclasses.dataclass(frozen=True)
class EncodingSpec:
    """Which encodings to compute and their sizes; an empty/zero field disables one.

    **Fields:**
        lappe_k: LapPE eigenpairs (width `2 * lappe_k`), an integer in [0, `LAPPE_MAX_K`].
        rwse_steps: RWSE walk lengths `1..rwse_steps`, an integer in [0, `RWSE_MAX_STEPS`].
        heat_times: HKdiagSE diffusion times.
        elstatic: include ElstaticPE (width 5).
        cycle_lengths: CycleGE lengths.
    """

    lappe_k: int = 4
    rwse_steps: int = 8
    heat_times: tuple[float, ...] = (0.5, 1.0, 2.0, 4.0)
    elstatic: bool = True
    cycle_lengths: tuple[int, ...] = (3, 4, 5, 6)

    def __post_init__(self) -> None:
        for name in ("lappe_k", "rwse_steps"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int) or v < 0:
                raise ValueError(f"{name}: expected a non-negative integer, received {v!r}")
        # bounded here, where the user spells them (lap_pe/rwse would name `k`/`steps`)
        for name, cap in (("lappe_k", LAPPE_MAX_K), ("rwse_steps", RWSE_MAX_STEPS)):
            if getattr(self, name) > cap:
                raise ValueError(
                    f"{name}: expected at most {cap} (one encoding column per unit), "
                    f"received {getattr(self, name)}"
                )
        if any(not np.isfinite(t) or t <= 0 for t in self.heat_times):
            raise ValueError(f"heat_times: expected positive times, received {self.heat_times}")
        if any(int(c) < 3 for c in self.cycle_lengths):
            raise ValueError(f"cycle_lengths: expected lengths >= 3, received {self.cycle_lengths}")

    @property
    def dim(self) -> int:
        """Width of `graph_encodings` output."""
        return (
            2 * self.lappe_k
            + self.rwse_steps
            + len(self.heat_times)
            + (5 if self.elstatic else 0)
            + len(self.cycle_lengths)
        )

    def to_json(self) -> dict:
        return dataclasses.asdict(self)


def graph_encodings(adj: object, spec: EncodingSpec) -> np.ndarray:
    """All encodings of `spec` for one graph, concatenated: `[n, spec.dim]` float64.

    One Laplacian eigendecomposition is shared by LapPE, HKdiagSE and ElstaticPE.
    """
    a = _as_adjacency(adj)
    parts = []
    if spec.lappe_k or spec.heat_times or spec.elstatic:
        lam, vec = _laplacian_eigh(a)
    if spec.lappe_k:
        parts.append(_lap_pe(lam, vec, spec.lappe_k))
    if spec.rwse_steps:
        parts.append(rwse(a, spec.rwse_steps))
    if spec.heat_times:
        parts.append(_hk(lam, vec, spec.heat_times))
    if spec.elstatic:
        parts.append(_elstatic(a, lam, vec))
    if spec.cycle_lengths:
        parts.append(cycle_ge(a, spec.cycle_lengths))
    if not parts:
        return np.zeros((_size(a), 0))
    return np.concatenate(parts, axis=1)


def _dense_hasse(inc: list[Any], sizes: tuple[int, ...], rank: int, route: str):
    """Dense twin of `hasse_graph` for small complexes (same graphs, no sparse overhead)."""
    n = sizes[rank]
    if route in ("up", "down"):
        m = inc[rank + 1] @ inc[rank + 1].T if route == "up" else inc[rank].T @ inc[rank]
        a = (m > 0).astype(np.float64)
        np.fill_diagonal(a, 0.0)
        return a, np.arange(n)
    b = inc[rank] if route == "boundary" else inc[rank + 1]
    lo, hi = b.shape
    a = np.zeros((lo + hi, lo + hi))
    a[:lo, lo:] = b
    a[lo:, :lo] = b.T
    return a, (lo + np.arange(n)) if route == "boundary" else np.arange(n)


def complex_encodings(cx: Complex, spec: EncodingSpec) -> tuple[tuple[np.ndarray, ...], ...]:
    """Encodings of every rank on every route of its Hasse decomposition (HOPSE, P18).

    Each bipartite boundary graph is encoded once and shared by the two ranks it
    joins.

    **Returns:**
        `out[r][i]`: float64 `[n_r, spec.dim]` for route `rank_routes(r, R)[i]`.
    """
    small = sum(cx.sizes) <= _DENSE_MAX
    # inc[0] is None: rank 0 has no incidence
    inc: list[Any] = (
        [None] + [cx.incidence(r).toarray() for r in range(1, cx.max_rank + 1)] if small else []
    )
    cache: dict[tuple[str, int], np.ndarray] = {}
    out = []
    for r in range(cx.max_rank + 1):
        per_route = []
        for route in rank_routes(r, cx.max_rank):
            if small:
                adj, rows = _dense_hasse(inc, cx.sizes, r, route)
            else:
                adj, rows = hasse_graph(cx, r, route)
            # the boundary graph of rank r is the coboundary graph of rank r-1
            if route in ("boundary", "coboundary"):
                key = ("bip", r if route == "boundary" else r + 1)
            else:
                key = (route, r)
            if key not in cache:
                cache[key] = graph_encodings(adj, spec)
            per_route.append(cache[key][rows])
        out.append(tuple(per_route))
    return tuple(out)
