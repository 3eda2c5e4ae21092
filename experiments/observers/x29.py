"""P2 claim (X-29): two-stage training certifies, is more accurate and faster.

Four ways to train the same neural extended-state observer (same random
initialisation, X-29 longitudinal ND-PA model with 10 % model uncertainty and an
external sinusoidal disturbance, high-gain epsilon = 0.01 as in the paper's code):

- two-stage: point-guided Lyapunov pre-training, then LMI fine-tuning (barrier in
  the loop, no SDP solve) until the certificate holds;
- point-only: stage 1 alone;
- LMI-only: stage 2 from the random initialisation;
- direct SDP: one cvxpy SDP solve per step (dual-gradient steps) until certified.

Every result is re-checked independently with cvxpy + Clarabel (`certify_lmi`)
and simulated with diffrax against the true (uncertain, disturbed) plant. The MSE
claims score the four states after the initial transient (saved times `t >=
settle_time`; `t = 0`, where every observer starts from `x_hat = 0`, is never
scored), with a paired bootstrap interval over the random initial errors; the
whole-horizon MSE (dominated by the `t = 0` sample) is reported alongside. All four
states are measured (the paper's 5-output C), so the state error is gone within a few
saved steps; the disturbance estimate (the extended state, against the true total
disturbance) is scored too. A stress set of initial errors where the point-only
observer's Lyapunov function (its learned P) does not decrease tests what the global
certificate buys. The paper's public code computes no MSE and times only its MATLAB
direct-LMI solver (tic/toc), so its MSE values are quoted without a matching metric.
"""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
import matplotlib.pyplot as plt
import numpy as np
import optax

import jaxlab.observers as O
from experiments._harness import (
    Estimate,
    Precondition,
    Result,
    RunContext,
    at_least,
    at_most,
    bootstrap,
    gated,
    interleaved_times,
    log,
)
from experiments.observers import _setup as C
from jaxlab import Driver, TqdmProgress

NAME = "observers_x29"
PAPER = "P2"
DESCRIPTION = "X-29: two-stage vs LMI-only vs point-only vs direct SDP (MSE, time, cvxpy check)"

# wall-clock metrics (two runs of one seed agree on every other metric)
TIMING_METRICS = ("time_*_s", "compile_*_s", "setup_*_s", "speedup_*", "step_time_*_s",
                  "direct_sdp_seconds_per_step")  # fmt: skip

PAPER_POLES = [-0.5, -1 + 0.2j, -1 - 0.2j, -1.5 + 0.5j, -1.5 - 0.5j, -2 + 0.2j, -2 - 0.2j, -2.5]


@dataclasses.dataclass(frozen=True)
class Config:
    """Settings of one run; the defaults are QUICK (2 CPU cores, minutes)."""

    hidden: tuple[int, ...] = (16, 16)
    epsilon: float = 0.01
    uncertainty: float = 0.1
    stage1_steps: int = 1000
    stage2_max_steps: int = 8000
    lmi_only_max_steps: int = 8000
    direct_max_steps: int = 6
    num_initial: int = 16
    horizon: float = 10.0
    num_save: int = 401
    settle_time: float = 0.5  # scored from here (eps = 0.01: the peaking is over by ~0.1 s)
    n_boot: int = 2000
    # bars of the MSE-ratio claims (upper end of the 95% interval), fixed before the run:
    # "< LMI-only": two-stage / LMI-only at most 1; "<< point-only": at most 0.5 (2x lower;
    # the paper's 0.0499 vs 1.0645 is ~20x)
    lmi_ratio_bar: float = 1.0
    point_ratio_bar: float = 0.5
    # "faster": training-time speedup at least this (the one-sided speed_level bound of
    # the median per-round speedup; 2 * speed_level - 1 two-sided percentile bootstrap)
    speedup_bar: float = 1.0
    speed_level: float = 0.95
    # the speedups' interval: timing_rounds (>= 5) interleaved rounds, each timing a chunk
    # of timing_chunk point steps, one of timing_chunk LMI-barrier steps and one direct-SDP
    # step; a method's training time in a round is its step counts (of this run's training)
    # times that round's per-step seconds
    timing_rounds: int = 5
    timing_chunk: int = 200
    init_spread: tuple[float, ...] = (5.0, 0.05, 0.05, 0.05)
    # initial errors where point-only training lacks global stability: candidates with
    # scaled state error |eta_x| log-uniform in [0.1, violation_radius], kept where the
    # point-only observer's Lyapunov function (its learned P) does not decrease
    violation_candidates: int = 4096
    violation_radius: float = 300.0
    # then a bounded gradient search (O.search_decrease_violations: candidates x steps
    # gradient evaluations) pushes each candidate's state error towards a violation
    violation_search_steps: int = 50
    violation_step_size: float = 0.1
    # the stress-set row is testable only with at least this many such starts
    stress_min_starts: int = 8
    # measurement noise: white, std = noise_fraction x each output channel's RMS along the
    # noise-free evaluation trajectories, sampled every noise_period s and held (a 100 Hz
    # digital sensor); an assumed sensor grade, not a measured one
    noise_fraction: float = 0.01
    noise_period: float = 0.01
    # simulation tolerance (rtol = atol) and the reference the integration error is measured
    # against; the MSE rows need that error (RMS of the estimates) below sim_error_fraction
    # x the smallest compared RMSE
    sim_tol: float = 1e-7
    ref_tol: float = 1e-9
    sim_error_fraction: float = 0.01
    # ObserverTrainConfig fields
    train: dict[str, float] = dataclasses.field(default_factory=lambda: dict(C.TRAIN_QUICK))


QUICK = Config()
# the smoke tier (300 steps per stage: fewer leave observers whose simulations diverge and
# run to diffrax's step limit, slower than the training)
TINY = Config(
    hidden=(8,),
    stage1_steps=300,
    stage2_max_steps=300,
    lmi_only_max_steps=300,
    direct_max_steps=2,
    epsilon=0.05,  # less stiff: at 0.01 the barely trained observers' simulations diverge
    num_initial=3,  # = the violation starts found: their simulations reuse the compilations
    stress_min_starts=3,
    violation_candidates=256,
    violation_search_steps=10,
    horizon=1.0,
    num_save=21,
    n_boot=50,
    timing_chunk=5,
    train={**C.TRAIN_QUICK, "batch": 8, "rollout_steps": 3},
)
# FULL: hidden (32, 64, 32) is the paper's "small" network
FULL = Config(
    hidden=(32, 64, 32),
    stage1_steps=10000,
    stage2_max_steps=10000,
    lmi_only_max_steps=20000,
    direct_max_steps=200,
    num_initial=32,
    num_save=2001,
)


def full_work(config) -> float:
    """Compilations (a fixed 5e6: TINY's ~18 s, its 900 steps run in 0.2 s) plus training
    steps x batch x hidden width, a direct-SDP step counting as 5000 batch rows."""
    width = sum(config.hidden)
    steps = config.stage1_steps + config.stage2_max_steps + config.lmi_only_max_steps
    return 5e6 + width * (steps * config.train["batch"] + 5000 * config.direct_max_steps)


def run(config, key: jax.Array, ctx: RunContext) -> Result:
    with jax.enable_x64(True):
        return _run(config, key)


def _ratio(cfg, a, b, key, i):
    """Paired bootstrap ratio `mean(a) / mean(b)` with its 95% interval (an `Estimate`)."""
    return C.ratio_estimate(a, b, key=jax.random.fold_in(key, i), n_boot=cfg.n_boot)


def _step_speedups(cfg, tc, optimizer, params0, p_point, obs0, key, steps) -> dict:
    """Training-time speedups of two-stage over LMI-only and over direct SDP, with
    intervals over `cfg.timing_rounds` interleaved rounds (`interleaved_times`, after one
    warm-up call of each).

    Each round times a compiled chunk of `k = cfg.timing_chunk` point steps (stage 1) and
    one of `k` LMI-barrier steps (stage 2 and LMI-only: the same loss and optimiser), and
    one direct-SDP step (`O.DirectSDPStepper`: SDP solve, then the dual-gradient step). With
    this run's step counts `steps = (n1, n2, n_lmi, n_sdp)`, round r's training times are
    `T_two = (n1 t_point + n2 t_lmi) / k`, `T_lmi = n_lmi t_lmi / k`, `T_sdp = n_sdp t_sdp`,
    and its speedups `T_lmi / T_two`, `T_sdp / T_two`; the claim's estimate is the median
    per-round speedup with its percentile bootstrap over rounds at the two-sided level
    `2 speed_level - 1`. The step counts are this seed's (the interval is over timing, not
    over training runs)."""
    rounds, k = int(cfg.timing_rounds), int(cfg.timing_chunk)
    if rounds < 5:
        raise ValueError(f"config.timing_rounds: expected >= 5 interleaved rounds, got {rounds}")
    if k < 1:
        raise ValueError(f"config.timing_chunk: expected >= 1 steps, received {k}")
    keys = jax.random.split(jax.random.fold_in(key, 0), k)

    def chunk(loss_fn, params):
        step = O.stage_step(loss_fn, optimizer, tc)
        state = O.stage_init(params, optimizer)
        run_chunk = jax.jit(lambda st, ks: jax.lax.scan(step, st, ks)[1])
        return lambda: run_chunk(state, keys)

    stepper = O.DirectSDPStepper(obs0, key=jax.random.fold_in(key, 1), config=tc)
    fns = {
        "point": chunk(O.point_loss, params0),
        "lmi": chunk(O.lmi_loss, p_point),
        "direct_sdp": stepper,
    }
    times = {n: np.asarray(v) for n, v in interleaved_times(fns, warmup=1, repeats=rounds).items()}
    n1, n2, n_lmi, n_sdp = (float(s) for s in steps)
    t_two = (n1 * times["point"] + n2 * times["lmi"]) / k
    t_lmi = n_lmi * times["lmi"] / k
    t_sdp = n_sdp * times["direct_sdp"]
    level = 2 * float(cfg.speed_level) - 1
    seed = int(jax.random.randint(jax.random.fold_in(key, 2), (), 0, 2**31 - 1))

    def interval(ratios, i):
        est = bootstrap(ratios, np.median, seed=seed + i, level=level)
        return dataclasses.replace(est, method=f"{est.method} of the median per-round ratio")

    return {
        "speedup_two_stage_vs_lmi_only": interval(t_lmi / t_two, 0),
        "speedup_two_stage_vs_direct_sdp": interval(t_sdp / t_two, 1),
        "step_time_point_s": float(np.median(times["point"])) / k,
        "step_time_lmi_s": float(np.median(times["lmi"])) / k,
        "step_time_direct_sdp_s": float(np.median(times["direct_sdp"])),
        "timing_rounds": rounds,
    }


def _violation_starts(cfg, plant, params, key):
    """Initial conditions `(x0s, x_hat0s, n_bad, n_sampled)` whose scaled initial error
    `eta = ((x0 - x_hat0) / eps, d(0, x0))` violates the nominal Lyapunov decrease of
    `params` (its observer and learned `P`): `violation_candidates` candidates (scaled
    state-error radius log-uniform in `[0.1, violation_radius]`, random direction; true
    state as the evaluation's), then `violation_search_steps` steps of gradient ascent on
    the normalised decrease bound over the state-error part (`|eta_x| <=
    violation_radius`; the disturbance part is fixed by `x0`); the first `num_initial`
    violating ones are returned, `n_bad` found after the search, `n_sampled` before it."""
    obs = params.observer
    n = plant.state_dim
    kx, kd, kr = jax.random.split(key, 3)
    m = cfg.violation_candidates
    x0 = jnp.asarray(cfg.init_spread)[None, :] * jax.random.normal(kx, (m, n))
    d = jax.random.normal(kd, (m, n))
    d = d / jnp.linalg.norm(d, axis=1, keepdims=True)
    r = jnp.exp(
        jax.random.uniform(kr, (m, 1), minval=np.log(0.1), maxval=np.log(cfg.violation_radius))
    )
    eta_x = d * r
    d0 = jax.vmap(lambda x: O.total_disturbance(plant, jnp.zeros(()), x))(x0)
    etas = jnp.concatenate([eta_x, d0], axis=1)
    vals = jax.jit(
        jax.vmap(lambda e: O.decrease_bound(obs, params.P, e, rate=0.0, disturbance_bound=0.0))
    )(etas)
    n_sampled = int(np.sum(np.asarray(vals) > 0))
    free = jnp.arange(etas.shape[1]) < n
    etas, vals = O.search_decrease_violations(
        obs,
        params.P,
        etas,
        steps=cfg.violation_search_steps,
        step_size=cfg.violation_step_size,
        max_norm=cfg.violation_radius,
        free=free,
    )
    bad = np.flatnonzero(np.asarray(vals) > 0)
    pick = bad[: cfg.num_initial]
    x0v = x0[pick]
    return x0v, x0v - obs.epsilon * etas[pick, :n], int(bad.size), n_sampled


def _run(cfg, key):
    tc = C.train_config(cfg)
    k_init, k_train, k_lmi, k_sdp, k_ic = jax.random.split(key, 5)
    plant = O.x29_longitudinal(cfg.uncertainty)
    obs0 = O.NeuralObserver.from_plant(plant, tuple(cfg.hidden), epsilon=cfg.epsilon, key=k_init)
    params0 = O.CertifiedObserver.from_observer(obs0)

    log.info("two-stage training")
    adam = optax.adam(tc.learning_rate)  # one object: stage 2 and LMI-only share a compile
    p_point, p_two, info_two = O.train_two_stage(
        params0,
        key=k_train,
        config=tc,
        stage1_steps=cfg.stage1_steps,
        stage2_steps=cfg.stage2_max_steps,
        driver=Driver(progress=TqdmProgress(desc="two-stage training")),
        optimizer=adam,
    )
    t_point = info_two["stage1"]["seconds"]
    t_two = t_point + info_two["stage2"]["seconds"]
    log.info("LMI-only training")
    p_lmi, info_lmi = O.train_lmi_only(
        params0,
        key=k_lmi,
        config=tc,
        steps=cfg.lmi_only_max_steps,
        driver=Driver(progress=TqdmProgress(desc="LMI-only training")),
        optimizer=adam,
    )
    log.info("direct-SDP training")
    o_sdp, info_sdp = O.train_direct_sdp(obs0, key=k_sdp, config=tc, max_steps=cfg.direct_max_steps)
    log.info("per-step timings (%d interleaved rounds)", cfg.timing_rounds)
    speed = _step_speedups(
        cfg, tc, adam, params0, p_point, obs0, jax.random.fold_in(k_sdp, 3),
        (cfg.stage1_steps, info_two["stage2"]["steps"], info_lmi["steps"], info_sdp["steps"]),
    )  # fmt: skip

    observers = {
        "two_stage": p_two.observer,
        "lmi_only": p_lmi.observer,
        "point_only": p_point.observer,
        "direct_sdp": o_sdp,
    }
    certs = {k: O.certify_lmi(o) for k, o in observers.items()}
    for k, c in certs.items():
        log.info(
            "cvxpy certificate %s: certified=%s margin=%.3g (%s, %.2fs)",
            k,
            c.certified,
            c.margin,
            c.status,
            c.seconds,
        )

    # evaluation: random initial errors around a trimmed state, estimate starts at 0
    ts = jnp.linspace(0.0, cfg.horizon, cfg.num_save)
    spread = jnp.asarray(cfg.init_spread)
    x0s = spread * jax.random.normal(k_ic, (cfg.num_initial, 4))
    xh0s = jnp.zeros_like(x0s)
    baselines = {
        "luenberger": O.LuenbergerObserver.from_plant(plant, [-5.0, -6.0, -7.0, -8.0]),
        "eso": O.high_gain_eso(plant, epsilon=cfg.epsilon, poles=PAPER_POLES, key=k_init),
        "ekf": O.disturbance_ekf(plant),
    }
    # sensor noise: a fraction of each output channel's RMS along the noise-free trajectories
    # (the plant's trajectory does not depend on the observer: its inner loop uses the true
    # state), one realisation per start, the same for every observer
    tol = cfg.sim_tol
    y_rms = C.output_rms(
        plant, C.simulate_many(plant, baselines["luenberger"], x0s, xh0s, ts, tol=tol)
    )
    noise_std = cfg.noise_fraction * y_rms
    k_noise = jax.random.fold_in(k_ic, 5)
    noise = C.sensor_noise(
        noise_std, key=k_noise, batch=cfg.num_initial, period=cfg.noise_period,
        horizon=cfg.horizon,
    )  # fmt: skip
    trajs = {
        k: C.simulate_many(plant, o, x0s, xh0s, ts, noise, tol=tol)
        for k, o in {**observers, **baselines}.items()
    }
    mses = {k: C.mse(t) for k, t in trajs.items()}
    settle = C.settle_index(ts, cfg.settle_time)
    # integration error of these simulations (against the tighter reference tolerance)
    int_err = max(
        C.integration_error(
            plant, observers[k], x0s, xh0s, ts, noise, start=settle, tol=tol, ref_tol=cfg.ref_tol
        )
        for k in ("two_stage", "point_only")
    )
    per_ic = {k: C.per_start_mse(t, start=settle) for k, t in trajs.items()}
    mses_after = {k: float(np.mean(v)) for k, v in per_ic.items()}
    # the disturbance estimate (the extended state): the plant's trajectory is the same for
    # every observer (its inner loop uses the true state), so is the true disturbance
    d_true = C.true_disturbance(plant, trajs["two_stage"])
    with_d = ("two_stage", "lmi_only", "point_only", "direct_sdp", "eso", "ekf")
    per_ic_d = {k: C.per_start_disturbance_mse(d_true, trajs[k], start=settle) for k in with_d}
    dmse = {k: float(np.mean(v)) for k, v in per_ic_d.items()}

    # initial errors where the point-only observer lacks (sampled) global stability
    x0v, xh0v, n_bad, n_sampled = _violation_starts(
        cfg, plant, p_point, jax.random.fold_in(k_ic, 1)
    )
    n_stress = int(x0v.shape[0])
    stress = ("two_stage", "point_only", "lmi_only", "eso")
    stress_ok = n_stress >= cfg.stress_min_starts
    if stress_ok:
        noise_v = C.sensor_noise(
            noise_std, key=jax.random.fold_in(k_noise, 1), batch=n_stress,
            period=cfg.noise_period, horizon=cfg.horizon,
        )  # fmt: skip
        trajs_v = {
            k: C.simulate_many(plant, o, x0v, xh0v, ts, noise_v, tol=tol)
            for k, o in observers.items()
        }
        trajs_v["eso"] = C.simulate_many(plant, baselines["eso"], x0v, xh0v, ts, noise_v, tol=tol)
        per_v = {k: C.per_start_mse(trajs_v[k], start=settle) for k in stress}
        d_true_v = C.true_disturbance(plant, trajs_v["two_stage"])
        per_vd = {
            k: C.per_start_disturbance_mse(d_true_v, trajs_v[k], start=settle) for k in stress
        }
        ratio_v = _ratio(cfg, per_v["two_stage"], per_v["point_only"], key, 91)
        ratio_vd = _ratio(cfg, per_vd["two_stage"], per_vd["point_only"], key, 92)
    else:
        per_v = per_vd = {}
        nan = float("nan")
        ratio_v = ratio_vd = Estimate(nan, nan, nan, 0.95, "no stress set", 1)
    k_boot = jax.random.fold_in(key, 77)
    ratio_lmi = _ratio(cfg, per_ic["two_stage"], per_ic["lmi_only"], k_boot, 0)
    ratio_point = _ratio(cfg, per_ic["two_stage"], per_ic["point_only"], k_boot, 1)
    ratio_d_lmi = _ratio(cfg, per_ic_d["two_stage"], per_ic_d["lmi_only"], k_boot, 2)
    ratio_d_point = _ratio(cfg, per_ic_d["two_stage"], per_ic_d["point_only"], k_boot, 3)
    t_lmi = info_lmi["seconds"]
    t_sdp = info_sdp["seconds"]
    metrics = {
        "time_two_stage_s": t_two,
        "time_stage1_s": t_point,
        "time_stage2_s": info_two["stage2"]["seconds"],
        "time_lmi_only_s": t_lmi,
        "time_point_only_s": t_point,
        "time_direct_sdp_s": t_sdp,
        "steps_stage2": info_two["stage2"]["steps"],
        "steps_lmi_only": info_lmi["steps"],
        "steps_direct_sdp": info_sdp["steps"],
        "direct_sdp_seconds_per_step": t_sdp / max(info_sdp["steps"], 1),
        "compile_two_stage_s": info_two["stage1"]["compile_seconds"]
        + info_two["stage2"]["compile_seconds"],
        "compile_lmi_only_s": info_lmi["compile_seconds"],
        "setup_direct_sdp_s": info_sdp["setup_seconds"],
        "lmi_only_reached_certificate": int(info_lmi["stopped"]),
        "direct_sdp_reached_certificate": int(info_sdp["certified"]),
        **{f"mse_{k}": v for k, v in mses.items()},
        **{f"mse_after_transient_{k}": v for k, v in mses_after.items()},
        "mse_ratio_two_stage_vs_lmi_only": ratio_lmi,
        "mse_ratio_two_stage_vs_point_only": ratio_point,
        **{f"dist_mse_after_transient_{k}": v for k, v in dmse.items()},
        "dist_mse_ratio_two_stage_vs_lmi_only": ratio_d_lmi,
        "dist_mse_ratio_two_stage_vs_point_only": ratio_d_point,
        "violation_starts": n_bad,
        "violation_starts_sampled": n_sampled,
        "stress_starts": n_stress,
        "integration_error_rms": int_err,
        **{f"noise_std_{i}": float(v) for i, v in enumerate(np.asarray(noise_std))},
        **{f"violation_mse_after_transient_{k}": float(np.mean(v)) for k, v in per_v.items()},
        **{f"violation_dist_mse_after_transient_{k}": float(np.mean(v)) for k, v in per_vd.items()},
        "violation_mse_ratio_two_stage_vs_point_only": ratio_v,
        "violation_dist_mse_ratio_two_stage_vs_point_only": ratio_vd,
        **{f"certified_{k}": int(c.certified) for k, c in certs.items()},
        **{f"margin_{k}": c.margin for k, c in certs.items()},
        "speedup_one_run_two_stage_vs_lmi_only": t_lmi / t_two,
        "speedup_one_run_two_stage_vs_direct_sdp": t_sdp / t_two,
        **speed,
    }

    lmi_lb = (
        ""
        if info_lmi["stopped"]
        else f" (not certified after {info_lmi['steps']} steps: a lower bound)"
    )
    sdp_lb = (
        ""
        if info_sdp["certified"]
        else f" (not certified after {info_sdp['steps']} SDP steps: a lower bound)"
    )

    def f(v):
        return f"{v:.4g}"

    steps_txt = (
        f"step counts of this run x per-step seconds (median of {cfg.timing_rounds} "
        f"interleaved rounds: point {speed['step_time_point_s']:.3g} s, LMI "
        f"{speed['step_time_lmi_s']:.3g} s); two-stage {cfg.stage1_steps} + "
        f"{info_two['stage2']['steps']} steps"
    )

    stress = (
        f"{n_sampled} of {cfg.violation_candidates} sampled initial errors violate the "
        f"point-only decrease, {n_bad} after {cfg.violation_search_steps} gradient-search "
        f"steps each; {n_stress} simulated"
        + (
            f"; there: state {f(float(np.mean(per_v['two_stage'])))} vs "
            f"{f(float(np.mean(per_v['point_only'])))}; disturbance estimate "
            f"{f(float(np.mean(per_vd['two_stage'])))} vs "
            f"{f(float(np.mean(per_vd['point_only'])))} (ratio {ratio_vd:.3g})"
            if stress_ok
            else f" (scaled radius <= {cfg.violation_radius:g}): too few to test on"
        )
    )
    compared = ("two_stage", "lmi_only", "point_only")
    floor = min(
        min(float(np.sqrt(mses_after[k])) for k in compared),
        min(float(np.sqrt(dmse[k])) for k in compared),
    )
    metrics["smallest_compared_rmse"] = floor

    def sim_gate(claim):
        return gated(
            claim,
            Precondition(
                f"integration error (rtol = atol = {tol:g} vs {cfg.ref_tol:g}, RMS of the "
                f"estimates) <= {cfg.sim_error_fraction:g} x the smallest compared RMSE",
                int_err <= cfg.sim_error_fraction * floor,
                f"{int_err:.3g} vs {cfg.sim_error_fraction:g} x {floor:.3g}",
            ),
        )

    noise_txt = (
        f"sensor noise {cfg.noise_fraction:g} x output RMS at {1 / cfg.noise_period:g} Hz; "
        f"integration error {int_err:.2g}"
    )

    def stress_gate(claim):
        return gated(
            claim,
            Precondition(
                f">= {cfg.stress_min_starts} initial errors where the point-only observer's "
                "Lyapunov decrease fails",
                stress_ok,
                f"{n_stress} ({n_bad} of {cfg.violation_candidates} candidates after the "
                "gradient search)",
            ),
        )

    claims = [
        sim_gate(
            at_most(
                ratio_d_lmi,
                cfg.lmi_ratio_bar,
                null=f"LMI-only (disturbance MSE ratio {cfg.lmi_ratio_bar:g})",
                subject="two-stage / LMI-only disturbance-estimate MSE after the transient",
                claim="two-stage disturbance-estimate MSE after the transient (t >= "
                f"{cfg.settle_time:g} s) < LMI-only",
                paper="0.0499 vs 0.0707 (metric not given in the paper's code)",
                detail=f"{f(dmse['two_stage'])} vs {f(dmse['lmi_only'])}; paired bootstrap "
                f"over {cfg.num_initial} initial errors; point-only {f(dmse['point_only'])}, "
                f"ESO {f(dmse['eso'])}, EKF {f(dmse['ekf'])}; {noise_txt}",
            )
        ),
        sim_gate(
            at_most(
                ratio_d_point,
                cfg.point_ratio_bar,
                null=f"point-only, at most {1 / cfg.point_ratio_bar:g}x worse (disturbance "
                f"MSE ratio {cfg.point_ratio_bar:g})",
                subject="two-stage / point-only disturbance-estimate MSE after the transient",
                claim="two-stage disturbance-estimate MSE after the transient << point-only "
                "(at least 2x lower)",
                paper="0.0499 vs 1.0645 (metric not given in the paper's code)",
                detail=f"{f(dmse['two_stage'])} vs {f(dmse['point_only'])}; {noise_txt}",
            )
        ),
        stress_gate(
            at_most(
                ratio_vd,
                cfg.point_ratio_bar,
                null=f"point-only, at most {1 / cfg.point_ratio_bar:g}x worse (disturbance "
                f"MSE ratio {cfg.point_ratio_bar:g})",
                subject="two-stage / point-only disturbance-estimate MSE on the stress set",
                claim="from initial errors where the point-only observer's Lyapunov function "
                "does not decrease, two-stage disturbance-estimate MSE after the transient << "
                "point-only (at least 2x lower)",
                paper="0.0499 vs 1.0645",
                detail=stress,
            )
        ),
        at_least(
            Estimate.point(
                float(certs["two_stage"].certified),
                method="cvxpy/Clarabel LMI check (1 certified, 0 not)",
            ),
            1.0,
            null="not certified (LMI infeasible, or margin <= 1e-7)",
            subject="two-stage observer certified",
            claim="two-stage observer is certified (independent cvxpy/Clarabel LMI check)",
            paper="certified (LMI feasible)",
            detail=f"margin {certs['two_stage'].margin:.3g}",
        ),
        sim_gate(
            at_most(
                ratio_lmi,
                cfg.lmi_ratio_bar,
                null=f"LMI-only (MSE ratio {cfg.lmi_ratio_bar:g})",
                subject="two-stage / LMI-only MSE after the transient",
                claim=f"two-stage MSE after the transient (t >= {cfg.settle_time:g} s) < "
                "LMI-only MSE",
                paper="0.0499 vs 0.0707",
                detail=f"{f(mses_after['two_stage'])} vs {f(mses_after['lmi_only'])}; paired "
                f"bootstrap over {cfg.num_initial} initial errors; whole horizon incl. t = 0: "
                f"{f(mses['two_stage'])} vs {f(mses['lmi_only'])}; {noise_txt}",
            )
        ),
        sim_gate(
            at_most(
                ratio_point,
                cfg.point_ratio_bar,
                null=f"point-only, at most {1 / cfg.point_ratio_bar:g}x worse (MSE ratio "
                f"{cfg.point_ratio_bar:g})",
                subject="two-stage / point-only MSE after the transient",
                claim="two-stage MSE after the transient << point-only MSE (at least 2x lower)",
                paper="0.0499 vs 1.0645",
                detail=f"{f(mses_after['two_stage'])} vs {f(mses_after['point_only'])}; whole "
                f"horizon: {f(mses['two_stage'])} vs {f(mses['point_only'])}; {noise_txt}",
            )
        ),
        stress_gate(
            at_most(
                ratio_v,
                cfg.point_ratio_bar,
                null=f"point-only, at most {1 / cfg.point_ratio_bar:g}x worse (MSE ratio "
                f"{cfg.point_ratio_bar:g})",
                subject="two-stage / point-only MSE after the transient on the stress set",
                claim="from initial errors where point-only training lacks global stability "
                "(its Lyapunov function does not decrease there), two-stage MSE after the "
                "transient << point-only (at least 2x lower)",
                paper="0.0499 vs 1.0645",
                detail=stress,
            )
        ),
        at_least(
            speed["speedup_two_stage_vs_lmi_only"],
            cfg.speedup_bar,
            null=f"LMI-only (speedup {cfg.speedup_bar:g})",
            subject="training time LMI-only / two-stage",
            claim="two-stage trains faster than LMI-only",
            paper="895 s vs 2210 s (paper's GPU/CPU)",
            detail=f"{steps_txt}; LMI-only {info_lmi['steps']} steps{lmi_lb}; the training "
            f"runs themselves: {t_two:.1f} s vs {t_lmi:.1f} s on {C.machine()}",
            timing=True,
        ),
        at_least(
            speed["speedup_two_stage_vs_direct_sdp"],
            cfg.speedup_bar,
            null=f"direct SDP-in-the-loop training (speedup {cfg.speedup_bar:g})",
            subject="training time direct SDP / two-stage",
            claim="two-stage trains faster than direct SDP-in-the-loop training",
            paper="faster than direct LMI methods",
            detail=f"{steps_txt}; direct SDP {info_sdp['steps']} steps{sdp_lb} at "
            f"{speed['step_time_direct_sdp_s']:.3g} s; the training runs themselves: "
            f"{t_two:.1f} s vs {t_sdp:.1f} s",
            timing=True,
        ),
    ]

    fig, axes = plt.subplots(2, 1, figsize=(7, 6), sharex=True)
    tsn = np.asarray(ts)
    axes[0].plot(tsn, np.asarray(trajs["two_stage"].x[0, :, 1]), "k", lw=2, label="true alpha")
    for k in ("two_stage", "lmi_only", "point_only", "eso", "ekf"):
        axes[0].plot(tsn, np.asarray(trajs[k].x_hat[0, :, 1]), lw=1, label=k)
    axes[0].set_ylabel("alpha (rad)")
    axes[0].legend(fontsize=7)
    for k in ("two_stage", "lmi_only", "point_only"):
        with np.errstate(over="ignore", invalid="ignore"):  # a diverged observer: inf
            e = np.sqrt(np.mean(np.asarray(trajs[k].x - trajs[k].x_hat) ** 2, axis=(0, 2)))
        axes[1].semilogy(tsn, np.maximum(e, 1e-12), label=k)
    axes[1].set_xlabel("t (s)")
    axes[1].set_ylabel("RMS state error")
    axes[1].legend(fontsize=7)
    fig.tight_layout()

    fig2, ax = plt.subplots(1, 2, figsize=(9, 3.2))
    ax[0].semilogy(info_two["stage1"]["losses"], label="stage 1 (point)")
    ax[0].set_title("stage-1 loss")
    ax[1].semilogy(info_two["stage2"]["losses"], label="two-stage: stage 2")
    ax[1].semilogy(info_lmi["losses"], label="LMI-only")
    ax[1].set_title("LMI barrier loss")
    ax[1].legend(fontsize=7)
    fig2.tight_layout()

    notes = (
        "Synthetic simulation of the X-29 longitudinal ND-PA model (matrices from the issue / the "
        "paper's public code; output map = the paper's 5-output C), with an LQR inner loop on the "
        "true state, a pilot-like sinusoidal reference, 10 % relative model error and a sinusoidal "
        "external disturbance, all unknown to the observers. Times are training wall-clock "
        "seconds without the one-off JIT compilation / SDP construction (reported separately as "
        f"compile_*/setup_* metrics), measured on {C.machine()}; the speedup claims' intervals "
        f"come from {cfg.timing_rounds} interleaved rounds of per-step timings (point, LMI, "
        "direct-SDP steps) times this run's step counts; the paper's seconds come from "
        "its own (different) machine, so only the ordering is comparable. Network: hidden "
        f"{list(cfg.hidden)} tanh (paper: 32-64-32). MSE also reported for baselines: Luenberger "
        "(no disturbance estimate), linear high-gain ESO with the paper's poles, EKF on the "
        "extended state. MSE claims: after the transient (t >= settle_time), t = 0 excluded. "
        f"Simulations: diffrax Tsit5 at rtol = atol = {cfg.sim_tol:g} (integration error "
        f"measured against {cfg.ref_tol:g}: integration_error_rms; at 1e-10 the noisy "
        "high-gain runs need > 1e5 steps each). Measurement noise: white "
        f"Gaussian, std {cfg.noise_fraction:g} x each output channel's RMS along the "
        f"noise-free trajectories (noise_std_*), sampled at {1 / cfg.noise_period:g} Hz and "
        "held (a digital sensor; an assumed grade, preset in Config), one realisation per "
        "start shared by all observers. The stress set: initial errors where the point-only "
        "observer's learned Lyapunov function does not decrease, found by sampling and a "
        "bounded gradient search (O.search_decrease_violations)."
    )
    return Result(
        metrics=metrics,
        claims=claims,
        figures={"x29_trajectories": fig, "x29_training": fig2},
        notes=notes,
    )
