"""Partial-diffusion refiner of SR embeddings (P11): a small conditional DDPM.

The refiner works in an embedding space of HR-sized feature maps, in which the SR
image and the real HR image have embeddings of the same kind: by default the learned
features of the joint model's shared encoder (`jaxlab.em.LearnedEmbedding`), or the
hand-made `structure_embedding(image)` (standardised intensity, ridge response, where
membranes are dark thin curves, and gradient magnitude; `jaxlab.em.StructureEmbedding`).
A small denoiser, conditioned on the SR embedding, is trained with the
epsilon-prediction loss of DDPM (Ho et al. 2020) on noised HR embeddings. At
inference the refiner starts from the SR embedding noised with the closed form
q(x_t0 | x_0) to a step t0 < T and denoises it in a few deterministic DDIM steps
(Song et al. 2021); the result is a structural prior approximating the HR
embedding, which guides the segmentation decoder.
t0 = T is full diffusion from (almost) pure noise; t0 = 0 returns the input.

Conventions: `alpha_bars` has T + 1 entries with `alpha_bars[0] = 1` (no noise) and
`alpha_bars[t] = prod_{s=1..t} (1 - betas[s - 1])`; steps t run over 0..T.
"""

from __future__ import annotations

import math
from typing import Any, cast

import equinox as eqx
import flax.linen as nn
import jax
import jax.core
import jax.numpy as jnp
import numpy as np
from flax.errors import FlaxError
from jaxtyping import Array, Float

from jaxlab._core import (
    as_array,
    check_ids,
    check_memory,
    check_nonnegative_int,
    check_positive_int,
    check_real,
)

from ._blocks import _ConvBlock, pixel_shuffle

__all__ = [
    "NoiseSchedule",
    "linear_schedule",
    "cosine_schedule",
    "make_schedule",
    "q_sample",
    "structure_embedding",
    "Denoiser",
    "refine_embedding",
    "refine_timesteps",
]


class NoiseSchedule(eqx.Module):
    """DDPM noise schedule: `betas` `(T,)` and `alpha_bars` `(T + 1,)`, alpha_bars[0] = 1."""

    betas: Float[Array, " T"]
    alpha_bars: Float[Array, " T1"]

    @property
    def num_steps(self) -> int:
        return int(self.betas.shape[0])


def _from_betas(betas: np.ndarray, dtype) -> NoiseSchedule:
    ab = np.concatenate([[1.0], np.cumprod(1.0 - betas)])
    return NoiseSchedule(jnp.asarray(betas, dtype), jnp.asarray(ab, dtype))


def _check_num_steps(num_steps) -> int:
    """A positive number of diffusion steps whose schedule arrays fit in memory."""
    t = check_positive_int("num_steps", num_steps)
    check_memory("num_steps", 8.0 * 4 * (t + 1))  # float64 betas, alpha_bars and temporaries
    return t


def linear_schedule(num_steps: int, *, dtype=jnp.float32) -> NoiseSchedule:
    """Linear betas from 1e-4 to 0.02 rescaled by 1000 / T (Ho et al. 2020; the
    rescaling of Nichol & Dhariwal 2021 keeps alpha_bar_T near 0 for small T)."""
    t = _check_num_steps(num_steps)
    scale = 1000.0 / t
    return _from_betas(np.linspace(1e-4 * scale, min(0.02 * scale, 0.999), t), dtype)


def cosine_schedule(num_steps: int, *, s: float = 0.008, dtype=jnp.float32) -> NoiseSchedule:
    """Cosine schedule (Nichol & Dhariwal 2021): alpha_bar(t) = cos^2(((t/T + s)/(1 + s)) pi/2),
    normalised, betas clipped at 0.999."""
    t = _check_num_steps(num_steps)
    s = check_real("s", s, low=0.0)
    f = np.cos((np.arange(t + 1) / t + s) / (1 + s) * np.pi / 2) ** 2
    ab = f / f[0]
    betas = np.clip(1.0 - ab[1:] / ab[:-1], 0.0, 0.999)
    return _from_betas(betas, dtype)


def make_schedule(kind: str, num_steps: int, *, dtype=jnp.float32) -> NoiseSchedule:
    """`linear_schedule` or `cosine_schedule` by name (`kind` in {"linear", "cosine"})."""
    if kind == "linear":
        return linear_schedule(num_steps, dtype=dtype)
    if kind == "cosine":
        return cosine_schedule(num_steps, dtype=dtype)
    raise ValueError(f"kind: expected 'linear' or 'cosine', received {kind!r}")


def q_sample(schedule: NoiseSchedule, x0: jax.Array, t: Any, noise: jax.Array) -> jax.Array:
    """Closed-form forward process: a sample of q(x_t | x_0).

    `x_t = sqrt(alpha_bar_t) x0 + sqrt(1 - alpha_bar_t) noise`.

    **Arguments:** `x0` `(B, ...)` or any shape; `t` int step(s) in [0, T], a scalar or
    `(B,)` broadcast over the trailing axes of `x0`; `noise` standard normal, like `x0`.

    **Returns:** `x_t`, same shape as `x0`.
    """
    x0 = as_array("x0", x0, dtype=jnp.floating, finite=True)
    noise = as_array("noise", noise, shape=tuple(x0.shape), dtype=jnp.floating, finite=True)
    if x0.ndim == 0:
        raise ValueError("x0: expected an array of at least one axis, received a scalar")
    # steps 0..T index alpha_bars (T + 1 entries); an out-of-range step would be clamped
    t = jnp.asarray(check_ids("t", t, schedule.num_steps + 1, what="diffusion steps"))
    if t.ndim > 1 or (t.ndim == 1 and t.shape[0] != x0.shape[0]):
        raise ValueError(
            f"t: expected a scalar or one step per sample (shape ({x0.shape[0]},)), "
            f"received shape {tuple(t.shape)}"
        )
    ab = schedule.alpha_bars[t].astype(x0.dtype)
    ab = ab.reshape(ab.shape + (1,) * (x0.ndim - ab.ndim))
    return jnp.sqrt(ab) * x0 + jnp.sqrt(1 - ab) * noise


def _blur_axis(x, sigma: float, axis: int):
    radius = max(1, int(math.ceil(3 * sigma)))
    w = np.exp(-0.5 * (np.arange(-radius, radius + 1) / sigma) ** 2)
    w = w / w.sum()
    pad = [(0, 0)] * x.ndim
    pad[axis] = (radius, radius)
    xp = jnp.pad(x, pad, mode="reflect")
    n = x.shape[axis]
    out = jnp.zeros_like(x)
    for k in range(2 * radius + 1):
        out = out + jnp.asarray(w[k], x.dtype) * jax.lax.slice_in_dim(xp, k, k + n, axis=axis)
    return out


def _standardise(c, axes=(-2, -1)):
    # zero mean, unit variance over the pixel axes (per image and channel)
    mean = jnp.mean(c, axis=axes, keepdims=True)
    var = jnp.mean((c - mean) ** 2, axis=axes, keepdims=True)
    return (c - mean) / jnp.sqrt(var + 1e-6)


def structure_embedding(image: jax.Array, *, sigma: float = 1.0) -> jax.Array:
    """Structural feature embedding of an EM image (the refiner's embedding space).

    Channels, each standardised per image: intensity, ridge response (Laplacian of
    the Gaussian-smoothed image; positive on dark membranes) and gradient magnitude.

    **Arguments:** `image` `(..., H, W)` float, H, W >= 4.

    **Returns:** `(..., H, W, 3)`.
    """
    x = as_array("image", image, dtype=jnp.floating, finite=True)
    if x.ndim < 2 or min(x.shape[-2:]) < 4:
        raise ValueError(f"image: expected (..., H, W) with H, W >= 4, received {x.shape}")
    sigma = check_real("sigma", sigma, low=0.0, low_inclusive=False)
    s = _blur_axis(_blur_axis(x, sigma, x.ndim - 2), sigma, x.ndim - 1)
    sp = jnp.pad(s, [(0, 0)] * (x.ndim - 2) + [(1, 1), (1, 1)], mode="edge")
    c = sp[..., 1:-1, 1:-1]
    lap = sp[..., :-2, 1:-1] + sp[..., 2:, 1:-1] + sp[..., 1:-1, :-2] + sp[..., 1:-1, 2:] - 4 * c
    gy = (sp[..., 2:, 1:-1] - sp[..., :-2, 1:-1]) / 2
    gx = (sp[..., 1:-1, 2:] - sp[..., 1:-1, :-2]) / 2
    grad = jnp.sqrt(gx**2 + gy**2 + 1e-8)
    return jnp.stack([_standardise(x), _standardise(lap), _standardise(grad)], axis=-1)


def _time_embedding(t, dim: int, num_steps: int, dtype):
    half = dim // 2
    freqs = jnp.exp(-math.log(10000.0) * jnp.arange(half, dtype=dtype) / half)
    arg = (t.astype(dtype) * (1000.0 / num_steps))[:, None] * freqs[None]
    return jnp.concatenate([jnp.sin(arg), jnp.cos(arg)], axis=-1)


class Denoiser(nn.Module):
    """Small conditional epsilon-prediction network for the refiner.

    A two-level U-Net over `concat(x_t, cond)` with a sinusoidal time embedding added
    inside every block. With `residual=True` (default) its output `r` is a correction
    of the condition, and the predicted noise is the one that separates x_t from the
    clean estimate `cond + r` under `schedule`:
    `eps = (x_t - sqrt(alpha_bar_t) (cond + r)) / sqrt(1 - alpha_bar_t)`. The output
    layer starts at zero, so an untrained refiner returns the SR embedding for every
    t0, and training learns how the HR embedding departs from it. With
    `residual=False` the network predicts the noise directly (plain DDPM).

    **Arguments (call):** `x_t` `(B, H, W, C)`, `t` int `(B,)` in 1..T, `cond`
    `(B, H, W, C)` (the SR embedding); H, W even.

    **Returns:** predicted noise `(B, H, W, C)`.
    """

    num_steps: int
    features: int = 32
    schedule: str = "linear"
    residual: bool = True
    param_dtype: Any = jnp.float32

    @nn.compact
    def __call__(self, x_t, t, cond):

        dt, f = self.param_dtype, self.features
        if x_t.shape[-3] % 2 or x_t.shape[-2] % 2:
            raise ValueError(f"x_t: expected even H, W, received shape {x_t.shape}")
        if self.residual and cond.shape != x_t.shape:
            raise ValueError(
                f"cond: expected shape {x_t.shape} (residual denoiser), received {cond.shape}"
            )
        t = jnp.asarray(t)
        temb = _time_embedding(t, f, self.num_steps, dt)
        temb = nn.Dense(f, dtype=dt, param_dtype=dt)(
            nn.silu(nn.Dense(f, dtype=dt, param_dtype=dt)(temb))
        )
        b1 = temb[:, None, None, :]
        b2 = nn.Dense(2 * f, dtype=dt, param_dtype=dt)(temb)[:, None, None, :]
        x_t, cond = jnp.asarray(x_t, dt), jnp.asarray(cond, dt)
        h = jnp.concatenate([x_t, cond], axis=-1)
        h1 = _ConvBlock(f, dt)(nn.Conv(f, (3, 3), dtype=dt, param_dtype=dt)(h), b1)
        h2 = nn.silu(nn.Conv(2 * f, (3, 3), strides=2, dtype=dt, param_dtype=dt)(h1))
        h2 = _ConvBlock(2 * f, dt)(h2, b2)
        u = pixel_shuffle(nn.Conv(4 * f, (1, 1), dtype=dt, param_dtype=dt)(h2), 2)
        h = _ConvBlock(f, dt)(jnp.concatenate([u, h1], axis=-1), b1)
        out = nn.Conv(
            x_t.shape[-1], (3, 3), dtype=dt, param_dtype=dt, kernel_init=nn.initializers.zeros
        )(h)
        if not self.residual:
            return out
        ab = make_schedule(self.schedule, self.num_steps, dtype=dt).alpha_bars[t]
        ab = ab[:, None, None, None]
        x0 = cond + out
        return (x_t - jnp.sqrt(ab) * x0) / jnp.sqrt(jnp.maximum(1 - ab, 1e-12))


def refine_timesteps(t0: int, n_steps: int) -> tuple[int, ...]:
    """Strided, strictly decreasing steps from `t0` to 0 (at most `n_steps` jumps).

    `t0` an int >= 0, `n_steps` a positive int."""
    t0 = check_nonnegative_int("t0", t0)
    n_steps = check_positive_int("n_steps", n_steps)
    n = min(n_steps, t0)
    return tuple(int(v) for v in np.unique(np.round(np.linspace(0, t0, n + 1)))[::-1])


def _check_fits_denoiser(name: str, denoiser: Any, params: Any, z: jax.Array, t0: int) -> None:
    """Raise a `ValueError` naming `name` unless embeddings `z` `(B, H, W, C)` fit the
    denoiser's parameters (checked by shape, nothing is computed)."""
    b = z.shape[0]
    try:  # the network's own shape error names a layer, not the argument
        jax.eval_shape(lambda x: denoiser.apply(params, x, jnp.full((b,), t0, jnp.int32), x), z)
    except (FlaxError, TypeError, ValueError) as e:
        raise ValueError(
            f"{name}: shape {tuple(z.shape)} does not fit the denoiser's "
            f"parameters ({str(e)[:200]})"
        ) from None


def refine_embedding(
    denoiser: Denoiser,
    params: Any,
    schedule: NoiseSchedule,
    embedding: jax.Array,
    *,
    t0: int,
    n_steps: int = 5,
    clip: float = 8.0,
    key: jax.Array,
) -> jax.Array:
    """Partial-diffusion refinement of an SR embedding (P11).

    Noise `embedding` to step `t0` with the closed form q(x_t0 | x_0), then denoise it
    with deterministic DDIM steps (eta = 0) along `refine_timesteps(t0, n_steps)`,
    each conditioned on the SR embedding. `t0 = T` starts from (almost) pure noise;
    `t0 = 0` returns `embedding` unchanged.

    **Arguments:** `denoiser`, `params` (flax variables of it); `schedule` with T steps;
    `embedding` `(B, H, W, C)` (or `(H, W, C)`); `t0` Python int in [0, T];
    `n_steps` Python int >= 1; `clip` bound on the predicted x_0 (the embedding is
    standardised, so |x_0| beyond it is noise amplification at large t); `key` for the
    initial noise (keyword-only).

    **Returns:** the refined embedding, same shape.
    """
    T = schedule.num_steps
    if isinstance(t0, bool) or not isinstance(t0, int | np.integer) or not 0 <= t0 <= T:
        raise ValueError(f"t0: expected an integer in [0, {T}], received {t0!r}")
    check_positive_int("n_steps", n_steps)
    clip = check_real("clip", clip, low=0.0, low_inclusive=False)
    embedding = as_array("embedding", embedding, dtype=jnp.floating, finite=True, nonempty=True)
    if embedding.ndim not in (3, 4):
        raise ValueError(
            f"embedding: expected (B, H, W, C) or (H, W, C), received shape {embedding.shape}"
        )
    if t0 == 0:
        return embedding
    single = embedding.ndim == 3
    z = embedding[None] if single else embedding
    b = z.shape[0]
    _check_fits_denoiser("embedding", denoiser, params, z, t0)
    ab = schedule.alpha_bars.astype(z.dtype)
    x = q_sample(schedule, z, jnp.asarray(t0), jax.random.normal(key, z.shape, z.dtype))
    steps = refine_timesteps(int(t0), int(n_steps))
    for t, t_next in zip(steps[:-1], steps[1:], strict=True):
        eps = cast(jax.Array, denoiser.apply(params, x, jnp.full((b,), t, jnp.int32), z))
        x0_hat = jnp.clip((x - jnp.sqrt(1 - ab[t]) * eps) / jnp.sqrt(ab[t]), -clip, clip)
        eps = (x - jnp.sqrt(ab[t]) * x0_hat) / jnp.sqrt(1 - ab[t])  # consistent with the clip
        x = jnp.sqrt(ab[t_next]) * x0_hat + jnp.sqrt(1 - ab[t_next]) * eps
    return x[0] if single else x
