"""Two-stage training: point-guided Lyapunov pre-training, then LMI fine-tuning.

Stage 1 (point-guided): on sampled scaled errors `eta`, minimise an estimation loss
(error left after a short rollout of the error dynamics under random admissible
disturbance derivatives) plus the hinge on the robust Lyapunov decrease condition
(`lyapunov_hinge`) with a learnable `P` (PD by construction).

Stage 2 (LMI fine-tuning): minimise the differentiable eigenvalue barrier/penalty of
the global certificate `H(P, T) <= -margin I` (`lmi_penalty`) jointly in the
weights, `P` and the multipliers `T = exp(log_t)`, keeping a (smaller) estimation
loss; stops as soon as the certificate holds. No SDP is solved in the loop.

Both stages are pure `(init, step)` pairs over a `TrainState` (the step object
`StageStep`); `fit` runs them with the training driver `jaxlab.run_steps`, certification being the
driver's `stop` test between chunks.

Paper: P2, "Provably stable neural-network observers".
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable
from typing import Any

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import optax
from jaxtyping import Array, Float

from jaxlab._core import (
    AbstractStep,
    Driver,
    ValidatedState,
    ValidatedStep,
    as_array,
    check_memory,
    check_positive_int,
    check_real,
    driver_for,
    optimizer_update,
    run_steps,
)

from ._lmi import LyapunovMatrix, lmi_matrix, lmi_penalty, lyapunov_hinge, scaled_errors_arg
from ._observer import NeuralObserver, trainable_filter

__all__ = [
    "ObserverTrainConfig",
    "CertifiedObserver",
    "TrainState",
    "sample_errors",
    "estimation_loss",
    "point_loss",
    "lmi_loss",
    "stage_init",
    "stage_step",
    "StageStep",
    "max_lmi_eigenvalue",
    "lyapunov_warm_start",
    "normalised_lmi",
    "fit",
]


@dataclasses.dataclass(frozen=True)
class ObserverTrainConfig:
    """Hyper-parameters of both stages (hashable; passed as a static argument).

    - `batch`: sampled errors per step; `sample_radius`: errors drawn uniformly in
      direction with radius uniform in `[min_radius, sample_radius]` (scaled coordinates).
    - `rate`, `disturbance_bound`, `hinge_margin`: the robust decrease condition
      (`lyapunov_hinge`); `rollout_steps`, `rollout_dt`: the estimation-loss rollout
      (fast time); `est_weight`, `hinge_weight`, `reg_weight`: stage-1 weights.
    - `lmi_margin`, `barrier_weight`, `violation_weight`, `lmi_est_weight`, `p_floor`
      (normalised `P >= p_floor I`, weighted by `p_weight`): stage 2.
    - `learning_rate`.

    Construction checks the fields: `batch` and `rollout_steps` positive ints; every other
    field a finite real, `sample_radius`, `rollout_dt` and the learning rates `> 0`, the
    weights, margins, `min_radius`, `p_floor` and `disturbance_bound` `>= 0`; anything
    else raises `ValueError` naming the field.
    """

    batch: int = 64
    sample_radius: float = 1.0
    min_radius: float = 0.05
    rate: float = 0.1
    disturbance_bound: float = 0.5
    hinge_margin: float = 0.1
    rollout_steps: int = 10
    rollout_dt: float = 0.1
    est_weight: float = 1.0
    hinge_weight: float = 1.0
    reg_weight: float = 1e-4
    lmi_margin: float = 1e-3
    barrier_weight: float = 1e-3
    violation_weight: float = 1e2
    lmi_est_weight: float = 0.1
    p_floor: float = 0.05
    p_weight: float = 10.0
    learning_rate: float = 1e-2
    lmi_learning_rate: float = 1e-2

    def __post_init__(self):
        check_positive_int("batch", self.batch)
        check_positive_int("rollout_steps", self.rollout_steps)
        positive = ("sample_radius", "rollout_dt", "learning_rate", "lmi_learning_rate")
        for f in dataclasses.fields(self):
            if f.name in ("batch", "rollout_steps"):
                continue
            low = 0.0 if f.name != "rate" else None
            check_real(f.name, getattr(self, f.name), low=low, low_inclusive=f.name not in positive)


class CertifiedObserver(eqx.Module):
    """An observer with its Lyapunov matrix and LMI multipliers (what both stages train).

    **Fields:** `observer: NeuralObserver`, `lyapunov: LyapunovMatrix (ne)`,
    `log_multipliers (nh,)` (`T = diag(exp(log_multipliers))`).
    """

    observer: NeuralObserver
    lyapunov: LyapunovMatrix
    log_multipliers: Float[Array, " nh"]

    @classmethod
    def from_observer(cls, observer: NeuralObserver, P=None) -> CertifiedObserver:
        """Start from `P = I` (or the given `P`) and unit multipliers.

        `P (ne, ne)`: None (the identity) or a finite real symmetric positive-definite
        matrix (above `LyapunovMatrix`'s floor); anything else raises `ValueError` naming
        `P`.
        """
        ne, nh = observer.extended_dim, observer.hidden_dim
        dt = observer.A.dtype
        if P is None:
            P = jnp.eye(ne, dtype=dt)
        else:
            P = as_array("P", P, shape=(ne, ne), dtype=np.number, real=True, finite=True)
            P = P.astype(dt)
        return cls(
            observer=observer,
            lyapunov=LyapunovMatrix.from_matrix(P),
            log_multipliers=jnp.zeros((nh,), dt),
        )

    @property
    def P(self):
        return self.lyapunov.matrix()

    @property
    def multipliers(self):
        return jnp.exp(self.log_multipliers)

    def lmi(self):
        """The certificate matrix `H(P, T)` of the current parameters."""
        return lmi_matrix(self.observer, self.P, self.multipliers)


def _filter(params: CertifiedObserver):
    spec = jax.tree_util.tree_map(lambda _: False, params)
    return eqx.tree_at(
        lambda p: (p.observer, p.lyapunov.factor, p.log_multipliers),
        spec,
        (trainable_filter(params.observer), True, True),
    )


def sample_errors(
    num: int, dim: int, *, key: jax.Array, radius: float, min_radius: float, dtype=None
):
    """`num` scaled errors: uniform directions, norms uniform in `[min_radius, radius]`.

    `key` (keyword-only) is the only randomness. **Arguments:** `num`, `dim` positive
    integers; `radius > 0` and `0 <= min_radius <= radius`, finite reals.

    **Returns:** `(num, dim)`.
    """
    check_positive_int("num", num)
    check_positive_int("dim", dim)
    check_memory("num x dim", 4 * 8.0 * num * dim)  # directions, norms, result
    radius = check_real("radius", radius, low=0.0, low_inclusive=False)
    min_radius = check_real("min_radius", min_radius, low=0.0, high=radius)
    kd, kr = jax.random.split(key)
    dtype = dtype or jnp.zeros(()).dtype
    d = jax.random.normal(kd, (num, dim), dtype)
    d = d / jnp.linalg.norm(d, axis=1, keepdims=True)
    r = jax.random.uniform(kr, (num, 1), dtype, minval=min_radius, maxval=radius)
    return d * r


def estimation_loss(observer: NeuralObserver, etas, config: ObserverTrainConfig, *, key: jax.Array):
    """Mean `log(1 + |eta(T)|^2 / |eta(0)|^2)` after an Euler rollout of the error dynamics.

    The rollout (fast time, `rollout_steps` steps of `rollout_dt`) applies a random
    constant disturbance derivative of norm `disturbance_bound` per sample, so a
    small value means fast convergence and a small disturbance-induced residual (the
    log keeps the loss finite for unstable initial observers).
    **Arguments:** `observer`; `etas (S, ne)` finite, non-zero; `config`; `key`.

    **Returns:** a scalar.
    """
    etas = scaled_errors_arg("etas", observer, etas, batch=True)
    _, _, D = observer.error_model()
    nd = D.shape[1]
    w = jax.random.normal(key, (etas.shape[0], nd), etas.dtype)
    w = config.disturbance_bound * w / jnp.linalg.norm(w, axis=1, keepdims=True)

    def one(eta0, wi):
        def body(eta, _):
            return eta + config.rollout_dt * (
                observer.error_field(eta) + observer.epsilon * D @ wi
            ), None

        eta, _ = jax.lax.scan(body, eta0, None, length=config.rollout_steps)
        return jnp.log1p(jnp.sum(eta**2) / jnp.sum(eta0**2))

    return jnp.mean(jax.vmap(one)(etas, w))


def _sample(obs: NeuralObserver, config: ObserverTrainConfig, key: jax.Array):
    # named for the config field a caller sets (sample_errors would name its `num`)
    check_memory("config.batch", 4 * 8.0 * config.batch * obs.extended_dim)
    return sample_errors(
        config.batch,
        obs.extended_dim,
        key=key,
        radius=config.sample_radius,
        min_radius=config.min_radius,
        dtype=obs.A.dtype,
    )


def estimation_term(
    obs: NeuralObserver,
    config: ObserverTrainConfig,
    key: jax.Array,
    estimation: Callable[[NeuralObserver, jax.Array], Array] | None = None,
):
    """The estimation term of the stage losses: `estimation(obs, key)`, or with None
    `estimation_loss` on `config.batch` sampled scaled errors (the linearised model)."""
    ks, ke = jax.random.split(key)
    if estimation is not None:
        return estimation(obs, ke)
    return estimation_loss(obs, _sample(obs, config, ks), config, key=ke)


def _weight_norm(observer: NeuralObserver):
    leaves = [observer.gain, observer.readout, *observer.hidden]
    return sum(jnp.sum(w**2) for w in leaves)


def point_loss(
    params: CertifiedObserver,
    config: ObserverTrainConfig,
    *,
    key: jax.Array,
    estimation: Callable[[NeuralObserver, jax.Array], Array] | None = None,
):
    """Stage-1 loss: `est_weight * estimation + hinge_weight * hinge + reg_weight * |W|^2`.

    `estimation(observer, key) -> scalar` is the estimation term; None uses
    `estimation_loss` on the linearised error model (the sampled scaled errors);
    `rollout_estimation(plant, ...)` gives the one on rollouts of the real nonlinear
    plant with the observer in the loop. Bind it with `functools.partial`.
    """
    ks, ke = jax.random.split(key)
    obs = params.observer
    etas = _sample(obs, config, ks)
    est = (
        estimation(obs, ke)
        if estimation is not None
        else estimation_loss(obs, etas, config, key=ke)
    )
    hinge = lyapunov_hinge(
        obs,
        params.P,
        etas,
        rate=config.rate,
        disturbance_bound=config.disturbance_bound,
        margin=config.hinge_margin,
    )
    return (
        config.est_weight * est
        + config.hinge_weight * hinge
        + config.reg_weight * _weight_norm(obs)
    )


def lmi_loss(
    params: CertifiedObserver,
    config: ObserverTrainConfig,
    *,
    key: jax.Array,
    estimation: Callable[[NeuralObserver, jax.Array], Array] | None = None,
):
    """Stage-2 loss: LMI barrier/penalty + `lmi_est_weight * estimation` + regulariser.

    `estimation` as in `point_loss` (None: `estimation_loss` on the linearised model)."""
    obs = params.observer
    P = params.P
    P_n = P / (jnp.trace(P) / P.shape[0])
    # the certificate, and a conditioning constraint P_n >= p_floor I so that the
    # free scale of P cannot hide a violation in a near-singular direction of V
    eye = jnp.eye(P.shape[0], dtype=P.dtype)
    joint = jax.scipy.linalg.block_diag(
        normalised_lmi(params), config.p_weight * (config.p_floor * eye - P_n)
    )
    pen = lmi_penalty(
        joint,
        margin=config.lmi_margin,
        barrier_weight=config.barrier_weight,
        violation_weight=config.violation_weight,
    )
    loss = pen + config.reg_weight * _weight_norm(obs)
    if config.lmi_est_weight > 0:
        loss = loss + config.lmi_est_weight * estimation_term(obs, config, key, estimation)
    return loss


def normalised_lmi(params: CertifiedObserver):
    """`H(P, T) / (trace(P) / ne)`: the certificate matrix with the free scale of
    `(P, T)` removed, so a margin is relative to the size of `P`."""
    P = params.P
    return params.lmi() / (jnp.trace(P) / P.shape[0])


def lyapunov_warm_start(params: CertifiedObserver) -> CertifiedObserver:
    """Reset `P` from the Lyapunov equation `J^T P + P J = -I` of the error dynamics'
    Jacobian `J` at 0 (normalised to mean eigenvalue 1), when `J` is Hurwitz.

    A cheap, well-conditioned starting point for stage 2: any global certificate's `P`
    must in particular certify the linearisation. Leaves `params` unchanged otherwise.
    """
    import scipy.linalg

    obs = params.observer
    J = np.asarray(
        jax.jacfwd(obs.error_field)(jnp.zeros((obs.extended_dim,), obs.A.dtype)), np.float64
    )
    if not np.all(np.isfinite(J)) or np.linalg.eigvals(J).real.max() >= 0:
        return params
    P = scipy.linalg.solve_continuous_lyapunov(J.T, -np.eye(J.shape[0]))
    P = 0.5 * (P + P.T)
    P = P / (np.trace(P) / P.shape[0])
    floor = params.lyapunov.floor
    if np.linalg.eigvalsh(P)[0] <= 2 * floor:
        P = P + 2 * floor * np.eye(P.shape[0])
    return eqx.tree_at(
        lambda p: p.lyapunov, params, LyapunovMatrix.from_matrix(jnp.asarray(P, obs.A.dtype), floor)
    )


def max_lmi_eigenvalue(params: CertifiedObserver):
    """Largest eigenvalue of `normalised_lmi(params)` (negative means certified)."""
    return jnp.linalg.eigvalsh(normalised_lmi(params))[-1]


class TrainState(eqx.Module):
    """Trainable parameters, frozen parameters, optimiser state and step count."""

    trainable: CertifiedObserver
    frozen: CertifiedObserver
    opt_state: optax.OptState
    step: Array

    @property
    def params(self) -> CertifiedObserver:
        return eqx.combine(self.trainable, self.frozen)


def stage_init(params: CertifiedObserver, optimizer: optax.GradientTransformation) -> TrainState:
    """Initial `TrainState` (splits trainable leaves: gain, weights, P factor, multipliers)."""
    trainable, frozen = eqx.partition(params, _filter(params))
    return TrainState(trainable, frozen, optimizer.init(trainable), jnp.zeros((), jnp.int32))


def stage_step(
    loss_fn: Callable, optimizer: optax.GradientTransformation, config: ObserverTrainConfig
):
    """A pure step `(state, key) -> (state, loss)` for `loss_fn(params, config, *, key)`."""

    def step(state: TrainState, key):
        def f(tr):
            return loss_fn(eqx.combine(tr, state.frozen), config, key=key)

        loss, grads = eqx.filter_value_and_grad(f)(state.trainable)
        updates, opt_state = optimizer_update(optimizer, grads, state.opt_state, state.trainable)
        trainable = eqx.apply_updates(state.trainable, updates)
        return TrainState(trainable, state.frozen, opt_state, state.step + 1), loss

    return step


class StageStep(AbstractStep):
    """One Adam step of a training stage (P2) as a step of `jaxlab.run_steps`.

    `init(params, key)` is `stage_init(params, optimizer)` (`key` unused) and `step` is
    `stage_step(loss_fn, optimizer, config)`, with `aux = {"loss": loss}`.

    **Arguments:** `loss_fn(params, config, *, key)` (`point_loss` for stage 1, `lmi_loss`
    for stage 2); `optimizer` (optax); `config` (`ObserverTrainConfig`).
    """

    loss_fn: Callable = eqx.field(static=True)
    optimizer: optax.GradientTransformation = eqx.field(static=True)
    config: ObserverTrainConfig = eqx.field(static=True)

    def init(self, model: CertifiedObserver, key: jax.Array) -> TrainState:
        del key
        return stage_init(model, self.optimizer)

    def step(self, state: TrainState, key: jax.Array):
        state, loss = stage_step(self.loss_fn, self.optimizer, self.config)(state, key)
        return state, {"loss": loss}


def fit(
    loss_fn: Callable,
    params: CertifiedObserver,
    *,
    key: jax.Array,
    config: ObserverTrainConfig,
    steps: int,
    min_steps: int = 0,
    optimizer: optax.GradientTransformation | None = None,
    driver: Driver | None = None,
    val_loss: Callable[[CertifiedObserver, Any], Array] | None = None,
    val_data: Any = None,
    val_every: int = 50,
    patience: int | None = None,
):
    """Run `steps` Adam steps of `loss_fn` (`StageStep` through `jaxlab.run_steps`).

    **Arguments:** `loss_fn(params, config, *, key)`; `params`; `key` (keyword-only; step `i`
    uses `fold_in(key, i)`); `config`; `steps`; `optimizer` (default
    `optax.adam(config.learning_rate)`; pass the same object to several fits to reuse their
    compilation); `driver` a `jaxlab.Driver`: chunk (steps per jitted scan), checkpointer,
    progress (default silent) and `stop`, which here is called with the current
    parameters, `stop(params) -> bool`, after each chunk once `min_steps` are done (e.g.
    "certified").

    Validation (`jaxlab.ValidatedStep`): with `val_loss(params, val_data) -> scalar`
    (jittable; e.g. the after-transient error of rollouts from held-out initial states),
    the parameters are scored at the start and every `val_every` steps and the
    best-scored ones are returned, so training never ends worse than its initialisation
    on that score; `patience` evaluations without an improvement end the run (None:
    never). `stop` then sees the current (not the best) parameters.

    The step is compiled on throw-away chunks (of both chunk lengths the run uses)
    before the clock starts.

    **Returns:** `(params, info)` (an exception to the `(model, History)` convention: the
    timings and the validation record are what the observers' callers read) with
    `info = {"steps", "seconds", "compile_seconds", "losses" (np array of the steps run),
    "stopped"}`; `seconds` is training wall time without compilation. With validation
    also `"val_losses"` (the scores, NaN between evaluations), `"init_val_loss"`,
    `"best_val_loss"`, `"best_step"` (0: the initial parameters were kept) and `"last"`
    (the parameters of the last step).
    """
    check_positive_int("steps", steps)
    driver = driver_for(driver)
    stop = driver.stop
    check_positive_int("val_every", val_every)
    if patience is not None:
        check_positive_int("patience", patience)
    optimizer = optax.adam(config.learning_rate) if optimizer is None else optimizer
    stage = StageStep(loss_fn, optimizer, config)
    step: AbstractStep = stage
    if val_loss is not None:
        if not callable(val_loss):
            raise ValueError(f"val_loss: expected a callable, received {type(val_loss).__name__}")
        score = val_loss
        step = ValidatedStep(
            stage,
            lambda st, data: score(st.params, data),
            val_data,
            every=val_every,
            patience=steps + 1 if patience is None else patience,
        )
    state = step.init(params, key)
    init_val = float(state.best_loss) if isinstance(state, ValidatedState) else float("nan")
    chunk = min(driver.chunk, steps)
    stopped = []

    def current(st) -> TrainState:
        return st.state if isinstance(st, ValidatedState) else st

    def stop_fn(st) -> bool:
        if isinstance(step, ValidatedStep) and step.stop(st):
            stopped.append(True)
            return True
        tr = current(st)
        if stop is None or int(tr.step) < min_steps or not bool(stop(tr.params)):
            return False
        stopped.append(True)
        return True

    # compile once outside the timed loop (throw-away chunks on the initial state)
    t0 = time.perf_counter()
    warm = chunk + steps % chunk if steps % chunk else chunk
    jax.block_until_ready(
        run_steps(
            step, state, key=jax.random.fold_in(key, 7), steps=warm, driver=Driver(chunk=chunk)
        )[0]
    )
    if stop is not None:
        stop(current(state).params)
    compile_seconds = time.perf_counter() - t0
    t0 = time.perf_counter()
    state, hist = run_steps(
        step,
        state,
        key=key,
        steps=steps,
        driver=driver.replace(chunk=chunk, stop=stop_fn),
    )
    params = state.best.params if isinstance(state, ValidatedState) else state.params
    jax.block_until_ready(params)
    info = {
        "steps": hist.steps_done,
        "seconds": time.perf_counter() - t0,
        "compile_seconds": compile_seconds,
        "losses": hist.losses[: hist.steps_done],
        "stopped": bool(stopped),
    }
    if isinstance(state, ValidatedState):
        vals = np.asarray(hist.aux["val_loss"][: hist.steps_done])
        info["val_losses"] = vals
        info["init_val_loss"] = init_val
        info["best_val_loss"] = float(state.best_loss)
        info["best_step"] = int(state.best_step)
        info["last"] = state.state.params
    return params, info
