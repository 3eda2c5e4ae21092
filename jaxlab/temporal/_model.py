"""A Markov model of sparse temporal networks whose node set grows and shrinks (P3).

One step `t -> t + 1` of the chain, on the snapshot graph `G_t` with node set `V_t`:

1. **Departures.** Every node of `V_t` leaves independently with probability
   `q` (`departure_prob`); its edges leave with it.
2. **Arrivals.** `A_{t+1} ~ Poisson(lambda)` new nodes join (`arrival_rate`),
   so `n_{t+1} = Binomial(n_t, 1 - q) + Poisson(lambda)`; the size is
   stationary `Poisson(lambda / q)`.
3. **Persistence.** Each edge of `G_t` whose two endpoints stayed persists
   independently with probability `p` (`persistence`).
4. **Sparse formation.** Each pair of `V_{t+1}` receives a fresh edge with
   probability `a = alpha / n_{t+1}` (`formation`), so the expected degree stays
   `O(1)` as `n` grows.
5. **Triadic (group) closure.** Each triple of `V_{t+1}` forms a group with
   probability `g = gamma / n_{t+1}^2` (`closure`) and receives all three of its
   edges; groups create `O(n)` triangles, so that triangle counts carry
   information that edge counts do not.

An edge is present at `t + 1` when it persisted or was formed by step 4 or 5
(probabilities above 1 are clipped to 1 by the simulator, which happens only for
`n_{t+1} < alpha` or `n_{t+1}^2 < gamma`). Given the node process, pairs evolve as
conditionally independent two-state chains apart from the shared group events,
which keeps the conditional moments of edge and triangle counts in closed form
(`jaxlab.temporal.moment_means`). The stationary mean degree is
`(n - 1) f / (1 - p (1 - f) (1 - q)^2)` with `f = 1 - (1 - a)(1 - g)^(n - 2)` at
`n = lambda / q` (`stationary_mean_degree`, exact up to `O(1/n^2)` Jensen terms).

The simulator keeps a fixed number of node slots and a sparse edge list of
fixed capacity (`Capacity`); new pairs and groups are drawn exactly by geometric
skipping through the lexicographic enumeration of pairs/triples, so one step
costs `O(E + K)` random numbers rather than `O(n^2)` or `O(n^3)`. Time is a
`lax.scan`; replicates are a `vmap` over keys.
"""

from __future__ import annotations

import math
from typing import Any

import equinox as eqx
import jax
import jax.core
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Bool, Float, Int, PRNGKeyArray

from jaxlab._core import (
    as_array,
    check_ids,
    check_instance,
    check_memory,
    check_nonnegative_int,
    check_size,
)

__all__ = [
    "PARAM_NAMES",
    "TemporalNetworkParams",
    "Capacity",
    "Snapshot",
    "check_params",
    "default_capacity",
    "stationary_mean_size",
    "stationary_mean_degree",
    "simulate",
    "transition",
]

PARAM_NAMES = ("arrival_rate", "departure_prob", "persistence", "formation", "closure")
"""The model's parameter names, in the order of its parameter vector: node arrival rate lambda,
departure probability q, edge persistence p, formation alpha, triadic closure gamma."""

#: the simulator enumerates triples with int32: C(N, 3) < 2^31 needs N <= 1624.
MAX_SLOTS = 1624

MAX_STEPS = 10_000_000
"""The most transitions (`n_steps + burn_in`) one simulation runs: a bound on the work a
caller's size can ask for (10**7 steps take hours on a CPU); larger values are refused
before anything is allocated."""


def _check_steps(n_steps, burn_in) -> tuple[int, int]:
    """`n_steps` in [1, MAX_STEPS] and `burn_in` in [0, MAX_STEPS] as ints (booleans,
    floats and strings raise a `ValueError` naming the argument)."""
    n_steps = check_size("n_steps", n_steps, cap=MAX_STEPS, why="MAX_STEPS")
    burn_in = check_nonnegative_int("burn_in", burn_in)
    if burn_in > MAX_STEPS:
        raise ValueError(f"burn_in: expected at most {MAX_STEPS} (MAX_STEPS), received {burn_in}")
    return n_steps, burn_in


def _float_dtype():
    return jnp.zeros(()).dtype


def _real_scalar(name: str, x, dt) -> Array:
    """A concrete parameter must be a real scalar (None, strings, booleans, complex
    numbers and arrays are refused naming it); its range is `check_params`' business,
    at every function that uses it. Traced values pass through."""
    if not isinstance(x, jax.core.Tracer):
        a = np.asarray(x)
        if a.dtype.kind not in "iuf" or a.shape != ():
            raise ValueError(
                f"{name}: expected a real scalar, received {type(x).__name__} {x!r:.60}"
            )
    return jnp.asarray(x, dt)


class TemporalNetworkParams(eqx.Module):
    """Parameters (scalars) of the Markov model of a sparse temporal network whose node
    set grows and shrinks (P3).

    One step `t -> t + 1` on the snapshot `G_t` with `n_t` nodes: every node leaves with
    probability `q` (its edges with it); `Poisson(lambda)` new nodes arrive, so the size is
    stationary `Poisson(lambda / q)`; each edge whose endpoints stayed persists with
    probability `p`; each pair of the new node set gets a fresh edge with probability
    `alpha / n_{t+1}` (expected degree `O(1)`); each triple forms a group (all three edges)
    with probability `gamma / n_{t+1}^2`, so triangles carry information that edge counts
    do not. `simulate` runs the chain, `moment_means` gives the conditional moments of
    edge and triangle counts in closed form, `stationary_mean_degree` the stationary
    degree.

    **Arguments:**

    - `arrival_rate`: `lambda >= 0`, expected new nodes per step.
    - `departure_prob`: `q` in `[0, 1]`, per-node per-step leaving probability.
    - `persistence`: `p` in `[0, 1]`, per-edge per-step survival probability.
    - `formation`: `alpha >= 0`, fresh pairs form with probability `alpha / n`.
    - `closure`: `gamma >= 0`, triples form groups with probability `gamma / n^2`.
    """

    arrival_rate: Float[Array, ""]
    departure_prob: Float[Array, ""]
    persistence: Float[Array, ""]
    formation: Float[Array, ""]
    closure: Float[Array, ""]

    def __init__(self, arrival_rate, departure_prob, persistence, formation, closure):
        dt = _float_dtype()
        self.arrival_rate = _real_scalar("arrival_rate", arrival_rate, dt)
        self.departure_prob = _real_scalar("departure_prob", departure_prob, dt)
        self.persistence = _real_scalar("persistence", persistence, dt)
        self.formation = _real_scalar("formation", formation, dt)
        self.closure = _real_scalar("closure", closure, dt)

    def as_vector(self) -> Float[Array, 5]:
        """`(lambda, q, p, alpha, gamma)` in the order of `PARAM_NAMES`."""
        return jnp.stack([getattr(self, n) for n in PARAM_NAMES])

    @classmethod
    def from_vector(cls, theta: Float[Array, 5]) -> TemporalNetworkParams:
        return cls(*(theta[i] for i in range(5)))


def check_params(params: TemporalNetworkParams) -> None:
    """Raise `ValueError` naming the parameter when a concrete value is out of range."""
    bounds = {
        "arrival_rate": (0.0, math.inf),
        "departure_prob": (0.0, 1.0),
        "persistence": (0.0, 1.0),
        "formation": (0.0, math.inf),
        "closure": (0.0, math.inf),
    }
    for name, (lo, hi) in bounds.items():
        x = getattr(params, name)
        if isinstance(x, jax.core.Tracer):
            continue
        x = np.asarray(x)
        if x.shape != ():
            raise ValueError(f"{name}: expected a scalar, received shape {x.shape}")
        if not np.isfinite(x) or not lo <= float(x) <= hi:
            raise ValueError(
                f"{name}: expected a finite value in [{lo}, {hi}], received {float(x)}"
            )


class Capacity(eqx.Module):
    """Static sizes of the simulator's buffers.

    - `num_slots`: node slots `N` (at most 1624); must exceed the largest size.
    - `max_edges`: edge-list capacity `E`.
    - `max_new_pairs`: fresh pairs drawn per step, `K2`.
    - `max_groups`: groups drawn per step, `K3`.
    - `max_degree`: degree capacity `D` for the cycle counts.
    """

    num_slots: int = eqx.field(static=True)
    max_edges: int = eqx.field(static=True)
    max_new_pairs: int = eqx.field(static=True)
    max_groups: int = eqx.field(static=True)
    max_degree: int = eqx.field(static=True)

    def __check_init__(self):
        for name in ("num_slots", "max_edges", "max_new_pairs", "max_groups", "max_degree"):
            val = getattr(self, name)
            if not isinstance(val, int | np.integer) or val < 1:
                raise ValueError(f"{name}: expected a positive int, received {val!r}")
        if self.num_slots > MAX_SLOTS:
            raise ValueError(
                f"num_slots: at most {MAX_SLOTS} (int32 triple indices), received {self.num_slots}"
            )


def stationary_mean_size(params: TemporalNetworkParams) -> Float[Array, ""]:
    """`E[n] = lambda / q` of the stationary `Poisson(lambda / q)` size."""
    check_params(params)
    return params.arrival_rate / params.departure_prob


def _fresh_prob(n, alpha, gamma, exclude):
    """P(pair receives a fresh edge) at size n; `exclude` triples not counted."""
    a = alpha / n
    g = gamma / (n * n)
    return 1.0 - (1.0 - a) * (1.0 - g) ** (n - exclude)


def stationary_mean_degree(params: TemporalNetworkParams) -> Float[Array, ""]:
    """Stationary mean degree `2 E[m] / E[n]` (exact up to `O(1/n^2)` terms).

    A pair of nodes that co-exist for `k` steps carries an edge with probability
    `f (1 - r^(k+1)) / (1 - r)`, `r = p (1 - f)`; the pair's age is geometric
    with ratio `(1 - q)^2`, and averaging gives `f / (1 - r (1 - q)^2)`.
    """
    check_params(params)
    n = stationary_mean_size(params)
    f = _fresh_prob(n, params.formation, params.closure, 2.0)
    s = (1.0 - params.departure_prob) ** 2
    return (n - 1.0) * f / (1.0 - params.persistence * (1.0 - f) * s)


def default_capacity(params: TemporalNetworkParams, *, slack: float = 1.0) -> Capacity:
    """Buffer sizes that overflow with negligible probability at `params`."""
    check_params(params)
    mu = float(stationary_mean_size(params))
    deg = float(stationary_mean_degree(params))
    alpha, gamma = float(params.formation), float(params.closure)
    slots = int(math.ceil(slack * (mu + 8.0 * math.sqrt(mu) + 16)))
    slots = min(slots, MAX_SLOTS)
    edges_mean = 0.5 * slots * deg
    max_edges = int(slack * (1.3 * edges_mean + 8 * math.sqrt(edges_mean + 1) + 64))
    pairs_mean = 0.5 * alpha * slots
    groups_mean = gamma * slots / 6.0
    max_degree = int(min(slots, 2 * deg + 6 * math.sqrt(deg + 1) + 10))
    return Capacity(
        num_slots=slots,
        max_edges=max_edges,
        max_new_pairs=int(slack * (pairs_mean + 8 * math.sqrt(pairs_mean + 1) + 16)),
        max_groups=int(slack * (groups_mean + 8 * math.sqrt(groups_mean + 1) + 16)),
        max_degree=max_degree,
    )


class Snapshot(eqx.Module):
    """One snapshot (or, with a leading time axis, a sequence of them).

    - `present`: `(N,)` bool, which node slots are in `V_t`.
    - `arrived`: `(N,)` bool, nodes that joined at this step (a slot that is
      present at `t` and `t + 1` but arrived at `t + 1` holds a new node).
    - `edges`: `(E, 2)` int32 node slots, `u < v` for valid rows.
    - `edge_mask`: `(E,)` bool, which rows are edges.
    """

    present: Bool[Array, "*T N"]
    arrived: Bool[Array, "*T N"]
    edges: Int[Array, "*T E 2"]
    edge_mask: Bool[Array, "*T E"]


def _same_axes(name: str, a: tuple[str, Any], b: tuple[str, Any], axes: str, drop: int = 0):
    """Raise naming both fields when `a`'s shape (less its last `drop` axes) and `b`'s have
    the same rank but differ; a wrong rank is left to the per-field check."""
    sa, sb = np.shape(a[1]), np.shape(b[1])
    sa = sa[: len(sa) - drop]
    if len(sa) == len(sb) and sa != sb:
        raise ValueError(
            f"{name}.{a[0]}, {name}.{b[0]}: expected the same {axes} axes, received {sa} and {sb}"
        )


def check_snapshot(
    name: str, snap: Any, *, batched: bool, num_slots: int | None = None
) -> Snapshot:
    """Raise a `ValueError` naming `<name>.<field>` unless `snap` is a `Snapshot` whose
    fields have the documented shapes and dtypes (`present`, `arrived`: bool `(*T, N)`;
    `edges`: int `(*T, E, 2)`; `edge_mask`: bool `(*T, E)`; `*T` one leading axis when
    `batched`), and whose valid edge rows hold node slots in `[0, N)` (never wrapped).
    Returns the snapshot with its fields as JAX arrays (edges as int32)."""
    check_instance(name, snap, Snapshot)
    lead: tuple[str, ...] = ("T",) if batched else ()
    n = "N" if num_slots is None else num_slots
    sizes: dict[str, int] = {}
    present = as_array(
        f"{name}.present", snap.present, shape=(*lead, n), dtype=jnp.bool_, sizes=sizes
    )
    # one size, two fields: a mismatch names both (either may be the wrong one)
    _same_axes(name, ("present", snap.present), ("arrived", snap.arrived), "(*T, N)")
    _same_axes(name, ("edges", snap.edges), ("edge_mask", snap.edge_mask), "(*T, E)", drop=1)
    arrived = as_array(
        f"{name}.arrived", snap.arrived, shape=(*lead, n), dtype=jnp.bool_, sizes=sizes
    )
    edges = as_array(
        f"{name}.edges", snap.edges, shape=(*lead, "E", 2), dtype=jnp.integer, sizes=sizes
    )
    mask = as_array(
        f"{name}.edge_mask", snap.edge_mask, shape=(*lead, "E"), dtype=jnp.bool_, sizes=sizes
    )
    if not isinstance(edges, jax.core.Tracer) and not isinstance(mask, jax.core.Tracer):
        valid = np.asarray(edges)[np.asarray(mask)]
        check_ids(f"{name}.edges", valid, present.shape[-1], what="node slots")
    # the simulator's buffers are int32 (slots < MAX_SLOTS fit): an int64 array from the
    # caller would otherwise meet them under strict dtype promotion
    edges = edges.astype(jnp.int32)
    return Snapshot(present=present, arrived=arrived, edges=edges, edge_mask=mask)


def _saturating_cumsum(x, cap):
    return jax.lax.associative_scan(lambda a, b: jnp.minimum(a + b, cap), x)


def _bernoulli_positions(key, prob, total, k):
    """Positions in `[0, total)` of successes of iid Bernoulli(prob) trials.

    Exact up to floating point: gaps between successes are geometric. Returns
    `(positions (k,), valid (k,), overflow)`; overflow means that `k` successes
    were found before the end, so more may have been missed.
    """
    u = jax.random.uniform(key, (k,), dtype=_float_dtype(), minval=1e-30, maxval=1.0)
    log1m = jnp.log1p(-jnp.clip(prob, 0.0, 1.0))
    safe = jnp.where(log1m < 0, log1m, -1.0)
    gap = jnp.where(log1m < 0, jnp.floor(jnp.log(u) / safe), jnp.inf)
    totalf = total.astype(_float_dtype())
    gap = jnp.clip(gap, 0.0, totalf).astype(jnp.int32)
    cum = _saturating_cumsum(gap + 1, total + 1)
    pos = cum - 1
    valid = pos < total
    return pos, valid, valid[-1]


def _unrank_pairs(pos, tri2):
    j = jnp.searchsorted(tri2, pos, side="right").astype(jnp.int32) - 1
    i = pos - tri2[j]
    return i, j


def _tables(n_slots):
    r = np.arange(n_slots + 1, dtype=np.int64)
    tri2 = r * (r - 1) // 2
    tet3 = r * (r - 1) * (r - 2) // 6
    return jnp.asarray(tri2, jnp.int32), jnp.asarray(tet3, jnp.int32)


def _node_step(params, present, key):
    ks, ka = jax.random.split(key)
    n_slots = present.shape[0]
    stay = jax.random.uniform(ks, (n_slots,), dtype=_float_dtype()) >= params.departure_prob
    survive = present & stay
    arrivals = jax.random.poisson(ka, params.arrival_rate, dtype=jnp.int32)
    free = ~survive
    rank = jnp.cumsum(free, dtype=jnp.int32)
    arrived = free & (rank <= arrivals)
    overflow = arrivals > jnp.sum(free, dtype=jnp.int32)
    return survive, arrived, survive | arrived, overflow


def _edge_step(params, edges, edge_mask, survive, present_next, key, capacity: Capacity):
    """Edges at `t + 1` given `G_t`, the survivors and the node set `V_{t+1}`."""
    n_slots = capacity.num_slots
    sentinel = n_slots * n_slots
    kp, k2, k3 = jax.random.split(key, 3)
    u, v = edges[:, 0], edges[:, 1]
    coin = jax.random.uniform(kp, edge_mask.shape, dtype=_float_dtype())
    keep = edge_mask & survive[u] & survive[v] & (coin < params.persistence)

    n = jnp.sum(present_next, dtype=jnp.int32)
    nf = jnp.maximum(n, 1).astype(_float_dtype())
    a = jnp.clip(params.formation / nf, 0.0, 1.0)
    g = jnp.clip(params.closure / (nf * nf), 0.0, 1.0)
    slots = jnp.nonzero(present_next, size=n_slots, fill_value=0)[0].astype(jnp.int32)
    tri2, tet3 = _tables(n_slots)

    m2 = tri2[n]
    pos2, ok2, of2 = _bernoulli_positions(k2, a, m2, capacity.max_new_pairs)
    i2, j2 = _unrank_pairs(jnp.where(ok2, pos2, 0), tri2)
    pair_keys = jnp.where(ok2, slots[i2] * n_slots + slots[j2], sentinel)

    m3 = tet3[n]
    pos3, ok3, of3 = _bernoulli_positions(k3, g, m3, capacity.max_groups)
    pos3 = jnp.where(ok3, pos3, 0)
    kk = jnp.searchsorted(tet3, pos3, side="right").astype(jnp.int32) - 1
    i3, j3 = _unrank_pairs(pos3 - tet3[kk], tri2)
    si, sj, sk = slots[i3], slots[j3], slots[kk]
    group_keys = jnp.concatenate(
        [
            jnp.where(ok3, si * n_slots + sj, sentinel),
            jnp.where(ok3, si * n_slots + sk, sentinel),
            jnp.where(ok3, sj * n_slots + sk, sentinel),
        ]
    )
    old_keys = jnp.where(keep, u * n_slots + v, sentinel)
    keys = jnp.sort(jnp.concatenate([old_keys, pair_keys, group_keys]))
    first = (keys < sentinel) & jnp.concatenate([jnp.ones((1,), bool), keys[1:] != keys[:-1]])
    n_edges = jnp.sum(first, dtype=jnp.int32)
    keys = jnp.sort(jnp.where(first, keys, sentinel))[: capacity.max_edges]
    mask = keys < sentinel
    new_edges = jnp.stack(
        [jnp.where(mask, keys // n_slots, 0), jnp.where(mask, keys % n_slots, 0)], -1
    )
    overflow = of2 | of3 | (n_edges > capacity.max_edges)
    return new_edges.astype(jnp.int32), mask, overflow


def transition(
    params: TemporalNetworkParams,
    snapshot: Snapshot,
    present_next: Bool[Array, " N"],
    *,
    key: PRNGKeyArray,
    capacity: Capacity,
) -> tuple[Snapshot, Bool[Array, ""]]:
    """Edge step of the model from an observed snapshot to a given next node set.

    Used for one-step-ahead goodness of fit on real data: the node process is
    taken as observed (`present_next`, with survivors = present at both times),
    and edges evolve by persistence, sparse formation and group closure.

    `snapshot` is an unbatched `Snapshot` over `capacity.num_slots` slots and
    `present_next` a `(N,)` bool array (a `ValueError` naming the argument otherwise).

    **Returns:** `(next snapshot, overflow flag)`.
    """
    check_params(params)
    snapshot = check_snapshot("snapshot", snapshot, batched=False, num_slots=capacity.num_slots)
    present_next = as_array(
        "present_next", present_next, shape=(capacity.num_slots,), dtype=jnp.bool_
    )
    survive = snapshot.present & present_next
    edges, mask, overflow = _edge_step(
        params, snapshot.edges, snapshot.edge_mask, survive, present_next, key, capacity
    )
    nxt = Snapshot(
        present=present_next, arrived=present_next & ~survive, edges=edges, edge_mask=mask
    )
    return nxt, overflow


def _step(params, snap: Snapshot, key, capacity):
    kn, ke = jax.random.split(key)
    survive, arrived, present, of_n = _node_step(params, snap.present, kn)
    edges, mask, of_e = _edge_step(
        params, snap.edges, snap.edge_mask, survive, present, ke, capacity
    )
    return Snapshot(present=present, arrived=arrived, edges=edges, edge_mask=mask), of_n | of_e


def initial_snapshot(params: TemporalNetworkParams, capacity: Capacity) -> Snapshot:
    """`round(lambda / q)` nodes (clipped to the slots), no edges."""
    n0 = jnp.clip(jnp.round(stationary_mean_size(params)), 0, capacity.num_slots)
    present = jnp.arange(capacity.num_slots, dtype=jnp.int32) < n0.astype(jnp.int32)
    return Snapshot(
        present=present,
        arrived=present,
        edges=jnp.zeros((capacity.max_edges, 2), jnp.int32),
        edge_mask=jnp.zeros((capacity.max_edges,), bool),
    )


def run_chain(params, n_steps, key, capacity, burn_in, per_step):
    """Scan the chain: burn-in, then `n_steps` steps applying `per_step(prev, next)`."""
    k0, k1 = jax.random.split(key)

    def burn(carry, k):
        snap, of = carry
        nxt, of2 = _step(params, snap, k, capacity)
        return (nxt, of | of2), None

    init = (initial_snapshot(params, capacity), jnp.zeros((), bool))
    if burn_in > 0:
        init, _ = jax.lax.scan(burn, init, jax.random.split(k0, burn_in))

    def body(carry, k):
        snap, of = carry
        nxt, of2 = _step(params, snap, k, capacity)
        return (nxt, of | of2), per_step(snap, nxt)

    (last, overflow), out = jax.lax.scan(body, init, jax.random.split(k1, n_steps))
    return init[0], out, overflow


def simulate(
    params: TemporalNetworkParams,
    n_steps: int,
    *,
    key: PRNGKeyArray,
    capacity: Capacity,
    burn_in: int = 0,
) -> Snapshot:
    """Simulate `n_steps + 1` snapshots of the model (P3).

    **Arguments:**

    - `params`: a `TemporalNetworkParams`.
    - `n_steps`: static number of transitions, in [1, `MAX_STEPS`]; the snapshots must
      fit in memory (a `ValueError` naming `n_steps` otherwise).
    - `key`: PRNG key (keyword-only).
    - `capacity`: static buffer sizes (`default_capacity(params)`).
    - `burn_in`: static number of discarded initial steps, in [0, `MAX_STEPS`].

    **Returns:** a `Snapshot` with leading time axis `n_steps + 1`. Raises
    (`equinox.error_if`) when a buffer overflowed.
    """
    check_params(params)
    n_steps, burn_in = _check_steps(n_steps, burn_in)
    per_step = 2 * capacity.num_slots + 3 * capacity.max_edges  # int32/bool entries kept
    check_memory("n_steps", 4.0 * (n_steps + 1) * per_step)
    first, rest, overflow = _simulate_jit(params, n_steps, key, capacity, burn_in)
    seq = jax.tree.map(lambda a, b: jnp.concatenate([a[None], b]), first, rest)
    return eqx.error_if(seq, overflow, "simulate: a buffer overflowed; enlarge the Capacity")


@eqx.filter_jit
def _simulate_jit(params, n_steps, key, capacity, burn_in):
    return run_chain(params, n_steps, key, capacity, burn_in, lambda prev, nxt: nxt)
