"""Per-transition count statistics, the data of the method of moments (P3).

For a transition `G_t -> G_{t+1}` the survivors are the nodes present at both
times that did not (re-)arrive at `t + 1`; `G_t^s` is `G_t` restricted to them.
The moment equations (`jaxlab.temporal.moment_means`) need the counts of
`G_t^s` (edges, wedges, triangles), of `G_{t+1}` (edges, triangles) and the
number of edges of `G_t^s` still present at `t + 1`.
"""

from __future__ import annotations

import equinox as eqx
import jax
import jax.numpy as jnp
from jaxtyping import Array, Bool, Float, Int, PRNGKeyArray

from jaxlab._core import as_array, check_memory, check_positive_int

from ._cycles import _counts
from ._model import (
    Capacity,
    Snapshot,
    TemporalNetworkParams,
    _check_steps,
    check_params,
    check_snapshot,
    run_chain,
)

__all__ = [
    "TransitionStats",
    "transition_stats",
    "sequence_transition_stats",
    "simulate_transitions",
]


class TransitionStats(eqx.Module):
    """Counts of one transition (float scalars, or arrays with a leading time axis).

    - `size`, `next_size`: `n_t`, `n_{t+1}`.
    - `survivors`, `arrivals`: `|V_t and V_{t+1}|` (same nodes), `n_{t+1} - survivors`.
    - `surv_edges`, `surv_wedges`, `surv_triangles`: counts of `G_t^s`.
    - `persisted`: edges of `G_t^s` present in `G_{t+1}`.
    - `next_edges`, `next_wedges`, `next_triangles`, `next_four_cycles`: counts of
      `G_{t+1}` (4-cycles zero unless requested).
    - `weight`: 1 for transitions used by the estimators, 0 for excluded ones
      (e.g. across a gap of empty windows in real data).
    """

    size: Float[Array, "*T"]
    next_size: Float[Array, "*T"]
    survivors: Float[Array, "*T"]
    arrivals: Float[Array, "*T"]
    surv_edges: Float[Array, "*T"]
    surv_wedges: Float[Array, "*T"]
    surv_triangles: Float[Array, "*T"]
    persisted: Float[Array, "*T"]
    next_edges: Float[Array, "*T"]
    next_wedges: Float[Array, "*T"]
    next_triangles: Float[Array, "*T"]
    next_four_cycles: Float[Array, "*T"]
    weight: Float[Array, "*T"]


def _edge_keys(edges: Int[Array, "E 2"], mask: Bool[Array, " E"], n: int) -> Int[Array, " E"]:
    lo = jnp.minimum(edges[:, 0], edges[:, 1])
    hi = jnp.maximum(edges[:, 0], edges[:, 1])
    return jnp.where(mask & (lo != hi), lo * n + hi, n * n)


def _transition_stats(prev: Snapshot, nxt: Snapshot, max_degree: int, four_cycles: bool):
    n = prev.present.shape[-1]
    dt = jnp.zeros(()).dtype
    surv = prev.present & nxt.present & ~nxt.arrived
    u, v = prev.edges[:, 0], prev.edges[:, 1]
    smask = prev.edge_mask & surv[u] & surv[v]
    sc, of1 = _counts(prev.edges, smask, n, max_degree, False)
    nc, of2 = _counts(nxt.edges, nxt.edge_mask, n, max_degree, four_cycles)
    # persisted: unique surviving edges of G_t whose key is among G_{t+1}'s keys
    skeys = jnp.sort(_edge_keys(prev.edges, smask, n))
    sfirst = (skeys < n * n) & jnp.concatenate([jnp.ones((1,), bool), skeys[1:] != skeys[:-1]])
    nkeys = jnp.sort(_edge_keys(nxt.edges, nxt.edge_mask, n))
    idx = jnp.clip(jnp.searchsorted(nkeys, skeys), 0, nkeys.shape[0] - 1)
    persisted = jnp.sum(sfirst & (nkeys[idx] == skeys), dtype=jnp.int32)
    n_next = jnp.sum(nxt.present, dtype=jnp.int32)
    n_surv = jnp.sum(surv, dtype=jnp.int32)

    def f(x):
        return jnp.asarray(x).astype(dt)

    stats = TransitionStats(
        size=f(jnp.sum(prev.present, dtype=jnp.int32)),
        next_size=f(n_next),
        survivors=f(n_surv),
        arrivals=f(n_next - n_surv),
        surv_edges=f(sc.edges),
        surv_wedges=f(sc.wedges),
        surv_triangles=f(sc.triangles),
        persisted=f(persisted),
        next_edges=f(nc.edges),
        next_wedges=f(nc.wedges),
        next_triangles=f(nc.triangles),
        next_four_cycles=f(nc.four_cycles),
        weight=jnp.ones((), dt),
    )
    return stats, of1 | of2


def transition_stats(
    prev: Snapshot, nxt: Snapshot, *, max_degree: int, four_cycles: bool = False
) -> TransitionStats:
    """Count statistics of one transition `prev -> nxt` (same node slots).

    **Arguments:**

    - `prev`, `nxt`: unbatched `Snapshot`s over the same `N` slots.
    - `max_degree`: static degree capacity for the cycle counts.
    - `four_cycles`: also count the 4-cycles of `nxt`.

    **Returns:** a `TransitionStats` of scalars.
    """
    prev = check_snapshot("prev", prev, batched=False)
    nxt = check_snapshot("nxt", nxt, batched=False, num_slots=prev.present.shape[0])
    # no node has more than N - 1 neighbours: a larger capacity counts the same
    max_degree = min(
        check_positive_int("max_degree", max_degree), max(prev.present.shape[-1] - 1, 1)
    )
    if prev.present.shape != nxt.present.shape or prev.present.ndim != 1:
        raise ValueError(
            f"prev, nxt: expected unbatched snapshots over the same slots, received present "
            f"shapes {prev.present.shape} and {nxt.present.shape}"
        )
    stats, overflow = _transition_stats(prev, nxt, int(max_degree), four_cycles)
    return eqx.error_if(stats, overflow, "transition_stats: a degree exceeds max_degree")


def sequence_transition_stats(
    seq: Snapshot,
    *,
    max_degree: int,
    valid: Bool[Array, " T-1"] | None = None,
    four_cycles: bool = False,
) -> TransitionStats:
    """Statistics of all `T - 1` consecutive transitions of a snapshot sequence.

    **Arguments:**

    - `seq`: a `Snapshot` with leading time axis `T >= 2`.
    - `max_degree`: static degree capacity.
    - `valid`: `(T - 1,)` bool; transitions marked False get weight 0.
    - `four_cycles`: also count the 4-cycles of every `G_{t+1}`.

    **Returns:** a `TransitionStats` with leading axis `T - 1`.
    """
    seq = check_snapshot("seq", seq, batched=True)
    # no node has more than N - 1 neighbours: a larger capacity counts the same
    max_degree = min(
        check_positive_int("max_degree", max_degree), max(seq.present.shape[-1] - 1, 1)
    )
    if seq.present.ndim != 2 or seq.present.shape[0] < 2:
        raise ValueError(
            f"seq: expected a snapshot sequence with leading time axis >= 2, received present "
            f"shape {seq.present.shape}"
        )
    stats, overflow = _sequence_stats_jit(seq, int(max_degree), bool(four_cycles))
    if valid is not None:
        valid = as_array("valid", valid, dtype=jnp.bool_)
        if valid.shape != (seq.present.shape[0] - 1,):
            raise ValueError(
                f"valid: expected shape ({seq.present.shape[0] - 1},), received {valid.shape}"
            )
        stats = eqx.tree_at(lambda s: s.weight, stats, valid.astype(stats.weight.dtype))
    return eqx.error_if(
        stats, jnp.any(overflow), "sequence_transition_stats: a degree exceeds max_degree"
    )


@eqx.filter_jit
def _sequence_stats_jit(seq, max_degree, four_cycles):
    prev = jax.tree.map(lambda x: x[:-1], seq)
    nxt = jax.tree.map(lambda x: x[1:], seq)
    return jax.vmap(lambda a, b: _transition_stats(a, b, max_degree, four_cycles))(prev, nxt)


def simulate_transitions(
    params: TemporalNetworkParams,
    n_steps: int,
    *,
    key: PRNGKeyArray,
    capacity: Capacity,
    burn_in: int = 0,
    four_cycles: bool = False,
) -> TransitionStats:
    """Simulate the model and return only its transition statistics (P3).

    Memory is `O(n_steps)` (the snapshots are not kept), which makes long and
    many (`vmap` over keys) replicate chains cheap.

    **Arguments:** as `simulate`, plus `four_cycles` (count 4-cycles too).

    **Returns:** a `TransitionStats` with leading axis `n_steps`. Raises
    (`equinox.error_if`) when a buffer overflowed.
    """
    check_params(params)
    n_steps, burn_in = _check_steps(n_steps, burn_in)
    check_memory("n_steps", 4.0 * n_steps * 13)
    stats, overflow = _simulate_transitions_jit(
        params, n_steps, key, capacity, burn_in, four_cycles
    )
    return eqx.error_if(
        stats, overflow, "simulate_transitions: a buffer overflowed; enlarge the Capacity"
    )


@eqx.filter_jit
def _simulate_transitions_jit(params, n_steps, key, capacity, burn_in, four_cycles):
    def per_step(prev, nxt):
        return _transition_stats(prev, nxt, capacity.max_degree, four_cycles)

    _, (stats, of_deg), overflow = run_chain(params, n_steps, key, capacity, burn_in, per_step)
    return stats, overflow | jnp.any(of_deg)
