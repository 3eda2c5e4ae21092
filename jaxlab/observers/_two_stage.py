"""The paper's training recipe: stage 1 (point-guided), then stage 2 (LMI fine-tuning)
until certified; and the LMI-only baseline it is compared with.

Stage 1 minimises, over sampled scaled errors `eta` (see `point_loss`),

    L_1 = w_est * estimation + w_hinge * mean max(0, V'(eta) + rate V(eta) + margin) + w_reg |W|^2,

with `V(eta) = eta^T P eta` and a learnable `P > 0`. Stage 2 starts from stage 1's result
and minimises (see `lmi_loss`)

    L_2 = barrier/penalty of lambda_max(H(P, T)) + w_lmi_est * estimation + regulariser,

stopping after the first chunk whose parameters satisfy the global certificate
`lambda_max(H(P, T)) < -lmi_margin` (`max_lmi_eigenvalue`). With a validation score,
stage 1 returns its best-scored parameters (initial ones included) and stage 2 runs all
its steps and returns its best-scored ones. The LMI-only baseline runs stage 2 from the
initial parameters (no stage 1).

Both run on `fit` (the `jaxlab` driver); same key, same numbers.

Paper: P2, "Provably stable neural-network observers".
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import equinox as eqx
import jax
import jax.numpy as jnp
import optax

from jaxlab._core import Driver, check_memory, check_positive_int, check_real, driver_for

from ._train import (
    CertifiedObserver,
    ObserverTrainConfig,
    fit,
    lmi_loss,
    max_lmi_eigenvalue,
    point_loss,
)

__all__ = ["train_two_stage", "train_lmi_only", "certified_score"]

_max_eig = eqx.filter_jit(max_lmi_eigenvalue)


def _certified_stop(config: ObserverTrainConfig) -> Callable[[CertifiedObserver], bool]:
    return lambda p: bool(_max_eig(p) < -config.lmi_margin)


def certified_score(val_loss: Callable, margin: float) -> Callable:
    """A validation score that is `val_loss(params, data)` where the parameters' own
    `(P, T)` certify them (`max_lmi_eigenvalue(params) < -margin`) and `inf` elsewhere:
    as `train_two_stage`'s `stage2_validation` score, stage 2 returns its best-validated
    certified state, and its starting state (stage 1's result) when none is certified.

    **Arguments:** `val_loss(params, data) -> scalar` (jittable); `margin` a finite real
    (the certificate `max_lmi_eigenvalue < -margin`, e.g. `ObserverTrainConfig.lmi_margin`).

    **Returns:** `score(params, data) -> scalar`.
    """
    if not callable(val_loss):
        raise ValueError(f"val_loss: expected a callable, received {type(val_loss).__name__}")
    margin = check_real("margin", margin)

    def score(params, data):
        ok = max_lmi_eigenvalue(params) < -margin
        return jnp.where(ok, val_loss(params, data), jnp.inf)

    return score


def _validation(name: str, validation) -> dict[str, Any]:
    if validation is None:
        return {}
    if not (isinstance(validation, tuple) and len(validation) == 3 and callable(validation[0])):
        raise ValueError(
            f"{name}: expected a tuple (val_loss, val_data, every) with a callable val_loss, "
            f"received {type(validation).__name__}"
        )
    val_loss, val_data, every = validation
    return {"val_loss": val_loss, "val_data": val_data, "val_every": every}


def _no_checkpointer(driver: Driver | None) -> Driver:
    driver = driver_for(driver)
    if driver.checkpointer is not None:
        raise ValueError(
            "driver: train_two_stage runs two fits; its driver's checkpointer must be None "
            "(call fit per stage with a checkpointer each)"
        )
    return driver


def _check_config(config) -> None:
    if not isinstance(config, ObserverTrainConfig):
        raise ValueError(
            f"config: expected an ObserverTrainConfig, received {type(config).__name__}"
        )


def train_two_stage(
    params: CertifiedObserver,
    *,
    key: jax.Array,
    config: ObserverTrainConfig,
    stage1_steps: int,
    stage2_steps: int,
    optimizer: optax.GradientTransformation | None = None,
    estimation: Callable | None = None,
    stage2_estimation: Callable | None | str = "same",
    validation: tuple | None = None,
    stage2_validation: tuple | None = None,
    stage1_patience: int | None = None,
    driver: Driver | None = None,
) -> tuple[CertifiedObserver, CertifiedObserver, dict]:
    """Two-stage training: `stage1_steps` of `point_loss`, then up to `stage2_steps` of
    `lmi_loss` from its result, stopping once the LMI certificate holds.

    **Arguments:**

    - `params`: the initial `CertifiedObserver` (e.g. `CertifiedObserver.from_observer`).
    - `key` (keyword-only): split in two, one key per stage.
    - `config`: the `ObserverTrainConfig` of both stages (`lmi_margin` is the stop's).
    - `stage1_steps`, `stage2_steps`: steps of each stage (stage 2: at most); positive ints,
      refused (`ValueError` naming them) when their per-step loss record exceeds memory.
    - `optimizer`: default `optax.adam(config.learning_rate)`; the same object for
      several fits lets them share their compilation.
    - `estimation`: the estimation term of both losses (None: the linearised error
      model; `rollout_estimation(...)`: rollouts of the real plant).
      `stage2_estimation` overrides it for stage 2 (`"same"`: keep `estimation`).
    - `validation`: `(val_loss, val_data, every)` for stage 1 (`fit`'s validation), which
      then returns its best-validated parameters, the initial ones included.
    - `stage2_validation`: the same for stage 2, which then runs all `stage2_steps` (no
      stop at the first certificate) and returns its best-scored parameters (make the
      score inf where the certificate fails: `certified_score`).
    - `stage1_patience`: with `validation`, stage 1 ends after this many evaluations
      without an improvement (early stopping; None: it runs all `stage1_steps`).
    - `driver`: a `jaxlab.Driver` both stages run with: chunk (steps per jitted scan; the
      certificate is checked between chunks), progress (both stages report to it in
      turn), stop (`stop(params)`, as in `fit`; stage 2 also stops at the certificate);
      its checkpointer must be None (two runs would share one file).

    **Returns:** `(point_only, two_stage, info)`: stage 1's parameters (the point-only
    baseline), stage 2's, and `{"stage1": info, "stage2": info}` (each `fit`'s info).
    """
    _check_config(config)
    for name, steps in (("stage1_steps", stage1_steps), ("stage2_steps", stage2_steps)):
        check_positive_int(name, steps)
        # each stage's fit keeps a loss (and a validation score) per step
        check_memory(name, 8.0 * steps)
    if isinstance(stage2_estimation, str) and stage2_estimation != "same":
        raise ValueError(
            f'stage2_estimation: expected "same", None or a callable, received '
            f"{stage2_estimation!r}"
        )
    driver = _no_checkpointer(driver)
    val1 = _validation("validation", validation)
    val2 = _validation("stage2_validation", stage2_validation)
    optimizer = optax.adam(config.learning_rate) if optimizer is None else optimizer
    k1, k2 = jax.random.split(key)
    point = (
        point_loss if estimation is None else functools.partial(point_loss, estimation=estimation)
    )
    est2 = estimation if isinstance(stage2_estimation, str) else stage2_estimation
    lmi = lmi_loss if est2 is None else functools.partial(lmi_loss, estimation=est2)
    p1, i1 = fit(
        point,
        params,
        key=k1,
        config=config,
        steps=stage1_steps,
        optimizer=optimizer,
        driver=driver,
        patience=stage1_patience if val1 else None,
        **val1,
    )
    p2, i2 = fit(
        lmi,
        p1,
        key=k2,
        config=config,
        steps=stage2_steps,
        **val2,
        optimizer=optimizer,
        driver=driver_for(driver, stop=None if val2 else _certified_stop(config)),
    )
    return p1, p2, {"stage1": i1, "stage2": i2}


def train_lmi_only(
    params: CertifiedObserver,
    *,
    key: jax.Array,
    config: ObserverTrainConfig,
    steps: int,
    optimizer: optax.GradientTransformation | None = None,
    driver: Driver | None = None,
) -> tuple[CertifiedObserver, dict]:
    """The LMI-only baseline: up to `steps` of `lmi_loss` from `params` (no stage 1),
    stopping once the certificate `max_lmi_eigenvalue < -config.lmi_margin` holds.

    **Arguments:** as `train_two_stage` (`steps` in place of the two stage lengths; the
    driver's checkpointer is allowed here: one run).

    **Returns:** `(params, info)` of `fit`; `info["stopped"]` says whether the
    certificate was reached.
    """
    _check_config(config)
    check_positive_int("steps", steps)
    return fit(
        lmi_loss,
        params,
        key=key,
        config=config,
        steps=steps,
        optimizer=optax.adam(config.learning_rate) if optimizer is None else optimizer,
        driver=driver_for(driver, stop=_certified_stop(config)),
    )
