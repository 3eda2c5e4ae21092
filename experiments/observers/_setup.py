"""Shared pieces of the P2 observer experiments (settings, simulation of many starts, error
metrics and the ratio statistic their claims bootstrap); the training recipe and the
ESO/EKF baselines are `jaxlab.observers` (`train_two_stage`, `train_lmi_only`,
`high_gain_eso`, `disturbance_ekf`)."""

from __future__ import annotations

import dataclasses
import os
import platform
from types import SimpleNamespace

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

import jaxlab.observers as O
from experiments._harness import Estimate, bootstrap


def machine() -> str:
    """One line naming the machine the timings come from."""
    dev = jax.devices()[0]
    return (
        f"{platform.machine()} {platform.processor() or 'cpu'}, {os.cpu_count()} logical CPUs "
        "visible"
        f" (shared), JAX backend {dev.platform}"
    )


# the training settings (ObserverTrainConfig fields) the P2 experiments' QUICK configs share
TRAIN_QUICK = {"batch": 64, "rollout_steps": 10, "rollout_dt": 0.1, "learning_rate": 0.01}


def train_config(cfg) -> O.ObserverTrainConfig:
    keys = {f.name for f in O.ObserverTrainConfig.__dataclass_fields__.values()}
    return O.ObserverTrainConfig(**{k: v for k, v in cfg.train.items() if k in keys})


# the default tolerance (rtol = atol) of the evaluation simulations and the tighter
# reference their integration error is measured against (tests/observers/
# test_observers_noise.py); experiments with sensor noise set their own (Config.sim_tol:
# every hold time restarts the stiff high-gain transient, and 1e-10 then needs > 1e5
# steps per trajectory)
SIM_TOL = 1e-10
REF_TOL = 1e-12
MAX_STEPS = 400_000


@eqx.filter_jit
def _simulate_many(plant, observer, x0s, x_hat0s, ts, noise, tol):
    def one(a, b, n):
        return O.simulate(
            plant, observer, a, b, ts, rtol=tol, atol=tol, noise=n, max_steps=MAX_STEPS
        )

    if noise is None:
        return jax.vmap(lambda a, b: one(a, b, None))(x0s, x_hat0s)
    return jax.vmap(one)(x0s, x_hat0s, noise)


def simulate_many(plant, observer, x0s, x_hat0s, ts, noise=None, *, tol: float = SIM_TOL):
    """Trajectories for a batch of initial conditions (one compile per observer type);
    `noise`: a batched `O.SensorNoise` (one realisation per start, `sensor_noise`) or
    None; `tol`: rtol = atol of the step-size controller."""
    return _simulate_many(plant, observer, x0s, x_hat0s, ts, noise, tol)


def output_rms(plant, traj) -> np.ndarray:
    """Per-channel RMS of the noise-free plant output along a batch of trajectories `(p,)`."""
    y = jax.vmap(jax.vmap(plant.output))(traj.x)
    return np.sqrt(np.mean(np.asarray(y) ** 2, axis=(0, 1)))


def sensor_noise(std, *, key, batch: int, period: float, horizon: float):
    """`batch` independent `O.SensorNoise.white(std, period, horizon)` realisations, stacked
    (the batch axis first, for `simulate_many`)."""
    keys = jax.random.split(key, batch)
    samples = jax.vmap(
        lambda k: O.SensorNoise.white(std, key=k, period=period, horizon=horizon).samples
    )(keys)
    return O.SensorNoise(samples, float(period))


def integration_error(
    plant, observer, x0s, x_hat0s, ts, noise=None, *, start: int = 0, tol: float = SIM_TOL,
    ref_tol: float = REF_TOL,
):  # fmt: skip
    """RMS over starts, saved times from `start` and components of the difference between
    the estimates (`x_hat`, and `d_hat` where finite) simulated at `tol` and at `ref_tol`:
    the integration error of the evaluation simulations."""
    a = simulate_many(plant, observer, x0s, x_hat0s, ts, noise, tol=tol)
    b = simulate_many(plant, observer, x0s, x_hat0s, ts, noise, tol=ref_tol)
    diffs = [np.asarray(a.x_hat - b.x_hat)[:, start:].ravel()]
    dd = np.asarray(a.d_hat - b.d_hat)[:, start:].ravel()
    if np.all(np.isfinite(dd)):
        diffs.append(dd)
    return float(np.sqrt(np.mean(np.concatenate(diffs) ** 2)))


def settle_index(ts, settle_time: float) -> int:
    """Index of the first saved time `>= settle_time`, and at least 1: `t = 0` is never
    scored (every observer starts from `x_hat = 0`, so that sample is the same initial
    spread for all of them and would dominate a mean over a fast-converging horizon)."""
    return max(1, int(np.searchsorted(np.asarray(ts), settle_time)))


def per_start_mse(traj, *, start: int = 0) -> np.ndarray:
    """Mean squared state-estimation error per initial condition over saved times `start:`.

    `traj` holds a batch of trajectories (`x`, `x_hat` of shape `(B, T, n)`, `ok` `(B,)`);
    returns `(B,)`, `inf` for a failed or non-finite trajectory.
    """
    # a diverged (still ok) solve overflows the square: inf, not a warning
    with np.errstate(over="ignore", invalid="ignore"):
        err = np.asarray(traj.x - traj.x_hat)[:, start:] ** 2
        m = err.reshape(err.shape[0], -1).mean(axis=1)
    ok = np.asarray(traj.ok).reshape(err.shape[0], -1).all(axis=1)
    return np.where(ok & np.isfinite(m), m, np.inf)


def true_disturbance(plant, traj):
    """The disturbance an extended-state observer estimates (`O.total_disturbance`, relative
    to the linear model) along a batch of trajectories: `(B, T, nd)`."""
    f = jax.vmap(jax.vmap(lambda t, x: O.total_disturbance(plant, t, x)))
    ts = jnp.broadcast_to(traj.ts, traj.x.shape[:2])
    return f(ts, traj.x)


def per_start_disturbance_mse(d_true, traj, *, start: int = 0) -> np.ndarray:
    """Mean squared disturbance-estimate error per initial condition over saved times
    `start:`: `d_true (B, T, nd)` against `traj.d_hat`; `(B,)`, `inf` for a failed or
    non-finite trajectory (or an observer without a disturbance estimate, NaN `d_hat`)."""
    dt = SimpleNamespace(x=np.asarray(d_true), x_hat=np.asarray(traj.d_hat), ok=traj.ok)
    return per_start_mse(dt, start=start)


def mse(traj, *, start: int = 0) -> float:
    """Mean squared state-estimation error over saved times `start:`; inf when any
    trajectory failed."""
    return float(np.mean(per_start_mse(traj, start=start)))


# a diverged (infinite) error enters a ratio as the larger of this and 10x the largest
# finite error of either method, so a diverged run loses every comparison (the harness's
# estimators take finite values only)
DIVERGED_ERROR = 1e12


def ratio_estimate(a, b, *, key, n_boot: int = 2000, level: float = 0.95, stat=np.mean):
    """`stat(a) / stat(b)` with its percentile bootstrap interval, resampling the pairs
    `(a_i, b_i)` (the harness's `bootstrap` over paired items).

    `a`, `b`: per-item errors of two methods on the same items (initial conditions, plants);
    `key`: a JAX key (the resampling seed); `stat`: a reduction taking `axis`. Infinite or
    NaN errors (diverged runs) enter as `max(DIVERGED_ERROR, 10 * largest finite error)`.
    **Returns:** an `Estimate`.
    """
    a, b = np.asarray(a, float), np.asarray(b, float)
    if a.shape != b.shape or a.ndim != 1 or a.size < 2:
        raise ValueError(
            f"a, b: expected two 1-D arrays of one length >= 2, got {a.shape}, {b.shape}"
        )
    finite = np.concatenate([a[np.isfinite(a)], b[np.isfinite(b)]])
    cap = max(DIVERGED_ERROR, 10 * float(np.max(np.abs(finite), initial=0.0)))
    a, b = (np.where(np.isfinite(v), v, cap) for v in (a, b))

    def ratio(x, y, axis=-1):
        return np.asarray(stat(x, axis=axis)) / np.asarray(stat(y, axis=axis))

    seed = int(jax.random.randint(key, (), 0, 2**31 - 1))
    est = bootstrap((a, b), ratio, seed=seed, level=level, n_resamples=n_boot)
    return dataclasses.replace(est, method=f"paired {est.method} of a ratio")


def median_higher(v, axis=-1):
    """The median as the higher of the two middle values (never interpolates between a
    finite and a diverged run's error)."""
    return np.percentile(v, 50, axis=axis, method="higher")


def sqrt_estimate(est: Estimate) -> Estimate:
    """The square root of a non-negative estimate and of its interval ends (an RMSE ratio
    from an MSE ratio: the map is monotone, so the percentile interval maps exactly)."""
    return dataclasses.replace(
        est, value=float(np.sqrt(est.value)), low=float(np.sqrt(est.low)),
        high=float(np.sqrt(est.high)),
    )  # fmt: skip
