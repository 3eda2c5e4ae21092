"""P2 claim (nonlinear benchmarks): certified neural observers track as well as baselines.

Van der Pol, Duffing and a pendulum with an unknown disturbance (all measured in
position only). Per system: a two-stage-trained neural extended-state observer
(certified independently with cvxpy/Clarabel) against the baselines with the same
model knowledge (the linearisation at the origin): a Luenberger observer and a
linear high-gain ESO; the EKF on the extended state, which knows the nonlinear
nominal model, is reported separately. Errors are RMSE after the transient (saved
times from `settle_time`, `t = 0` never scored). A check that training does not end
worse than its initialisation (the ESO gain plus a random MLP) compares the trained
observer with the initial one. Also: the sampled local stability radius and the
probabilistic coverage level of the point-guided (stage-1) observer.

Not done (issue 34 item 2): the estimation loss still rolls out the linearised error
model, not the nonlinear plant with the observer in the loop.
"""

from __future__ import annotations

import dataclasses
import functools

import jax
import jax.numpy as jnp
import matplotlib.pyplot as plt
import numpy as np

import jaxlab.observers as O
from experiments._harness import Claim, Result, RunContext, log
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
    stage1_steps: int = 400
    stage2_max_steps: int = 8000
    num_initial: int = 4
    horizon: float = 10.0
    num_save: int = 201
    settle_time: float = 1.0
    coverage_samples: int = 2000
    coverage_confidence: float = 0.99
    domain_radius: float = 2.0
    # ObserverTrainConfig fields
    train: dict[str, float] = dataclasses.field(
        default_factory=lambda: {**C.TRAIN_QUICK, "disturbance_bound": 0.5, "rate": 0.1}
    )


QUICK = Config()
FULL = Config(
    hidden=(32, 64, 32),
    stage1_steps=5000,
    stage2_max_steps=10000,
    num_initial=32,
    coverage_samples=100000,
)


_PLANTS = {"vanderpol": O.VanDerPol, "duffing": O.Duffing, "pendulum": O.DisturbedPendulum}


def run(config, key: jax.Array, ctx: RunContext) -> Result:
    with jax.enable_x64(True):
        return _run(config, key)


def _run(cfg, key):
    tc = C.train_config(cfg)
    metrics, claims, figures = {}, [], {}
    all_certified = True
    for name, k in zip(cfg.systems, jax.random.split(key, len(cfg.systems)), strict=True):
        log.info("system %s", name)
        plant = _PLANTS[name]()
        k_init, k_train, k_ic, k_rad, k_cov = jax.random.split(k, 5)
        # the output-injection gain starts from the pole-placed ESO gain (the paper's
        # observer = nominal model + gain + neural correction); the MLP is random
        eso = C.eso_for(plant, epsilon=cfg.epsilon, poles=cfg.eso_poles, key=k_init)
        obs0 = O.NeuralObserver.from_plant(
            plant, tuple(cfg.hidden), epsilon=cfg.epsilon, key=k_init, gain=eso.gain
        )
        p_point, p_two, info = C.two_stage(
            O.CertifiedObserver.from_observer(obs0),
            key=k_train,
            tc=tc,
            stage1_steps=cfg.stage1_steps,
            stage2_steps=cfg.stage2_max_steps,
        )
        cert = O.certify_lmi(p_two.observer)
        all_certified &= cert.certified
        metrics[f"certified_{name}"] = int(cert.certified)
        metrics[f"margin_{name}"] = cert.margin
        metrics[f"time_two_stage_{name}_s"] = info["stage1"]["seconds"] + info["stage2"]["seconds"]

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

        A, _, Cm, E = O.linear_model(plant)
        observers = {
            "neural": p_two.observer,
            "point_only": p_point.observer,
            "luenberger": O.LuenbergerObserver.from_plant(plant, [-3.0, -4.0]),
            "eso": eso,
            "ekf": C.ekf_for(plant, q_state=1e-3, q_dist=10.0, r=1e-3),
            "initial": obs0,  # the neural observer before training
        }
        ts = jnp.linspace(0.0, cfg.horizon, cfg.num_save)
        x0s = jax.random.normal(k_ic, (cfg.num_initial, 2))
        xh0s = jnp.zeros_like(x0s)
        trajs = {m: C.simulate_many(plant, o, x0s, xh0s, ts) for m, o in observers.items()}
        settle = C.settle_index(ts, cfg.settle_time)
        for m, tr in trajs.items():
            metrics[f"rmse_{name}_{m}"] = float(np.sqrt(C.mse(tr)))
            metrics[f"rmse_after_transient_{name}_{m}"] = float(np.sqrt(C.mse(tr, start=settle)))
        after = {m: metrics[f"rmse_after_transient_{name}_{m}"] for m in observers}
        same = ("luenberger", "eso")  # baselines with the neural observer's model knowledge
        best = min(same, key=after.__getitem__)
        claims.append(
            Claim(
                f"{name}: certified neural observer tracks at least as well as the best baseline "
                "with the same model knowledge (RMSE after the transient)",
                "improved tracking accuracy over observer baselines",
                f"neural {C.fmt(after['neural'])} vs {best} {C.fmt(after[best])} (Luenberger "
                f"{C.fmt(after['luenberger'])}, ESO {C.fmt(after['eso'])}; linearised model; "
                f"t >= {cfg.settle_time:g}; {cfg.num_initial} initial errors); EKF with the "
                f"full nonlinear model {C.fmt(after['ekf'])}; whole horizon incl. t = 0: neural "
                f"{C.fmt(metrics[f'rmse_{name}_neural'])} vs {best} "
                f"{C.fmt(metrics[f'rmse_{name}_{best}'])}; holds if neural <= {best}",
                after["neural"] <= after[best],
            )
        )
        claims.append(
            Claim(
                f"{name}: training does not end worse than its initialisation (RMSE after the "
                "transient)",
                "training improves the observer (implicit)",
                f"trained {C.fmt(after['neural'])} vs initial (ESO gain + random MLP) "
                f"{C.fmt(after['initial'])}, point-only {C.fmt(after['point_only'])}; holds if "
                "trained <= initial",
                after["neural"] <= after["initial"],
            )
        )
        fig, ax = plt.subplots(2, 1, figsize=(7, 5), sharex=True)
        tsn = np.asarray(ts)
        ax[0].plot(tsn, np.asarray(trajs["neural"].x[0, :, 1]), "k", lw=2, label="true x2")
        for m in ("neural", "eso", "ekf", "luenberger"):
            ax[0].plot(tsn, np.asarray(trajs[m].x_hat[0, :, 1]), lw=1, label=m)
        ax[0].legend(fontsize=7)
        ax[0].set_title(name)
        for m in ("neural", "eso", "ekf", "luenberger"):
            err = np.sqrt(np.mean(np.asarray(trajs[m].x - trajs[m].x_hat) ** 2, axis=(0, 2)))
            ax[1].semilogy(tsn, np.maximum(err, 1e-12), label=m)
        ax[1].set_ylabel("RMS error")
        ax[1].set_xlabel("t")
        fig.tight_layout()
        figures[f"{name}_trajectory"] = fig
    claims.insert(
        0,
        Claim(
            "all benchmark neural observers certified by the independent cvxpy check",
            "LMI-certified",
            f"{sum(metrics[f'certified_{s}'] for s in cfg.systems)}/{len(cfg.systems)} certified",
            bool(all_certified),
        ),
    )
    notes = (
        "Synthetic simulations (diffrax Tsit5). Disturbances: Van der Pol external sinusoid; "
        "Duffing "
        "10 % cubic-stiffness error + sinusoid (known forcing as input); pendulum 20 % damping "
        "error + "
        "a square-ish gust. Neural observer, Luenberger and ESO use the linearisation at the "
        "origin "
        "(the ESO lumps the nonlinearity into the extended state); the EKF uses the nonlinear "
        "nominal "
        "model. radius_*: largest ball inside the largest V-sublevel set free of sampled nominal "
        "decrease violations of the stage-1 observer (scaled error coordinates; assumes Lipschitz "
        "decrease and dense samples). coverage_*: one-sided Clopper-Pearson lower bound "
        f"(confidence {cfg.coverage_confidence}) on the probability, under the sampling "
        "distribution on the annulus min_radius <= |eta| <= domain_radius, that the robust "
        "decrease "
        "condition (rate, disturbance bound) of the stage-1 observer holds. rmse_* is over the "
        "whole "
        "horizon (high-gain observers pay for their initial peaking there); rmse_after_transient_* "
        "from settle_time on (the claims use these). The neural observer is still trained on the "
        "linearised error model (estimation loss) while the EKF has the nonlinear model: the "
        "EKF is therefore not counted as a same-knowledge baseline."
    )
    return Result(metrics=metrics, claims=claims, figures=figures, notes=notes)
