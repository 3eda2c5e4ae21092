"""Exact Monte-Carlo goodness of fit of count series against model replicates (P3).

The observed series and `R` replicates simulated from the fitted model are `R + 1`
samples that are exchangeable when the model generated the data. Each sample is
scored against the mean and variance of the *other* `R` samples (leave one out),
so the observed series and every replicate are scored by the same rule, and the
Monte-Carlo p-value `(1 + #{replicates scoring >= observed}) / (R + 1)` is exact:
`P(p <= a) <= a` for every `a`, with equality at `a = k / (R + 1)` when scores do
not tie. (Scoring each replicate against a mean and variance that include it, as
a naive version does, shrinks the replicates' scores and rejects a true model too
often: about 20% at nominal 5% with `R = 39`.)
"""

from __future__ import annotations

import equinox as eqx
import jax
import jax.core
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Bool, Float, Int, PRNGKeyArray

from .._core import (
    as_array,
    check_array,
    check_finite,
    check_ids,
    check_memory,
    check_positive_int,
)
from ._cycles import cycle_counts
from ._model import (
    Capacity,
    Snapshot,
    TemporalNetworkParams,
    check_params,
    check_snapshot,
    transition,
)
from ._moments import _estimate, _simulable
from ._stats import TransitionStats, _transition_stats

__all__ = [
    "BootstrapGofResult",
    "GofResult",
    "bootstrap_gof",
    "monte_carlo_gof",
    "one_step_counts",
    "two_sided_pvalues",
]


class GofResult(eqx.Module):
    """Result of `monte_carlo_gof`.

    - `pvalues`: `(S,)` exact Monte-Carlo p-value of each statistic.
    - `pvalue`: the p-value of the sum of the `S` scores (all statistics jointly).
    - `observed`: `(S,)` score of the observed series.
    - `replicates`: `(R, S)` scores of the replicates (leave-one-out).
    """

    pvalues: Float[Array, " S"]
    pvalue: Float[Array, ""]
    observed: Float[Array, " S"]
    replicates: Float[Array, "R S"]


def _loo_scores(pooled: Float[Array, "M T S"], var_floor: float) -> Float[Array, "M S"]:
    m = pooled.shape[0]
    n = m - 1  # size of each leave-one-out reference set
    mean = jnp.mean(pooled, axis=0, keepdims=True)
    dev = pooled - mean
    ss = jnp.sum(dev**2, axis=0, keepdims=True)
    # leave-one-out: z_i - mean_{-i} = dev_i * m / n; SS_{-i} = SS - dev_i^2 * m / n
    resid = dev * (m / n)
    var_loo = (ss - dev**2 * (m / n)) / (n - 1)
    var_loo = jnp.maximum(var_loo, var_floor)
    return jnp.sum(resid**2 / var_loo, axis=1)


def monte_carlo_gof(
    observed: Float[Array, "T S"],
    replicates: Float[Array, "R T S"],
    *,
    var_floor: float = 0.25,
) -> GofResult:
    """Exact Monte-Carlo test of a series of statistics against model replicates.

    The score of a sample is `sum_t (z_t - mean_t)^2 / max(var_t, var_floor)`, with
    `mean_t`, `var_t` (ddof 1) taken over the other `R` samples (leave one out), per
    statistic. A small p-value says the observed series deviates from the model's
    one-step predictions more than the model's own draws do: read per statistic, it
    is a misfit diagnostic (which counts the model does not reproduce).

    Method: Monte-Carlo tests (Barnard 1963; Davison & Hinkley 1997, ch. 4), applied
    to the one-step-ahead cycle counts of the P3 temporal-network model.

    **Arguments:**

    - `observed`: `(T, S)` observed values of `S` statistics at `T` times.
    - `replicates`: `(R, T, S)` the same statistics simulated from the model, `R >= 2`.
    - `var_floor`: lower bound on the reference variance (integer counts can have a
      zero sample variance).

    **Returns:** a `GofResult` (p-values `(S,)` and joint, scores).
    """
    dt = jnp.result_type(float)
    observed = as_array("observed", observed, dtype=np.number)
    replicates = as_array("replicates", replicates, dtype=np.number)
    for name, v in (("observed", observed), ("replicates", replicates)):
        if jnp.iscomplexobj(v):  # the cast below would drop the imaginary part
            raise ValueError(f"{name}: expected real statistics, received dtype {v.dtype}")
    observed, replicates = observed.astype(dt), replicates.astype(dt)
    sizes = check_array("observed", observed, shape=("T", "S"))
    check_array("replicates", replicates, shape=(None, "T", "S"), sizes=sizes)
    if replicates.shape[0] < 2:
        raise ValueError(
            f"replicates: expected at least 2 replicates, received {replicates.shape[0]}"
        )
    check_finite("observed", observed)
    check_finite("replicates", replicates)
    if not var_floor > 0:
        raise ValueError(f"var_floor: expected a positive number, received {var_floor!r}")
    pooled = jnp.concatenate([observed[None], replicates], axis=0)
    scores = _loo_scores(pooled, float(var_floor))
    obs, rep = scores[0], scores[1:]
    m = pooled.shape[0]
    pvalues = (1 + jnp.sum(rep >= obs[None], axis=0, dtype=dt)) / m
    total = jnp.sum(scores, axis=1)
    pvalue = (1 + jnp.sum(total[1:] >= total[0], dtype=dt)) / m
    return GofResult(pvalues=pvalues, pvalue=pvalue, observed=obs, replicates=rep)


def _checked_snapshots_and_times(snapshots, times, capacity):
    """Validate a (T_all, slots) snapshot series against `capacity` and the time indices
    into it; returns `(snapshots, times as int array, T_all)`."""
    if snapshots.present.ndim != 2 or snapshots.present.shape[1] != capacity.num_slots:
        raise ValueError(
            f"snapshots: expected present of shape (T_all, {capacity.num_slots}), received "
            f"{snapshots.present.shape}"
        )
    snapshots = check_snapshot("snapshots", snapshots, batched=True)
    t_all = snapshots.present.shape[0]
    if isinstance(times, jax.core.Tracer):
        times = jnp.asarray(times)
        check_array("times", times, ndim=1, dtype=jnp.integer)
    else:
        ids = np.asarray(check_ids("times", times, max(t_all - 1, 0), what="time indices"))
        check_array("times", ids, ndim=1, dtype=np.integer)
        times = jnp.asarray(ids)
    return snapshots, times, t_all


def one_step_counts(
    params: TemporalNetworkParams,
    snapshots: Snapshot,
    times: Int[Array, " T"],
    *,
    key: PRNGKeyArray,
    capacity: Capacity,
    n_replicates: int,
) -> Float[Array, "R T 3"]:
    """Edge, triangle and 4-cycle counts of `G_{t+1}` simulated one step from `G_t`.

    For each time `t` in `times` the model's edge dynamics (`transition`) run one step
    from the snapshot `G_t` to the node set of `G_{t+1}` (the node process is taken as
    observed), independently `n_replicates` times: the model's one-step-ahead predictive
    draws, the replicates of `monte_carlo_gof` (P3).

    **Arguments:**

    - `params`: a `TemporalNetworkParams`.
    - `snapshots`: a `Snapshot` sequence with leading time axis `T_all` over
      `capacity.num_slots` node slots.
    - `times`: `(T,)` int indices `t` with `t + 1 < T_all`.
    - `key`: PRNG key (keyword-only).
    - `capacity`: static buffer sizes of the simulated graphs.
    - `n_replicates`: static number `R` of draws per time.

    **Returns:** `(R, T, 3)` float counts (edges, triangles, 4-cycles). Raises
    (`equinox.error_if`) when a buffer overflowed.
    """
    check_params(params)
    r = check_positive_int("n_replicates", n_replicates)
    # R x T one-step draws over the edge buffer
    check_memory("n_replicates", 16.0 * r * np.size(times) * capacity.max_edges)
    snapshots, times, t_all = _checked_snapshots_and_times(snapshots, times, capacity)
    if times.size and (int(times.min()) < 0 or int(times.max()) + 1 >= t_all):
        raise ValueError(
            f"times: expected indices in [0, {t_all - 2}], received min {int(times.min())} "
            f"and max {int(times.max())}"
        )
    pad = max(capacity.max_edges - snapshots.edges.shape[1], 0)
    padded = Snapshot(
        present=snapshots.present,
        arrived=snapshots.arrived,
        edges=jnp.pad(snapshots.edges, ((0, 0), (0, pad), (0, 0))),
        edge_mask=jnp.pad(snapshots.edge_mask, ((0, 0), (0, pad))),
    )
    counts, overflow = _one_step_counts_jit(params, padded, times, key, capacity, r)
    return eqx.error_if(
        counts, overflow, "one_step_counts: a buffer overflowed; enlarge the Capacity"
    )


@eqx.filter_jit
def _one_step_counts_jit(params, seq, times, key, capacity, n_replicates):
    def per_time(t, k):
        snap = jax.tree.map(lambda x: x[t], seq)
        nxt, overflow = transition(params, snap, seq.present[t + 1], key=k, capacity=capacity)
        c = cycle_counts(
            nxt.edges, nxt.edge_mask, num_nodes=capacity.num_slots, max_degree=capacity.max_degree
        )
        counts = jnp.stack([c.edges, c.triangles, c.four_cycles])
        return counts.astype(jnp.zeros(()).dtype), overflow

    def per_replicate(k):
        return jax.vmap(per_time)(times, jax.random.split(k, times.shape[0]))

    counts, overflow = jax.lax.map(per_replicate, jax.random.split(key, n_replicates))
    return counts, jnp.any(overflow)


class BootstrapGofResult(eqx.Module):
    """Result of `bootstrap_gof`.

    - `pvalues`: `(S,)` two-sided parametric-bootstrap p-values, one per statistic:
      `min(1, 2 min(upper, lower))`.
    - `upper`, `lower`: `(S,)` the one-sided p-values `(1 + #{D* >= D}) / (B + 1)` (the
      data vary more around the model's predictions than the model's own data do) and
      `(1 + #{D* <= D}) / (B + 1)` (less: too regular).
    - `observed`: `(S,)` dispersion index `D` of the observed transitions.
    - `replicates`: `(B, S)` dispersion indices of the bootstrap data sets.
    - `theta`: `(5,)` the estimate on the observed transitions (the generating value).
    - `theta_replicates`: `(B, 5)` the estimate re-computed on every bootstrap data set.
    - `converged`: `(B,)` the re-estimate converged.
    """

    pvalues: Float[Array, " S"]
    upper: Float[Array, " S"]
    lower: Float[Array, " S"]
    observed: Float[Array, " S"]
    replicates: Float[Array, "B S"]
    theta: Float[Array, " 5"]
    theta_replicates: Float[Array, "B 5"]
    converged: Bool[Array, " B"]


def two_sided_pvalues(
    observed: Float[Array, " S"], replicates: Float[Array, "B S"]
) -> tuple[Float[Array, " S"], Float[Array, " S"], Float[Array, " S"]]:
    """Two-sided Monte-Carlo p-values of `observed` among `replicates` (per column):
    `(two_sided, upper, lower)` with `upper = (1 + #{rep >= obs}) / (B + 1)`,
    `lower = (1 + #{rep <= obs}) / (B + 1)` and `two_sided = min(1, 2 min(upper, lower))`
    (doubling the smaller one-sided p-value; Davison & Hinkley 1997, sec. 4.2).

    **Arguments:** `observed` (S,) statistics of the data; `replicates` (B, S) the same
    statistics of B bootstrap data sets.

    **Returns:** `(two_sided, upper, lower)`, each (S,)."""
    sizes: dict[str, int] = {}
    observed = as_array(
        "observed", observed, shape=("S",), dtype=jnp.floating, sizes=sizes, finite=True
    )
    replicates = as_array(
        "replicates",
        replicates,
        shape=(None, "S"),
        dtype=jnp.floating,
        sizes=sizes,
        finite=True,
        nonempty=True,
    )
    dt = jnp.result_type(float)
    b = replicates.shape[0]
    upper = (1 + jnp.sum(replicates >= observed[None], axis=0, dtype=dt)) / (b + 1)
    lower = (1 + jnp.sum(replicates <= observed[None], axis=0, dtype=dt)) / (b + 1)
    return jnp.minimum(1.0, 2.0 * jnp.minimum(upper, lower)), upper, lower


def _counts3(st: TransitionStats) -> Float[Array, "*T 3"]:
    return jnp.stack([st.next_edges, st.next_triangles, st.next_four_cycles], axis=-1)


@eqx.filter_jit
def _bootstrap_gof_jit(seq, times, key, capacity, n_bootstrap, n_inner):
    prev = jax.tree.map(lambda x: x[times], seq)
    present_next = seq.present[times + 1]
    nxt_obs = jax.tree.map(lambda x: x[times + 1], seq)
    md = capacity.max_degree

    def stats_of(nxt):
        return jax.vmap(lambda a, b: _transition_stats(a, b, md, True))(prev, nxt)

    def one_step(params, k):
        """One draw of every transition: `G_{t+1}` from the observed `G_t`, `V_{t+1}`."""
        keys = jax.random.split(k, times.shape[0])
        return jax.vmap(lambda s, pn, kk: transition(params, s, pn, key=kk, capacity=capacity))(
            prev, present_next, keys
        )

    def dispersion(counts, theta, k):
        """Re-fit-free part: the model's one-step predictive moments at `theta` (from
        `n_inner` draws) and the dispersion index of `counts` around them."""
        params = _simulable(theta)

        def draw(kk):
            nxt, of = one_step(params, kk)
            st, of2 = stats_of(nxt)
            return _counts3(st), jnp.any(of) | jnp.any(of2)

        inner, of = jax.lax.map(draw, jax.random.split(k, n_inner))
        mean = jnp.mean(inner, axis=0)
        var = jnp.var(inner, axis=0, ddof=1)
        d = jnp.sum((counts - mean) ** 2, axis=0) / jnp.maximum(jnp.sum(var, axis=0), 1e-12)
        return d, jnp.any(of)

    k_obs, k_boot = jax.random.split(key)
    st_obs, of0 = stats_of(nxt_obs)
    est = _estimate(st_obs)
    d_obs, of1 = dispersion(_counts3(st_obs), est.theta, k_obs)
    params_obs = _simulable(est.theta)

    def replicate(k):
        k1, k2 = jax.random.split(k)
        nxt, of = one_step(params_obs, k1)
        st, of2 = stats_of(nxt)
        est_b = _estimate(st)
        d, of3 = dispersion(_counts3(st), est_b.theta, k2)
        return d, est_b.theta, est_b.converged, jnp.any(of) | jnp.any(of2) | of3

    d_rep, th_rep, conv, of_rep = jax.lax.map(replicate, jax.random.split(k_boot, n_bootstrap))
    overflow = jnp.any(of0) | of1 | jnp.any(of_rep)
    return d_obs, d_rep, est.theta, th_rep, conv, overflow


def bootstrap_gof(
    snapshots: Snapshot,
    times: Int[Array, " T"],
    *,
    key: PRNGKeyArray,
    capacity: Capacity,
    n_bootstrap: int,
    n_inner: int,
) -> BootstrapGofResult:
    """Parametric-bootstrap goodness of fit of the P3 model, re-estimating on every replicate.

    The data are the transitions `G_t -> G_{t+1}` at `times`, conditional on every `G_t`
    and node set `V_{t+1}` (the node process is taken as observed). The statistic of a
    data set is, per count (edges, triangles, 4-cycles of `G_{t+1}`; 4-cycles are not used
    by the estimator), the dispersion index

        D = sum_t (z_t - mu_t(theta))^2 / sum_t v_t(theta)

    with `theta` the method-of-moments estimate (`estimate_moments`) on that data set and
    `mu_t`, `v_t` the mean and variance of `n_inner` one-step model draws from `G_t` at
    `theta`: about `1 + 1 / n_inner` when the model fits; larger when the counts vary more
    around the model's one-step predictions than the model allows (or are biased), smaller
    when they are more regular than the model's own draws. The null distribution of `D`
    comes from `n_bootstrap` data sets simulated one step from every observed `G_t` at the
    observed estimate, each re-estimated and scored exactly as the observed data (Davison &
    Hinkley 1997, sec. 4.2.3: a parametric bootstrap test of a composite null), so fitting
    the moments on the tested data is accounted for. The p-value is two-sided: a series
    too close to the model's predictions is a misfit too.

    **Arguments:**

    - `snapshots`: a `Snapshot` sequence with leading time axis over `capacity.num_slots`.
    - `times`: `(T,)` int indices `t` with `t + 1` inside the sequence.
    - `key`: PRNG key (keyword-only).
    - `capacity`: static buffer sizes, large enough for draws at the re-estimates too.
    - `n_bootstrap`: static number `B >= 1` of bootstrap data sets.
    - `n_inner`: static number `>= 2` of one-step draws for each data set's predictive
      moments.

    **Returns:** a `BootstrapGofResult` (two-sided and one-sided p-values, statistics, the
    estimate and its `B` re-estimates). Raises (`equinox.error_if`) when a buffer
    overflowed.
    """
    b = check_positive_int("n_bootstrap", n_bootstrap)
    r = check_positive_int("n_inner", n_inner)
    if r < 2:
        raise ValueError(f"n_inner: expected at least 2 draws, received {r}")
    # B data sets x n_inner one-step draws per time over the edge buffer
    work = 16.0 * b * (r + 1) * max(np.size(times), 1) * capacity.max_edges
    check_memory("n_bootstrap" if b >= r else "n_inner", work)
    snapshots, times, t_all = _checked_snapshots_and_times(snapshots, times, capacity)
    if times.size < 2 or int(times.min()) < 0 or int(times.max()) + 1 >= t_all:
        raise ValueError(
            f"times: expected >= 2 indices in [0, {t_all - 2}], received {times.size} "
            f"in [{int(times.min()) if times.size else '-'}, "
            f"{int(times.max()) if times.size else '-'}]"
        )
    pad = max(capacity.max_edges - snapshots.edges.shape[1], 0)
    padded = Snapshot(
        present=snapshots.present,
        arrived=snapshots.arrived,
        edges=jnp.pad(snapshots.edges, ((0, 0), (0, pad), (0, 0))),
        edge_mask=jnp.pad(snapshots.edge_mask, ((0, 0), (0, pad))),
    )
    d_obs, d_rep, theta, th_rep, conv, overflow = _bootstrap_gof_jit(
        padded, times, key, capacity, b, r
    )
    two, upper, lower = two_sided_pvalues(d_obs, d_rep)
    res = BootstrapGofResult(
        pvalues=two,
        upper=upper,
        lower=lower,
        observed=d_obs,
        replicates=d_rep,
        theta=theta,
        theta_replicates=th_rep,
        converged=conv,
    )
    return eqx.error_if(res, overflow, "bootstrap_gof: a buffer overflowed; enlarge the Capacity")
