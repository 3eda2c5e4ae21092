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


# ---- issue #59 round 3 (contract fuzz over every public temporal function)


def _params():
    from jaxlab.temporal import TemporalNetworkParams

    return TemporalNetworkParams(1.0, 0.3, 0.6, 1.5, 1.0)


def test_simulation_sizes_refuse_bools_and_huge_values():
    """Before: `simulate(params, True, ...)` ran one step (a bool passed `isinstance(int)`)
    and n_steps=10**9 went on to allocate and scan without bound."""
    from jaxlab.temporal import MAX_STEPS, default_capacity, simulate, simulate_transitions

    p = _params()
    cap = default_capacity(p)
    for fn in (simulate, simulate_transitions):
        with pytest.raises(ValueError, match="^n_steps: expected a positive integer"):
            fn(p, True, key=jax.random.key(0), capacity=cap)
        with pytest.raises(ValueError, match="^n_steps: expected at most"):
            fn(p, MAX_STEPS + 1, key=jax.random.key(0), capacity=cap)
        with pytest.raises(ValueError, match="^burn_in: expected an integer >= 0"):
            fn(p, 2, key=jax.random.key(0), capacity=cap, burn_in=-1)


def test_snapshot_functions_check_the_snapshot():
    """Before: transition/transition_stats took a snapshot with node slots outside
    [0, N) or a wrong-size `present_next` and returned counts of other nodes (or failed
    with a broadcasting error)."""
    from jaxlab.temporal import Capacity, Snapshot, transition, transition_stats

    cap = Capacity(num_slots=5, max_edges=10, max_new_pairs=10, max_groups=10, max_degree=4)
    present = np.array([True, True, True, True, False])
    edges = np.array([[0, 1], [1, 2], [0, 2]])
    snap = Snapshot(present, np.zeros(5, bool), edges, np.ones(3, bool))
    nxt = Snapshot(
        np.array([True, True, True, False, True]),
        np.array([False, False, False, False, True]),
        np.array([[0, 1], [1, 2], [2, 4]]),
        np.ones(3, bool),
    )
    assert int(transition_stats(snap, nxt, max_degree=4).next_triangles) == 0
    bad = Snapshot(present, np.zeros(5, bool), np.array([[0, 1], [1, 2], [0, 7]]), np.ones(3, bool))
    with pytest.raises(ValueError, match=r"prev.edges: node slots must lie in \[0, 5\)"):
        transition_stats(bad, nxt, max_degree=4)
    with pytest.raises(ValueError, match=r"snapshot.edges: node slots must lie in \[0, 5\)"):
        transition(_params(), bad, present, key=jax.random.key(0), capacity=cap)
    with pytest.raises(ValueError, match="^present_next: expected shape"):
        transition(_params(), snap, present[:4], key=jax.random.key(0), capacity=cap)
    # a capacity above N - 1 counts the same (no node has more neighbours)
    big = transition_stats(snap, nxt, max_degree=10**9)
    assert int(big.next_edges) == 3


def test_moment_functions_refuse_nan_and_singular_data():
    """Before: a NaN theta or a NaN weight gave NaN residuals/estimates silently, and
    plugin_covariance(theta="abc") failed inside jnp.asarray. (plugin_covariance now also
    refuses a non-finite covariance from a singular Jacobian, seen at float32 on chains
    too short to see triangles.)"""
    from jaxlab.temporal import (
        default_capacity,
        estimating_functions,
        plugin_covariance,
        simulate_transitions,
    )

    p = _params()
    cap = default_capacity(p)
    stats = simulate_transitions(p, 20, key=jax.random.key(0), capacity=cap)
    theta = np.array([1.0, 0.3, 0.6, 1.5, 1.0])
    assert np.all(np.isfinite(estimating_functions(theta, stats)))
    with pytest.raises(ValueError, match="^theta: expected finite"):
        estimating_functions(np.where(np.arange(5) == 2, np.nan, theta), stats)
    w = np.asarray(stats.weight).copy()
    w[3] = np.nan
    import dataclasses

    with pytest.raises(ValueError, match="^stats.weight: expected finite"):
        estimating_functions(theta, dataclasses.replace(stats, weight=w))
    with pytest.raises(ValueError, match="^theta: expected"):
        plugin_covariance("abc", 10.0, key=jax.random.key(0), n_chains=2, n_steps=8)


def test_two_sided_pvalues_checks_its_statistics():
    """Before: NaN statistics gave p-values as if NaN were never >= or <= anything."""
    from jaxlab.temporal import two_sided_pvalues

    r = np.random.default_rng(0)
    obs, reps = r.standard_normal(3), r.standard_normal((6, 3))
    two, _, _ = two_sided_pvalues(obs, reps)
    assert np.all((np.asarray(two) > 0) & (np.asarray(two) <= 1))
    obs[1] = np.nan
    with pytest.raises(ValueError, match="^observed: expected finite"):
        two_sided_pvalues(obs, reps)
    with pytest.raises(ValueError, match="^replicates: expected shape"):
        two_sided_pvalues(reps[0], reps[:, :2])


def test_params_refuse_non_scalars_and_the_stationary_moments_check_ranges():
    """Before: `TemporalNetworkParams` stored None, strings, booleans and vectors, and
    `stationary_mean_size` / `stationary_mean_degree` returned NaN or negative sizes for
    NaN or out-of-range parameters (only `default_capacity` checked them)."""
    from jaxlab.temporal import (
        TemporalNetworkParams,
        stationary_mean_degree,
        stationary_mean_size,
    )

    good = (1.0, 0.1, 0.5, 1.0, 1.0)
    for i, name in enumerate(("arrival_rate", "departure_prob", "persistence")):
        for bad in (None, "0.5", True, [0.1, 0.2], 1j):
            args = list(good)
            args[i] = bad
            with pytest.raises(ValueError, match=f"^{name}: expected a real scalar"):
                TemporalNetworkParams(*args)
    assert float(stationary_mean_size(TemporalNetworkParams(*good))) == pytest.approx(10.0)
    for fn in (stationary_mean_size, stationary_mean_degree):
        with pytest.raises(ValueError, match="^arrival_rate: expected a finite"):
            fn(TemporalNetworkParams(float("nan"), 0.1, 0.5, 1.0, 1.0))
        with pytest.raises(ValueError, match="^departure_prob: expected a finite"):
            fn(TemporalNetworkParams(1.0, 1.5, 0.5, 1.0, 1.0))
    # traced values pass through (fits build parameters under jit)
    f = jax.jit(lambda v: stationary_mean_size(TemporalNetworkParams.from_vector(v)))
    assert float(f(np.asarray(good))) == pytest.approx(10.0)


def test_moment_functions_take_count_lists_and_refuse_fractional_counts():
    """Before: a plain list as a `TransitionStats` field failed inside the arithmetic
    (TypeError, or TracerArrayConversionError under jit), and a fractional count such as
    2.5 surviving edges was estimated from silently."""
    import dataclasses

    from jaxlab.temporal import (
        default_capacity,
        estimate_moments,
        moment_means,
        sandwich_covariance,
        simulate_transitions,
    )

    p = _params()
    stats = simulate_transitions(p, 200, key=jax.random.key(0), capacity=default_capacity(p))
    theta = np.asarray(estimate_moments(stats).theta)
    listed = dataclasses.replace(
        stats,
        surv_edges=np.asarray(stats.surv_edges).tolist(),
        weight=np.asarray(stats.weight).tolist(),
    )
    np.testing.assert_allclose(
        estimate_moments(listed).theta, estimate_moments(stats).theta, rtol=1e-12
    )
    np.testing.assert_allclose(
        sandwich_covariance(theta, listed), sandwich_covariance(theta, stats), rtol=1e-12
    )
    frac = np.asarray(stats.surv_edges).copy()
    frac[2] += 0.5
    with pytest.raises(ValueError, match="^stats.surv_edges: expected whole counts"):
        moment_means(theta[2:], dataclasses.replace(stats, surv_edges=frac))


def test_contact_readers_refuse_non_strings_and_name_the_bad_column(tmp_path):
    """Issue #59 (fuzz of the readers): `read_contacts(None)` raised a TypeError from
    `Path(None)` and `sociopatterns_path` of an array an unhashable-type TypeError, neither
    naming the argument; a malformed field is named by its column (the `Contacts` field)."""
    from jaxlab.temporal import read_contacts, sociopatterns_path

    for bad in (None, 3, np.array(["x"])):
        with pytest.raises(ValueError, match="^path: expected a str or PathLike"):
            read_contacts(bad)
    for bad in (None, np.array([["hospital"]]), ["hospital"]):
        with pytest.raises(ValueError, match="^name: expected a str"):
            sociopatterns_path(bad)
    for text, where in (
        ("1 2 3\nnan 2 3\n", "line 2: times"),
        ("1 x 3\n", "line 1: source"),
        ("1 2 3.5\n", "line 1: target"),
    ):
        p = tmp_path / "contacts.txt"
        p.write_text(text)
        with pytest.raises(ValueError, match=f"{where}: expected an integer"):
            read_contacts(p)
