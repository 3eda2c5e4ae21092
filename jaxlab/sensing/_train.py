"""Simulated probe data and ELBO training (`VAEStep` run by `jaxlab.run_steps`)."""

from __future__ import annotations

import functools

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import optax
from jaxtyping import Array, Float

from jaxlab._core import (
    AbstractStep,
    Driver,
    History,
    as_array,
    check_memory,
    check_positive_int,
    check_real,
    check_steps,
    optimizer_update,
    run_steps,
)

from ._flower import TUBE_RADIUS, Flower, observe, sample_flower
from ._model import MultimodalVAE, elbo

__all__ = ["ProbeData", "VAEStep", "random_actions", "simulate_probes", "train_model"]


class ProbeData(eqx.Module):
    """F flowers x K probes: actions and the two noisy observation streams."""

    flowers: Flower
    actions: Float[Array, "F K 3"]
    visual: Float[Array, "F K 9"]
    mechano: Float[Array, "F K 6"]


def random_actions(flower: Flower, n: int, *, key: jax.Array, near_nectary: float = 0.25):
    """n probe actions: uniform over the corolla, a fraction aimed near the nectary.

    `n` a positive integer; `near_nectary` the fraction in [0, 1] aimed near the nectary.
    """
    check_positive_int("n", n)
    check_memory("n", 4.0 * 16 * n)  # radii, angles, positions, permutation
    near_nectary = check_real("near_nectary", near_nectary, low=0.0, high=1.0)
    k1, k2, k3, k4 = jax.random.split(key, 4)
    r = 0.95 * jnp.sqrt(jax.random.uniform(k1, (n,)))
    th = jax.random.uniform(k2, (n,), maxval=2 * jnp.pi)
    pos = jnp.stack([r * jnp.cos(th), r * jnp.sin(th)], -1)
    near = flower.nectary[None] + 1.5 * TUBE_RADIUS * jax.random.normal(k3, (n, 2))
    pick = (jnp.arange(n) < int(near_nectary * n))[:, None]
    pos = jnp.where(pick, near, pos)
    pos = jax.random.permutation(k4, pos)
    angle = jax.random.uniform(jax.random.fold_in(key, 1), (n, 1), maxval=2 * jnp.pi)
    return jnp.concatenate([pos, angle], -1)


def simulate_probes(n_flowers: int, n_probes: int, *, key: jax.Array, **flower_kwargs) -> ProbeData:
    """Sample flowers (training conditions unless `flower_kwargs` say otherwise) and probe them."""
    check_positive_int("n_flowers", n_flowers)
    check_positive_int("n_probes", n_probes)
    # per flower: its key and parameters, and per probe the action, both observations and
    # the renderer's intermediates (a few copies)
    check_memory("n_flowers x n_probes", 8.0 * n_flowers * (16 + 4 * n_probes * (3 + 9 + 6)))
    keys = jax.random.split(key, n_flowers)
    # one compiled program (run eagerly, the vmapped renderer compiled ~170 primitives one
    # by one, ~10 s on 2 cores, again for every other number of flowers); keyword values
    # that cannot be static (traced arrays) keep the eager path
    kwargs = tuple(
        sorted(
            (k, tuple(np.asarray(v).tolist()) if isinstance(v, list | np.ndarray) else v)
            for k, v in flower_kwargs.items()
        )
    )
    try:
        hash(kwargs)
    except TypeError:
        return _simulate_probes(keys, n_probes, dict(flower_kwargs))
    return _simulate_probes_jit(keys, n_probes, kwargs)


def _simulate_probes(keys, n_probes: int, flower_kwargs: dict) -> ProbeData:
    def one(k):
        kf, ka, ko = jax.random.split(k, 3)
        f = sample_flower(key=kf, **flower_kwargs)
        acts = random_actions(f, n_probes, key=ka)
        v, m = jax.vmap(lambda a, kk: observe(f, a, key=kk))(acts, jax.random.split(ko, n_probes))
        return f, acts, v, m

    f, a, v, m = jax.vmap(one)(keys)
    return ProbeData(flowers=f, actions=a, visual=v, mechano=m)


@functools.partial(jax.jit, static_argnums=(1, 2))
def _simulate_probes_jit(keys, n_probes: int, flower_kwargs: tuple) -> ProbeData:
    return _simulate_probes(keys, n_probes, dict(flower_kwargs))


def _probe_data(data: ProbeData) -> ProbeData:
    """`data` with every leaf a finite JAX array of the documented shape (NumPy converted)."""
    sizes: dict[str, int] = {}
    fields = {}
    for name, width in (("actions", 3), ("visual", 9), ("mechano", 6)):
        fields[name] = as_array(
            f"data.{name}",
            getattr(data, name),
            shape=("F", "K", width),
            dtype=jnp.floating,
            sizes=sizes,
            finite=True,
        )
    flowers = jax.tree.map(lambda x: jnp.asarray(x) if eqx.is_array_like(x) else x, data.flowers)
    return ProbeData(flowers=flowers, **fields)


class VAEStep(AbstractStep):
    """One Adam step on the mean negative ELBO of a random batch of flowers (P4).

    Each step draws `batch_size` flowers and, per flower, a random number of its probes
    as context (1 .. K), so the model learns to predict probes it has not seen. The
    state is `(params, opt_state)` with `params` the array leaves of the
    `MultimodalVAE`; its non-array part is held by the step (`model(state)` puts
    them together).

    **Arguments:**

    - `model`: the `MultimodalVAE` to train (its non-array part is kept here).
    - `data`: the `ProbeData` (F flowers x K probes).
    - `optimizer`: an optax transformation (`optax.adam(1e-3)` in `train_model`).
    - `batch_size`: flowers per step (drawn with replacement), a positive integer whose
      step fits in memory (a larger one raises a `ValueError` naming it).
    """

    data: ProbeData
    static: MultimodalVAE = eqx.field(static=True)
    optimizer: optax.GradientTransformation = eqx.field(static=True)
    batch_size: int = eqx.field(static=True)

    def __init__(
        self,
        model: MultimodalVAE,
        data: ProbeData,
        *,
        optimizer: optax.GradientTransformation,
        batch_size: int = 64,
    ):
        if not isinstance(model, MultimodalVAE):
            raise ValueError(f"model: expected a MultimodalVAE, received {type(model).__name__}")
        if not isinstance(data, ProbeData):
            raise ValueError(f"data: expected ProbeData, received {type(data).__name__}")
        self.batch_size = check_positive_int("batch_size", batch_size)
        self.static = eqx.partition(model, eqx.is_array)[1]
        self.data = _probe_data(data)
        # the step holds every sampled flower's probes and the encoders' activations for
        # the gradient (a few copies of `width` floats per probe): a huge batch is refused
        # before it is compiled
        width = max(int(x.shape[-1]) for x in jax.tree.leaves(eqx.filter(model, eqx.is_array)))
        n_probes = int(self.data.actions.shape[1])
        check_memory("batch_size", 8.0 * 8 * self.batch_size * n_probes * (18 + width))
        self.optimizer = optimizer

    def init(self, model: MultimodalVAE, key: jax.Array):
        """`(params, opt_state)` of `model` (`key` unused: the start is the model)."""
        del key
        params = eqx.filter(model, eqx.is_array)
        return params, self.optimizer.init(params)

    def model(self, state) -> MultimodalVAE:
        """The `MultimodalVAE` of a state."""
        return eqx.combine(state[0], self.static)

    def step(self, state, key):
        params, opt_state = state
        data = self.data
        n_flowers, n_probes = data.actions.shape[:2]
        ki, kc, ke = jax.random.split(key, 3)
        idx = jax.random.randint(ki, (self.batch_size,), 0, n_flowers)
        n_ctx = jax.random.randint(kc, (self.batch_size,), 1, n_probes + 1)
        keys = jax.random.split(ke, self.batch_size)

        def loss_fn(p):
            mdl = eqx.combine(p, self.static)
            vals = jax.vmap(
                lambda i, n, kk: elbo(
                    mdl, data.visual[i], data.mechano[i], data.actions[i], key=kk, n_context=n
                )
            )(idx, n_ctx, keys)
            return -jnp.mean(vals)

        loss, grads = jax.value_and_grad(loss_fn)(params)
        updates, opt_state = optimizer_update(self.optimizer, grads, opt_state, params)
        return (eqx.apply_updates(params, updates), opt_state), {"loss": loss}


def train_model(
    model: MultimodalVAE,
    data: ProbeData,
    *,
    key: jax.Array,
    steps: int = 2000,
    batch_size: int = 64,
    optimizer: optax.GradientTransformation | None = None,
    driver: Driver | None = None,
) -> tuple[MultimodalVAE, History]:
    """Maximise the mean ELBO (`VAEStep` through `jaxlab.run_steps`).

    **Arguments:**

    - `model`, `data`: the `MultimodalVAE` and its `ProbeData`.
    - `key`: PRNG key (keyword-only); step `i` uses `fold_in(key, i)`.
    - `steps`: optimiser steps, in [1, `jaxlab.MAX_RUN_STEPS`] (10**7: a larger count
      raises a `ValueError` naming `steps` before anything compiles); `batch_size`:
      flowers per step.
    - `optimizer`: optax transformation (default `optax.adam(1e-3)`).
    - `driver`: a `jaxlab.Driver` (chunk, checkpointer for save/resume: a resumed run
      equals an uninterrupted one, progress; default `Driver()`, silent).

    **Returns:** `(model, history)`, `history.losses` the per-step -ELBO `(steps,)` (the
    whole run's, also after a resume).
    """
    check_steps("steps", steps)
    optimizer = optax.adam(1e-3) if optimizer is None else optimizer
    step = VAEStep(model, data, optimizer=optimizer, batch_size=batch_size)
    state, hist = run_steps(
        step,
        step.init(model, key),
        key=key,
        steps=steps,
        driver=driver,
    )
    return step.model(state), hist
