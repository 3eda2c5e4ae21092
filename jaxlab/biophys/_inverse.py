"""Inverse fit: per-neuron time-varying input current and 3-D position from probe traces.

P12's method. Each neuron's somatic input current is parameterised by its
values at knots every `knot_spacing_ms` and linearly interpolated in between
(`CurrentBasis`): the knots are named physical quantities (nA at a time), the
local support keeps each spike's gradient on the few knots that precede it,
the resolution is matched to synaptic/membrane time scales (a few ms), and a
second-difference penalty is the smoothness prior. Positions are the soma
coordinates relative to the probe plane.

The loss has these parts:

- trace term: mean squared error between the simulated traces of all neurons
  (their sum, through the volume conductor) and the recording, in units of the
  noise variance;
- spike-time anchors (`SpikeAnchor`): near each sorted spike time the
  somatic voltage is pulled up to the spike peak, and away from the anchors it
  is kept below a quiet threshold. In the subthreshold regime the trace term is
  nearly flat in the current (the paper's observation); the anchors carry the
  gradient back in time through the simulator to the drive that produced each
  spike. The anchors also align a waveform term: each neuron's simulated
  extracellular waveform around its model spikes vs the recording around the
  sorted times, averaged over spikes, which informs the position;
- smoothness prior on the current knots.

Without anchors (`anchor=None`) only the trace and smoothness terms remain:
the ablation. The starting current may come from the spike times too
(`rate_initial_current`: the model's f-I curve inverted on the smoothed
spike train).

Optimisation is optax (Adam by default) on unit-free parameters, in pure
`(init_fit, fit_step)` form, packaged as the step object `FitStep`; `fit` runs it
with the training driver `jaxlab.run_steps` (progress, checkpoint/resume).
"""

from __future__ import annotations

import math
from typing import cast

import diffrax
import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import optax
from jaxtyping import Array, ArrayLike, Bool, Float, Int

from jaxlab._core import (
    AbstractStep,
    Driver,
    StepLoop,
    as_array,
    check_array,
    check_finite,
    check_ids,
    check_instance,
    check_memory,
    check_positive_int,
    check_real,
    driver_for,
    optimizer_update,
    run_steps,
)

from ._conductor import SIGMA_CORTEX
from ._forward import population_sources
from ._neurons import BallAndStick
from ._simulate import check_stable, simulate
from ._spiketrain import spike_indices

__all__ = [
    "CurrentBasis",
    "FitParams",
    "SpikeAnchor",
    "FitProblem",
    "FitState",
    "FitResult",
    "default_optimizer",
    "firing_rate_curve",
    "rate_initial_current",
    "make_fit_problem",
    "fit_loss",
    "init_fit",
    "fit_step",
    "FitStep",
    "fit",
]


class CurrentBasis(eqx.Module):
    """Piecewise-linear current: knot values every `knot_spacing_ms`, interpolated per step."""

    n_steps: int = eqx.field(static=True)
    dt: float = eqx.field(static=True)
    knot_spacing_ms: float = eqx.field(static=True)

    @property
    def n_knots(self) -> int:
        return int(math.ceil(self.n_steps * self.dt / self.knot_spacing_ms)) + 1

    def knot_times(self) -> Float[Array, " K"]:
        return jnp.arange(self.n_knots, dtype=jnp.result_type(float)) * self.knot_spacing_ms

    def evaluate(self, coeffs: Float[Array, " K"]) -> Float[Array, " T"]:
        """Current at every step `(T,)` from knot values `(K,)`."""
        t = jnp.arange(self.n_steps, dtype=coeffs.dtype) * self.dt
        return jnp.interp(t, self.knot_times().astype(coeffs.dtype), coeffs)

    def project(self, current: Float[ArrayLike, " T"]) -> Float[Array, " K"]:
        """Least-squares knot values of a sampled current (its best representation)."""
        eye = jnp.eye(self.n_knots, dtype=jnp.asarray(current).dtype)
        design = jax.vmap(self.evaluate)(eye).T  # (T, K)
        sol, *_ = jnp.linalg.lstsq(design, jnp.asarray(current))
        return sol


class FitParams(eqx.Module):
    """Fitted quantities: soma `positions` `(N, 3)` um and current knots `coeffs` `(N, K)` nA."""

    positions: Float[Array, "N 3"]
    coeffs: Float[Array, "N K"]


class SpikeAnchor(eqx.Module):
    """Spike-time anchor loss (P12): voltage at sorted spike times and quiet elsewhere.

    - `weight`: multiplies the anchor terms; `quiet_weight`: extra factor of the quiet term.
    - `peak_mv`: the largest somatic voltage within `match_ms` of each anchor is
      pulled up to this value (a spike near the sorted time), with a hinge: once
      the model spikes there, the term is zero.
    - `scale_mv`: voltage scale of the squared errors.
    - `match_ms`: half-width of the window searched for the spike peak.
    - `quiet_mv`: farther than the problem's `anchor_window_ms` from every anchor,
      voltage above this is penalised (spikes the sorting did not see).
    """

    weight: float = 1.0
    quiet_weight: float = 5.0
    peak_mv: float = 20.0
    scale_mv: float = 20.0
    match_ms: float = 0.5
    quiet_mv: float = -45.0
    template_weight: float = 10.0
    template_before_ms: float = 1.0
    template_after_ms: float = 1.5


class FitProblem(eqx.Module):
    """Everything the loss needs; build it with `make_fit_problem`."""

    cell: BallAndStick
    electrodes: Float[Array, "S 3"]
    traces: Float[Array, "T S"]
    anchor_idx: Int[Array, "N A"]
    anchor_valid: Bool[Array, "N A"]
    quiet_mask: Bool[Array, "N T"]
    noise_var: Float[Array, ""]
    basis: CurrentBasis
    smoothness: float = eqx.field(static=True)
    position_unit_um: float = eqx.field(static=True)
    current_unit_na: float = eqx.field(static=True)
    sigma: float = eqx.field(static=True)
    solver: diffrax.AbstractSolver = eqx.field(static=True)


def make_fit_problem(
    cell: BallAndStick,
    electrodes: Float[ArrayLike, "S 3"],
    traces: Float[ArrayLike, "T S"],
    spike_idx: list[ArrayLike],
    *,
    dt: float,
    noise_std: float,
    knot_spacing_ms: float = 4.0,
    anchor_window_ms: float = 1.5,
    smoothness: float = 1e-3,
    position_unit_um: float = 5.0,
    current_unit_na: float = 0.05,
    sigma: float = SIGMA_CORTEX,
    solver: diffrax.AbstractSolver | None = None,
) -> FitProblem:
    """Assemble a `FitProblem` from a recording and per-neuron sorted spike times.

    **Arguments:**

    - `cell`: the `BallAndStick` model assumed for every neuron.
    - `electrodes`: `(S, 3)` site positions (um); `traces`: `(T, S)` recording (uV).
    - `spike_idx`: one array of spike sample indices per neuron (the sorting).
    - `dt`: sample step (ms); `noise_std`: noise standard deviation (uV).
    - `knot_spacing_ms`: current-basis resolution; `smoothness`: prior weight.
    - `position_unit_um`, `current_unit_na`: the optimiser's parameter units.
    """
    check_instance("cell", cell, BallAndStick)
    sizes: dict[str, int] = {}
    traces = as_array(
        "traces", traces, shape=("T", "S"), dtype=jnp.floating, sizes=sizes, finite=True
    )
    electrodes = as_array(
        "electrodes", electrodes, shape=("S", 3), dtype=jnp.floating, sizes=sizes, finite=True
    )
    if sizes["T"] == 0:
        raise ValueError("traces: expected at least one sample, received shape (0, S)")
    dt = check_real("dt", dt, low=0.0, low_inclusive=False)
    noise_std = check_real("noise_std", noise_std, low=0.0, low_inclusive=False)
    knot_spacing_ms = check_real("knot_spacing_ms", knot_spacing_ms, low=0.0, low_inclusive=False)
    anchor_window_ms = check_real("anchor_window_ms", anchor_window_ms, low=0.0)
    smoothness = check_real("smoothness", smoothness, low=0.0)
    position_unit_um = check_real(
        "position_unit_um", position_unit_um, low=0.0, low_inclusive=False
    )
    current_unit_na = check_real("current_unit_na", current_unit_na, low=0.0, low_inclusive=False)
    sigma = check_real("sigma", sigma, low=0.0, low_inclusive=False)
    n_t = sizes["T"]
    # a sequence (a 2-D array: one row per neuron); not None, a string or a scalar
    if not (
        isinstance(spike_idx, list | tuple)
        or (isinstance(spike_idx, np.ndarray | jax.Array) and spike_idx.ndim >= 1)
    ):
        raise ValueError(
            "spike_idx: expected one array of spike indices per neuron, received "
            f"{type(spike_idx).__name__}"
        )
    if len(spike_idx) == 0:
        raise ValueError("spike_idx: expected one array of spike indices per neuron, received []")
    spikes = [
        check_ids(f"spike_idx[{n}]", s, n_t, what="sample indices") for n, s in enumerate(spike_idx)
    ]
    for n, s in enumerate(spikes):
        if s.ndim != 1:
            raise ValueError(f"spike_idx[{n}]: expected a 1-D array, received shape {s.shape}")
    n_a = max(1, max(int(s.size) for s in spikes))
    idx = np.zeros((len(spikes), n_a), dtype=np.int32)
    valid = np.zeros((len(spikes), n_a), dtype=bool)
    quiet = np.ones((len(spikes), n_t), dtype=bool)
    half = int(round(anchor_window_ms / dt))
    for n, s in enumerate(spikes):
        idx[n, : s.size] = s
        valid[n, : s.size] = True
        for k in s:
            quiet[n, max(0, k - half) : k + half + 1] = False
    traces = jnp.asarray(traces)
    return FitProblem(
        cell=cell,
        electrodes=electrodes,
        traces=traces,
        anchor_idx=jnp.asarray(idx),
        anchor_valid=jnp.asarray(valid),
        quiet_mask=jnp.asarray(quiet),
        noise_var=jnp.asarray(noise_std**2, dtype=traces.dtype),
        basis=CurrentBasis(n_t, dt, knot_spacing_ms),
        smoothness=smoothness,
        position_unit_um=position_unit_um,
        current_unit_na=current_unit_na,
        sigma=sigma,
        solver=diffrax.Euler() if solver is None else solver,
    )


def firing_rate_curve(
    cell: BallAndStick,
    currents: Float[ArrayLike, " G"],
    *,
    dt: float,
    duration_ms: float = 500.0,
    transient_ms: float = 200.0,
) -> np.ndarray:
    """Steady firing rate (Hz) of `cell` under each constant somatic current (nA): its f-I curve."""
    grid = as_array("currents", currents, ndim=1, dtype=jnp.floating, finite=True, nonempty=True)
    dt = check_real("dt", dt, low=0.0, low_inclusive=False)
    duration_ms = check_real("duration_ms", duration_ms, low=0.0, low_inclusive=False)
    transient_ms = check_real("transient_ms", transient_ms, low=0.0)
    n = int(round(duration_ms / dt))
    skip = int(round(transient_ms / dt))
    if not 0 <= skip < n:
        raise ValueError("transient_ms: expected 0 <= transient_ms < duration_ms")
    # the (G, n, D) state trajectories (float64 at most)
    check_memory("duration_ms", 8.0 * grid.shape[0] * n * (cell.init_state().shape[0] + 2))
    volts = jax.vmap(lambda i: simulate(cell, jnp.full((n,), i), dt=dt).voltage)(grid)
    check_stable(volts, dt)
    window_s = (n - skip) * dt / 1000.0
    return np.asarray([spike_indices(np.asarray(v)[skip:]).size / window_s for v in volts])


def rate_initial_current(
    spike_idx: ArrayLike,
    basis: CurrentBasis,
    fi_currents: ArrayLike,
    fi_rates: ArrayLike,
    *,
    kernel_ms: float = 8.0,
    rest_current: float = 0.2,
) -> Float[Array, " K"]:
    """Starting current knots from a neuron's sorted spike times and the model's f-I curve.

    The spike train is smoothed with a Gaussian kernel into a rate (Hz); where
    the rate reaches the model's slowest repetitive rate the f-I curve is
    inverted, elsewhere the current is `rest_current` (subthreshold). The knots
    are the least-squares projection of that current onto `basis`. Uses the
    spike times, like the anchors; the no-anchor ablation starts from a
    constant current instead.
    """
    check_instance("basis", basis, CurrentBasis)
    sizes: dict[str, int] = {}
    # checks only: the inversion runs in float64 on the caller's values
    as_array("fi_currents", fi_currents, shape=("G",), dtype=jnp.floating, sizes=sizes, finite=True)
    as_array(
        "fi_rates", fi_rates, shape=("G",), dtype=jnp.floating, sizes=sizes, finite=True, low=0.0
    )
    cur = np.asarray(fi_currents, dtype=np.float64)
    rates = np.asarray(fi_rates, dtype=np.float64)
    spikes = check_ids("spike_idx", spike_idx, basis.n_steps, what="sample indices")
    if spikes.ndim != 1:
        raise ValueError(f"spike_idx: expected a 1-D array, received shape {spikes.shape}")
    kernel_ms = check_real("kernel_ms", kernel_ms, low=0.0, low_inclusive=False)
    rest_current = check_real("rest_current", rest_current)
    firing = rates > 0
    if not np.any(firing):
        raise ValueError("fi_rates: the f-I curve has no firing current; widen fi_currents")
    fi_r, fi_i = rates[firing], cur[firing]
    order = np.argsort(fi_r)
    t = np.arange(basis.n_steps) * basis.dt
    r = np.zeros(basis.n_steps)
    for k in spikes:
        r += np.exp(-0.5 * ((t - t[k]) / kernel_ms) ** 2)
    r *= 1000.0 / (kernel_ms * np.sqrt(2 * np.pi))
    i_t = np.where(r >= 0.5 * fi_r.min(), np.interp(r, fi_r[order], fi_i[order]), rest_current)
    return basis.project(jnp.asarray(i_t, dtype=jnp.result_type(float)))


def _to_physical(u: FitParams, problem: FitProblem) -> FitParams:
    return FitParams(u.positions * problem.position_unit_um, u.coeffs * problem.current_unit_na)


def _to_units(p: FitParams, problem: FitProblem) -> FitParams:
    return FitParams(p.positions / problem.position_unit_um, p.coeffs / problem.current_unit_na)


def fit_loss(
    u: FitParams, problem: FitProblem, anchor: SpikeAnchor | None
) -> tuple[Float[Array, ""], dict[str, Array]]:
    """The P12 fit loss of unit-free parameters `u` (positions, current knots).

    Parts: the trace term (mean squared error of the summed simulated traces against the
    recording, in units of the noise variance); with `anchor` (a `SpikeAnchor`), the
    spike-time anchors (somatic voltage pulled up to the spike peak near each sorted
    spike time, kept below a quiet threshold away from them) and the waveform term
    they align; the smoothness prior on the current knots. `anchor=None` keeps only the
    trace and smoothness terms (the ablation).

    **Returns:** `(total, parts)`, `parts` a dict of the scalar terms.
    """
    check_instance("u", u, FitParams)
    check_instance("problem", problem, FitProblem)
    n = problem.anchor_idx.shape[0]
    check_array("u.positions", u.positions, shape=(n, 3), dtype=jnp.floating)
    check_array("u.coeffs", u.coeffs, shape=(n, problem.basis.n_knots), dtype=jnp.floating)
    check_finite("u.positions", u.positions)  # concrete values; a no-op under jit / grad
    check_finite("u.coeffs", u.coeffs)
    p = _to_physical(u, problem)
    dtype = problem.traces.dtype
    currents = jax.vmap(problem.basis.evaluate)(p.coeffs.astype(dtype))
    i_m, gains, volts, _ = population_sources(
        problem.cell,
        p.positions.astype(dtype),
        currents,
        problem.electrodes,
        dt=problem.basis.dt,
        solver=problem.solver,
        sigma=problem.sigma,
    )
    gains = gains.astype(i_m.dtype)
    traces = jnp.einsum("ntc,nsc->ts", i_m, gains)
    trace = jnp.mean((traces - problem.traces) ** 2) / problem.noise_var
    d2 = u.coeffs[:, 2:] - 2 * u.coeffs[:, 1:-1] + u.coeffs[:, :-2]
    # a basis of fewer than 3 knots has no second difference: no smoothness term (the
    # mean over an empty array would be NaN)
    smooth = problem.smoothness * jnp.sum(d2**2) / max(d2.size, 1)
    total = trace + smooth.astype(trace.dtype)
    parts = {"trace": trace, "smooth": smooth}
    if anchor is not None:
        half = int(round(anchor.match_ms / problem.basis.dt))
        offs = jnp.arange(-half, half + 1, dtype=problem.anchor_idx.dtype)
        win = jnp.clip(problem.anchor_idx[:, :, None] + offs[None, None], 0, volts.shape[1] - 1)
        n_w = win.shape[1] * win.shape[2]
        at = jnp.take_along_axis(volts, win.reshape(win.shape[0], n_w), axis=1)
        at = jnp.max(at.reshape(win.shape), axis=-1)
        err = (jax.nn.relu(anchor.peak_mv - at) / anchor.scale_mv) ** 2
        n_valid = jnp.maximum(jnp.sum(problem.anchor_valid), 1).astype(dtype)
        peak = jnp.sum(jnp.where(problem.anchor_valid, err, 0.0)) / n_valid
        over = jax.nn.relu(volts - anchor.quiet_mv) / anchor.scale_mv
        quiet = jnp.sum(jnp.where(problem.quiet_mask, over**2, 0.0)) / jnp.maximum(
            jnp.sum(problem.quiet_mask), 1
        ).astype(dtype)
        # model spike nearest each anchor (index only; no gradient through the argmax)
        n_t = volts.shape[1]
        at_win = jnp.take_along_axis(volts, win.reshape(win.shape[0], n_w), axis=1)
        best = jnp.argmax(jax.lax.stop_gradient(at_win).reshape(win.shape), axis=-1)
        model_idx = jnp.take_along_axis(win, best[..., None], axis=-1)[..., 0]  # (N, A)
        before = int(round(anchor.template_before_ms / problem.basis.dt))
        after = int(round(anchor.template_after_ms / problem.basis.dt))
        w_off = jnp.arange(-before, after, dtype=problem.anchor_idx.dtype)
        m_t = jnp.clip(model_idx[..., None] + w_off[None, None], 0, n_t - 1)  # (N, A, W)
        r_t = jnp.clip(problem.anchor_idx[..., None] + w_off[None, None], 0, n_t - 1)
        # The waveform term informs positions only: currents get their gradient from the
        # anchors and the trace term (letting it reshape currents trades spike timing
        # for waveform detail).
        i_snip = jax.vmap(lambda im, t: im[t])(jax.lax.stop_gradient(i_m), m_t)  # (N,A,W,C)
        model_wave = jnp.einsum("nawc,nsc->naws", i_snip, gains)
        rec_wave = problem.traces[r_t]  # (N, A, W, S)
        wmask = problem.anchor_valid.astype(dtype)[..., None, None]
        counts = jnp.maximum(jnp.sum(problem.anchor_valid, axis=1), 1).astype(dtype)
        model_tmpl = jnp.sum(model_wave * wmask, axis=1) / counts[:, None, None]
        rec_tmpl = jnp.sum(rec_wave * wmask, axis=1) / counts[:, None, None]
        template = jnp.mean((model_tmpl - rec_tmpl) ** 2) / problem.noise_var
        total = (
            total
            + anchor.weight * (peak + anchor.quiet_weight * quiet)
            + anchor.template_weight * template
        )
        parts = parts | {"anchor_peak": peak, "anchor_quiet": quiet, "template": template}
    return total, parts


class FitState(eqx.Module):
    """Optimiser state of the inverse fit (unit-free parameters, optax state, step count)."""

    params: FitParams
    opt_state: optax.OptState
    step: Int[Array, ""]


class FitResult(eqx.Module):
    """Fitted `params` (physical units, |z| taken: the probe plane is a mirror symmetry),
    per-neuron `currents` `(N, T)` nA and the loss history `(steps,)`."""

    params: FitParams
    currents: Float[Array, "N T"]
    losses: Float[Array, " steps"]


def default_optimizer(
    n_steps: int, learning_rate: float = 0.1, position_start: float = 0.3
) -> optax.GradientTransformation:
    """Adam with cosine decay and gradient clipping; positions start moving late.

    Positions are frozen for the first `position_start` fraction of the steps:
    until the anchors have placed the model's spikes at the sorted times, the
    trace term's gradient in position points at misaligned waveforms.
    """
    n_steps = check_positive_int("n_steps", n_steps)
    learning_rate = check_real("learning_rate", learning_rate, low=0.0, low_inclusive=False)
    position_start = check_real("position_start", position_start, low=0.0, high=1.0)
    start = int(position_start * n_steps)
    cur = optax.cosine_decay_schedule(learning_rate, n_steps, alpha=0.05)
    pos = optax.join_schedules(
        [
            optax.constant_schedule(0.0),
            optax.cosine_decay_schedule(learning_rate, max(n_steps - start, 1), alpha=0.05),
        ],
        [start],
    )
    labels = FitParams(positions="position", coeffs="current")  # type: ignore[arg-type]
    return optax.chain(
        optax.clip_by_global_norm(10.0),
        optax.multi_transform({"position": optax.adam(pos), "current": optax.adam(cur)}, labels),
    )


def init_fit(
    problem: FitProblem, params0: FitParams, optimizer: optax.GradientTransformation
) -> FitState:
    """Initial `FitState` from physical starting parameters `params0`."""
    n = problem.anchor_idx.shape[0]
    check_array("params0.positions", params0.positions, shape=(n, 3), dtype=jnp.floating)
    check_array(
        "params0.coeffs", params0.coeffs, shape=(n, problem.basis.n_knots), dtype=jnp.floating
    )
    check_finite("params0.positions", params0.positions)
    check_finite("params0.coeffs", params0.coeffs)
    u = _to_units(params0, problem)
    # optax annotates params as arrays/containers; an eqx.Module is a pytree like them.
    return FitState(params=u, opt_state=optimizer.init(cast(optax.Params, u)), step=jnp.asarray(0))


def _fit_step(
    problem: FitProblem,
    state: FitState,
    optimizer: optax.GradientTransformation,
    anchor: SpikeAnchor | None,
) -> tuple[FitState, Float[Array, ""]]:
    (loss, _), grads = jax.value_and_grad(fit_loss, has_aux=True)(state.params, problem, anchor)
    updates, opt_state = optimizer_update(optimizer, grads, state.opt_state, state.params)
    params = optax.apply_updates(cast(optax.Params, state.params), updates)
    return FitState(params=cast(FitParams, params), opt_state=opt_state, step=state.step + 1), loss


@eqx.filter_jit
def fit_step(
    problem: FitProblem,
    state: FitState,
    optimizer: optax.GradientTransformation,
    anchor: SpikeAnchor | None,
) -> tuple[FitState, Float[Array, ""]]:
    """One optimiser step; returns the new state and the loss before the step."""
    return _fit_step(problem, state, optimizer, anchor)


class FitStep(AbstractStep):
    """The inverse fit (P12) as a step object of the training driver `jaxlab.run_steps`.

    `init(params0, key)` is `init_fit` (physical starting `FitParams`; `key` unused:
    the fit is deterministic) and `step(state, key)` is one `fit_step`, with
    `aux = {"loss": loss before the step}`.

    **Arguments:** `problem` (from `make_fit_problem`), `optimizer` (optax; see
    `default_optimizer`), `anchor` (a `SpikeAnchor`, or None for the trace-only ablation).
    """

    problem: FitProblem
    optimizer: optax.GradientTransformation = eqx.field(static=True)
    anchor: SpikeAnchor | None = None

    def init(self, model: FitParams, key: jax.Array) -> FitState:
        del key
        return init_fit(self.problem, model, self.optimizer)

    def step(self, state: FitState, key: jax.Array):
        del key
        state, loss = _fit_step(self.problem, state, self.optimizer, self.anchor)
        return state, {"loss": loss}


def fit(
    problem: FitProblem,
    params0: FitParams,
    *,
    steps: int,
    anchor: SpikeAnchor | None = None,
    optimizer: optax.GradientTransformation | None = None,
    driver: Driver | None = None,
) -> FitResult:
    """Run `steps` steps of gradient descent on `fit_loss` (`FitStep` through the driver).

    **Arguments:**

    - `problem`: from `make_fit_problem`; `params0`: starting `FitParams` (physical units).
    - `steps`: optimiser steps; `anchor`: a `SpikeAnchor` (P12's method) or `None`
      (trace loss only, the ablation).
    - `optimizer`: optax transformation; default `default_optimizer(steps)`.
    - `driver`: a `jaxlab.Driver`: chunk (steps between checkpoint/progress/stop checks;
      25 here when left at the default), checkpointer (the state and loss history are
      saved every `checkpointer.every` steps, every chunk when None; with `resume` the
      run continues from the file and equals an uninterrupted one), progress (default
      silent), `stop(state) -> bool` on the `FitState`; `StepLoop()` (one jitted call per
      step) unless it names a loop.

    **Returns:** a `FitResult` (`losses` `(steps,)`, NaN after an early stop; an
    exception to the `(model, History)` convention: the fitted currents and parameters
    in physical units are what its callers read).
    """
    check_positive_int("steps", steps)
    optimizer = default_optimizer(steps) if optimizer is None else optimizer
    step = FitStep(problem, optimizer, anchor)
    key = jax.random.key(0)  # unused by the steps: the fit is deterministic
    state, hist = run_steps(
        step,
        step.init(params0, key),
        key=key,
        steps=steps,
        driver=driver_for(driver, chunk=25, loop=StepLoop()),
    )
    p = _to_physical(state.params, problem)
    p = FitParams(p.positions.at[:, 2].set(jnp.abs(p.positions[:, 2])), p.coeffs)
    currents = jax.vmap(problem.basis.evaluate)(p.coeffs)
    return FitResult(params=p, currents=currents, losses=jnp.asarray(hist.losses))
