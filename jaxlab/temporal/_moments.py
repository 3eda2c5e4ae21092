"""Method-of-moments estimation from cycle counts, with asymptotic covariance (P3).

Estimating equations. For every transition `t -> t + 1` with `n' = n_{t+1}`,
`a = alpha / n'`, `g = gamma / n'^2` and the fresh-edge probabilities
`f_k = 1 - (1 - a)(1 - g)^(n' - k)` (a pair gets a fresh edge, from its own
coin or from one of the `n' - k` groups containing it that are not excluded):

    E[s_t        | F_t] = (1 - q) n_t                             (survivors)
    E[A_{t+1}    | F_t] = lambda                                  (arrivals)
    E[P_t        | F_t, V_{t+1}] = e^s (1 - (1 - p)(1 - f_2))     (persisted edges)
    E[m_{t+1}    | F_t, V_{t+1}] = E[P_t | ...] + (C(n', 2) - e^s) f_2
    E[tri_{t+1}  | F_t, V_{t+1}] = sum_k T_k (g + (1 - g) h_1^k h_0^(3-k))

with `h_1 = p + (1 - p) f_3`, `h_0 = f_3`, and `T_k` the number of triples of
`V_{t+1}` spanning `k` edges of the survivor graph `G_t^s`:
`T_3 = tri^s`, `T_2 = wedges^s - 3 tri^s`, `T_1 = e^s (n' - 2) - 2 T_2 - 3 T_3`,
`T_0 = C(n', 3) - T_1 - T_2 - T_3`. Given no group on a triple, its three
pairs are independent, so these are exact, not asymptotic, expansions; the
residuals `psi_t` are martingale differences. The node part is solved in
closed form; `(p, alpha, gamma)` by Newton's method (optimistix). The
asymptotic covariance is the sandwich `J^-1 S J^-T / T` with
`J = E[d psi / d theta]`, `S = E[psi psi^T]` (no autocovariance terms for
martingale differences). `plugin_covariance` evaluates `J` and `S` on chains
simulated at the estimate (the paper's simulation-based plug-in);
`sandwich_covariance` evaluates them on the observed transitions.
"""

from __future__ import annotations

import dataclasses

import equinox as eqx
import jax
import jax.core
import jax.numpy as jnp
import numpy as np
import optimistix as optx
from jaxtyping import Array, Bool, Float, PRNGKeyArray
from scipy import stats as sps

from .._core import as_array, check_memory, check_real, check_size
from ._model import MAX_STEPS, Capacity, TemporalNetworkParams, default_capacity
from ._stats import TransitionStats, simulate_transitions

__all__ = [
    "MomentEstimate",
    "moment_means",
    "estimating_functions",
    "estimate_moments",
    "sandwich_covariance",
    "plugin_covariance",
    "confidence_intervals",
]


def _simulable(theta: Float[Array, " 5"]) -> TemporalNetworkParams:
    """`theta` clipped into the parameter space the simulator accepts."""
    return TemporalNetworkParams.from_vector(
        jnp.stack(
            [
                jnp.maximum(theta[0], 1e-6),
                jnp.clip(theta[1], 1e-6, 1.0),
                jnp.clip(theta[2], 0.0, 1.0),
                jnp.maximum(theta[3], 0.0),
                jnp.maximum(theta[4], 0.0),
            ]
        )
    )


def _comb2(n):
    return n * (n - 1.0) / 2.0


def _comb3(n):
    return n * (n - 1.0) * (n - 2.0) / 6.0


def moment_means(
    edge_theta: Float[Array, 3], stats: TransitionStats
) -> tuple[Float[Array, "*T"], Float[Array, "*T"], Float[Array, "*T"]]:
    """Conditional means of (persisted edges, edges, triangles) at `t + 1`.

    **Arguments:**

    - `edge_theta`: `(p, alpha, gamma)`.
    - `stats`: `TransitionStats` (any leading shape).

    **Returns:** `(E[P_t], E[m_{t+1}], E[tri_{t+1}])`, each shaped like `stats.size`.
    A NaN/inf `edge_theta` or count raises a `ValueError` naming it.
    """
    edge_theta = as_array("edge_theta", edge_theta, shape=(3,), dtype=jnp.floating, finite=True)
    stats = _check_stats_values(stats)
    p, alpha, gamma = edge_theta[0], edge_theta[1], edge_theta[2]
    n = stats.next_size
    has = n > 0
    n_safe = jnp.where(has, n, 1.0)
    a = jnp.where(has, alpha / n_safe, 0.0)
    g = jnp.where(has, gamma / (n_safe * n_safe), 0.0)
    f2 = 1.0 - (1.0 - a) * (1.0 - g) ** jnp.maximum(n - 2.0, 0.0)
    f3 = 1.0 - (1.0 - a) * (1.0 - g) ** jnp.maximum(n - 3.0, 0.0)
    e_s, w_s, t_s = stats.surv_edges, stats.surv_wedges, stats.surv_triangles
    keep1 = 1.0 - (1.0 - p) * (1.0 - f2)
    mean_p = e_s * keep1
    mean_m = mean_p + (_comb2(n) - e_s) * f2
    h1 = p + (1.0 - p) * f3
    h0 = f3
    t3 = t_s
    t2 = w_s - 3.0 * t_s
    t1 = e_s * (n - 2.0) - 2.0 * t2 - 3.0 * t3
    t0 = jnp.where(n >= 3, _comb3(n), 0.0) - t1 - t2 - t3
    mean_t = (
        t3 * (g + (1.0 - g) * h1**3)
        + t2 * (g + (1.0 - g) * h1**2 * h0)
        + t1 * (g + (1.0 - g) * h1 * h0**2)
        + t0 * (g + (1.0 - g) * h0**3)
    )
    return mean_p, mean_m, mean_t


def estimating_functions(theta: Float[Array, 5], stats: TransitionStats) -> Float[Array, "*T 5"]:
    """Weighted residuals `psi_t(theta)` (order of `PARAM_NAMES`), zero-mean at the truth.

    The five components are: arrivals - lambda; survivors - (1 - q) n_t;
    persisted - E[persisted]; edges - E[edges]; triangles - E[triangles].
    A NaN/inf `theta` or count raises a `ValueError` naming it.
    """
    theta = as_array("theta", theta, shape=(5,), dtype=jnp.floating, finite=True)
    stats = _check_stats_values(stats)
    lam, q = theta[0], theta[1]
    mean_p, mean_m, mean_t = moment_means(theta[2:], stats)
    psi = jnp.stack(
        [
            stats.arrivals - lam,
            stats.survivors - (1.0 - q) * stats.size,
            stats.persisted - mean_p,
            stats.next_edges - mean_m,
            stats.next_triangles - mean_t,
        ],
        axis=-1,
    )
    return psi * stats.weight[..., None]


class MomentEstimate(eqx.Module):
    """Result of `estimate_moments`.

    - `theta`: `(5,)` estimates in the order of `PARAM_NAMES`.
    - `converged`: the Newton solve met its tolerance.
    - `condition`: condition number of the (scaled) Jacobian of the edge
      equations; large values mean (near) non-identifiability.
    - `identifiable`: the data determine all five parameters (survivor edges
      exist, triples exist, the Jacobian is well conditioned).
    - `n_transitions`: total weight of the transitions used.
    """

    theta: Float[Array, 5]
    converged: Bool[Array, ""]
    condition: Float[Array, ""]
    identifiable: Bool[Array, ""]
    n_transitions: Float[Array, ""]

    @property
    def params(self) -> TemporalNetworkParams:
        return TemporalNetworkParams.from_vector(self.theta)


def _flatten(stats: TransitionStats) -> TransitionStats:
    return jax.tree.map(lambda x: jnp.reshape(x, (-1,)), stats)


def _check_stats_values(stats: TransitionStats) -> TransitionStats:
    """A `TransitionStats` whose concrete fields are finite non-negative whole counts
    (weights in [0, 1]), returned with its fields as arrays: a `ValueError` naming
    `stats.<field>` otherwise (a plain list is taken as an array)."""
    if not isinstance(stats, TransitionStats):
        raise ValueError(f"stats: expected a TransitionStats, received {type(stats).__name__}")
    if not isinstance(stats.weight, jax.core.Tracer):
        arrays = {}
        for field in dataclasses.fields(stats):
            x = getattr(stats, field.name)
            if isinstance(x, jax.core.Tracer):
                arrays[field.name] = x
                continue
            x = np.asarray(x)
            if x.dtype.kind not in "biuf":
                raise ValueError(f"stats.{field.name}: expected real counts, received {x.dtype}")
            if not np.all(np.isfinite(x)) or np.any(x < 0):
                raise ValueError(f"stats.{field.name}: expected finite non-negative counts")
            if field.name != "weight" and np.any(x != np.round(x)):
                raise ValueError(f"stats.{field.name}: expected whole counts, received a fraction")
            # whole counts computed in floating point, as the simulator's statistics are
            arrays[field.name] = jnp.asarray(x, float) if x.dtype.kind in "biu" else jnp.asarray(x)
        stats = TransitionStats(**arrays)
    shape = np.shape(stats.size)
    for field in dataclasses.fields(stats):
        got = np.shape(getattr(stats, field.name))
        if got != shape:
            raise ValueError(
                f"stats.{field.name}: expected shape {shape} (of stats.size), got {got}"
            )
    w = stats.weight
    if not isinstance(w, jax.core.Tracer) and np.any(np.asarray(w) > 1):
        raise ValueError(f"stats.weight: expected weights in [0, 1], received max {np.max(w)}")
    return stats


def _check_stats(stats: TransitionStats) -> TransitionStats:
    stats = _check_stats_values(stats)
    stats = _flatten(stats)
    if stats.size.shape[0] < 1:
        raise ValueError("stats: expected at least one transition")
    if not isinstance(stats.weight, jax.core.Tracer) and float(np.sum(stats.weight)) <= 0:
        raise ValueError("stats: all transitions have weight 0 (empty data)")
    return stats


@eqx.filter_jit
def _estimate(stats: TransitionStats) -> MomentEstimate:
    w = stats.weight
    wsum = jnp.sum(w)
    lam = jnp.sum(w * stats.arrivals) / wsum
    size_sum = jnp.sum(w * stats.size)
    q = 1.0 - jnp.sum(w * stats.survivors) / jnp.where(size_sum > 0, size_sum, 1.0)

    n = stats.next_size
    n_safe = jnp.maximum(n, 1.0)
    es_sum = jnp.sum(w * stats.surv_edges)
    p0 = jnp.clip(jnp.sum(w * stats.persisted) / jnp.maximum(es_sum, 1.0), 0.02, 0.98)
    denom = jnp.sum(w * (_comb2(n) - stats.surv_edges) / n_safe)
    c0 = jnp.maximum(jnp.sum(w * (stats.next_edges - stats.persisted)) / denom, 1e-3)
    new_tri = jnp.sum(w * (stats.next_triangles - p0**3 * stats.surv_triangles))
    gamma0 = jnp.clip(new_tri / jnp.sum(w * _comb3(n) / n_safe**2), 0.0, 0.9 * c0)
    alpha0 = jnp.maximum(c0 - gamma0, 0.1 * c0)
    y0 = jnp.stack([p0, alpha0, gamma0])

    obs = jnp.stack(
        [
            jnp.sum(w * stats.persisted),
            jnp.sum(w * stats.next_edges),
            jnp.sum(w * stats.next_triangles),
        ]
    )

    scale = jnp.maximum(obs, 1.0)

    def equations(y, _):
        mp, mm, mt = moment_means(y, stats)
        means = jnp.stack([jnp.sum(w * mp), jnp.sum(w * mm), jnp.sum(w * mt)])
        return (obs - means) / scale

    tol = 1e-9 if y0.dtype == jnp.float64 else 1e-5
    sol = optx.root_find(equations, optx.Newton(rtol=tol, atol=tol), y0, max_steps=100, throw=False)
    edge = sol.value
    jac = jax.jacfwd(equations)(edge, None)
    sv = jnp.linalg.svd(jac, compute_uv=False)
    cond = sv[0] / jnp.maximum(sv[-1], jnp.finfo(sv.dtype).tiny)
    theta = jnp.concatenate([jnp.stack([lam, q]), edge])
    ok = sol.result == optx.RESULTS.successful
    resid = jnp.max(jnp.abs(equations(edge, None)))
    converged = ok | (resid < 10 * tol)
    identifiable = (es_sum > 0) & (jnp.sum(w * _comb3(n)) > 0) & (cond < 1e8) & (size_sum > 0)
    return MomentEstimate(
        theta=theta,
        converged=converged,
        condition=cond,
        identifiable=identifiable,
        n_transitions=wsum,
    )


def estimate_moments(stats: TransitionStats) -> MomentEstimate:
    """Method-of-moments estimate of `(lambda, q, p, alpha, gamma)` from cycle counts (P3).

    **Arguments:**

    - `stats`: `TransitionStats` of the observed transitions (any leading shape;
      several chains may be pooled by stacking).

    **Returns:** a `MomentEstimate`; check `converged` and `identifiable`.
    """
    return _estimate(_check_stats(stats))


@eqx.filter_jit
def _sandwich_parts(theta, stats):
    psi = estimating_functions(theta, stats)
    wsum = jnp.sum(stats.weight)
    jac = jax.jacfwd(lambda th: jnp.sum(estimating_functions(th, stats), axis=0))(theta) / wsum
    meat = psi.T @ psi / wsum
    return jac, meat, wsum


def _sandwich(jac, meat, n):
    jinv = jnp.linalg.inv(jac)
    return jinv @ meat @ jinv.T / n


def sandwich_covariance(theta: Float[Array, 5], stats: TransitionStats) -> Float[Array, "5 5"]:
    """Empirical sandwich covariance `J^-1 S J^-T / T` of the estimator on observed data.

    **Arguments:** `theta` `(5,)` (the estimate), `stats` (the observed transitions).

    **Returns:** `(5, 5)` covariance of the estimate.
    """
    theta = as_array("theta", theta, shape=(5,), dtype=jnp.floating, finite=True)
    stats = _check_stats(stats)
    jac, meat, wsum = _sandwich_parts(theta, stats)
    return _finite_covariance(_sandwich(jac, meat, wsum), "stats")


def _finite_covariance(cov, name: str):
    """A concrete covariance with NaN/inf (a singular Jacobian: the data carry no
    information on some parameter) is a `ValueError` naming what to enlarge, never a
    silent NaN matrix."""
    if not isinstance(cov, jax.core.Tracer) and not bool(jnp.all(jnp.isfinite(cov))):
        raise ValueError(
            f"{name}: the estimating functions' Jacobian is singular on these transitions "
            "(too few transitions, or no edges/triangles): the covariance is undefined"
        )
    return cov


def plugin_covariance(
    theta: Float[Array, " 5"],
    n_transitions,
    *,
    key: PRNGKeyArray,
    n_chains: int = 4,
    n_steps: int = 500,
    burn_in: int | None = None,
    capacity: Capacity | None = None,
) -> Float[Array, "5 5"]:
    """Simulation-based plug-in covariance of the estimator (P3).

    Simulates `n_chains` stationary chains of `n_steps` transitions at the
    estimate, evaluates `J = E[d psi / d theta]` and `S = E[psi psi^T]` on them,
    and returns `J^-1 S J^-T / n_transitions`. With `capacity` and `burn_in`
    given it is traceable (`jit`/`vmap` over estimates and keys).

    **Arguments:**

    - `theta`: `(5,)` estimate (clipped into the parameter space to simulate).
    - `n_transitions`: number (total weight) of observed transitions.
    - `key`: PRNG key; `n_chains`, `n_steps`: simulation size (positive ints, at most
      `MAX_STEPS`; chains too short to see every statistic make the Jacobian singular,
      a `ValueError` naming `n_steps`);
      `burn_in`: default `5 / q` steps (needs a concrete `theta`);
      `capacity`: default `default_capacity` at the estimate (concrete `theta`).

    **Returns:** `(5, 5)` covariance.
    """
    theta = as_array("theta", theta, shape=(5,), dtype=jnp.floating, finite=True)
    if not isinstance(n_transitions, jax.core.Tracer):
        check_real("n_transitions", n_transitions, low=0.0, low_inclusive=False)
    n_chains = check_size("n_chains", n_chains, cap=MAX_STEPS, why="MAX_STEPS")
    n_steps = check_size("n_steps", n_steps, cap=MAX_STEPS, why="MAX_STEPS")
    check_memory("n_chains", 4.0 * 13 * n_chains * n_steps)
    sim = _simulable(theta)
    if capacity is None:
        capacity = default_capacity(sim)
    if burn_in is None:
        burn_in = int(min(5.0 / max(float(sim.departure_prob), 1e-3), 2000))
    keys = jax.random.split(key, n_chains)
    stats = jax.vmap(
        lambda k: simulate_transitions(sim, n_steps, key=k, capacity=capacity, burn_in=burn_in)
    )(keys)
    jac, meat, _ = _sandwich_parts(sim.as_vector(), _flatten(stats))
    cov = _sandwich(jac, meat, jnp.asarray(n_transitions, jac.dtype))
    return _finite_covariance(cov, "n_steps")


def confidence_intervals(
    theta: Float[Array, 5], covariance: Float[Array, "5 5"], *, level: float = 0.95
) -> Float[Array, "5 2"]:
    """Normal-approximation intervals `theta +- z sqrt(diag(cov))`.

    **Returns:** `(5, 2)` array of (low, high).
    """
    if not 0.0 < level < 1.0:
        raise ValueError(f"level: expected a value in (0, 1), received {level}")
    theta = as_array("theta", theta, shape=(5,), dtype=jnp.floating, finite=True)
    covariance = as_array("covariance", covariance, shape=(5, 5), dtype=jnp.floating, finite=True)
    z = float(sps.norm.ppf(0.5 + level / 2.0))
    se = jnp.sqrt(jnp.clip(jnp.diagonal(covariance), 0.0, None))
    return jnp.stack([theta - z * se, theta + z * se], axis=-1)
