"""Training LAPLEX layers with `jaxlab.run_steps`: a classification head, a Gram covariance.

`HeadStep` is one full-batch Adam step of softmax cross-entropy for a head
`x -> logits` (`LaplexLinear` or any comparable module); `GramStep` one step of the
stochastic matvec-only Gaussian negative log-likelihood of a `LaplexGram` (CG + SLQ)
on training vectors. `fit_head` and `fit_gram` run them with `jaxlab.run_steps`.

Paper: P9, LAPLEX (exact trainable Laplace-kernel operators).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import cast

import equinox as eqx
import jax
import jax.numpy as jnp
import optax
from jaxtyping import Array, Float, Int, PRNGKeyArray

from jaxlab._core import (
    AbstractStep,
    Driver,
    History,
    StepLoop,
    as_array,
    check_ids,
    check_memory,
    check_positive_int,
    check_real,
    driver_for,
    optimizer_update,
    run_steps,
)

from ._gram import LaplexGram
from ._linear import LaplexLinear

__all__ = ["HeadStep", "GramStep", "fit_head", "fit_gram"]


def _logits(model: eqx.Module, x: Array) -> Array:
    if isinstance(model, LaplexLinear) or callable(getattr(model, "batch", None)):
        return cast(LaplexLinear, model).batch(x)  # a batched head (one matmat)
    return jax.vmap(cast(Callable[[Array], Array], model))(x)  # a callable head module


class HeadStep(AbstractStep):
    """One full-batch Adam step of mean softmax cross-entropy for a classification head.

    The state is `(params, opt_state)`, `params` the array leaves of the head (its
    non-array part is held here; `model(state)` puts them together). Deterministic:
    the step key is unused.

    **Arguments:** `model` (a `LaplexLinear` or any module with a `.batch(x)` method,
    applied to the whole batch, or any module mapping `(inp,)` to `(classes,)`); `x`
    `(B, inp)`; `y` `(B,)` integer labels; `optimizer` (optax).
    """

    x: Float[Array, "B inp"]
    y: Int[Array, " B"]
    static: eqx.Module = eqx.field(static=True)
    optimizer: optax.GradientTransformation = eqx.field(static=True)

    def __init__(
        self,
        model: eqx.Module,
        x: Float[Array, "B inp"],
        y: Int[Array, " B"],
        *,
        optimizer: optax.GradientTransformation,
    ):
        sizes: dict[str, int] = {}
        x = as_array("x", x, shape=("B", None), dtype=jnp.floating, sizes=sizes, finite=True)
        if sizes["B"] == 0:
            raise ValueError("x: expected at least one example, received shape (0, inp)")
        logits = jax.eval_shape(lambda: _logits(model, x))
        if len(logits.shape) != 2 or logits.shape[0] != sizes["B"]:
            raise ValueError(
                f"model: expected logits of shape (B, classes) for x of shape {tuple(x.shape)}, "
                f"received {tuple(logits.shape)}"
            )
        y = as_array("y", y, shape=("B",), dtype=jnp.integer, sizes=sizes)
        # a label outside [0, classes) would be read as another class or as -inf silently
        check_ids("y", y, int(logits.shape[1]), what="class labels")
        self.x, self.y = x, y
        self.static = eqx.partition(model, eqx.is_array)[1]
        self.optimizer = optimizer

    def init(self, model: eqx.Module, key: PRNGKeyArray):
        del key
        params = eqx.filter(model, eqx.is_array)
        return params, self.optimizer.init(params)

    def model(self, state) -> eqx.Module:
        """The head of a state."""
        return eqx.combine(state[0], self.static)

    def step(self, state, key):
        del key
        params, opt_state = state

        def loss_fn(p):
            logits = _logits(eqx.combine(p, self.static), self.x)
            return jnp.mean(optax.softmax_cross_entropy_with_integer_labels(logits, self.y))

        loss, grads = jax.value_and_grad(loss_fn)(params)
        updates, opt_state = optimizer_update(self.optimizer, grads, opt_state, params)
        return (optax.apply_updates(params, updates), opt_state), {"loss": loss}


class GramStep(AbstractStep):
    """One Adam step of the mean per-dimension NLL of a `LaplexGram` on training vectors.

    The loss is `sum_j nll(y_j) / (n * N)` with `LaplexGram.neg_log_likelihood` (CG for
    the quadratic form, SLQ/Hutchinson probes drawn from `fold_in(key, j)` for vector
    `j`). State `(params, opt_state)` as in `HeadStep`.

    **Arguments:** `model` (`LaplexGram`); `ys` `(n, N)` training vectors; `optimizer`;
    `probes`, `lanczos_steps`, `cg_tol`, `cg_maxiter` as in `neg_log_likelihood`.
    """

    ys: Float[Array, "n N"]
    static: LaplexGram = eqx.field(static=True)
    optimizer: optax.GradientTransformation = eqx.field(static=True)
    probes: int = eqx.field(static=True)
    lanczos_steps: int = eqx.field(static=True)
    cg_tol: float = eqx.field(static=True)
    cg_maxiter: int = eqx.field(static=True)

    def __init__(
        self,
        model: LaplexGram,
        ys: Float[Array, "n N"],
        *,
        optimizer: optax.GradientTransformation,
        probes: int = 8,
        lanczos_steps: int = 30,
        cg_tol: float = 1e-6,
        cg_maxiter: int = 1000,
    ):
        if not isinstance(model, LaplexGram):
            raise ValueError(f"model: expected a LaplexGram, received {type(model).__name__}")
        self.ys = as_array(
            "ys", ys, shape=(None, model.size), dtype=jnp.floating, finite=True, nonempty=True
        )
        self.static = eqx.partition(model, eqx.is_array)[1]
        self.optimizer = optimizer
        self.probes = check_positive_int("probes", probes)
        self.lanczos_steps = check_positive_int("lanczos_steps", lanczos_steps)
        # the SLQ Lanczos bases, one (lanczos_steps, N) per probe (slq_logdet's estimate),
        # checked here so that the message names this argument
        item = jnp.dtype(self.ys.dtype).itemsize
        check_memory("lanczos_steps", (self.lanczos_steps + 2.0) * model.size * item)
        check_memory("probes", self.probes * (self.lanczos_steps + 2.0) * model.size * item)
        self.cg_tol = check_real("cg_tol", cg_tol, low=0.0)
        self.cg_maxiter = check_positive_int("cg_maxiter", cg_maxiter)

    def init(self, model: LaplexGram, key: PRNGKeyArray):
        del key
        params = eqx.filter(model, eqx.is_array)
        return params, self.optimizer.init(params)

    def model(self, state) -> LaplexGram:
        """The `LaplexGram` of a state."""
        return eqx.combine(state[0], self.static)

    def step(self, state, key):
        params, opt_state = state
        n = self.ys.shape[0]

        def loss_fn(p):
            m = eqx.combine(p, self.static)
            nll = jax.vmap(  # one traced likelihood for all n vectors (not n copies)
                lambda y, j: m.neg_log_likelihood(
                    y,
                    key=jax.random.fold_in(key, j),
                    probes=self.probes,
                    lanczos_steps=self.lanczos_steps,
                    cg_tol=self.cg_tol,
                    cg_maxiter=self.cg_maxiter,
                )
            )(self.ys, jnp.arange(n))
            return jnp.sum(nll) / (n * self.ys.shape[1])

        loss, grads = jax.value_and_grad(loss_fn)(params)
        updates, opt_state = optimizer_update(self.optimizer, grads, opt_state, params)
        return (optax.apply_updates(params, updates), opt_state), {"loss": loss}


def fit_head(
    model: eqx.Module,
    x: Float[Array, "B inp"],
    y: Int[Array, " B"],
    *,
    steps: int,
    optimizer: optax.GradientTransformation | None = None,
    driver: Driver | None = None,
) -> tuple[eqx.Module, History]:
    """Train a classification head full-batch (`HeadStep` through the driver).

    **Arguments:** `model`, `x` `(B, inp)`, `y` `(B,)` as in `HeadStep`; `steps`;
    `optimizer` (default `optax.adam(0.02)`); `driver` a `jaxlab.Driver` (chunk: steps
    between checkpoint/progress checks, checkpointer, progress; `StepLoop()`, one jitted
    call per step, unless it names a loop).

    **Returns:** `(model, history)`, `history.losses` `(steps,)` the training loss
    before each step.
    """
    optimizer = optax.adam(0.02) if optimizer is None else optimizer
    step = HeadStep(model, x, y, optimizer=optimizer)
    key = jax.random.key(0)  # unused: full-batch steps are deterministic
    state, hist = run_steps(
        step,
        step.init(model, key),
        key=key,
        steps=steps,
        driver=driver_for(driver, loop=StepLoop()),
    )
    return step.model(state), hist


def fit_gram(
    model: LaplexGram,
    ys: Float[Array, "n N"],
    *,
    key: PRNGKeyArray,
    steps: int,
    optimizer: optax.GradientTransformation | None = None,
    probes: int = 8,
    lanczos_steps: int = 30,
    cg_tol: float = 1e-6,
    cg_maxiter: int = 1000,
    driver: Driver | None = None,
) -> tuple[LaplexGram, History]:
    """Fit a `LaplexGram` by stochastic maximum likelihood (`GramStep` through the driver).

    **Arguments:** `model`, `ys` `(n, N)` and the likelihood settings as in `GramStep`;
    `key` (keyword-only; step `i` draws its probes from `fold_in(key, i)`); `steps`;
    `optimizer` (default `optax.adam(0.03)`); `driver` a `jaxlab.Driver` (chunk: steps
    between checkpoint/progress checks, 10 here when left at the default; checkpointer,
    progress; `StepLoop()` unless it names a loop).

    **Returns:** `(model, history)`, `history.losses` `(steps,)` the per-dimension NLL.
    """
    optimizer = optax.adam(0.03) if optimizer is None else optimizer
    step = GramStep(
        model,
        ys,
        optimizer=optimizer,
        probes=probes,
        lanczos_steps=lanczos_steps,
        cg_tol=cg_tol,
        cg_maxiter=cg_maxiter,
    )
    state, hist = run_steps(
        step,
        step.init(model, key),
        key=key,
        steps=steps,
        driver=driver_for(driver, chunk=10, loop=StepLoop()),
    )
    return step.model(state), hist
