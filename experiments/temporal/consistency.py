"""P3: consistency, sqrt(T) rate and CI coverage of the cycle-count method of moments.

Replicate chains of the sparse size-varying model are simulated at known
parameters; the estimator is applied to prefixes of length T on a growing grid.
Reported: relative bias at the largest T, the log-log slope of RMSE vs T
(-0.5 for a sqrt(T)-consistent estimator), and the empirical coverage of 95%
intervals whose covariance is the simulation-based plug-in evaluated at each
replicate's own estimate (the paper's procedure), plus the same with the
empirical sandwich.

Each claim's interval is a percentile bootstrap over the replicate chains (a replicate,
with its estimates at every T and its plug-in interval, is the resampled unit; the
statistic is recomputed on each resample), `replicate_estimates`:

- bias: `max_i |mean_r (theta_ri - theta_i) / theta_i|` at the largest T;
- rate: `b + 1/2`, with `b` the mean over the five parameters of the least-squares slope
  of `log RMSE_i(T)` on `log T`, `RMSE_i(T) = sqrt(mean_r (theta_ri(T) - theta_i)^2)`
  (0 for the root-T rate);
- coverage: `mean_{r, i} 1{|theta_ri - theta_i| < 1.96 sd_ri} - 0.95`.
"""

from __future__ import annotations

import dataclasses

import equinox as eqx
import jax
import jax.numpy as jnp
import matplotlib.pyplot as plt
import numpy as np
from scipy import stats as sps
from tqdm import tqdm

from experiments._harness import Estimate, Result, RunContext, at_most, bootstrap, equivalent, log
from jaxlab.temporal import (
    PARAM_NAMES,
    TemporalNetworkParams,
    default_capacity,
    estimate_moments,
    plugin_covariance,
    sandwich_covariance,
    simulate_transitions,
)

NAME = "temporal_consistency"
PAPER = "P3"
DESCRIPTION = "MoM from cycle counts: bias -> 0, RMSE ~ T^-1/2, 95% plug-in CI coverage"


@dataclasses.dataclass(frozen=True)
class Config:
    """Settings of one run; the defaults are QUICK (2 CPU cores, minutes)."""

    # lambda, q, p, alpha, gamma (mean size 20)
    params: tuple[float, ...] = (1.5, 0.075, 0.6, 1.5, 1.0)
    t_grid: tuple[int, ...] = (50, 100, 200, 400)
    replicates: int = 64
    burn_in: int = 100
    plugin_chains: int = 2
    plugin_steps: int = 200
    # the claims' tolerances (the bands the claims have always used): |relative bias| at
    # the largest T below `bias_tol`; RMSE log-log slope within -0.5 +- `slope_margin`;
    # 95% CI coverage within 0.95 +- `coverage_margin`
    bias_tol: float = 0.05
    slope_margin: float = 0.1
    coverage_margin: float = 0.02
    # percentile-bootstrap resamples of the replicates behind each claim's interval
    n_boot: int = 2000


QUICK = Config()
# the smoke tier
TINY = Config(t_grid=(20, 40), replicates=4, burn_in=20, plugin_chains=2, plugin_steps=20)
FULL = Config(
    params=(4.0, 0.08, 0.6, 1.5, 1.0),
    t_grid=(100, 200, 400, 800, 1600, 3200),
    replicates=500,
    burn_in=200,
    plugin_chains=4,
    plugin_steps=800,
)


def full_work(config) -> float:
    """Simulated chain steps (data and plug-in chains), plus the compilations (a fixed 1.7e4:
    TINY's ~17 s; a chain step runs in ~1 ms here)."""
    burn, reps = config.burn_in, config.replicates
    data = reps * (config.t_grid[-1] + burn)
    plugin = reps * config.plugin_chains * (config.plugin_steps + burn)
    return 1.7e4 + data + plugin


def _prefix(stats, t):
    """The first `t` transitions, as weights (one shape, so one compilation for all t)."""
    mask = (jnp.arange(stats.weight.shape[-1]) < t).astype(stats.weight.dtype)
    return eqx.tree_at(lambda s: s.weight, stats, stats.weight * mask)


def _max_rel_bias(*rel, axis=-1):
    """`max_i |mean_r rel_i|` of the relative errors `rel_i` (one array per parameter,
    replicates along `axis`), vectorised over leading axes (a bootstrap statistic)."""
    return np.max(np.abs(np.stack([np.mean(r, axis=axis) for r in rel])), axis=0)


def _slope_statistic(grid):
    """The statistic `b + 1/2` on squared errors `sq_(t, i)` (one array per T of `grid`
    and parameter, T-major, replicates along `axis`): `b` the mean over parameters of
    the least-squares slope of `log RMSE` on `log T`."""
    x = np.log(np.asarray(grid, np.float64))
    xc = x - x.mean()

    def statistic(*sq, axis=-1):
        ms = np.stack([np.mean(c, axis=axis) for c in sq], axis=-1)
        log_rmse = 0.5 * np.log(ms.reshape(*ms.shape[:-1], len(grid), -1))
        slope = np.einsum("t,...ti->...i", xc, log_rmse) / np.sum(xc**2)
        return np.mean(slope, axis=-1) + 0.5

    return statistic


def replicate_estimates(
    thetas: dict[int, np.ndarray],
    theta0: np.ndarray,
    covered: np.ndarray,
    *,
    seed: int,
    n_boot: int,
) -> dict[str, Estimate]:
    """The claims' estimates with percentile-bootstrap intervals over the replicates.

    **Arguments:** `thetas` maps each T (ascending) to the `(replicates, 5)` estimates on
    the first T transitions; `theta0` the `(5,)` truth; `covered` the `(replicates, 5)`
    indicators that a replicate's 95% interval (largest T) covers the truth; `seed` and
    `n_boot` of the bootstrap.

    **Returns:** `{"bias": max |relative bias| at the largest T, "slope": RMSE log-log
    slope + 0.5, "coverage": coverage - 0.95}` (formulas in the module docstring).
    """
    grid = sorted(thetas)
    reps = {thetas[t].shape[0] for t in grid} | {covered.shape[0]}
    if len(grid) < 2 or len(reps) != 1 or reps.pop() < 2:
        raise ValueError(
            "thetas, covered: expected >= 2 T and one number (>= 2) of replicates, "
            f"received T {grid} and shapes {[thetas[t].shape for t in grid]}, {covered.shape}"
        )
    theta0 = np.asarray(theta0, np.float64)
    rel = (thetas[grid[-1]] - theta0) / theta0
    sq = [(thetas[t][:, i] - theta0[i]) ** 2 for t in grid for i in range(theta0.size)]
    cov = np.asarray(covered, np.float64).mean(axis=1) - 0.95
    return {
        "bias": bootstrap(tuple(rel.T), _max_rel_bias, seed=seed, n_resamples=n_boot),
        "slope": bootstrap(tuple(sq), _slope_statistic(grid), seed=seed, n_resamples=n_boot),
        "coverage": bootstrap(cov, seed=seed, n_resamples=n_boot),
    }


def run(config, key: jax.Array, ctx: RunContext) -> Result:
    truth = TemporalNetworkParams(*config.params)
    theta0 = np.asarray(truth.as_vector(), np.float64)
    grid = [int(t) for t in config.t_grid]
    reps = int(config.replicates)
    burn = int(config.burn_in)
    cap = default_capacity(truth, slack=1.5)
    k_sim, k_plug = jax.random.split(key)

    log.info("simulating %d chains of %d transitions", reps, grid[-1])
    chunk = 16
    parts = []
    keys = jax.random.split(k_sim, reps)
    for s in tqdm(range(0, reps, chunk), desc="simulate"):
        parts.append(
            jax.vmap(
                lambda k: simulate_transitions(truth, grid[-1], key=k, capacity=cap, burn_in=burn)
            )(keys[s : s + chunk])
        )
    stats = jax.tree.map(lambda *xs: jnp.concatenate(xs), *parts)

    est_fn = jax.jit(jax.vmap(lambda s: estimate_moments(s).theta))
    sand_fn = jax.jit(jax.vmap(lambda th, s: jnp.sqrt(jnp.diagonal(sandwich_covariance(th, s)))))
    thetas, sand_sd = {}, {}
    for t in tqdm(grid, desc="estimate"):
        sub = _prefix(stats, t)
        thetas[t] = np.asarray(est_fn(sub), np.float64)
        sand_sd[t] = np.asarray(sand_fn(jnp.asarray(thetas[t]), sub), np.float64)

    # simulation-based plug-in covariance at each replicate's own estimate (largest T)
    t_max = grid[-1]
    n_ch, n_st = int(config.plugin_chains), int(config.plugin_steps)

    def plug_sd(theta, k):
        cov = plugin_covariance(
            theta, float(t_max), key=k, n_chains=n_ch, n_steps=n_st, burn_in=burn, capacity=cap
        )
        return jnp.sqrt(jnp.diagonal(cov))

    pkeys = jax.random.split(k_plug, reps)
    plug_parts = []
    for s in tqdm(range(0, reps, chunk), desc="plug-in"):
        plug_parts.append(
            np.asarray(
                jax.vmap(plug_sd)(jnp.asarray(thetas[t_max][s : s + chunk]), pkeys[s : s + chunk])
            )
        )
    plugin_sd = np.concatenate(plug_parts).astype(np.float64)

    metrics: dict[str, float | Estimate] = {}
    err_max = thetas[t_max] - theta0
    for i, name in enumerate(PARAM_NAMES):
        metrics[f"mom_rel_bias_{name}"] = float(err_max[:, i].mean() / theta0[i])
    rmse = np.array(
        [[np.sqrt(np.mean((thetas[t][:, i] - theta0[i]) ** 2)) for i in range(5)] for t in grid]
    )
    slopes = [float(np.polyfit(np.log(grid), np.log(rmse[:, i]), 1)[0]) for i in range(5)]
    for i, name in enumerate(PARAM_NAMES):
        metrics[f"rmse_slope_{name}"] = slopes[i]
        metrics[f"rmse_{name}_T{t_max}"] = float(rmse[-1, i])
    metrics["rmse_slope"] = float(np.mean(slopes))
    covered = np.abs(err_max) < 1.96 * plugin_sd
    metrics["ci_coverage_95"] = float(covered.mean())
    for i, name in enumerate(PARAM_NAMES):
        metrics[f"ci_coverage_95_{name}"] = float(covered[:, i].mean())
    for t in grid:
        cov_t = np.abs(thetas[t] - theta0) < 1.96 * sand_sd[t]
        metrics[f"ci_coverage_95_sandwich_T{t}"] = float(cov_t.mean())
    mc_sd = err_max.std(axis=0, ddof=1)
    metrics["plugin_sd_over_mc_sd"] = float(np.mean(plugin_sd.mean(axis=0) / mc_sd))
    metrics["replicates"] = reps
    metrics["t_max"] = t_max
    cov = metrics["ci_coverage_95"]

    # figures: sampling distributions vs the normal limit; RMSE vs T
    fig, axes = plt.subplots(1, 5, figsize=(17, 3.2))
    zgrid = np.linspace(-4, 4, 200)
    for i, name in enumerate(PARAM_NAMES):
        z = err_max[:, i] / plugin_sd[:, i]
        axes[i].hist(z, bins=20, density=True, alpha=0.6, label="(est - true) / plug-in sd")
        axes[i].plot(zgrid, sps.norm.pdf(zgrid), "k-", label="N(0, 1)")
        axes[i].set_title(f"{name}, T={t_max}")
    axes[0].legend(fontsize=7)
    fig.tight_layout()
    fig2, ax = plt.subplots(figsize=(5, 4))
    for i, name in enumerate(PARAM_NAMES):
        ax.loglog(grid, rmse[:, i] / theta0[i], "o-", label=f"{name} (slope {slopes[i]:.2f})")
    ax.loglog(
        grid,
        rmse[0].mean() / theta0.mean() * (np.array(grid) / grid[0]) ** -0.5,
        "k--",
        label="T^-1/2",
    )
    ax.set_xlabel("T (transitions)")
    ax.set_ylabel("relative RMSE")
    ax.legend(fontsize=7)
    fig2.tight_layout()

    est = replicate_estimates(
        thetas,
        theta0,
        covered,
        seed=int(jax.random.randint(ctx.key("bootstrap"), (), 0, 2**31 - 1)),
        n_boot=int(config.n_boot),
    )
    for k, e in est.items():
        metrics[f"claim_{k}"] = e
    over = f"percentile bootstrap over {reps} replicate chains"
    claims = [
        at_most(
            est["bias"],
            config.bias_tol,
            null=f"a relative bias of {config.bias_tol:g} or more",
            claim="MoM estimators are consistent (bias vanishes)",
            paper="strong consistency",
            subject=f"max over 5 parameters of |mean relative bias| at T={t_max}",
            detail=f"{over}, the max recomputed per resample",
        ),
        equivalent(
            est["slope"],
            "RMSE log-log slope",
            "the root-T rate (slope -0.5)",
            config.slope_margin,
            claim="root-T asymptotic normality: RMSE ~ T^-1/2",
            paper="log-log slope -0.5",
            detail=f"compared: mean slope over 5 parameters minus (-0.5); mean slope "
            f"{metrics['rmse_slope']:.3f} (per parameter "
            + ", ".join(f"{s:.2f}" for s in slopes)
            + f") over T = {grid}; {over}, the slopes refitted per resample",
        ),
        equivalent(
            est["coverage"],
            "plug-in 95% CI coverage",
            "the nominal 0.95",
            config.coverage_margin,
            claim="simulation-based plug-in variance gives calibrated 95% CIs",
            paper="coverage ~0.95",
            detail=f"compared: coverage minus 0.95; coverage {cov:.3f} over {reps} replicates "
            f"x 5 parameters at T={t_max}; {over}",
        ),
    ]
    notes = (
        f"Synthetic data from the jaxlab.temporal model at (lambda, q, p, alpha, gamma) = "
        f"{list(config.params)}; {reps} replicate chains, burn-in {burn}. Plug-in covariance: "
        f"{n_ch} chains x {n_st} transitions simulated at each replicate's estimate."
    )
    return Result(
        metrics=metrics,
        claims=claims,
        figures={"sampling_distributions": fig, "rmse_vs_T": fig2},
        notes=notes,
    )
