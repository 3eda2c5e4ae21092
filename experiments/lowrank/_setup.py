"""Shared pieces of the P1 history experiments: the two-channel layout and teacher tasks,
random initial overlaps, and batched training histories."""

from __future__ import annotations

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from jaxlab import lowrank as lr

LAYOUT = lr.OverlapLayout(1, 2)  # rows (m, n, I1, I2, w)


def channel_task(
    gain: float, channel: int, readout_overlap: float = 0.6, recurrence: float = 0.5
) -> lr.Task:
    """Teacher-student task on input `channel` (of two): steps and pulses of 5 amplitudes.

    Targets are the full output time courses of a linear rank-1 teacher with
    `m.n = recurrence`, `m.w = readout_overlap` and `n.I = gain (1 - m.n) / m.w`
    (steady-state gain `gain`); every time step counts and pulse responses expose
    the recurrent time constant, so the task pins down `m.n` and `n.I` separately.
    """
    step = lr.fixed_point_task(gain=gain).astype(jnp.float64)
    n_steps = step.inputs.shape[1]
    pulse = step.inputs * (jnp.arange(n_steps) < 5).astype(jnp.float64)[None, :, None]
    u = jnp.concatenate([step.inputs, pulse], axis=0)
    zeros = jnp.zeros_like(u)
    inputs = jnp.concatenate([u, zeros] if channel == 0 else [zeros, u], axis=-1)
    mn = recurrence
    g_t = jnp.eye(5, dtype=jnp.float64)
    g_t = g_t.at[0, 1].set(mn).at[1, 0].set(mn)
    g_t = g_t.at[0, 4].set(readout_overlap).at[4, 0].set(readout_overlap)
    n_i = gain * (1.0 - mn) / readout_overlap
    g_t = g_t.at[1, 2 + channel].set(n_i).at[2 + channel, 1].set(n_i)
    mask = jnp.ones(u.shape[:2], jnp.float64)
    probe = lr.Task(inputs, mask, mask, step.dt)
    targets = lr.overlap_outputs(g_t, probe, LAYOUT, lr.Linear())
    return lr.Task(inputs, targets, mask, step.dt, f"teacher_ch{channel + 1}")


def random_init(
    key, n_nets: int, jitter: float, input_corr: float = 0.0, readout_overlap: float = 0.6
):
    """Random initial overlaps `(n_nets, 5, 5)`: a fixed skeleton plus per-network jitter.

    Skeleton: unit-norm m, I1, I2, w; I1.I2 = `input_corr`; m.w = `readout_overlap`
    (the readout sees the recurrent mode); small n. Jitter perturbs the n row of a
    square-root factor (the fixed vectors match the teacher's), so every sample is
    positive semi-definite.
    """
    base = jnp.eye(5, dtype=jnp.float64).at[1, 1].set(0.1)
    base = base.at[2, 3].set(input_corr).at[3, 2].set(input_corr)
    base = base.at[0, 4].set(readout_overlap).at[4, 0].set(readout_overlap)
    fac = jnp.concatenate([jnp.linalg.cholesky(base), jnp.zeros((5, 5), jnp.float64)], 1)
    noise = jax.random.normal(key, (n_nets, 10), jnp.float64) * jitter / np.sqrt(10)
    f = fac[None].repeat(n_nets, axis=0).at[:, 1, :].add(noise)
    return f @ jnp.swapaxes(f, 1, 2)


@eqx.filter_jit
def _train_batch(gs, phases, weight_decay, trained, rtol):
    return jax.vmap(
        lambda g: lr.train_history(g, phases, trained, weight_decay=weight_decay, rtol=rtol)
    )(gs)


def train_histories(gs, phases, weight_decay, rtol, trained):
    """`lowrank.train_history` of every network `gs` (B, P, P) through the phases
    `[(task, duration), ...]` (one compile per history structure)."""
    phases = [(task, jnp.asarray(duration, jnp.float64)) for task, duration in phases]
    return _train_batch(gs, phases, jnp.asarray(weight_decay, jnp.float64), trained, rtol)
