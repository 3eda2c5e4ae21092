"""Differentiable closed-loop rollouts of the real (nonlinear) plant with the observer in
the loop, and the estimation loss built on them.

`simulate` (diffrax, adaptive steps) is the evaluation; `rollout` is a fixed-step RK4
`lax.scan` of the same joint vector field, cheap to differentiate through, for
training. `rollout_estimation` turns it into the estimation term of the stage losses
(`point_loss`, `lmi_loss` take it as `estimation=`): the observer is trained on what it
will meet, the plant's true nonlinear dynamics and disturbance, not on its own
linearised error model (`estimation_loss`).

Paper: P2, "Provably stable neural-network observers".
"""

from __future__ import annotations

from collections.abc import Callable

import jax
import jax.numpy as jnp
from jaxtyping import Array, Float

from jaxlab._core import as_array, check_memory, check_positive_int, check_real

from ._observer import AbstractObserver
from ._simulate import Trajectory, joint_field
from ._systems import AbstractPlant

__all__ = ["rollout", "rollout_mse", "rollout_estimation"]


def _rollout_bytes(n: int, n_obs: int, steps: int) -> float:
    """About the bytes one rollout saves: the plant state (`n`) and the observer state
    (`n_obs`) per step, a few copies."""
    return 3 * 8.0 * (steps + 1) * (n + n_obs)


def _observer_size(observer: AbstractObserver, x_hat0) -> int:
    """Entries of `observer.init(x_hat0)` (an EKF adds its covariance)."""
    return sum(a.size for a in jax.tree.leaves(jax.eval_shape(observer.init, x_hat0)))


def rollout(
    plant: AbstractPlant,
    observer: AbstractObserver,
    x0,
    x_hat0,
    *,
    dt: float,
    steps: int,
    t0=0.0,
) -> Trajectory:
    """Fixed-step RK4 rollout of plant + observer from `t0` (`steps` steps of `dt`).

    The joint vector field is `simulate`'s (true plant dynamics including its unknown
    disturbance; the observer sees only `y = C x` and the known input). Differentiable
    in the observer (and everything else); `jax.vmap`-able.

    **Arguments:** `plant`; `observer`; `x0 (n,)`; `x_hat0 (n,)`; `dt > 0`, `steps >= 1`
    (keyword-only); `t0` start time (traced; e.g. a random disturbance phase).

    **Returns:** a `Trajectory` with `steps + 1` saved times `t0 + dt * arange(steps + 1)`;
    `ok` is False when the rollout left the finite numbers.
    """
    kw = {"dtype": jnp.floating, "finite": True}
    x0 = as_array("x0", x0, shape=(plant.state_dim,), **kw)
    x_hat0 = as_array("x_hat0", x_hat0, shape=(plant.state_dim,), **kw)
    steps = check_positive_int("steps", steps)
    dt = check_real("dt", dt, low=0.0, low_inclusive=False)
    n = plant.state_dim
    check_memory("steps", _rollout_bytes(n, _observer_size(observer, x_hat0), steps))
    args = (plant, observer)
    dtype = jnp.result_type(x0, x_hat0)
    t0 = jnp.asarray(t0, dtype)

    def field(t, y):
        return joint_field(t, y, args)

    def axpy(a, y, k):
        return jax.tree_util.tree_map(lambda u, v: u + a * v, y, k)

    def body(carry, i):
        y = carry
        t = t0 + i * dt
        k1 = field(t, y)
        k2 = field(t + dt / 2, axpy(dt / 2, y, k1))
        k3 = field(t + dt / 2, axpy(dt / 2, y, k2))
        k4 = field(t + dt, axpy(dt, y, k3))
        y = jax.tree_util.tree_map(
            lambda u, a, b, c, d: u + dt / 6 * (a + 2 * b + 2 * c + d), y, k1, k2, k3, k4
        )
        return y, y

    y0 = (jnp.asarray(x0, dtype), observer.init(jnp.asarray(x_hat0, dtype)))
    _, ys = jax.lax.scan(body, y0, jnp.arange(steps, dtype=dtype))
    ys = jax.tree_util.tree_map(lambda a, b: jnp.concatenate([a[None], b]), y0, ys)
    xs, obs = ys
    x_hat, d_hat = jax.vmap(observer.estimate)(obs)
    ts = t0 + dt * jnp.arange(steps + 1, dtype=dtype)
    ok = jnp.all(jnp.isfinite(xs)) & jnp.all(jnp.isfinite(x_hat))
    return Trajectory(ts=ts, x=xs, x_hat=x_hat, d_hat=d_hat, ok=ok)


def rollout_mse(
    plant: AbstractPlant,
    observer: AbstractObserver,
    x0s,
    x_hat0s,
    *,
    dt: float,
    steps: int,
    start: int = 1,
    t0s=None,
    weights=None,
) -> Float[Array, ""]:
    """Mean squared state-estimation error of RK4 rollouts over saved steps `start:`.

    **Arguments:** `x0s (B, n)`, `x_hat0s (B, n)` initial states and estimates; `dt`,
    `steps` as `rollout`; `start >= 1` (the first scored saved step: `t = t0`, where the
    error is the given initial error whatever the observer, is never scored; a larger
    `start` also skips the peaking transient); `t0s (B,)` start times (default 0);
    `weights (n,)` per-state weights of the squared error (default 1).

    **Returns:** a scalar (the mean over starts, scored steps and states).
    """
    sizes = {"n": plant.state_dim}
    kw = {"dtype": jnp.floating, "finite": True, "nonempty": True, "sizes": sizes}
    x0s = as_array("x0s", x0s, shape=("B", "n"), **kw)
    x_hat0s = as_array("x_hat0s", x_hat0s, shape=("B", "n"), **kw)
    steps = check_positive_int("steps", steps)
    if isinstance(start, bool) or not (isinstance(start, int) and 1 <= start <= steps):
        raise ValueError(f"start: expected an int in [1, steps={steps}], received {start!r}")
    n_obs = _observer_size(observer, x_hat0s[0])
    check_memory("steps", x0s.shape[0] * _rollout_bytes(plant.state_dim, n_obs, steps))
    dt_ = jnp.result_type(x0s)
    t0s = (
        jnp.zeros((x0s.shape[0],), dt_) if t0s is None else as_array("t0s", t0s, shape=("B",), **kw)
    )
    w = (
        jnp.ones((plant.state_dim,), dt_)
        if weights is None
        else as_array("weights", weights, shape=("n",), low=0.0, **kw)
    )

    def one(x0, xh0, t0):
        tr = rollout(plant, observer, x0, xh0, dt=dt, steps=steps, t0=t0)
        return jnp.mean(w[None, :] * (tr.x[start:] - tr.x_hat[start:]) ** 2)

    return jnp.mean(jax.vmap(one)(x0s, x_hat0s, t0s))


def rollout_estimation(
    plant: AbstractPlant,
    *,
    initial_spread,
    batch: int,
    dt: float,
    steps: int,
    start: int = 1,
    period: float = 0.0,
    weights=None,
) -> Callable[[AbstractObserver, jax.Array], Array]:
    """The nonlinear-rollout estimation term for `point_loss` / `lmi_loss` (`estimation=`).

    Returns `estimation(observer, key) -> log(rollout_mse)` on a fresh batch per call:
    `batch` true initial states `x0 = initial_spread * N(0, I)`, estimates starting at
    `x_hat0 = 0`, start times uniform in `[0, period)` (the disturbance phase; `period =
    0` starts every rollout at `t = 0`). The log makes the term scale-free (Adam steps are
    invariant to a constant factor, and the term neither dwarfs nor vanishes beside the
    Lyapunov hinge as the error shrinks).

    **Arguments:** `plant` (the real plant: its disturbance is unknown to the observer but
    acts in the rollout); `initial_spread (n,)` or scalar; `batch`, `dt`, `steps`, `start`,
    `weights` as `rollout_mse`; `period >= 0`.

    **Returns:** the function `estimation(observer, key) -> scalar` described above.
    """
    batch = check_positive_int("batch", batch)
    steps = check_positive_int("steps", steps)
    n = plant.state_dim
    spread = as_array("initial_spread", initial_spread, dtype=jnp.floating, finite=True, low=0.0)
    if spread.shape not in ((), (n,)):
        raise ValueError(
            f"initial_spread: expected a scalar or shape ({n},), received {spread.shape}"
        )
    spread = jnp.broadcast_to(spread.astype(plant.C.dtype), (n,))
    period = check_real("period", period, low=0.0)
    # checked once here, before the observer is known: its state taken as 3 n (an EKF on
    # (x, d) with its covariance is about that for small n)
    check_memory("batch x steps", batch * _rollout_bytes(n, 3 * n, steps))

    def estimation(observer: AbstractObserver, key: jax.Array) -> Array:
        kx, kt = jax.random.split(key)
        x0s = spread[None, :] * jax.random.normal(kx, (batch, plant.state_dim), spread.dtype)
        t0s = period * jax.random.uniform(kt, (batch,), spread.dtype)
        err = rollout_mse(
            plant,
            observer,
            x0s,
            jnp.zeros_like(x0s),
            dt=dt,
            steps=steps,
            start=start,
            t0s=t0s,
            weights=weights,
        )
        return jnp.log(err + 1e-30)

    return estimation
