"""Shared synthetic ground truth and fitting pipeline of the P12 biophys experiments.

Synthetic data (no paired patch/Neuropixels recording ships in a pip wheel):
ball-and-stick HH cells (dendrite along the shank) at random positions beside
a Neuropixels 1.0 probe, each driven by its own smooth random somatic current
(Gaussian-filtered white noise), recorded at 30 kHz with white + 1/f +
spatially correlated noise. The "sorting" is the ground-truth spike times
(somatic voltage peaks), as if a sorter had found every spike.

Two options of the generator: repeated stimulus trials (`trials` > 1: the current
is a stimulus-locked part repeated every trial plus a private part, the fraction
`trial_private_frac` of its variance, so that a fit on some trials can be scored
on a held-out one), and a `Mismatch` between the generating cells and the model
the fit assumes (dendrite length and diameters scaled, each dendrite tilted,
extracellular conductivity scaled).
"""

from __future__ import annotations

import dataclasses
import functools

import jax
import jax.numpy as jnp
import numpy as np
from scipy.ndimage import gaussian_filter1d

from experiments._harness import RunContext, log
from jaxlab import Driver, TqdmProgress
from jaxlab import biophys as bp


@dataclasses.dataclass(frozen=True)
class BiophysConfig:
    """QUICK settings shared by the P12 experiments (each sets its own n_neurons and
    spacing_um); `FULL_OVERRIDES` are the paper-scale values of FULL."""

    n_neurons: int = 20
    spacing_um: float = 30.0
    duration_ms: float = 1000.0
    z_min_um: float = 15.0
    z_max_um: float = 40.0
    current_mean_na: tuple[float, float] = (0.3, 0.45)
    current_std_na: float = 0.15
    current_tau_ms: float = 8.0
    noise_white_uv: float = 2.5
    noise_pink_uv: float = 0.8
    noise_correlated_uv: float = 1.5
    knot_ms: float = 5.0
    fit_steps: int = 150
    lr: float = 0.1
    # the cell: "hh" (Hodgkin-Huxley soma, class II) or "wang_buzsaki" (class I)
    neuron: str = "hh"
    dendrite_diameter_um: float = 4.0
    # subthreshold current of the fit's starts, top of the f-I grid, optimiser unit (nA)
    rest_current_na: float = 0.2
    fi_max_na: float = 1.4
    current_unit_na: float = 0.05
    # repeated stimulus trials (1: one continuous stretch) and the private share of the
    # current's variance (the rest is stimulus-locked, identical in every trial)
    trials: int = 1
    trial_private_frac: float = 0.0


@dataclasses.dataclass(frozen=True)
class Mismatch:
    """How the generating cells differ from the model the fit assumes (identity: none).

    `length_scale` multiplies the dendrite's length, `diameter_scale` the soma's and the
    dendrite's diameters, `tilt_deg` tilts each cell's dendrite away from the model's
    axis (the shank, y) by that angle towards a random azimuth, `sigma_scale`
    multiplies the extracellular conductivity of the generator (the fit keeps 0.3 S/m).
    """

    length_scale: float = 1.0
    diameter_scale: float = 1.0
    tilt_deg: float = 0.0
    sigma_scale: float = 1.0

    @property
    def is_identity(self) -> bool:
        return self == Mismatch()


def make_cell(config: BiophysConfig) -> bp.BallAndStick:
    """The ball-and-stick cell of `config` (HH or Wang-Buzsaki soma)."""
    somas = {"hh": bp.HodgkinHuxley(), "wang_buzsaki": bp.WangBuzsaki()}
    if config.neuron not in somas:
        raise ValueError(f"neuron: expected one of {sorted(somas)}, received {config.neuron!r}")
    return bp.BallAndStick(
        soma=somas[config.neuron], dendrite_diameter=float(config.dendrite_diameter_um)
    )


def perturbed_cells(
    cell: bp.BallAndStick, mismatch: Mismatch, n: int, rng: np.random.Generator
) -> list[bp.BallAndStick]:
    """One generating cell per neuron: `cell` with `mismatch`'s morphology and tilt."""
    theta = np.deg2rad(mismatch.tilt_deg)
    phis = rng.uniform(0.0, 2 * np.pi, n)
    out = []
    for phi in phis:
        u = np.array(
            [np.sin(theta) * np.cos(phi), np.cos(theta), np.sin(theta) * np.sin(phi)], np.float32
        )
        out.append(
            dataclasses.replace(
                cell,
                dendrite_length=float(cell.dendrite_length) * mismatch.length_scale,
                dendrite_diameter=float(cell.dendrite_diameter) * mismatch.diameter_scale,
                soma_diameter=float(cell.soma_diameter) * mismatch.diameter_scale,
                direction=jnp.asarray(u),
            )
        )
    return out


@functools.partial(jax.jit, static_argnames=("sigma",))
def _one_cell(cell, position, current, electrodes, sigma):
    return bp.population_traces(cell, position[None], current[None], electrodes, dt=DT, sigma=sigma)


def record_mismatched(
    cells: list[bp.BallAndStick],
    positions: np.ndarray,
    currents: np.ndarray,
    probe: bp.Probe,
    *,
    sigma: float,
    noise: bp.NoiseModel,
    key: jax.Array,
) -> bp.Recording:
    """`bp.record` with a cell per neuron: each neuron's traces summed, then the noise."""
    electrodes = probe.electrodes()
    clean, volts, spikes = None, [], []
    for c, p, i in zip(cells, positions, currents, strict=True):
        tr, v, sp = _one_cell(c, jnp.asarray(p), jnp.asarray(i), electrodes, sigma)
        clean = tr if clean is None else clean + tr
        volts.append(v[0])
        spikes.append(sp[0])
    assert clean is not None
    noisy = clean + noise.sample(probe, clean.shape[0], fs=1000.0 / DT, key=key).astype(clean.dtype)
    return bp.Recording(
        traces=noisy, clean=clean, voltage=jnp.stack(volts), spikes=jnp.stack(spikes), dt=DT
    )


FULL_OVERRIDES = {"n_neurons": 200, "duration_ms": 60000.0, "spacing_um": 17.0, "fit_steps": 1000}

DT = 1.0 / 30.0  # ms: 30 kHz
F32 = jnp.float32


@dataclasses.dataclass
class Synthetic:
    cell: bp.BallAndStick
    probe: bp.Probe
    positions: np.ndarray  # (N, 3)
    currents: np.ndarray  # (N, T)
    recording: bp.Recording
    spikes: list[np.ndarray]
    noise: bp.NoiseModel
    snr: np.ndarray  # (N,) peak |template| on the best site / noise std


def make_synthetic(
    config: BiophysConfig, key: jax.Array, mismatch: Mismatch | None = None
) -> Synthetic:
    """Population, currents, noisy recording, sorted spikes (see module doc). `cell` of the
    result is the model the fit assumes; with a `mismatch` the recording comes from
    perturbed cells (the same positions, currents and noise as without)."""
    n = int(config.n_neurons)
    t_steps = int(round(config.duration_ms / DT))
    seed = int(jax.random.randint(key, (), 0, 2**31 - 1))
    rng = np.random.default_rng(seed)
    cell = make_cell(config)
    full_probe = bp.neuropixels_1(dtype=F32)
    depth0 = 200.0
    ys = depth0 + np.sort(rng.uniform(0.0, config.spacing_um * n, n))
    positions = np.stack(
        [rng.uniform(-10.0, 80.0, n), ys, rng.uniform(config.z_min_um, config.z_max_um, n)], 1
    )
    positions = positions.astype(np.float32)
    # Sites spanning the population (all 384 when the population spans the shank).
    sites = full_probe.sites_between(ys.min() - 120.0, ys.max() + 400.0)
    probe = full_probe.select(sites)
    white = _smooth_noise(rng, n, t_steps, config.current_tau_ms)
    trials = int(config.trials)
    if trials > 1:
        if t_steps % trials:
            raise ValueError(f"trials: {trials} does not divide {t_steps} samples")
        stim = np.tile(_smooth_noise(rng, n, t_steps // trials, config.current_tau_ms), trials)
        f = float(config.trial_private_frac)
        white = np.sqrt(1.0 - f) * stim + np.sqrt(f) * white
    mean = rng.uniform(config.current_mean_na[0], config.current_mean_na[1], (n, 1))
    currents = (mean + config.current_std_na * white).astype(np.float32)
    noise = bp.NoiseModel(
        white_uv=config.noise_white_uv,
        pink_uv=config.noise_pink_uv,
        correlated_uv=config.noise_correlated_uv,
    )
    if mismatch is None:
        rec = bp.record(
            cell,
            jnp.asarray(positions),
            jnp.asarray(currents),
            probe,
            dt=DT,
            noise=noise,
            key=jax.random.fold_in(key, 1),
        )
    else:
        mrng = np.random.default_rng(seed + 1)
        rec = record_mismatched(
            perturbed_cells(cell, mismatch, n, mrng),
            positions,
            currents,
            probe,
            sigma=bp.SIGMA_CORTEX * mismatch.sigma_scale,
            noise=noise,
            key=jax.random.fold_in(key, 1),
        )
    spikes = [bp.spike_indices(v) for v in np.asarray(rec.voltage)]
    clean = np.asarray(rec.clean)
    snr = []
    for s in spikes:
        if s.size == 0:
            snr.append(0.0)
            continue
        idx = s[(s >= 30) & (s + 45 <= clean.shape[0])]
        tmpl = clean[idx[:, None] + np.arange(-30, 45)[None, :]].mean(0)
        snr.append(float(np.abs(tmpl).max() / noise.total_std))
    return Synthetic(cell, probe, positions, currents, rec, spikes, noise, np.asarray(snr))


def _smooth_noise(rng: np.random.Generator, n: int, t_steps: int, tau_ms: float) -> np.ndarray:
    """`(n, t_steps)` Gaussian-filtered white noise (s.d. `tau_ms`), unit s.d. per row."""
    white = gaussian_filter1d(rng.standard_normal((n, t_steps)), tau_ms / DT, axis=1)
    return white / white.std(axis=1, keepdims=True)


def trial_steps(config: BiophysConfig) -> int:
    """Samples per stimulus trial."""
    return int(round(config.duration_ms / DT)) // int(config.trials)


def window(syn: Synthetic, start: int, stop: int) -> Synthetic:
    """The samples `[start, stop)` of a synthetic recording as a recording of their own
    (traces, currents, voltages cut; spikes inside kept, re-indexed from `start`)."""
    rec = syn.recording
    spikes = [s[(s >= start) & (s < stop)] - start for s in syn.spikes]
    return dataclasses.replace(
        syn,
        currents=syn.currents[:, start:stop],
        recording=bp.Recording(
            traces=rec.traces[start:stop],
            clean=rec.clean[start:stop],
            voltage=rec.voltage[:, start:stop],
            spikes=rec.spikes[:, start:stop],
            dt=rec.dt,
        ),
        spikes=spikes,
    )


def triangulate(syn: Synthetic) -> np.ndarray:
    """Monopolar-triangulation (x, y, z) of every neuron from its noisy template."""
    out = []
    traces = np.asarray(syn.recording.traces)
    for s in syn.spikes:
        ptp = bp.template_ptp(traces, s, before=30, after=45)
        out.append(bp.monopolar_triangulation(ptp, np.asarray(syn.probe.positions))[:3])
    return np.asarray(out, dtype=np.float32)


def make_problem(syn: Synthetic, config: BiophysConfig) -> bp.FitProblem:
    """The inverse-fit problem of a synthetic recording and its sorted spikes."""
    return bp.make_fit_problem(
        syn.cell,
        syn.probe.electrodes(),
        syn.recording.traces,
        syn.spikes,
        dt=DT,
        noise_std=syn.noise.total_std,
        knot_spacing_ms=config.knot_ms,
        current_unit_na=config.current_unit_na,
    )


def start_params(
    syn: Synthetic,
    problem: bp.FitProblem,
    config: BiophysConfig,
    *,
    rate_start: bool,
    init_positions: np.ndarray,
) -> bp.FitParams:
    """Starting parameters: triangulated positions and either P12's rate-based current
    (the model's f-I curve inverted on the smoothed sorted spike train: spike times
    only) or a constant subthreshold current (`rest_current_na`, no spike times)."""
    n, k = syn.positions.shape[0], problem.basis.n_knots
    rest = float(config.rest_current_na)
    if rate_start:
        grid = jnp.linspace(0.0, float(config.fi_max_na), 29, dtype=F32)
        rates = bp.firing_rate_curve(syn.cell, grid, dt=DT)
        coeffs = jnp.stack(
            [
                bp.rate_initial_current(s, problem.basis, grid, rates, rest_current=rest)
                for s in syn.spikes
            ]
        ).astype(F32)
    else:
        coeffs = jnp.full((n, k), rest, dtype=F32)
    start = init_positions.copy()
    start[:, 2] = np.maximum(start[:, 2], 5.0)
    return bp.FitParams(jnp.asarray(start, dtype=F32), coeffs)


def start_result(problem: bp.FitProblem, params0: bp.FitParams) -> bp.FitResult:
    """The starting point as a `FitResult` (no steps), to evaluate like a fit."""
    currents = jax.vmap(problem.basis.evaluate)(params0.coeffs)
    return bp.FitResult(params=params0, currents=currents, losses=jnp.zeros((0,), F32))


def fit_population(
    syn: Synthetic,
    config: BiophysConfig,
    ctx: RunContext,
    *,
    anchored: bool,
    init_positions: np.ndarray,
    tag: str,
    rate_start: bool | None = None,
) -> bp.FitResult:
    """P12's inverse fit (anchored loss) or the trace-only loss; `rate_start` (default:
    `anchored`) picks the spike-time-based starting current or the constant one."""
    problem = make_problem(syn, config)
    rate_start = anchored if rate_start is None else rate_start
    params0 = start_params(
        syn, problem, config, rate_start=rate_start, init_positions=init_positions
    )
    log.info(
        "biophys fit %s: %d neurons, %d steps, %d sites, %d samples",
        tag,
        syn.positions.shape[0],
        config.fit_steps,
        syn.probe.n_sites,
        problem.traces.shape[0],
    )
    return bp.fit(
        problem,
        params0,
        steps=int(config.fit_steps),
        anchor=bp.SpikeAnchor() if anchored else None,
        optimizer=bp.default_optimizer(int(config.fit_steps), config.lr),
        driver=Driver(
            checkpointer=ctx.checkpointer(f"fit_{tag}"),
            progress=TqdmProgress(desc=f"biophys fit {tag}"),
        ),
    )


def evaluate(syn: Synthetic, res: bp.FitResult, lowpass_ms: float = 20.0) -> dict[str, np.ndarray]:
    """Per-neuron localisation error, current correlation (raw and Gaussian low-passed with
    s.d. `lowpass_ms`) and spike match (+/- 1 ms)."""
    err = np.linalg.norm(np.asarray(res.params.positions) - syn.positions, axis=1)
    fc = np.asarray(res.currents)
    corr = np.asarray([np.corrcoef(fc[i], syn.currents[i])[0, 1] for i in range(len(fc))])
    sigma = lowpass_ms / DT
    lp_fit = gaussian_filter1d(fc.astype(np.float64), sigma, axis=1)
    lp_true = gaussian_filter1d(syn.currents.astype(np.float64), sigma, axis=1)
    corr_lp = np.asarray([np.corrcoef(lp_fit[i], lp_true[i])[0, 1] for i in range(len(fc))])
    _, volts, _ = bp.population_traces(
        syn.cell, res.params.positions, res.currents, syn.probe.electrodes(), dt=DT
    )
    tol = int(round(1.0 / DT))
    match = np.asarray(
        [
            bp.match_fraction(s, bp.spike_indices(np.asarray(v)), tolerance=tol)
            for s, v in zip(syn.spikes, volts, strict=True)
        ]
    )
    return {"err": err, "corr": corr, "corr_lp": corr_lp, "match": match}


def plot_fit(syn: Synthetic, res: bp.FitResult, neuron: int):
    """Figure: recorded vs fitted traces over the probe around one neuron's spike."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fitted, _, _ = bp.population_traces(
        syn.cell, res.params.positions, res.currents, syn.probe.electrodes(), dt=DT
    )
    traces = np.asarray(syn.recording.traces)
    fitted = np.asarray(fitted)
    s = syn.spikes[neuron]
    t0 = int(s[len(s) // 2]) if s.size else traces.shape[0] // 2
    win = np.arange(max(t0 - 60, 0), min(t0 + 90, traces.shape[0]))
    pos = np.asarray(syn.probe.positions)
    near = np.argsort(np.linalg.norm(pos - syn.positions[neuron, :2], axis=1))[:12]
    fig, ax = plt.subplots(figsize=(6, 7))
    scale = 0.9 * 20.0 / max(np.abs(traces[np.ix_(win, near)]).max(), 1e-6)
    tt = (win - t0) * DT
    for j in near:
        x0, y0 = pos[j]
        ax.plot(x0 + tt * 4.0, y0 + scale * traces[win, j], color="0.6", lw=0.8)
        ax.plot(x0 + tt * 4.0, y0 + scale * fitted[win, j], color="C3", lw=1.0)
    ax.plot(*syn.positions[neuron, :2], "k*", ms=12, label="true soma (x, y)")
    ax.plot(*np.asarray(res.params.positions)[neuron, :2], "C3x", ms=10, mew=2, label="fitted soma")
    ax.set_xlabel("x (um); each trace spans 5 ms (4 um per ms)")
    ax.set_ylabel("depth y (um)")
    ax.set_title(f"neuron {neuron}: recorded (grey) vs fitted (red) traces")
    ax.legend(loc="upper right", fontsize=8)
    fig.tight_layout()
    return fig
