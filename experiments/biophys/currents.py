"""P12 claim: spike-time anchors make the per-neuron input current recoverable.

Synthetic ground truth as in biophys_localize. The anchored fit (P12: rate-based
start from the sorted spike times, anchor + aligned-waveform terms) is compared
with the ablation that never sees spike times: the same simulator, conductor,
optimiser and steps, trace loss only, from a constant subthreshold current,
where the trace loss is nearly flat in the current (the failure the paper
describes). Both start from the triangulated positions.
"""

from __future__ import annotations

import dataclasses

import jax
import matplotlib
import numpy as np

from experiments._harness import Claim, Result, RunContext
from experiments.biophys import _setup as setup

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

NAME = "biophys_currents"
PAPER = "P12"
DESCRIPTION = "Recovered input currents and spike timing with vs without spike-time anchors"


@dataclasses.dataclass(frozen=True)
class Config(setup.BiophysConfig):
    """Settings of one run; the defaults are QUICK (2 CPU cores, minutes)."""

    n_neurons: int = 8
    spacing_um: float = 60.0


QUICK = Config()
FULL = Config(**setup.FULL_OVERRIDES)


def run(config, key: jax.Array, ctx: RunContext) -> Result:
    syn = setup.make_synthetic(config, key)
    base = setup.triangulate(syn)
    anchored = setup.fit_population(
        syn, config, ctx, anchored=True, init_positions=base, tag="anchored"
    )
    ablation = setup.fit_population(
        syn, config, ctx, anchored=False, init_positions=base, tag="no_anchor"
    )
    ev, ev0 = setup.evaluate(syn, anchored), setup.evaluate(syn, ablation)
    corr, match = float(ev["corr"].mean()), float(ev["match"].mean())
    corr0, match0 = float(ev0["corr"].mean()), float(ev0["match"].mean())
    metrics = {
        "current_corr_mean": corr,
        "spike_match_frac": match,
        "current_corr_no_anchor": corr0,
        "spike_match_frac_no_anchor": match0,
        "current_corr_min": float(ev["corr"].min()),
        "loc_err_um_mean": float(ev["err"].mean()),
        "loc_err_um_mean_no_anchor": float(ev0["err"].mean()),
        "n_true_spikes": int(sum(s.size for s in syn.spikes)),
        "peak_snr_median": float(np.median(syn.snr)),
    }
    claims = [
        Claim(
            claim="recovered input current correlates with the truth (goal >= 0.9)",
            paper="time-varying latent input current recovered per neuron",
            measured=f"mean Pearson r = {corr:.2f}",
            holds=bool(corr >= 0.9),
        ),
        Claim(
            claim="fitted model reproduces the sorted spikes within +/-1 ms (goal >= 0.9)",
            paper="reproduces observed spatio-temporal activity",
            measured=f"{match:.2f} of true spikes matched",
            holds=bool(match >= 0.9),
        ),
        Claim(
            claim="without spike-time anchors the fit fails (flat subthreshold landscape)",
            paper="gradient descent without anchors lacks a useful signal",
            measured=(
                f"no anchors: r = {corr0:.2f}, match {match0:.2f} "
                f"(anchored: r = {corr:.2f}, match {match:.2f})"
            ),
            holds=bool(match0 < match - 0.3 and corr0 < corr - 0.2),
        ),
    ]
    fig, axes = plt.subplots(3, 1, figsize=(8, 6), sharex=True)
    t = np.arange(syn.currents.shape[1]) * setup.DT
    for ax, n in zip(axes, range(min(3, len(syn.spikes))), strict=False):
        ax.plot(t, syn.currents[n], color="k", lw=1.0, label="true")
        ax.plot(t, np.asarray(anchored.currents[n]), color="C3", lw=1.0, label="anchored fit")
        ax.plot(t, np.asarray(ablation.currents[n]), color="C0", lw=0.8, label="no anchors")
        ax.plot(
            t[syn.spikes[n]],
            np.full(syn.spikes[n].size, syn.currents[n].max() * 1.05),
            "|",
            color="k",
            ms=6,
        )
        ax.set_ylabel(f"neuron {n} (nA)")
    axes[0].legend(fontsize=8, ncol=3)
    axes[-1].set_xlabel("time (ms)")
    fig.tight_layout()
    return Result(
        metrics=metrics,
        claims=claims,
        figures={"currents": fig, "fitted_trace": setup.plot_fit(syn, anchored, 0)},
        notes=(
            "Synthetic ground truth (see biophys_localize). The anchored fit uses the "
            "sorted spike times twice: for its rate-based starting current (inverse f-I "
            "curve) and in the loss; the ablation uses no spike times at all. HH cells are "
            "class II (57-100 Hz when firing), so spike timing constrains the current "
            "only loosely and subthreshold stretches of the current are weakly "
            "identifiable from the extracellular signal alone."
        ),
    )
