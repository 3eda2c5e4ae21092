"""Simulator: stationary size and degree vs analytic values, exact one-step moments."""

import jax
import jax.numpy as jnp
import networkx as nx
import numpy as np
import pytest

from jaxlab.temporal import (
    Capacity,
    Snapshot,
    TemporalNetworkParams,
    default_capacity,
    moment_means,
    sequence_to_graphs,
    sequence_transition_stats,
    simulate,
    simulate_transitions,
    stationary_mean_degree,
    stationary_mean_size,
    transition,
)

from .conftest import BURN_IN, KEYS, N_STEPS, PARAMS


@pytest.fixture
def cap(chain_capacity):
    return chain_capacity


@pytest.fixture
def long_chain(replicate_chains):
    return replicate_chains


def test_stationary_size_matches_poisson(long_chain):
    n = long_chain.next_size.ravel()
    mu = float(stationary_mean_size(PARAMS))
    # autocorrelation time ~ 2 / q: standard error ~ sqrt(mu / (draws * q / 2))
    se = np.sqrt(mu / (n.size * float(PARAMS.departure_prob) / 2))
    assert abs(n.mean() - mu) < 4 * se
    assert 0.5 * mu < n.var() < 1.7 * mu  # Poisson: variance = mean


def test_stationary_mean_degree_matches_analytic(long_chain):
    deg = 2 * long_chain.next_edges.mean() / long_chain.next_size.mean()
    assert deg == pytest.approx(float(stationary_mean_degree(PARAMS)), rel=0.08)


def test_vmap_equals_loop(long_chain, cap):
    one = simulate_transitions(PARAMS, N_STEPS, key=KEYS[1], capacity=cap, burn_in=BURN_IN)
    for a, b in zip(jax.tree.leaves(one), jax.tree.leaves(long_chain), strict=True):
        np.testing.assert_array_equal(np.asarray(a), b[1])


def test_simulated_snapshots_are_valid_and_match_stats(long_chain, cap):
    seq = simulate(PARAMS, N_STEPS, key=KEYS[0], capacity=cap, burn_in=BURN_IN)
    present = np.asarray(seq.present)
    edges = np.asarray(seq.edges)
    mask = np.asarray(seq.edge_mask)
    for t in range(present.shape[0]):
        e = edges[t][mask[t]]
        assert np.all(e[:, 0] < e[:, 1])
        assert present[t][e].all()  # edges only between present nodes
        assert len({tuple(x) for x in e}) == len(e)
    # the same chain (same key) summarised inside the scan equals the stats of the snapshots
    from_seq = sequence_transition_stats(seq, max_degree=cap.max_degree)
    for a, b in zip(jax.tree.leaves(from_seq), jax.tree.leaves(long_chain), strict=True):
        np.testing.assert_array_equal(np.asarray(a), b[0])
    # counts agree with networkx on every snapshot
    graphs = sequence_to_graphs(seq)
    tri = [sum(nx.triangles(g).values()) // 3 for g in graphs[1:]]
    np.testing.assert_array_equal(long_chain.next_triangles[0], tri)
    np.testing.assert_array_equal(
        long_chain.next_edges[0], [g.number_of_edges() for g in graphs[1:]]
    )
    np.testing.assert_array_equal(
        long_chain.next_size[0], [g.number_of_nodes() for g in graphs[1:]]
    )


def test_one_step_moments_are_exact(getkey):
    """Monte-Carlo of the simulator's edge step vs the closed-form conditional means."""
    p = TemporalNetworkParams(1.0, 0.1, 0.6, 2.0, 3.0)
    n_slots = 24
    cap = Capacity(num_slots=n_slots, max_edges=200, max_new_pairs=64, max_groups=40, max_degree=24)
    g = nx.gnp_random_graph(20, 0.2, seed=3)
    g.add_edges_from([(0, 1), (1, 2), (0, 2), (2, 3)])
    el = np.zeros((200, 2), np.int32)
    edges = np.array(sorted(g.edges()), np.int32)
    el[: len(edges)] = edges
    mask = np.zeros(200, bool)
    mask[: len(edges)] = True
    present = np.zeros(n_slots, bool)
    present[:20] = True
    snap = Snapshot(jnp.asarray(present), jnp.asarray(present), jnp.asarray(el), jnp.asarray(mask))
    nxt_present = present.copy()
    nxt_present[[3, 5, 7]] = False  # departures
    nxt_present[[21, 22]] = True  # arrivals
    nxt_present = jnp.asarray(nxt_present)

    from jaxlab.temporal._stats import _transition_stats

    def one(k):
        nxt, overflow = transition(p, snap, nxt_present, key=k, capacity=cap)
        stats, _ = _transition_stats(snap, nxt, cap.max_degree, False)
        return stats, overflow

    stats, overflow = jax.jit(jax.vmap(one))(jax.random.split(getkey(), 4000))
    assert not bool(jnp.any(overflow))
    first = jax.tree.map(lambda x: x[0], stats)
    mp, mm, mt = moment_means(jnp.stack([p.persistence, p.formation, p.closure]), first)
    for sim, mean in ((stats.persisted, mp), (stats.next_edges, mm), (stats.next_triangles, mt)):
        sim = np.asarray(sim)
        se = sim.std() / np.sqrt(sim.size)
        assert abs(sim.mean() - float(mean)) < 4.5 * se + 1e-9, (sim.mean(), float(mean))


def test_bad_parameters_raise():
    cap = Capacity(num_slots=8, max_edges=8, max_new_pairs=8, max_groups=8, max_degree=4)
    key = jax.random.key(0)
    with pytest.raises(ValueError, match="arrival_rate"):
        simulate(TemporalNetworkParams(-1.0, 0.1, 0.5, 1.0, 0.0), 5, key=key, capacity=cap)
    with pytest.raises(ValueError, match="departure_prob"):
        simulate(TemporalNetworkParams(1.0, 1.5, 0.5, 1.0, 0.0), 5, key=key, capacity=cap)
    with pytest.raises(ValueError, match="persistence"):
        simulate_transitions(
            TemporalNetworkParams(1.0, 0.1, -0.5, 1.0, 0.0), 5, key=key, capacity=cap
        )
    with pytest.raises(ValueError, match="formation"):
        default_capacity(TemporalNetworkParams(1.0, 0.1, 0.5, -1.0, 0.0))
    with pytest.raises(ValueError, match="closure"):
        default_capacity(TemporalNetworkParams(1.0, 0.1, 0.5, 1.0, float("nan")))
    with pytest.raises(ValueError, match="n_steps"):
        simulate(TemporalNetworkParams(1.0, 0.1, 0.5, 1.0, 0.0), 0, key=key, capacity=cap)
    with pytest.raises(ValueError, match="num_slots"):
        Capacity(num_slots=5000, max_edges=8, max_new_pairs=8, max_groups=8, max_degree=4)
    with pytest.raises(ValueError, match="max_edges"):
        Capacity(num_slots=8, max_edges=0, max_new_pairs=8, max_groups=8, max_degree=4)


def test_capacity_overflow_raises():
    p = TemporalNetworkParams(5.0, 0.1, 0.9, 3.0, 0.0)
    cap = Capacity(num_slots=20, max_edges=10, max_new_pairs=8, max_groups=8, max_degree=10)
    with pytest.raises(Exception, match="overflow"):
        jax.block_until_ready(simulate(p, 3, key=jax.random.key(0), capacity=cap))
