"""Encodings vs dense linear algebra (eigh, matrix powers, expm, pinv) and networkx cycles."""

from math import comb

import networkx as nx
import numpy as np
import pytest
import scipy.linalg
import scipy.sparse as sp

import jaxlab.topology as T


def _dense_laplacian(g, n):
    return nx.laplacian_matrix(g, nodelist=range(n)).toarray().astype(float)


def _graphs():
    yield "path", nx.path_graph(7)
    yield "bowtie_plus_isolated", nx.from_edgelist([(0, 1), (1, 2), (0, 2), (2, 3), (3, 4), (2, 4)])
    g = nx.gnp_random_graph(12, 0.3, seed=4)
    yield "random_disconnected", g


@pytest.mark.parametrize(("name", "g"), list(_graphs()))
def test_lap_pe_vs_numpy_eigh(name, g):
    n = g.number_of_nodes()
    adj = nx.to_numpy_array(g, nodelist=range(n))
    k = 3
    pe = T.lap_pe(sp.csr_array(adj), k)
    assert pe.shape == (n, 2 * k)
    lam, vec = np.linalg.eigh(_dense_laplacian(g, n))
    nz = lam > 1e-8
    lam, vec = lam[nz][:k], vec[:, nz][:, :k]
    np.testing.assert_allclose(pe[0, k:], lam, atol=1e-10)
    lap = _dense_laplacian(g, n)
    for j in range(k):
        v = pe[:, j]
        np.testing.assert_allclose(lap @ v, lam[j] * v, atol=1e-9)  # eigenpair
        if (
            j == 0
            or abs(lam[j] - lam[j - 1]) > 1e-6
            and (j + 1 == k or abs(lam[j + 1] - lam[j]) > 1e-6)
        ):
            # simple eigenvalue: equal to numpy's eigenvector up to sign
            assert min(np.abs(v - vec[:, j]).max(), np.abs(v + vec[:, j]).max()) < 1e-9
        # canonical sign: descending sorted entries of v beat those of -v
        a, b = np.sort(v)[::-1], np.sort(-v)[::-1]
        d = np.flatnonzero(np.abs(a - b) > 1e-8)
        assert d.size == 0 or a[d[0]] > b[d[0]]


def test_lap_pe_is_permutation_equivariant_and_pads():
    # a graph whose first eigenvalues are simple and whose eigenvectors are not
    # sign-symmetric (checked below), so the sign choice is node-order free
    g = nx.gnp_random_graph(9, 0.4, seed=1)
    adj = nx.to_numpy_array(g, nodelist=range(9))
    lam, vec = np.linalg.eigh(np.diag(adj.sum(1)) - adj)
    assert np.all(np.diff(lam[:6]) > 1e-6)
    assert all(
        np.abs(np.sort(vec[:, j]) + np.sort(vec[:, j])[::-1]).max() > 1e-6 for j in range(1, 5)
    )
    for seed in range(3):
        perm = np.random.default_rng(seed).permutation(9)
        a = T.lap_pe(adj, 4)
        b = T.lap_pe(adj[np.ix_(perm, perm)], 4)
        np.testing.assert_allclose(b, a[perm], atol=1e-9)
    # a path has sign-symmetric eigenvectors: equivariant up to sign only
    path = nx.to_numpy_array(nx.path_graph(6))
    perm = np.random.default_rng(0).permutation(6)
    np.testing.assert_allclose(
        np.abs(T.lap_pe(path[np.ix_(perm, perm)], 4)), np.abs(T.lap_pe(path, 4))[perm], atol=1e-9
    )
    tiny = T.lap_pe(np.array([[0.0, 1.0], [1.0, 0.0]]), 3)  # one non-trivial pair only
    np.testing.assert_array_equal(tiny[:, [1, 2, 4, 5]], 0.0)
    np.testing.assert_allclose(tiny[:, 3], 2.0)


@pytest.mark.parametrize(("name", "g"), list(_graphs()))
def test_rwse_vs_matrix_powers(name, g):
    n = g.number_of_nodes()
    adj = nx.to_numpy_array(g, nodelist=range(n))
    adj = np.pad(adj, ((0, 1), (0, 1)))  # an isolated node
    deg = adj.sum(1)
    p = np.divide(adj, deg[:, None], out=np.zeros_like(adj), where=deg[:, None] > 0)
    expected = np.stack([np.diag(np.linalg.matrix_power(p, t)) for t in range(1, 7)], axis=1)
    np.testing.assert_allclose(T.rwse(adj, 6), expected, atol=1e-12)
    np.testing.assert_allclose(T.rwse(sp.csr_array(adj), 6), expected, atol=1e-12)


def test_rwse_sparse_path_on_large_cycle_is_analytic():
    n = 1500  # above the dense threshold: exercises the sparse-product path
    adj = sp.csr_array(nx.adjacency_matrix(nx.cycle_graph(n)), dtype=float)
    out = T.rwse(adj, 8)
    expected = [comb(t, t // 2) / 2**t if t % 2 == 0 else 0.0 for t in range(1, 9)]
    np.testing.assert_allclose(out, np.broadcast_to(expected, (n, 8)), atol=1e-12)


@pytest.mark.parametrize(("name", "g"), list(_graphs()))
def test_hkdiag_vs_expm(name, g):
    n = g.number_of_nodes()
    adj = nx.to_numpy_array(g, nodelist=range(n))
    times = (0.3, 1.0, 3.0)
    expected = np.stack(
        [np.diag(scipy.linalg.expm(-t * _dense_laplacian(g, n))) for t in times], axis=1
    )
    np.testing.assert_allclose(T.hkdiag_se(adj, times), expected, atol=1e-10)


@pytest.mark.parametrize(("name", "g"), list(_graphs()))
def test_elstatic_vs_pinv(name, g):
    n = g.number_of_nodes()
    adj = nx.to_numpy_array(g, nodelist=range(n))
    pinv = np.linalg.pinv(_dense_laplacian(g, n), hermitian=True, rcond=1e-10)
    expected = np.stack(
        [np.diag(pinv), pinv.min(1), pinv.max(1), pinv.std(1), np.diag(adj @ pinv)], axis=1
    )
    np.testing.assert_allclose(T.elstatic_pe(adj), expected, atol=1e-9)


@pytest.mark.parametrize(("name", "g"), list(_graphs()))
def test_cycle_ge_vs_networkx(name, g):
    n = g.number_of_nodes()
    adj = nx.to_numpy_array(g, nodelist=range(n))
    lengths = (3, 4, 5)
    expected = np.zeros((n, 3))
    for c in nx.chordless_cycles(g, length_bound=5):
        expected[c, lengths.index(len(c))] += 1
    np.testing.assert_array_equal(T.cycle_ge(adj, lengths), expected)


def test_graph_and_complex_encodings_shapes_and_sharing():
    spec = T.EncodingSpec(
        lappe_k=2, rwse_steps=3, heat_times=(1.0,), elstatic=True, cycle_lengths=(3, 4)
    )
    assert spec.dim == 4 + 3 + 1 + 5 + 2
    cx = T.cycle_lift(5, np.array([[0, 1], [1, 2], [0, 2], [2, 3], [3, 4], [2, 4]]))
    enc = T.complex_encodings(cx, spec)
    for r in range(3):
        assert len(enc[r]) == len(T.rank_routes(r, 2))
        for e in enc[r]:
            assert e.shape == (cx.sizes[r], spec.dim)
    # the rank-1 boundary route and the rank-0 coboundary route are one bipartite graph
    adj, _ = T.hasse_graph(cx, 1, "boundary")
    full = T.graph_encodings(adj, spec)
    np.testing.assert_allclose(enc[0][1], full[: cx.sizes[0]])
    np.testing.assert_allclose(enc[1][2], full[cx.sizes[0] :])
    # the sparse Hasse graph and the dense fast path agree
    np.testing.assert_allclose(
        enc[1][0],
        T.graph_encodings(T.hasse_graph(cx, 1, "up")[0], spec)[T.hasse_graph(cx, 1, "up")[1]],
    )
    empty = T.clique_lift(4, np.array([[0, 1], [2, 3]]))  # no triangles: empty rank 2
    enc = T.complex_encodings(empty, spec)
    assert enc[2][0].shape == (0, spec.dim)


def test_encodings_reject_bad_input():
    with pytest.raises(ValueError, match="square"):
        T.rwse(np.zeros((2, 3)), 2)
    with pytest.raises(ValueError, match="symmetric"):
        T.lap_pe(np.array([[0.0, 1.0], [0.0, 0.0]]), 1)
    with pytest.raises(ValueError, match="non-negative"):
        T.hkdiag_se(np.array([[0.0, -1.0], [-1.0, 0.0]]), (1.0,))
    with pytest.raises(ValueError, match="non-negative"):
        T.elstatic_pe(np.array([[0.0, np.nan], [np.nan, 0.0]]))
    with pytest.raises(ValueError, match="heat_times"):
        T.EncodingSpec(heat_times=(0.0,))
    with pytest.raises(ValueError, match="cycle_lengths"):
        T.EncodingSpec(cycle_lengths=(2,))
    with pytest.raises(ValueError, match="lappe_k"):
        T.EncodingSpec(lappe_k=-1)
