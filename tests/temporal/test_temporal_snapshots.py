"""Contacts -> snapshots, networkx interchange, SocioPatterns files, malformed input."""

import jax.numpy as jnp
import networkx as nx
import numpy as np
import pytest

from jaxlab.temporal import (
    SOCIOPATTERNS,
    Contacts,
    contacts_to_snapshots,
    cycle_counts,
    graphs_to_sequence,
    read_contacts,
    sequence_to_graphs,
    sequence_transition_stats,
    sociopatterns_path,
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
