"""temporal.cycle_counts refuses node ids outside [0, num_nodes) (found by the contract
fuzz of issue #59: an out-of-range id was counted as another node silently) and a bool
capacity."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxlab.temporal import cycle_counts

TRIANGLE_AND_TAIL = np.array([[0, 1], [1, 2], [2, 0], [2, 3]])


def test_out_of_range_node_ids_raise_never_wrap():
    c = cycle_counts(TRIANGLE_AND_TAIL, num_nodes=4, max_degree=3)
    assert (int(c.edges), int(c.triangles)) == (4, 1)  # by hand: one triangle, 4 edges
    for bad in (4, -1, 10**9):
        e = TRIANGLE_AND_TAIL.copy()
        e[3, 1] = bad
        with pytest.raises(ValueError, match=r"edges: node ids must lie in \[0, 4\)"):
            cycle_counts(e, num_nodes=4, max_degree=3)
    # a masked-out row is not an edge: its ids are not checked
    e = TRIANGLE_AND_TAIL.copy()
    e[3] = -1
    mask = jnp.asarray([True, True, True, False])
    assert int(cycle_counts(e, mask, num_nodes=4, max_degree=3).triangles) == 1
    f = jax.jit(lambda e: cycle_counts(e, num_nodes=4, max_degree=3).triangles)
    with pytest.raises(Exception, match=r"node ids must lie in \[0, 4\)"):
        jax.block_until_ready(
            f(jnp.asarray(np.where(TRIANGLE_AND_TAIL == 3, 9, TRIANGLE_AND_TAIL)))
        )


def test_capacities_refuse_bools():
    with pytest.raises(ValueError, match="num_nodes: expected an int"):
        cycle_counts(TRIANGLE_AND_TAIL, num_nodes=True, max_degree=3)
    with pytest.raises(ValueError, match="max_degree: expected a positive int"):
        cycle_counts(TRIANGLE_AND_TAIL, num_nodes=4, max_degree=True)


def test_monte_carlo_gof_refuses_complex_statistics():
    from jaxlab.temporal import monte_carlo_gof

    r = np.random.default_rng(14)
    obs, reps = r.standard_normal((4, 3)), r.standard_normal((6, 4, 3))
    monte_carlo_gof(obs, reps)
    with pytest.raises(ValueError, match="observed: expected real"):
        monte_carlo_gof(obs + 1j, reps)
    with pytest.raises(ValueError, match="replicates: expected real"):
        monte_carlo_gof(obs, reps + 1j)


def test_a_degree_capacity_above_the_node_count_is_clamped():
    """Issue #59 (contract fuzz): max_degree=10**9 allocated a (num_nodes, 10**9) table;
    no node of a simple graph has more than num_nodes - 1 neighbours, so the counts with
    any larger capacity equal those at num_nodes."""
    want = cycle_counts(TRIANGLE_AND_TAIL, num_nodes=4, max_degree=4)
    got = cycle_counts(TRIANGLE_AND_TAIL, num_nodes=4, max_degree=10**9)
    assert [int(v) for v in (got.edges, got.wedges, got.triangles, got.four_cycles)] == [
        int(v) for v in (want.edges, want.wedges, want.triangles, want.four_cycles)
    ]
