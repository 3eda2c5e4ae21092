"""Lifts, boundary matrices, Betti numbers and Hasse routes vs hand-built complexes and networkx."""

import itertools

import networkx as nx
import numpy as np
import pytest

import jaxlab.topology as T

TRIANGLE = np.array([[0, 1], [1, 2], [0, 2]])
SQUARE = np.array([[0, 1], [1, 2], [2, 3], [0, 3]])
BOWTIE = np.array([[0, 1], [1, 2], [0, 2], [2, 3], [3, 4], [2, 4]])


def _random_graph(seed, n=9, p=0.4):
    g = nx.gnp_random_graph(n, p, seed=seed)
    return n, np.array(sorted(g.edges()), dtype=np.int64).reshape(-1, 2), g


def test_triangle_clique_lift_hand_built():
    cx = T.clique_lift(3, TRIANGLE)
    assert cx.cells == (((0,), (1,), (2,)), ((0, 1), (0, 2), (1, 2)), ((0, 1, 2),))
    b1 = np.array([[-1, -1, 0], [1, 0, -1], [0, 1, 1]], float)
    b2 = np.array([[1], [-1], [1]], float)  # d[012] = [12] - [02] + [01]
    np.testing.assert_array_equal(cx.boundary(1).toarray(), b1)
    np.testing.assert_array_equal(cx.boundary(2).toarray(), b2)
    assert T.betti_numbers(cx) == (1, 0, 0)


def test_square_lifts_hand_built():
    flag = T.clique_lift(4, SQUARE)
    assert flag.sizes == (4, 4, 0)
    assert T.betti_numbers(flag) == (1, 1, 0)  # a hole
    cell = T.cycle_lift(4, SQUARE)
    assert cell.cells[2] == ((0, 1, 2, 3),)
    # ring 0->1->2->3->0 against edges (0,1),(0,3),(1,2),(2,3)
    np.testing.assert_array_equal(cell.boundary(2).toarray().ravel(), [1, -1, 1, 1])
    assert T.betti_numbers(cell) == (1, 0, 0)  # the hole is filled


def test_bowtie_lifts_hand_built():
    graph_only = T.clique_lift(5, BOWTIE, max_rank=1)
    assert T.betti_numbers(graph_only) == (1, 2)
    flag = T.clique_lift(5, BOWTIE)
    assert flag.cells[2] == ((0, 1, 2), (2, 3, 4))
    assert T.betti_numbers(flag) == (1, 0, 0)
    cell = T.cycle_lift(5, BOWTIE)
    assert cell.cells[2] == ((0, 1, 2), (2, 3, 4))
    # node 2 touches both triangles: up-adjacent to all four others
    np.testing.assert_array_equal(cell.up_adjacency(0).toarray()[2], [1, 1, 0, 1, 1])
    # the two triangles share no edge: not down-adjacent
    assert cell.down_adjacency(2).nnz == 0


@pytest.mark.parametrize("seed", range(6))
def test_clique_lift_matches_networkx(seed):
    n, edges, g = _random_graph(seed, n=10, p=0.5)
    cx = T.clique_lift(n, edges, max_rank=3)
    cliques = [tuple(sorted(c)) for c in nx.enumerate_all_cliques(g)]
    for r in range(4):
        assert sorted(cx.cells[r]) == sorted(c for c in cliques if len(c) == r + 1)
    for r in range(2, 4):
        assert np.abs(cx.boundary(r - 1) @ cx.boundary(r)).sum() == 0
    # Euler characteristic of the truncated complex equals the alternating Betti sum
    euler = sum((-1) ** r * k for r, k in enumerate(cx.sizes))
    assert euler == sum((-1) ** r * b for r, b in enumerate(T.betti_numbers(cx)))
    assert T.betti_numbers(cx)[0] == nx.number_connected_components(g)


@pytest.mark.parametrize("seed", range(6))
def test_chordless_cycles_and_cycle_lift_match_networkx(seed):
    n, edges, g = _random_graph(seed, n=9, p=0.35)
    ours = T.chordless_cycles(n, edges, max_length=6)
    theirs = nx.chordless_cycles(g, length_bound=6)
    assert sorted(tuple(sorted(c)) for c in ours) == sorted(tuple(sorted(c)) for c in theirs)
    cx = T.cycle_lift(n, edges, max_length=n)
    assert np.abs(cx.boundary(1) @ cx.boundary(2)).sum() == 0
    b0, b1, b2 = T.betti_numbers(cx)
    comps = nx.number_connected_components(g)
    assert b0 == comps
    assert b1 == 0  # chordless cycles span the cycle space
    assert b2 == cx.sizes[2] - (len(edges) - n + comps)


def test_hasse_routes_match_graph_constructions():
    n, edges, g = _random_graph(3, n=8, p=0.5)
    cx = T.clique_lift(n, edges)
    np.testing.assert_array_equal(
        cx.up_adjacency(0).toarray(), nx.to_numpy_array(g, nodelist=range(n))
    )
    lg = nx.line_graph(g)
    idx = {e: i for i, e in enumerate(cx.cells[1])}
    dense = np.zeros((len(idx), len(idx)))
    for a, b in lg.edges():
        dense[idx[tuple(sorted(a))], idx[tuple(sorted(b))]] = 1
        dense[idx[tuple(sorted(b))], idx[tuple(sorted(a))]] = 1
    np.testing.assert_array_equal(cx.down_adjacency(1).toarray(), dense)
    # edges are up-adjacent iff they lie in a common triangle
    for (i, e), (j, f) in itertools.combinations(enumerate(cx.cells[1]), 2):
        common = any(set(e) | set(f) == set(t) for t in cx.cells[2])
        assert cx.up_adjacency(1)[i, j] == float(common)
    assert T.rank_routes(0, 2) == ("up", "coboundary")
    assert T.rank_routes(1, 2) == ("up", "down", "boundary", "coboundary")
    assert T.rank_routes(2, 2) == ("down", "boundary")
    adj, rows = T.hasse_graph(cx, 1, "boundary")
    assert adj.shape[0] == cx.sizes[0] + cx.sizes[1]
    np.testing.assert_array_equal(rows, cx.sizes[0] + np.arange(cx.sizes[1]))
    s, t = T.route_edges(cx, 1, "boundary")
    assert len(s) == 2 * cx.sizes[1]
    assert t.max() < cx.sizes[1]
    assert s.max() < cx.sizes[0]
    s, t = T.route_edges(cx, 1, "coboundary")
    assert len(s) == 3 * cx.sizes[2]


def test_hodge_laplacian_kernel_dimension_is_betti():
    cx = T.clique_lift(5, BOWTIE, max_rank=1)
    lap = cx.hodge_laplacian(1).toarray()
    assert int(np.sum(np.linalg.eigvalsh(lap) < 1e-9)) == T.betti_numbers(cx)[1]


@pytest.mark.parametrize(
    ("num_nodes", "edges", "match"),
    [
        (3, np.array([[0, 0]]), "self-loops"),
        (3, np.array([[0, 1], [1, 0]]), "duplicate"),
        (3, np.array([[0, 5]]), r"\[0, 3\)"),
        (3, np.array([0, 1, 2]), r"shape \[E, 2\]"),
        (3, np.array([[0.0, 1.0]]), "integer"),
        (-1, np.zeros((0, 2), int), "num_nodes"),
    ],
)
def test_bad_graphs_raise(num_nodes, edges, match):
    with pytest.raises(ValueError, match=match):
        T.clique_lift(num_nodes, edges)
    with pytest.raises(ValueError, match=match):
        T.cycle_lift(num_nodes, edges)


def test_bad_lift_arguments_raise():
    with pytest.raises(ValueError, match="max_rank"):
        T.clique_lift(3, TRIANGLE, max_rank=0)
    with pytest.raises(ValueError, match="max_length"):
        T.cycle_lift(3, TRIANGLE, max_length=2)
    cx = T.clique_lift(3, TRIANGLE)
    with pytest.raises(ValueError, match="route"):
        T.hasse_graph(cx, 0, "down")
    with pytest.raises(ValueError, match="rank"):
        cx.boundary(3)


def test_tetrahedron_betti_numbers():
    k4 = np.array([[0, 1], [0, 2], [0, 3], [1, 2], [1, 3], [2, 3]])
    hollow = T.clique_lift(4, k4, max_rank=2)  # the 2-sphere
    assert hollow.sizes == (4, 6, 4)
    assert T.betti_numbers(hollow) == (1, 0, 1)
    solid = T.clique_lift(4, k4, max_rank=3)
    assert solid.sizes == (4, 6, 4, 1)
    assert T.betti_numbers(solid) == (1, 0, 0, 0)
    assert np.abs(solid.boundary(2) @ solid.boundary(3)).sum() == 0
