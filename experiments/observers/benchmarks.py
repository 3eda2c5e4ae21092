"""P2 claim (nonlinear benchmarks): certified neural observers track better than baselines.

Van der Pol, Duffing and a pendulum with an unknown disturbance (all measured in
position only). Per system: a two-stage-trained neural extended-state observer
(certified independently with cvxpy/Clarabel). Its estimation loss is the
after-transient error of RK4 rollouts of the real nonlinear plant with the observer in
the loop (`O.rollout_estimation`; random initial states and disturbance phases), and
stage 1 keeps its best state on held-out rollouts (`jaxlab.ValidatedStep` through
`O.fit(val_loss=...)`, the initialisation included). Baselines with the same
knowledge (the linearisation at the origin, plus for the tuned ESO the same
training rollouts): a Luenberger observer, the linear high-gain ESO with the preset
poles, and that ESO with its bandwidth chosen on the training rollouts (the tuned ESO,
whose gain the neural observer's output injection starts from). The EKF on the extended
state, which knows the nonlinear nominal model, is reported separately. Errors are RMSE
after the transient (saved times from `settle_time`, `t = 0` never scored) of diffrax
simulations from fresh initial errors, with a paired bootstrap interval over them.
Stage 1 stops early once validation has not improved for `stage1_patience`
evaluations; stage 2 (LMI fine-tuning; `stage2_rollout`: its estimation term is the same
nonlinear-plant rollouts, else the linearised error model, and the claim text says
which ran) keeps its best validated state among those its own (P, T) certify
(`O.certified_score`), and stage 1's result when none is certified; the tracking claim
is testable only for an observer the independent cvxpy check certifies. A check that
training does not end worse than its initialisation (the tuned ESO gain plus a random
MLP) compares the two on those test simulations. Also: the sampled local stability
radius and the probabilistic coverage level of the point-guided (stage-1) observer.
"""

from __future__ import annotations

import dataclasses
import functools

import equinox as eqx
import jax
import jax.numpy as jnp
import matplotlib.pyplot as plt
import numpy as np

import jaxlab.observers as O
from experiments._harness import (
    Estimate,
    Precondition,
    Result,
    RunContext,
    all_of,
    at_least,
    at_most,
    gated,
    log,
)
from experiments.observers import _setup as C

NAME = "observers_benchmarks"
PAPER = "P2"
DESCRIPTION = (
    "Van der Pol / Duffing / pendulum: neural observer vs Luenberger, ESO, EKF; radius and coverage"
)


@dataclasses.dataclass(frozen=True)
class Config:
    """Settings of one run; the defaults are QUICK (2 CPU cores, minutes)."""

    systems: tuple[str, ...] = ("vanderpol", "duffing", "pendulum")
    hidden: tuple[int, ...] = (8, 8)
    epsilon: float = 0.05
    eso_poles: tuple[float, ...] = (-1.0, -1.5, -2.0)
    stage1_steps: int = 2000  # at most: early stopping after stage1_patience evaluations
    stage1_patience: int = 4  # without a validation improvement
    stage2_max_steps: int = 2000
    num_initial: int = 16
    horizon: float = 10.0
    num_save: int = 201
    settle_time: float = 1.0
    # nonlinear-rollout estimation loss (RK4 rollouts of the real plant, fast observer)
    rollout_dt: float = 0.01
    rollout_horizon: float = 2.0
    rollout_batch: int = 4
    # stage 2's estimation term: the same nonlinear-plant rollouts as stage 1 (False: the
    # linearised error model)
    stage2_rollout: bool = True
    rollout_phase: float = 10.0  # start times uniform in [0, rollout_phase): disturbance phase
    num_val: int = 8
    val_every: int = 50
    # bandwidth multipliers of the ESO poles tried on the training rollouts (tuned ESO)
    eso_scales: tuple[float, ...] = (0.25, 0.5, 1.0, 2.0, 4.0, 8.0)
    n_boot: int = 2000
    # fixed before the run: "better" means the 95% interval of neural / best same-knowledge
    # baseline lies below ratio_margin; "not worse than init" means the interval of
    # trained / initial lies at or below init_ratio_bar
    ratio_margin: float = 1.0
    init_ratio_bar: float = 1.0
    coverage_samples: int = 2000
    coverage_confidence: float = 0.99
    domain_radius: float = 2.0
    # ObserverTrainConfig fields
    train: dict[str, float] = dataclasses.field(
        default_factory=lambda: {**C.TRAIN_QUICK, "disturbance_bound": 0.5, "rate": 0.1}
    )


QUICK = Config()
# the smoke tier: one system (the three share every stage; each costs ~30 s of compiles)
TINY = Config(
    systems=("vanderpol",),
    hidden=(4,),
    stage1_steps=20,
    stage1_patience=2,
    stage2_max_steps=20,
    num_initial=4,
    horizon=2.0,
    num_save=21,
    settle_time=0.5,
    rollout_dt=0.05,
    rollout_horizon=1.0,
    rollout_batch=2,
    num_val=2,
    val_every=10,
    eso_scales=(0.5, 1.0, 2.0),
    n_boot=50,
    coverage_samples=100,
    train={**C.TRAIN_QUICK, "batch": 8, "rollout_steps": 3, "disturbance_bound": 0.5, "rate": 0.1},
)
FULL = Config(
    hidden=(32, 64, 32),
    stage1_steps=5000,
    stage2_max_steps=10000,
    num_initial=32,
    coverage_samples=100000,
    rollout_horizon=4.0,
    rollout_batch=16,
    stage2_rollout=True,
)


def full_work(config) -> float:
    """Per system: its compilations (a fixed 1e6: ~20 s, all of TINY's time, while TINY's
    1920 units of steps run in 0.05 s) plus the RK4 rollout steps of training and validation."""
    roll = config.rollout_batch * config.rollout_horizon / config.rollout_dt
    stage2 = roll if config.stage2_rollout else config.train["batch"]
    steps = config.stage1_steps + config.stage2_max_steps
    val = steps / config.val_every * config.num_val * config.horizon / config.rollout_dt
    work = config.stage1_steps * roll + config.stage2_max_steps * stage2 + val
    return len(config.systems) * (1e6 + work)


_PLANTS = {"vanderpol": O.VanDerPol, "duffing": O.Duffing, "pendulum": O.DisturbedPendulum}


def run(config, key: jax.Array, ctx: RunContext) -> Result:
    with jax.enable_x64(True):
        return _run(config, key)


def _rollout_steps(cfg, horizon: float) -> int:
    return int(round(horizon / cfg.rollout_dt))


def _tuned_eso(cfg, plant, est, key):
    """The ESO pole scale (bandwidth) with the lowest training-rollout loss (same rollouts,
    same loss as the neural observer's estimation term); returns (observer, scale)."""
    scores = {}
    for s in cfg.eso_scales:
        eso = O.high_gain_eso(
            plant, epsilon=cfg.epsilon, poles=[s * p for p in cfg.eso_poles], key=key
        )
        # several fresh batches: the tuned baseline sees as many rollouts as a few train steps
        vals = [float(_jit_est(est, eso, jax.random.fold_in(key, j))) for j in range(8)]
        scores[s] = float(np.mean(vals)) if np.all(np.isfinite(vals)) else np.inf
    best = min(scores, key=scores.__getitem__)
    eso = O.high_gain_eso(
        plant, epsilon=cfg.epsilon, poles=[best * p for p in cfg.eso_poles], key=key
    )
    return eso, best


@functools.partial(jax.jit, static_argnums=0)
def _jit_est(est, observer, key):
    return est(observer, key)


def _run(cfg, key):
    tc = C.train_config(cfg)
    metrics, claims, figures = {}, [], {}
    for name, k in zip(cfg.systems, jax.random.split(key, len(cfg.systems)), strict=True):
        log.info("system %s", name)
        plant = _PLANTS[name]()
        k_init, k_train, k_ic, k_rad, k_cov = jax.random.split(k, 5)
        k_val, k_tune = jax.random.split(jax.random.fold_in(k, 11))
        eso = O.high_gain_eso(plant, epsilon=cfg.epsilon, poles=cfg.eso_poles, key=k_init)
        # estimation term: after-transient error of RK4 rollouts of the real plant
        start = max(1, _rollout_steps(cfg, cfg.settle_time))
        est = O.rollout_estimation(
            plant,
            initial_spread=1.0,
            batch=cfg.rollout_batch,
            dt=cfg.rollout_dt,
            steps=_rollout_steps(cfg, cfg.rollout_horizon),
            start=start,
            period=cfg.rollout_phase,
        )
        # held-out validation rollouts (own key) over the test horizon
        kv1, kv2 = jax.random.split(k_val)
        val_data = (
            jax.random.normal(kv1, (cfg.num_val, 2)),
            cfg.rollout_phase * jax.random.uniform(kv2, (cfg.num_val,)),
        )
        val_steps = _rollout_steps(cfg, cfg.horizon)
        # the baseline's bandwidth tuned on the training rollouts; the neural observer's
        # output-injection gain starts from it (the paper's observer = nominal model + gain +
        # neural correction); the MLP is random
        eso_tuned, scale = _tuned_eso(cfg, plant, est, k_tune)
        metrics[f"eso_tuned_scale_{name}"] = scale
        obs0 = O.NeuralObserver.from_plant(
            plant, tuple(cfg.hidden), epsilon=cfg.epsilon, key=k_init, gain=eso_tuned.gain
        )

        def val_loss(params, data, plant=plant, start=start, val_steps=val_steps):
            x0s, t0s = data
            v = O.rollout_mse(
                plant,
                params.observer,
                x0s,
                jnp.zeros_like(x0s),
                dt=cfg.rollout_dt,
                steps=val_steps,
                start=start,
                t0s=t0s,
            )
            return jnp.where(jnp.isfinite(v), v, jnp.inf)

        p_point, p_two, info = O.train_two_stage(
            O.CertifiedObserver.from_observer(obs0),
            key=k_train,
            config=tc,
            stage1_steps=cfg.stage1_steps,
            stage2_steps=cfg.stage2_max_steps,
            estimation=est,
            stage2_estimation=est if cfg.stage2_rollout else None,
            validation=(val_loss, val_data, cfg.val_every),
            # stage 2 keeps the best validated state among those its own (P, T) certify
            # (stage 1's result when none is)
            stage2_validation=(O.certified_score(val_loss, tc.lmi_margin), val_data, cfg.val_every),
            stage1_patience=cfg.stage1_patience,
        )
        i1, i2 = info["stage1"], info["stage2"]
        self_cert = bool(np.isfinite(i2["best_val_loss"]))
        metrics[f"stage2_self_certified_{name}"] = int(self_cert)
        metrics[f"val_mse_init_{name}"] = i1["init_val_loss"]
        metrics[f"val_mse_stage1_best_{name}"] = i1["best_val_loss"]
        metrics[f"stage1_best_step_{name}"] = i1["best_step"]
        metrics[f"steps_stage1_{name}"] = i1["steps"]
        metrics[f"val_mse_two_stage_{name}"] = float(eqx.filter_jit(val_loss)(p_two, val_data))
        metrics[f"steps_stage2_{name}"] = i2["steps"]
        metrics[f"stage2_best_step_{name}"] = i2["best_step"]
        cert = O.certify_lmi(p_two.observer)
        metrics[f"certified_{name}"] = int(cert.certified)
        metrics[f"margin_{name}"] = cert.margin
        metrics[f"time_two_stage_{name}_s"] = i1["seconds"] + i2["seconds"]

        # local radius and coverage of the point-guided (stage-1) observer with its learned P
        P1 = p_point.P
        etas, vals = O.sampled_decrease(
            p_point.observer,
            P1,
            key=k_rad,
            radius=cfg.domain_radius,
            num_samples=cfg.coverage_samples,
        )
        metrics[f"radius_{name}"] = O.local_stability_radius(p_point.observer, P1, etas, vals)
        cov_etas = O.sample_errors(
            cfg.coverage_samples,
            obs0.extended_dim,
            key=k_cov,
            radius=cfg.domain_radius,
            min_radius=tc.min_radius,
        )
        robust = jax.vmap(
            functools.partial(
                O.decrease_bound,
                p_point.observer,
                P1,
                rate=tc.rate,
                disturbance_bound=tc.disturbance_bound,
            )
        )(cov_etas)
        fails = int(np.sum(np.asarray(robust) >= 0))
        metrics[f"coverage_{name}"] = O.coverage_bound(
            cfg.coverage_samples, fails, cfg.coverage_confidence
        )
        metrics[f"coverage_failures_{name}"] = fails

        observers = {
            "neural": p_two.observer,
            "point_only": p_point.observer,
            "luenberger": O.LuenbergerObserver.from_plant(plant, [-3.0, -4.0]),
            "eso": eso,
            "eso_tuned": eso_tuned,
            "ekf": O.disturbance_ekf(
                plant, state_noise=1e-3, disturbance_noise=10.0, measurement_noise=1e-3
            ),
            "initial": obs0,  # the neural observer before training
        }
        ts = jnp.linspace(0.0, cfg.horizon, cfg.num_save)
        x0s = jax.random.normal(k_ic, (cfg.num_initial, 2))
        xh0s = jnp.zeros_like(x0s)
        trajs = {m: C.simulate_many(plant, o, x0s, xh0s, ts) for m, o in observers.items()}
        settle = C.settle_index(ts, cfg.settle_time)
        per_ic = {m: C.per_start_mse(tr, start=settle) for m, tr in trajs.items()}
        for m, tr in trajs.items():
            metrics[f"rmse_{name}_{m}"] = float(np.sqrt(C.mse(tr)))
            metrics[f"rmse_after_transient_{name}_{m}"] = float(np.sqrt(np.mean(per_ic[m])))
        after = {m: metrics[f"rmse_after_transient_{name}_{m}"] for m in observers}
        same = ("luenberger", "eso", "eso_tuned")  # the neural observer's model knowledge
        best = min(same, key=after.__getitem__)
        kb = jax.random.fold_in(k, 77)
        # ratios of mean squared errors; the RMSE ratio is their square root
        ratio = C.sqrt_estimate(
            C.ratio_estimate(
                per_ic["neural"], per_ic[best], key=jax.random.fold_in(kb, 0), n_boot=cfg.n_boot
            )
        )
        ratio_init = C.sqrt_estimate(
            C.ratio_estimate(
                per_ic["neural"],
                per_ic["initial"],
                key=jax.random.fold_in(kb, 1),
                n_boot=cfg.n_boot,
            )
        )
        metrics[f"rmse_ratio_{name}_neural_vs_best"] = ratio
        metrics[f"rmse_ratio_{name}_neural_vs_initial"] = ratio_init
        trained_on = (
            "trained on nonlinear-plant rollouts in both stages"
            if cfg.stage2_rollout
            else "stage 1 on nonlinear-plant rollouts, stage 2 on the linearised error model"
        )
        claims.append(
            gated(
                at_most(
                    ratio,
                    cfg.ratio_margin,
                    null=f"the best same-knowledge baseline, {best} (RMSE ratio "
                    f"{cfg.ratio_margin:g})",
                    subject=f"neural / {best} RMSE after the transient",
                    claim=f"{name}: certified neural observer ({trained_on}) tracks better "
                    "than the best baseline with the same model knowledge (RMSE after the "
                    "transient)",
                    paper="improved tracking accuracy over observer baselines",
                    detail=f"neural {after['neural']:.4g} vs {best} {after[best]:.4g} (Luenberger "
                    f"{after['luenberger']:.4g}, ESO {after['eso']:.4g}, ESO with bandwidth "
                    f"x{scale:g} tuned on the training rollouts {after['eso_tuned']:.4g}; "
                    f"linearised model; t >= {cfg.settle_time:g}); paired bootstrap over "
                    f"{cfg.num_initial} initial errors; EKF with the full nonlinear model "
                    f"{after['ekf']:.4g} (not a same-knowledge baseline); whole horizon incl. "
                    f"t = 0: neural {metrics[f'rmse_{name}_neural']:.4g} vs {best} "
                    f"{metrics[f'rmse_{name}_{best}']:.4g}",
                ),
                Precondition(
                    "the returned neural observer is certified (independent cvxpy check)",
                    bool(cert.certified),
                    f"certified={cert.certified}, margin {cert.margin:.3g}; stage 2 "
                    + (
                        "returned a self-certified state"
                        if self_cert
                        else "certified no state: stage 1's result returned"
                    ),
                ),
            )
        )
        stages = (
            f"stage 1 keeps its best validated state (step {i1['best_step']} of "
            f"{i1['steps']} run, patience {cfg.stage1_patience}; validation MSE "
            f"{i1['init_val_loss']:.3g} -> {i1['best_val_loss']:.3g}; "
            + (
                f"stage 2 keeps its best validated self-certified state, step {i2['best_step']}"
                if self_cert
                else f"no stage-2 state certified by its own (P, T) in {i2['steps']} "
                "steps: stage 1's result kept"
            )
            + f", validation MSE {metrics[f'val_mse_two_stage_{name}']:.3g})"
        )
        moved = i1["best_step"] > 0 or self_cert
        claims.append(
            gated(
                at_most(
                    ratio_init,
                    cfg.init_ratio_bar,
                    null=f"the initialisation, tuned ESO gain + random MLP (RMSE ratio "
                    f"{cfg.init_ratio_bar:g})",
                    subject="trained / initial RMSE after the transient",
                    claim=f"{name}: training does not end worse than its initialisation (RMSE "
                    "after the transient, fresh initial errors)",
                    paper="training improves the observer (implicit)",
                    detail=f"trained {after['neural']:.4g} vs initial {after['initial']:.4g}, "
                    f"point-only {after['point_only']:.4g}; {stages}",
                ),
                # with the initial state returned the ratio is 1 by construction
                Precondition(
                    "training returned a state other than the initial one",
                    bool(moved),
                    f"stage 1 best step {i1['best_step']}, stage 2 "
                    + ("returned a self-certified state" if self_cert else "certified no state"),
                ),
            )
        )
        fig, ax = plt.subplots(2, 1, figsize=(7, 5), sharex=True)
        tsn = np.asarray(ts)
        ax[0].plot(tsn, np.asarray(trajs["neural"].x[0, :, 1]), "k", lw=2, label="true x2")
        for m in ("neural", "eso", "eso_tuned", "ekf", "luenberger"):
            ax[0].plot(tsn, np.asarray(trajs[m].x_hat[0, :, 1]), lw=1, label=m)
        ax[0].legend(fontsize=7)
        ax[0].set_title(name)
        for m in ("neural", "eso", "eso_tuned", "ekf", "luenberger"):
            with np.errstate(over="ignore", invalid="ignore"):  # a diverged observer: inf
                err = np.sqrt(np.mean(np.asarray(trajs[m].x - trajs[m].x_hat) ** 2, axis=(0, 2)))
            ax[1].semilogy(tsn, np.maximum(err, 1e-12), label=m)
        ax[1].set_ylabel("RMS error")
        ax[1].set_xlabel("t")
        fig.tight_layout()
        figures[f"{name}_trajectory"] = fig
    certified = {
        s: at_least(
            Estimate.point(
                metrics[f"certified_{s}"], method="cvxpy/Clarabel LMI check (1 certified, 0 not)"
            ),
            1.0,
            null="not certified (LMI infeasible, or margin <= 1e-7)",
            subject=f"{s}: certified",
            claim=f"{s}: neural observer certified by the independent cvxpy check",
            paper="LMI-certified",
            detail=f"margin {metrics[f'margin_{s}']:.3g}",
        )
        for s in cfg.systems
    }
    claims.insert(
        0,
        all_of(
            certified,
            claim="all benchmark neural observers certified by the independent cvxpy check",
            paper="LMI-certified",
            detail=f"{sum(metrics[f'certified_{s}'] for s in cfg.systems)}/{len(cfg.systems)} "
            "certified",
        ),
    )
    notes = (
        "Synthetic simulations (diffrax Tsit5). Disturbances: Van der Pol external sinusoid; "
        "Duffing 10 % cubic-stiffness error + sinusoid (known forcing as input); pendulum 20 % "
        "damping error + a square-ish gust. Neural observer, Luenberger and ESO are built on "
        "the linearisation at the origin (the ESO lumps the nonlinearity into the extended "
        "state); the neural observer's estimation loss is the after-transient error of RK4 "
        f"rollouts (dt {cfg.rollout_dt:g}, {cfg.rollout_horizon:g} s, batch "
        f"{cfg.rollout_batch}) of the real plant with the observer in the loop, and the tuned "
        "ESO picks its bandwidth on the same rollouts (the same simulator access); the EKF "
        "uses the nonlinear nominal model and is reported separately. The neural gain starts "
        "from the tuned ESO's. Stage 1 is validated "
        f"every {cfg.val_every} steps on {cfg.num_val} held-out rollouts, stops after "
        f"{cfg.stage1_patience} evaluations without improvement and returns its best state "
        "(the initial one included); stage 2 ("
        + (
            "estimation term on the same rollouts"
            if cfg.stage2_rollout
            else "linearised estimation term"
        )
        + ") runs its step budget and keeps the best validated state among those its own "
        "(P, T) certify (stage 1's result if none). Simulations at rtol = atol = "
        f"{C.SIM_TOL:g}, no measurement noise. "
        "radius_*: largest ball inside the largest V-sublevel set free of sampled nominal "
        "decrease violations of the stage-1 observer (scaled error coordinates; assumes "
        "Lipschitz decrease and dense samples). coverage_*: one-sided Clopper-Pearson lower "
        f"bound (confidence {cfg.coverage_confidence}) on the probability, under the sampling "
        "distribution on the annulus min_radius <= |eta| <= domain_radius, that the robust "
        "decrease condition (rate, disturbance bound) of the stage-1 observer holds. rmse_* is "
        "over the whole horizon (high-gain observers pay for their initial peaking there); "
        "rmse_after_transient_* from settle_time on (the claims use these)."
    )
    return Result(metrics=metrics, claims=claims, figures=figures, notes=notes)
