"""P12 claim: spike-time anchors make the per-neuron input current recoverable.

Synthetic ground truth as in biophys_localize. The anchored fit (P12: rate-based
start from the sorted spike times, anchor + aligned-waveform terms) is compared
with its own starting current (spike times only, no fit: the baseline a fit must
beat), on the raw and on the low-passed current (the slow part that spike timing
identifies in a class-II HH cell). The ablation is 2 x 2: rate-based or constant
subthreshold start x anchored or trace-only loss, the same simulator, conductor,
optimiser and steps in every cell, so that the effect of the loss is separated
from that of the start (the trace loss is nearly flat in the current: the failure
the paper describes). All fits start from the triangulated positions.
"""

from __future__ import annotations

import dataclasses

import jax
import matplotlib
import numpy as np

from experiments._harness import (
    Estimate,
    Result,
    RunContext,
    all_of,
    at_least,
    paired_t,
    superior,
    t_mean,
)
from experiments.biophys import _setup as setup

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

NAME = "biophys_currents"
PAPER = "P12"
DESCRIPTION = "Recovered input currents and spike timing with vs without spike-time anchors"


@dataclasses.dataclass(frozen=True)
class Config(setup.BiophysConfig):
    """Settings of one run; the defaults are QUICK (2 CPU cores, minutes).

    `fit_steps` is the main anchored fit; the 2 x 2 ablation (start x loss) runs its four
    fits at `ablation_steps` each. The margin and the low-pass width (Gaussian s.d.) are
    fixed here, before the run (issue #34)."""

    n_neurons: int = 8
    spacing_um: float = 60.0
    fit_steps: int = 600
    ablation_steps: int = 150
    lowpass_ms: float = 10.0  # about one interspike interval at the cell's 57-100 Hz
    level: float = 0.95
    # superiority margin of the anchored over the trace-only loss, spike-match fraction
    # (issue #34, fixed before the run)
    ablation_match_margin: float = 0.3
    # the goals of the recovery claims (this repo's bars; the paper gives no number): mean
    # Pearson r of the (low-passed) current, and fraction of spikes matched within +-1 ms
    corr_bar: float = 0.9
    match_bar: float = 0.9
    # superiority margin of the fit's r over its spike-time-only start (0: any gain)
    gain_margin: float = 0.0


QUICK = Config()
# the smoke tier: two neurons, 150 ms, the main fit and the 2 x 2 ablation a few steps each
TINY = Config(n_neurons=2, duration_ms=150.0, fit_steps=4, ablation_steps=4)
FULL = Config(**setup.FULL_OVERRIDES, ablation_steps=300)


def full_work(config) -> float:
    """Simulated neuron-milliseconds over the five fits' steps (main fit + 2 x 2 ablation)."""
    return config.n_neurons * config.duration_ms * (config.fit_steps + 4 * config.ablation_steps)


STARTS = {"rate": True, "const": False}  # spike-time (f-I) start vs constant 0.2 nA
LOSSES = {"anchor": True, "trace": False}  # anchored loss vs trace-only loss


def _mean(ev, key):
    return float(np.mean(ev[key]))


def _t(x, level: float) -> Estimate:
    """`t_mean` over neurons; NaN (an untestable claim) where a correlation is undefined
    (a constant current)."""
    x = np.asarray(x, float)
    if not np.all(np.isfinite(x)):
        return Estimate(float("nan"), float("nan"), float("nan"), level, "t", x.size)
    return t_mean(x, level)


def _paired(a, b, level: float) -> Estimate:
    """`paired_t` over neurons; NaN where a value is undefined (as `_t`)."""
    a, b = np.asarray(a, float), np.asarray(b, float)
    if not (np.all(np.isfinite(a)) and np.all(np.isfinite(b))):
        return Estimate(float("nan"), float("nan"), float("nan"), level, "paired t", a.size)
    return paired_t(a, b, level)


def run(config, key: jax.Array, ctx: RunContext) -> Result:
    syn = setup.make_synthetic(config, key)
    base = setup.triangulate(syn)
    problem = setup.make_problem(syn, config)
    start = setup.start_result(
        problem, setup.start_params(syn, problem, rate_start=True, init_positions=base)
    )
    start_currents = np.asarray(start.currents)
    ev_start = setup.evaluate(syn, start, config.lowpass_ms)
    anchored = setup.fit_population(
        syn, config, ctx, anchored=True, init_positions=base, tag="anchored"
    )
    ev = setup.evaluate(syn, anchored, config.lowpass_ms)
    # 2 x 2 ablation, every cell at ablation_steps
    abl_cfg = dataclasses.replace(config, fit_steps=int(config.ablation_steps))
    cells, fits = {}, {}
    for s_name, rate in STARTS.items():
        for l_name, anchor in LOSSES.items():
            tag = f"abl_{s_name}_{l_name}"
            fits[(s_name, l_name)] = setup.fit_population(
                syn, abl_cfg, ctx, anchored=anchor, rate_start=rate, init_positions=base, tag=tag
            )
            cells[(s_name, l_name)] = setup.evaluate(syn, fits[(s_name, l_name)], config.lowpass_ms)
    corr_lp = _mean(ev, "corr_lp")
    corr_s, corr_lp_s, match_s = (_mean(ev_start, k) for k in ("corr", "corr_lp", "match"))
    lvl = config.level
    d_corr = _paired(ev["corr"], ev_start["corr"], lvl)
    d_lp = _paired(ev["corr_lp"], ev_start["corr_lp"], lvl)
    d_match = _paired(ev["match"], ev_start["match"], lvl)
    corr_t, corr_lp_t, match_t = (_t(ev[k], lvl) for k in ("corr", "corr_lp", "match"))
    n = len(syn.spikes)
    metrics = {
        "current_corr_mean": corr_t,
        "current_corr_lowpass_mean": corr_lp_t,
        "spike_match_frac": match_t,
        "current_corr_start": corr_s,
        "current_corr_lowpass_start": corr_lp_s,
        "spike_match_frac_start": match_s,
        "current_corr_gain": d_corr,
        "current_corr_lowpass_gain": d_lp,
        "spike_match_gain": d_match,
        "current_corr_min": float(ev["corr"].min()),
        "loc_err_um_mean": float(ev["err"].mean()),
        "n_true_spikes": int(sum(s.size for s in syn.spikes)),
        "peak_snr_median": float(np.median(syn.snr)),
    }
    for (s_name, l_name), e in cells.items():
        for k in ("corr", "corr_lp", "match", "err"):
            metrics[f"ablation_{k}_{s_name}_{l_name}"] = _mean(e, k)
    # the old single ablation (constant start + trace loss) under its old metric names
    metrics["current_corr_no_anchor"] = metrics["ablation_corr_const_trace"]
    metrics["spike_match_frac_no_anchor"] = metrics["ablation_match_const_trace"]
    metrics["loc_err_um_mean_no_anchor"] = metrics["ablation_err_const_trace"]
    # loss effect (anchor - trace) on spike match at each start, paired over neurons
    loss_effect = {
        s_name: _paired(cells[(s_name, "anchor")]["match"], cells[(s_name, "trace")]["match"], lvl)
        for s_name in STARTS
    }
    start_effect = {
        l_name: _paired(cells[("rate", l_name)]["match"], cells[("const", l_name)]["match"], lvl)
        for l_name in LOSSES
    }
    for s_name, e in loss_effect.items():
        metrics[f"ablation_loss_effect_match_{s_name}"] = e
    for l_name, e in start_effect.items():
        metrics[f"ablation_start_effect_match_{l_name}"] = e

    pct = f"{config.level:.0%}"
    grid = "; ".join(
        f"{s}+{ls}: r {metrics[f'ablation_corr_{s}_{ls}']:.2f}, "
        f"match {metrics[f'ablation_match_{s}_{ls}']:.2f}"
        for s in STARTS
        for ls in LOSSES
    )
    margin = float(config.ablation_match_margin)
    over = f"{pct} t over {n} neurons"
    goal_r = f"the goal r {config.corr_bar:g}"
    ablation_claim = (
        "without spike-time anchors the fit fails: the anchored loss beats the "
        f"trace-only loss from either start (spike match by > {margin:g})"
    )
    ablation_paper = "gradient descent without anchors lacks a useful signal"
    claims = [
        at_least(
            corr_t,
            config.corr_bar,
            null=goal_r,
            subject="mean Pearson r",
            claim=(
                f"recovered input current correlates with the truth (goal >= {config.corr_bar:g})"
            ),
            paper="time-varying latent input current recovered per neuron",
            detail=(
                f"{over}, after {config.fit_steps} steps; the spike-time-only start (inverse "
                f"f-I curve of the smoothed spike train) already has r = {corr_s:.2f}"
            ),
        ),
        superior(
            d_corr,
            "the anchored fit",
            "its spike-time-only start (no fit)",
            config.gain_margin,
            claim="the fit improves the current over its spike-time-only start",
            paper="the fit, not the spike times alone, recovers the current",
            detail=(
                f"Pearson r, paired over {n} neurons; low-passed (s.d. {config.lowpass_ms:g} "
                f"ms) r {corr_lp_s:.2f} -> {corr_lp:.2f}, gain {d_lp:+.2f}"
            ),
        ),
        at_least(
            corr_lp_t,
            config.corr_bar,
            null=goal_r,
            subject="mean low-passed Pearson r",
            claim=(
                f"the identifiable part, the low-passed current (s.d. {config.lowpass_ms:g} ms), "
                f"correlates with the truth (goal >= {config.corr_bar:g})"
            ),
            paper="time-varying latent input current recovered per neuron",
            detail=f"{over}; spike-time-only start {corr_lp_s:.2f}",
        ),
        at_least(
            match_t,
            config.match_bar,
            null=f"the goal {config.match_bar:g} of spikes matched",
            subject="fraction of true spikes matched",
            claim=(
                "fitted model reproduces the sorted spikes within +/-1 ms (goal >= "
                f"{config.match_bar:g})"
            ),
            paper="reproduces observed spatio-temporal activity",
            detail=(
                f"{over}, after {config.fit_steps} steps (start: {match_s:.2f}; gain "
                f"{d_match:+.2f}, {pct} paired t)"
            ),
        ),
        all_of(
            {
                f"{s_name} start": superior(
                    loss_effect[s_name],
                    "anchored loss",
                    "trace-only loss",
                    margin,
                    claim=ablation_claim,
                    paper=ablation_paper,
                )
                for s_name in STARTS
            },
            claim=ablation_claim,
            paper=ablation_paper,
            detail=(
                f"spike match paired over {n} neurons; 2 x 2 at {config.ablation_steps} steps "
                f"each (start x loss): {grid}; start effect: anchored loss "
                f"{start_effect['anchor']:+.2f}, trace loss {start_effect['trace']:+.2f}"
            ),
        ),
    ]
    ablation = fits[("const", "trace")]
    fig, axes = plt.subplots(3, 1, figsize=(8, 6), sharex=True)
    t = np.arange(syn.currents.shape[1]) * setup.DT
    for ax, n in zip(axes, range(min(3, len(syn.spikes))), strict=False):
        ax.plot(t, syn.currents[n], color="k", lw=1.0, label="true")
        ax.plot(t, np.asarray(anchored.currents[n]), color="C3", lw=1.0, label="anchored fit")
        ax.plot(t, np.asarray(ablation.currents[n]), color="C0", lw=0.8, label="no anchors")
        ax.plot(t, start_currents[n], color="0.5", lw=0.8, ls="--", label="spike-time start")
        ax.plot(
            t[syn.spikes[n]],
            np.full(syn.spikes[n].size, syn.currents[n].max() * 1.05),
            "|",
            color="k",
            ms=6,
        )
        ax.set_ylabel(f"neuron {n} (nA)")
    axes[0].legend(fontsize=8, ncol=4)
    axes[-1].set_xlabel("time (ms)")
    fig.tight_layout()
    return Result(
        metrics=metrics,
        claims=claims,
        figures={"currents": fig, "fitted_trace": setup.plot_fit(syn, anchored, 0)},
        notes=(
            "Synthetic ground truth (see biophys_localize). The anchored fit uses the "
            "sorted spike times twice: for its rate-based starting current (inverse f-I "
            "curve) and in the loss. The baseline of the current claims is that start "
            "itself (spike times only, no fit); the ablation is 2 x 2: rate-based or "
            "constant (0.2 nA) start x anchored or trace-only loss, all four at the same "
            "steps. Low-passed r: both currents Gaussian-filtered before the correlation "
            "(the slow drive that firing rate reports). HH cells are "
            "class II (57-100 Hz when firing), so spike timing constrains the current "
            "only loosely and subthreshold stretches of the current are weakly "
            "identifiable from the extracellular signal alone."
        ),
    )
