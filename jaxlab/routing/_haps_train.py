"""`HAPSStep`: the reward-augmented HAPS objective, one minibatch per step, for `run_steps`.

Per query x with correct option y, every candidate j's adapted model gives option logits
l_j (from its generated LoRA on its cached prefix). With pi = softmax(router logits):

- task term: sum_j w_j NLL_j, NLL_j = -log softmax(l_j)[y] (the correct option's NLL
  under j's adapted model), w = (1 - explore) stop_grad(pi) + explore / M: each generator
  learns mostly from the queries routed to it, and `explore` keeps every one training;
  its gradient reaches the generators and, through the shared trunk, the router's
  representation;
- routing term: the router maximises E_{j ~ pi}[R_j] with the reward
  R_j = -NLL_j + reward_weight * (correct_j - cost_weight * cost_j / max cost),
  correct_j = [argmax l_j = y] (with `reward_weight` = 0, the "no reward" ablation, the
  router learns from the task likelihood alone).

Why REINFORCE (`reinforce_surrogate`, baseline = the expected reward) rather than a
Gumbel-softmax relaxation: the reward (correctness minus cost) is a step function of the
adapted logits, with no pathwise gradient for a relaxation to follow, and the
score-function estimate is unbiased for any reward (Gumbel-softmax is biased at every
temperature > 0). It also needs only the sampled architecture's reward; here all M are
computed anyway (M is small, they share the batch), which gives the baseline exactly.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import equinox as eqx
import jax
import jax.numpy as jnp
import optax
from jaxtyping import Array, Float, Int

from jaxlab import lm
from jaxlab._core import (
    AbstractStep,
    Driver,
    as_array,
    check_ids,
    check_lengths,
    check_positive_int,
    driver_for,
    optimizer_update,
    run_steps,
)

from ._adapted import AdaptedInputs
from ._haps import HAPS
from ._reinforce import reinforce_surrogate

__all__ = ["HAPSStep", "fit_haps", "haps_predict"]


def _row(tree, i):
    return jax.tree_util.tree_map(lambda a: a[i], tree)


class HAPSStep(AbstractStep):
    """One Adam (or any optax) step of the HAPS objective on a random minibatch.

    **Arguments:**
        features: (N, F) query features.
        answers: (N,) int index of the correct option.
        cost: (N, M) cost of each candidate on each query (any unit >= 0).
        uppers: M frozen adapted blocks (`jaxlab.lm.layer_slice`; not trained).
        inputs: M `AdaptedInputs` with leaves stacked over the N queries.
        options: M (K,) option token ids.
        static: the non-array part of the `HAPS` (`eqx.partition(haps, eqx.is_inexact_array)[1]`).
        optimizer: optax transformation.
        batch_size: queries per step.
        reward_weight: beta, weight of the correctness-minus-cost reward (0: no reward term).
        cost_weight: lambda, the expected-cost penalty inside the reward.
        explore: mixing of the generators' weights with uniform (in [0, 1]; 1 trains
            every generator on every query, e.g. for static per-architecture LoRA).
        route_weight: weight of the routing term (0 leaves the router untrained).
        n_samples: REINFORCE samples per query.
    """

    features: Float[Array, "N F"]
    answers: Int[Array, " N"]
    cost: Float[Array, "N M"]
    uppers: tuple[lm.Transformer, ...]
    inputs: tuple[AdaptedInputs, ...]
    options: tuple[Int[Array, " K"], ...]
    static: Any = eqx.field(static=True)
    optimizer: optax.GradientTransformation = eqx.field(static=True)
    batch_size: int = eqx.field(static=True, default=16)
    reward_weight: float = eqx.field(static=True, default=1.0)
    cost_weight: float = eqx.field(static=True, default=0.0)
    explore: float = eqx.field(static=True, default=0.3)
    route_weight: float = eqx.field(static=True, default=1.0)
    n_samples: int = eqx.field(static=True, default=4)

    def init(self, model, key):
        del key
        params = eqx.filter(model, eqx.is_inexact_array)
        return params, self.optimizer.init(params)

    def objective(self, params, idx, *, key):
        """Mean HAPS loss over queries `idx` and per-query diagnostics."""
        model: HAPS = eqx.combine(params, self.static)
        cmax = jnp.max(self.cost)
        m = len(self.uppers)

        def one(i, k):
            x = self.features[i]
            logits = model.option_logits(x, self.uppers, _row(self.inputs, i), self.options)
            logp = jax.nn.log_softmax(logits, axis=-1)
            nll = -logp[:, self.answers[i]]
            pred = jnp.argmax(logits, axis=-1).astype(jnp.int32)
            correct = (pred == self.answers[i]).astype(jnp.float32)
            reward = -nll + self.reward_weight * (correct - self.cost_weight * self.cost[i] / cmax)
            rl = model.router_logits(x)
            pi = jax.lax.stop_gradient(jax.nn.softmax(rl))
            w = (1.0 - self.explore) * pi + self.explore / m
            task = jnp.sum(w * nll)
            route = reinforce_surrogate(rl, reward, key=k, n_samples=self.n_samples)
            chosen = jnp.argmax(rl)
            return task - self.route_weight * route, correct[chosen], jnp.sum(pi * nll)

        keys = jax.random.split(key, idx.shape[0])
        loss, acc, nll = jax.vmap(one)(idx, keys)
        return jnp.mean(loss), (jnp.mean(acc), jnp.mean(nll))

    def step(self, state, key):
        params, opt_state = state
        k_batch, k_loss = jax.random.split(key)
        n = self.features.shape[0]
        idx = jax.random.choice(k_batch, n, (min(self.batch_size, n),), replace=False)
        (loss, (acc, nll)), grads = jax.value_and_grad(self.objective, has_aux=True)(
            params, idx, key=k_loss
        )
        updates, opt_state = optimizer_update(self.optimizer, grads, opt_state, params)
        params = eqx.apply_updates(params, updates)
        return (params, opt_state), {"loss": loss, "routed_accuracy": acc, "nll": nll}


def _check_options(options: Sequence, uppers: Sequence[lm.Transformer]) -> tuple:
    """Each candidate's K option token ids, in its own vocabulary (never wrapped)."""
    opts = tuple(
        jnp.asarray(check_ids(f"options[{j}]", o, u.config.vocab_size, what="token ids"), jnp.int32)
        for j, (o, u) in enumerate(zip(options, uppers, strict=True))
    )
    if any(o.ndim != 1 or o.shape != opts[0].shape or o.size < 2 for o in opts):
        raise ValueError(
            f"options: expected the same K >= 2 option ids per candidate, received shapes "
            f"{[tuple(o.shape) for o in opts]}"
        )
    return opts


def fit_haps(
    haps: HAPS,
    features,
    answers,
    cost,
    uppers: Sequence[lm.Transformer],
    inputs: Sequence[AdaptedInputs],
    options: Sequence,
    *,
    key: jax.Array,
    steps: int = 300,
    optimizer: optax.GradientTransformation | None = None,
    driver: Driver | None = None,
    **step_options,
):
    """Train `haps` through `jaxlab.run_steps`.

    **Arguments:** as `HAPSStep` (features (N, F) finite, N >= 1, F the HAPS's
    n_features; answers (N,) option indices in [0, K); cost (N, M) finite >= 0; uppers,
    inputs, options; anything else raises a `ValueError` naming the argument), `key`,
    `steps`; `optimizer` (default
    `optax.adamw(3e-3, weight_decay=1e-4)`); `driver` a `jaxlab.Driver` (chunk, 25 here
    when left at the default; checkpointer; progress); `step_options` go to `HAPSStep`
    (batch_size, reward_weight, cost_weight, explore, route_weight, n_samples).

    **Returns:** `(trained HAPS, History)`.
    """
    m = haps.n_candidates
    sizes: dict[str, int] = {}
    f = haps.trunk.in_size
    x = as_array("features", features, shape=("N", f), sizes=sizes, finite=True, real=True)
    if x.shape[0] == 0:
        raise ValueError(f"features: expected at least one query, received shape {x.shape}")
    y = jnp.asarray(check_ids("answers", answers, None, what="option indices"), jnp.int32)
    c = as_array("cost", cost, shape=("N", m), sizes=sizes, finite=True, low=0.0, real=True)
    x, c = x.astype(jnp.float32), c.astype(jnp.float32)
    if x.ndim != 2 or y.shape != (x.shape[0],) or c.shape != (x.shape[0], m):
        raise ValueError(
            f"features, answers, cost: expected (N, F), (N,), (N, {m}), received "
            f"{x.shape}, {y.shape}, {c.shape}"
        )
    if not (len(uppers) == len(inputs) == len(options) == m):
        raise ValueError(
            f"uppers, inputs, options: expected {m} each, received "
            f"{len(uppers)}, {len(inputs)}, {len(options)}"
        )
    opts = _check_options(options, uppers)
    y = jnp.asarray(
        check_ids("answers", answers, opts[0].shape[0], what="option indices"), jnp.int32
    )
    for j, inp in enumerate(inputs):
        check_lengths(features=x, **{f"inputs[{j}]": inp.resid})
    params, static = eqx.partition(haps, eqx.is_inexact_array)
    step = HAPSStep(
        x,
        y,
        c,
        tuple(uppers),
        tuple(inputs),
        opts,
        static,
        optax.adamw(3e-3, weight_decay=1e-4) if optimizer is None else optimizer,
        **step_options,
    )
    steps = check_positive_int("steps", steps)
    driver = driver_for(driver, chunk=25)
    state, hist = run_steps(
        step,
        step.init(params, key),
        key=key,
        steps=steps,
        driver=driver.replace(chunk=min(steps, driver.chunk)),
    )
    return eqx.combine(state[0], static), hist


@eqx.filter_jit
def _predict_chunk(haps, features, uppers, inputs, options):
    def one(x, inp):
        return haps.option_logits(x, uppers, inp, options), jax.nn.log_softmax(
            haps.router_logits(x)
        )

    return jax.vmap(one)(features, inputs)


def haps_predict(
    haps: HAPS,
    features,
    uppers: Sequence[lm.Transformer],
    inputs: Sequence[AdaptedInputs],
    options: Sequence,
    *,
    chunk: int = 32,
) -> tuple[Float[Array, "N M K"], Float[Array, "N M"]]:
    """Every candidate's adapted option logits and the router's log-probabilities.

    **Arguments:** `haps`; `features` (N, F) finite, N >= 1, F = the HAPS's n_features
    (else a `ValueError` naming it); `uppers`, `inputs` (stacked over N), `options`
    as in `HAPSStep`; `chunk` queries per compiled call (bounds memory; at most the
    number of queries are padded to).

    **Returns:** `(option_logits (N, M, K), router_log_probs (N, M))`.
    """
    f = haps.trunk.in_size
    x = as_array("features", features, shape=(None, f), finite=True, nonempty=True, real=True)
    x = x.astype(jnp.float32)
    if not (len(uppers) == len(inputs) == len(options) == haps.n_candidates):
        raise ValueError(
            f"uppers, inputs, options: expected {haps.n_candidates} each, received "
            f"{len(uppers)}, {len(inputs)}, {len(options)}"
        )
    opts = _check_options(options, uppers)
    for j, inp in enumerate(inputs):
        check_lengths(features=x, **{f"inputs[{j}]": inp.resid})
    n = x.shape[0]
    # a chunk beyond the queries would only pad: never more rows than there are queries
    chunk = min(check_positive_int("chunk", chunk), max(n, 1))
    outs = []
    for s in range(0, n, chunk):
        idx = jnp.minimum(jnp.arange(s, s + chunk), n - 1)  # one shape: pad with the last row
        got = _predict_chunk(haps, x[idx], tuple(uppers), _row(tuple(inputs), idx), opts)
        outs.append(jax.tree_util.tree_map(lambda a, s=s: a[: min(chunk, n - s)], got))
    return jnp.concatenate([o[0] for o in outs]), jnp.concatenate([o[1] for o in outs])
