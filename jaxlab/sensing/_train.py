"""Simulated probe data and ELBO training (optax, progress bar, checkpoints)."""

from __future__ import annotations

from pathlib import Path

import equinox as eqx
import jax
import jax.numpy as jnp
import optax
from jaxtyping import Array, Float
from tqdm.auto import tqdm

from jaxlab._core import check_positive_int, load_checkpoint, optimizer_update, save_checkpoint

from ._flower import TUBE_RADIUS, Flower, observe, sample_flower
from ._model import MultimodalVAE, elbo

__all__ = ["ProbeData", "random_actions", "simulate_probes", "train_model"]


class ProbeData(eqx.Module):
    """F flowers x K probes: actions and the two noisy observation streams."""

    flowers: Flower
    actions: Float[Array, "F K 3"]
    visual: Float[Array, "F K 9"]
    mechano: Float[Array, "F K 6"]


def random_actions(flower: Flower, n: int, *, key: jax.Array, near_nectary: float = 0.25):
    """n probe actions: uniform over the corolla, a fraction aimed near the nectary."""
    k1, k2, k3, k4 = jax.random.split(key, 4)
    r = 0.95 * jnp.sqrt(jax.random.uniform(k1, (n,)))
    th = jax.random.uniform(k2, (n,), maxval=2 * jnp.pi)
    pos = jnp.stack([r * jnp.cos(th), r * jnp.sin(th)], -1)
    near = flower.nectary + 1.5 * TUBE_RADIUS * jax.random.normal(k3, (n, 2))
    pick = (jnp.arange(n) < int(near_nectary * n))[:, None]
    pos = jnp.where(pick, near, pos)
    pos = jax.random.permutation(k4, pos)
    angle = jax.random.uniform(jax.random.fold_in(key, 1), (n, 1), maxval=2 * jnp.pi)
    return jnp.concatenate([pos, angle], -1)


def simulate_probes(
    n_flowers: int, n_probes: int, *, key: jax.Array, **flower_kwargs
) -> ProbeData:
    """Sample flowers (training conditions unless `flower_kwargs` say otherwise) and probe them."""
    check_positive_int("n_flowers", n_flowers)
    check_positive_int("n_probes", n_probes)

    def one(k):
        kf, ka, ko = jax.random.split(k, 3)
        f = sample_flower(key=kf, **flower_kwargs)
        acts = random_actions(f, n_probes, key=ka)
        v, m = jax.vmap(lambda a, kk: observe(f, a, key=kk))(acts, jax.random.split(ko, n_probes))
        return f, acts, v, m

    f, a, v, m = jax.vmap(one)(jax.random.split(key, n_flowers))
    return ProbeData(flowers=f, actions=a, visual=v, mechano=m)


def train_model(
    model: MultimodalVAE,
    data: ProbeData,
    *,
    key: jax.Array,
    steps: int = 2000,
    batch_size: int = 64,
    learning_rate: float = 1e-3,
    chunk: int = 100,
    checkpoint: str | Path | None = None,
    resume: bool = False,
    progress: bool = True,
) -> tuple[MultimodalVAE, Float[Array, " steps"]]:
    """Maximise the mean ELBO with Adam; returns the model and the per-step -ELBO.

    Each step uses a random subset of each flower's probes as context (so the
    model learns to predict probes it has not seen). Steps run in jitted chunks
    of `chunk`; with `checkpoint`, the model is saved after each chunk and
    `resume=True` continues from it.
    """
    check_positive_int("steps", steps)
    n_flowers, n_probes = data.actions.shape[:2]
    opt = optax.adam(learning_rate)
    opt_state = opt.init(eqx.filter(model, eqx.is_array))
    start = 0
    ckpt = Path(checkpoint) if checkpoint is not None else None
    if resume and ckpt is not None and ckpt.is_file():
        model, opt_state, start_arr = load_checkpoint(ckpt, (model, opt_state, jnp.array(0)))
        start = int(start_arr)

    def loss_fn(mdl, idx, k):
        kc, ke = jax.random.split(k)
        n_ctx = jax.random.randint(kc, (idx.shape[0],), 1, n_probes + 1)
        keys = jax.random.split(ke, idx.shape[0])
        vals = jax.vmap(lambda i, n, kk: elbo(mdl, data.visual[i], data.mechano[i],
                                              data.actions[i], key=kk, n_context=n))(
            idx, n_ctx, keys)
        return -jnp.mean(vals)

    @eqx.filter_jit
    def run_chunk(mdl, st, k):
        def body(carry, kk):
            m, s = carry
            ki, kl = jax.random.split(kk)
            idx = jax.random.randint(ki, (batch_size,), 0, n_flowers)
            loss, g = eqx.filter_value_and_grad(loss_fn)(m, idx, kl)
            upd, s = optimizer_update(opt, g, s, eqx.filter(m, eqx.is_array))
            return (eqx.apply_updates(m, upd), s), loss

        params, static = eqx.partition(mdl, eqx.is_array)

        def body_p(carry, kk):
            (m, s), loss = body((eqx.combine(carry[0], static), carry[1]), kk)
            return (eqx.filter(m, eqx.is_array), s), loss

        (params, st), losses = jax.lax.scan(body_p, (params, st), jax.random.split(k, chunk))
        return eqx.combine(params, static), st, losses

    losses = []
    n_chunks = -(-(steps - start) // chunk) if steps > start else 0
    bar = tqdm(range(n_chunks), desc="sensing: ELBO", disable=not progress)
    done = start
    for _ in bar:
        model, opt_state, ls = run_chunk(model, opt_state, jax.random.fold_in(key, done))
        done += chunk
        losses.append(ls)
        bar.set_postfix(neg_elbo=float(ls[-1]))
        if ckpt is not None:
            save_checkpoint(ckpt, (model, opt_state, jnp.array(done)))
    all_losses = jnp.concatenate(losses) if losses else jnp.zeros((0,))
    return model, all_losses
