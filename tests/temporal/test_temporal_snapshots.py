"""Contacts -> snapshots, networkx interchange, SocioPatterns files, malformed input."""

import jax.numpy as jnp
import networkx as nx
import numpy as np
import pytest

from jaxlab.temporal import (
    SOCIOPATTERNS,
    Contacts,
    Snapshot,
    contacts_to_snapshots,
    cycle_counts,
    graphs_to_sequence,
    read_contacts,
    sequence_to_graphs,
    sequence_transition_stats,
    sociopatterns_path,
    transition_stats,
)


def _write(tmp_path, text, name="c.csv"):
    p = tmp_path / name
    p.write_bytes(text.encode())
    return p


def test_read_contacts_crlf_and_extra_columns(tmp_path):
    p = _write(tmp_path, "20\t1\t2\tA\tB\r\n40\t2\t3\tB\tB\r\n\r\n60\t1\t3\tA\tB\r\n")
    c = read_contacts(p)
    np.testing.assert_array_equal(c.times, [20, 40, 60])
    np.testing.assert_array_equal(c.source, [1, 2, 1])
    np.testing.assert_array_equal(c.target, [2, 3, 3])


@pytest.mark.parametrize(
    ("bad", "what"),
    [
        ("20\t1\t2\n40\t2\n", "line 2"),
        ("20\t1\t2\n40\t2\t3\nx\t1\t2\n", "line 3"),
        ("20\t1\t2\n40\t2\t2\n", "line 2: self-contact"),
        ("-5\t1\t2\n", "line 1: negative time"),
        ("", "empty"),
    ],
)
def test_read_contacts_malformed_names_the_line(tmp_path, bad, what):
    p = _write(tmp_path, bad)
    with pytest.raises(ValueError, match=what):
        read_contacts(p)


def test_windows_and_gaps():
    c = Contacts(
        times=np.array([0, 10, 25, 31, 95, 100]),
        source=np.array([1, 2, 1, 4, 1, 5]),
        target=np.array([2, 3, 3, 5, 2, 6]),
    )
    graphs, k = contacts_to_snapshots(c, window=30)
    np.testing.assert_array_equal(k, [0, 1, 3])  # window 2 is empty and dropped
    assert sorted(graphs[0].edges()) == [(1, 2), (1, 3), (2, 3)]
    assert sorted(graphs[1].nodes()) == [4, 5]
    data = graphs_to_sequence(graphs, window_index=k)
    np.testing.assert_array_equal(data.valid, [True, False])
    assert data.nodes == [1, 2, 3, 4, 5, 6]
    back = sequence_to_graphs(data.snapshots, data.nodes)
    for a, b in zip(graphs, back, strict=True):
        assert sorted(a.nodes()) == sorted(b.nodes())
        assert {frozenset(e) for e in a.edges()} == {frozenset(e) for e in b.edges()}
    stats = sequence_transition_stats(
        data.snapshots, max_degree=data.max_degree, valid=jnp.asarray(data.valid)
    )
    np.testing.assert_array_equal(np.asarray(stats.weight), [1.0, 0.0])
    np.testing.assert_array_equal(np.asarray(stats.survivors), [0.0, 1.0])  # node 5 stays


def test_bad_window_and_empty_contacts():
    c = Contacts(times=np.array([0]), source=np.array([1]), target=np.array([2]))
    with pytest.raises(ValueError, match="window"):
        contacts_to_snapshots(c, window=0)
    with pytest.raises(ValueError, match="window"):
        contacts_to_snapshots(c, window=-3.0)
    empty = Contacts(
        times=np.zeros(0, np.int64), source=np.zeros(0, np.int64), target=np.zeros(0, np.int64)
    )
    with pytest.raises(ValueError, match="no contacts"):
        contacts_to_snapshots(empty, window=20)
    with pytest.raises(ValueError, match="graphs"):
        graphs_to_sequence([])
    with pytest.raises(ValueError, match="name"):
        sociopatterns_path("zoo")


@pytest.mark.parametrize("name", sorted(SOCIOPATTERNS))
def test_sociopatterns_files_parse(name):
    c = read_contacts(sociopatterns_path(name))
    assert len(c) > 30000
    assert np.all(c.source != c.target)


def test_hospital_snapshot_counts_match_networkx():
    c = read_contacts(sociopatterns_path("hospital"))
    graphs, k = contacts_to_snapshots(c, window=3600)
    data = graphs_to_sequence(graphs, window_index=k)
    seq = data.snapshots
    n = len(data.nodes)
    for t in range(0, len(graphs), 7):
        cc = cycle_counts(seq.edges[t], seq.edge_mask[t], num_nodes=n, max_degree=data.max_degree)
        g = graphs[t]
        tri = sum(nx.triangles(g).values()) // 3
        c4 = sum(1 for cyc in nx.simple_cycles(g, length_bound=4) if len(cyc) == 4)
        assert (int(cc.edges), int(cc.triangles), int(cc.four_cycles)) == (
            g.number_of_edges(),
            tri,
            c4,
        )


@pytest.mark.parametrize(
    ("fields", "named"),
    [
        ({"times": np.array([0, 1]), "source": np.array([1, 2, 3])}, "source"),
        ({"times": np.array([True, False, True])}, "times"),
        ({"target": np.array([[2, 3, 4]])}, "target"),
        ({"source": np.array([1.0, 2.0, 3.0])}, "source"),
    ],
)
def test_contacts_refuse_mismatched_or_non_integer_fields(fields, named):
    good = {"times": np.array([0, 1, 2]), "source": np.array([1, 2, 3]), "target": [2, 3, 4]}
    with pytest.raises(ValueError, match=named):
        Contacts(**{**good, **fields})
    c = Contacts(**good)  # a list is accepted and stored as int64
    assert c.target.dtype == np.int64


def _one_snapshot(edges, present_width=5):
    edges = np.asarray(edges)
    return Snapshot(
        np.ones((1, present_width), bool),
        np.zeros((1, present_width), bool),
        edges[None],
        np.ones((1, edges.shape[0]), bool),
    )


@pytest.mark.parametrize(
    ("edges", "named"),
    [
        (np.array([[0, 1, 2], [1, 2, 3]]), "seq.edges"),  # width 3
        (np.array([[0], [1]]), "seq.edges"),  # width 1
        (np.array([[True, False]]), "seq.edges"),  # boolean ids
        (np.array([[0, 5]]), "seq.edges"),  # slot 5 of N = 5
        (np.array([[0, 10**9]]), "seq.edges"),
    ],
)
def test_sequence_to_graphs_checks_the_snapshot(edges, named):
    with pytest.raises(ValueError, match=named):
        sequence_to_graphs(_one_snapshot(edges))
    graphs = sequence_to_graphs(_one_snapshot(np.array([[0, 4]])), nodes="abcde")
    assert sorted(graphs[0].edges()) == [("a", "e")]
    with pytest.raises(ValueError, match="nodes: expected 5"):
        sequence_to_graphs(_one_snapshot(np.array([[0, 4]])), nodes="abc")


def test_present_arrived_mismatch_names_both():
    prev = Snapshot(np.ones(4, bool), np.zeros(5, bool), np.array([[0, 1]]), np.ones(1, bool))
    nxt = Snapshot(np.ones(5, bool), np.zeros(5, bool), np.array([[0, 1]]), np.ones(1, bool))
    with pytest.raises(ValueError, match=r"prev\.present, prev\.arrived"):
        transition_stats(prev, nxt, max_degree=3)


def test_edges_edge_mask_mismatch_names_both():
    prev = Snapshot(np.ones(5, bool), np.zeros(5, bool), np.array([[0, 1]]), np.ones(3, bool))
    nxt = Snapshot(np.ones(5, bool), np.zeros(5, bool), np.array([[0, 1]]), np.ones(1, bool))
    with pytest.raises(ValueError, match=r"prev\.edges, prev\.edge_mask"):
        transition_stats(prev, nxt, max_degree=3)
