"""Tasks: batches of input time courses, target outputs and loss masks."""

from __future__ import annotations

import equinox as eqx
import jax
import jax.numpy as jnp
from jaxtyping import Array, Float, PRNGKeyArray

from jaxlab._core import (
    check_array,
    check_finite,
    check_memory,
    check_positive_int,
    check_range,
)

__all__ = [
    "Task",
    "fixed_point_task",
    "flip_flop_task",
    "context_task",
    "ramp_task",
]


class Task(eqx.Module):
    """A supervised RNN task on a uniform Euler time grid.

    **Fields:**

    - `inputs`: `(B, T, K)` input time courses `u(t)` for `B` trials.
    - `targets`: `(B, T)` target outputs `y(t)`.
    - `mask`: `(B, T)` non-negative weights of each time point in the loss.
    - `dt`: Euler step of the network dynamics (in units of the neuronal time constant).
    - `name`: a label.

    The loss is `sum(mask (z - y)^2) / (2 sum(mask))`.
    """

    inputs: Float[Array, "B T K"]
    targets: Float[Array, "B T"]
    mask: Float[Array, "B T"]
    dt: float = eqx.field(static=True)
    name: str = eqx.field(static=True, default="task")

    def __init__(self, inputs, targets, mask, dt: float, name: str = "task"):
        sizes = check_array("inputs", inputs, shape=("B", "T", "K"), dtype=jnp.floating)
        check_array("targets", targets, shape=("B", "T"), dtype=jnp.floating, sizes=sizes)
        check_array("mask", mask, shape=("B", "T"), dtype=jnp.floating, sizes=sizes)
        for nm, x in (("inputs", inputs), ("targets", targets), ("mask", mask)):
            check_finite(nm, x)
        check_range("mask", mask, low=0.0)
        if not dt > 0:
            raise ValueError(f"dt: expected a positive step, received {dt!r}")
        self.inputs = inputs
        self.targets = targets
        self.mask = mask
        self.dt = float(dt)
        self.name = name

    @property
    def n_inputs(self) -> int:
        return self.inputs.shape[-1]

    def astype(self, dtype) -> Task:
        """The same task with arrays cast to `dtype`."""
        return Task(
            self.inputs.astype(dtype),
            self.targets.astype(dtype),
            self.mask.astype(dtype),
            self.dt,
            self.name,
        )


def _task_sizes(n_trials, n_steps, n_inputs: int) -> tuple[int, int]:
    """`n_trials`, `n_steps` as positive ints whose task arrays (inputs, targets, mask and
    the intermediates, float32) fit in memory: a `ValueError` naming the size otherwise."""
    n_trials = check_positive_int("n_trials", n_trials)
    n_steps = check_positive_int("n_steps", n_steps)
    # the error names the larger of the two sizes (the one to reduce)
    name = "n_steps" if n_steps > n_trials else "n_trials"
    check_memory(name, 4.0 * n_trials * n_steps * (n_inputs + 4))
    return n_trials, n_steps


def _late_mask(n_trials: int, n_steps: int, fraction: float) -> Array:
    start = int(round(n_steps * (1.0 - fraction)))
    row = (jnp.arange(n_steps) >= start).astype(jnp.float32)
    return jnp.tile(row, (n_trials, 1))


def fixed_point_task(
    *,
    n_trials: int = 5,
    n_steps: int = 40,
    dt: float = 0.2,
    gain: float = 0.8,
    amplitude: float = 1.0,
) -> Task:
    """Fixed-point input-output map: constant input `a`, output must settle at `gain * a`.

    Input amplitudes `a` are evenly spaced in `[-amplitude, amplitude]`; the loss
    counts the last half of the trial (the network's fixed point). `K = 1`.
    """
    n_trials, n_steps = _task_sizes(n_trials, n_steps, 1)
    amps = jnp.linspace(-amplitude, amplitude, n_trials, dtype=jnp.float32)
    inputs = jnp.broadcast_to(amps[:, None, None], (n_trials, n_steps, 1))
    targets = jnp.broadcast_to(gain * amps[:, None], (n_trials, n_steps))
    return Task(inputs, targets, _late_mask(n_trials, n_steps, 0.5), dt, "fixed_point")


def flip_flop_task(
    *,
    key: PRNGKeyArray,
    n_trials: int = 8,
    n_steps: int = 60,
    dt: float = 0.2,
    pulse_prob: float = 0.08,
    pulse_width: int = 2,
    level: float = 0.5,
) -> Task:
    """One-bit flip-flop: +-1 pulses; the output must hold `level * sign(last pulse)`.

    Before the first pulse the target is 0. `K = 1`. A memory task: rank-1
    linear networks can only approximate it (a leaky integrator), tanh
    networks can form two attractors. `n_trials`, `n_steps`, `pulse_width` are positive
    integers (a pulse wider than the trial lasts the whole trial; sizes whose arrays do
    not fit in memory raise a `ValueError` naming them).
    """
    n_trials, n_steps = _task_sizes(n_trials, n_steps, 1)
    # a pulse longer than the trial is the whole trial (and bounds the loop below)
    pulse_width = min(check_positive_int("pulse_width", pulse_width), n_steps)
    k1, k2 = jax.random.split(key)
    onset = jax.random.bernoulli(k1, pulse_prob, (n_trials, n_steps))
    onset = onset.at[:, 0].set(False)
    sign = jnp.where(jax.random.bernoulli(k2, 0.5, (n_trials, n_steps)), 1.0, -1.0)
    pulses = jnp.where(onset, sign, 0.0)
    # Pulses last `pulse_width` steps.
    u = sum(jnp.roll(pulses, s, axis=1).at[:, :s].set(0.0) for s in range(pulse_width))
    u = jnp.clip(u, -1.0, 1.0).astype(jnp.float32)

    def hold(state, p):
        state = jnp.where(p != 0, jnp.sign(p), state)
        return state, state

    _, held = jax.lax.scan(hold, jnp.zeros(n_trials, jnp.float32), pulses.T)
    targets = level * held.T.astype(jnp.float32)
    mask = jnp.ones((n_trials, n_steps), jnp.float32)
    return Task(u[..., None], targets, mask, dt, "flip_flop")


def context_task(
    *,
    key: PRNGKeyArray,
    n_trials: int = 8,
    n_steps: int = 40,
    dt: float = 0.2,
) -> Task:
    """Context-dependent readout: two stimuli and a +-1 context cue; report the cued one.

    Inputs `(s1, s2, c)` are constant per trial with `s1, s2 ~ U(-1, 1)`;
    target `s1` when `c = +1`, `s2` when `c = -1`, counted over the last half.
    `K = 3`.
    """
    n_trials, n_steps = _task_sizes(n_trials, n_steps, 3)
    k1, k2 = jax.random.split(key)
    stim = jax.random.uniform(k1, (n_trials, 2), minval=-1.0, maxval=1.0)
    ctx = jnp.where(jnp.arange(n_trials) % 2 == 0, 1.0, -1.0)
    ctx = jax.random.permutation(k2, ctx)
    u = jnp.concatenate([stim, ctx[:, None]], axis=1).astype(jnp.float32)
    inputs = jnp.broadcast_to(u[:, None, :], (n_trials, n_steps, 3))
    target = jnp.where(ctx > 0, stim[:, 0], stim[:, 1]).astype(jnp.float32)
    targets = jnp.broadcast_to(target[:, None], (n_trials, n_steps))
    return Task(inputs, targets, _late_mask(n_trials, n_steps, 0.5), dt, "context")


def ramp_task(
    *,
    n_trials: int = 3,
    n_steps: int = 50,
    dt: float = 0.2,
    pulse_steps: int = 3,
    slope: float = 0.5,
) -> Task:
    """Temporal task: a brief input pulse of amplitude `a`; the output must ramp as `slope a t`.

    Amplitudes `a` are evenly spaced in `[0.5, 1]`; `t` is time since pulse onset
    in units of the trial length. `K = 1`. Reproducing a ramp needs slow
    recurrent dynamics (an eigenvalue of `J` near 1). `n_trials`, `n_steps`,
    `pulse_steps` are positive integers.
    """
    n_trials, n_steps = _task_sizes(n_trials, n_steps, 1)
    pulse_steps = check_positive_int("pulse_steps", pulse_steps)
    amps = jnp.linspace(0.5, 1.0, n_trials, dtype=jnp.float32)
    pulse = (jnp.arange(n_steps) < pulse_steps).astype(jnp.float32)
    inputs = (amps[:, None] * pulse[None, :])[..., None]
    t = jnp.arange(n_steps, dtype=jnp.float32) / n_steps
    targets = slope * amps[:, None] * t[None, :]
    mask = jnp.ones((n_trials, n_steps), jnp.float32)
    return Task(inputs, targets, mask, dt, "ramp")
