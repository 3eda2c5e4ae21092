"""A small learned stereo matcher in flax: RAFT-Stereo-lite (Lipson, Teed & Deng, 2021).

A shared convolutional feature encoder maps both rectified images to features at
1/`downsample` resolution; a context encoder maps the left image to the initial GRU
state and a context input. The all-pairs 1-D correlation volume along each epipolar
line, `corr[y, x, d] = <f_left[y, x], f_right[y, x - d]> / sqrt(C)` for every
`x' = x - d <= x`, is pooled along the disparity axis into a pyramid. Each refinement
iteration looks up a window of radius r around the current disparity at every level
(linear interpolation), encodes it with the disparity into motion features, updates a
convolutional GRU and predicts a disparity increment; the coarse disparity is clamped
at 0 and convex-upsampled (a learned softmax over each 3x3 coarse neighbourhood) to
full resolution, so every predicted disparity is >= 0.

Paper: P15 (its benchmark includes learned stereo matchers; this is a small one
trained on the generated face set).
"""

from __future__ import annotations

import math
from typing import Any

import flax.linen as nn
import jax
import jax.numpy as jnp
from jaxtyping import Array, Float

from jaxlab._core import (
    as_array,
    check_array,
    check_finite,
    check_memory,
    check_nonnegative_int,
    check_positive_int,
)

__all__ = [
    "correlation_volume",
    "correlation_pyramid",
    "lookup_pyramid",
    "convex_upsample",
    "RAFTStereo",
]


def correlation_volume(
    f_left: Float[Array, "H W C"], f_right: Float[Array, "H W C"]
) -> Float[Array, "H W W"]:
    """All-pairs 1-D correlation along rectified rows, indexed by disparity.

    **Arguments:**
        f_left, f_right: feature maps (H, W, C) of the left and right image.
    **Returns:**
        (H, W, W) array `corr[y, x, d] = <f_left[y, x], f_right[y, x - d]> / sqrt(C)` for
        `x - d >= 0` and 0 where the match would leave the right image.
    """
    sizes = check_array("f_left", f_left, shape=("H", "W", "C"), dtype=jnp.floating)
    check_array("f_right", f_right, shape=("H", "W", "C"), dtype=jnp.floating, sizes=sizes)
    check_finite("f_left", f_left)
    check_finite("f_right", f_right)
    w, c = f_left.shape[1], f_left.shape[2]
    full = jnp.einsum("yxc,yvc->yxv", f_left, f_right) / math.sqrt(c)  # v = x'
    xp = jnp.arange(w, dtype=jnp.int32)[:, None] - jnp.arange(w, dtype=jnp.int32)[None, :]
    idx = jnp.broadcast_to(jnp.maximum(xp, 0)[None], full.shape)
    return jnp.where(xp[None] >= 0, jnp.take_along_axis(full, idx, axis=2), 0.0)


def correlation_pyramid(corr: Float[Array, "H W D"], n_levels: int) -> list[Array]:
    """Average-pool the disparity axis by 2, `n_levels - 1` times (level l has D // 2^l
    entries; entry j of level l+1 is the mean of entries 2j and 2j+1 of level l).

    `corr`: a finite, non-empty `(H, W, D)` volume; `n_levels`: a positive integer with
    2^(n_levels-1) <= D (ValueErrors naming the argument otherwise)."""
    corr = as_array("corr", corr, ndim=3, dtype=jnp.floating, finite=True, nonempty=True)
    n_levels = check_positive_int("n_levels", n_levels)
    if n_levels - 1 >= corr.shape[2].bit_length():  # 2^(n_levels-1) > D, without the power
        raise ValueError(
            f"n_levels: expected 2^(n_levels-1) <= {corr.shape[2]} (disparity "
            f"range), received {n_levels}"
        )
    levels = [corr]
    for _ in range(n_levels - 1):
        c = levels[-1]
        n = c.shape[2] // 2
        levels.append(c[:, :, : 2 * n].reshape(c.shape[0], c.shape[1], n, 2).mean(-1))
    return levels


def lookup_pyramid(
    pyramid: list[Array], disparity: Float[Array, "H W"], radius: int
) -> Float[Array, "H W K"]:
    """Correlation around the current disparity: at level l, the values at disparity
    `disparity / 2^l + o` for o = -radius..radius, linearly interpolated along the
    disparity axis (0 outside the volume). Returns (H, W, n_levels * (2 radius + 1)),
    level-major.

    `pyramid`: a non-empty list of finite `(H, W, D_l)` volumes (`correlation_pyramid`);
    `disparity`: finite `(H, W)`; `radius`: an integer >= 0 whose window fits in memory
    (ValueErrors naming the argument otherwise)."""
    if isinstance(pyramid, str | bytes) or not isinstance(pyramid, list | tuple) or not pyramid:
        raise ValueError(
            f"pyramid: expected a non-empty list of (H, W, D) volumes, received "
            f"{type(pyramid).__name__}"
        )
    sizes: dict[str, int] = {}
    pyramid = [
        as_array(
            f"pyramid[{i}]",
            v,
            shape=("H", "W", None),
            dtype=jnp.floating,
            sizes=sizes,
            finite=True,
            nonempty=True,
        )
        for i, v in enumerate(pyramid)
    ]
    disparity = as_array(
        "disparity", disparity, shape=("H", "W"), dtype=jnp.floating, sizes=sizes, finite=True
    )
    radius = check_nonnegative_int("radius", radius)
    itemsize = jnp.dtype(disparity.dtype).itemsize
    check_memory("radius", 4.0 * len(pyramid) * (2 * radius + 1) * disparity.size * itemsize)
    offsets = jnp.arange(-radius, radius + 1, dtype=disparity.dtype)
    out = []
    for lvl, vol in enumerate(pyramid):
        n = vol.shape[2]
        pos = disparity[..., None] / (2.0**lvl) + offsets[None, None]  # (H, W, 2r+1)
        i0 = jnp.floor(pos)
        a = pos - i0
        i0 = i0.astype(jnp.int32)

        def take(i, vol=vol, n=n):
            v = jnp.take_along_axis(vol, jnp.clip(i, 0, n - 1), axis=2)
            return jnp.where((i >= 0) & (i < n), v, 0.0)

        out.append((1.0 - a) * take(i0) + a * take(i0 + 1))
    return jnp.concatenate(out, axis=-1)


def convex_upsample(
    disparity: Float[Array, "h w"], mask: Float[Array, "h w M"], factor: int
) -> Float[Array, "hf wf"]:
    """Upsample a coarse disparity map by `factor`: each fine pixel is a convex
    combination (softmax of `mask`, M = 9 factor^2 logits) of the 3x3 coarse
    neighbourhood (edge-padded), times `factor` (disparity in fine pixels).

    `disparity`: finite `(h, w)`; `mask`: finite `(h, w, 9 factor^2)`; `factor`: a
    positive integer whose output fits in memory (ValueErrors naming the argument)."""
    disparity = as_array(
        "disparity", disparity, ndim=2, dtype=jnp.floating, finite=True, nonempty=True
    )
    factor = check_positive_int("factor", factor)
    h, w = disparity.shape
    check_memory("factor", 10.0 * h * w * factor * factor * jnp.dtype(disparity.dtype).itemsize)
    mask = as_array(
        "mask", mask, shape=(h, w, 9 * factor * factor), dtype=jnp.floating, finite=True
    )
    wts = jax.nn.softmax(mask.reshape(h, w, factor, factor, 9), axis=-1)
    pad = jnp.pad(disparity, 1, mode="edge")
    nb = jnp.stack([pad[dy : dy + h, dx : dx + w] for dy in range(3) for dx in range(3)], -1)
    up = jnp.einsum("yxabk,yxk->yaxb", wts, factor * nb)
    return up.reshape(h * factor, w * factor)


def _instance_norm(x):
    mu = x.mean(axis=(-3, -2), keepdims=True)
    var = ((x - mu) ** 2).mean(axis=(-3, -2), keepdims=True)
    return (x - mu) * jax.lax.rsqrt(var + 1e-5)


class _Encoder(nn.Module):
    """Conv stem (7x7, stride 2), residual blocks, a second stride-2 stage when
    downsample = 4, then a 1x1 projection to `out_dim` channels."""

    width: int
    out_dim: int
    downsample: int
    norm: bool
    dtype: Any

    def _conv(self, f, k, s=1):
        return nn.Conv(
            f, (k, k), strides=(s, s), padding="SAME", dtype=self.dtype, param_dtype=self.dtype
        )

    def _res(self, x):
        f = x.shape[-1]
        h = self._conv(f, 3)(x)
        h = nn.relu(_instance_norm(h) if self.norm else h)
        h = self._conv(f, 3)(h)
        h = _instance_norm(h) if self.norm else h
        return nn.relu(x + h)

    @nn.compact
    def __call__(self, x):
        h = self._conv(self.width, 7, 2)(x)
        h = nn.relu(_instance_norm(h) if self.norm else h)
        h = self._res(h)
        if self.downsample == 4:
            h = self._conv(self.width * 3 // 2, 3, 2)(h)
            h = nn.relu(_instance_norm(h) if self.norm else h)
            h = self._res(h)
        return nn.Conv(self.out_dim, (1, 1), dtype=self.dtype, param_dtype=self.dtype)(h)


class _UpdateBlock(nn.Module):
    """Motion encoder + ConvGRU + disparity and upsampling-mask heads."""

    hidden_dim: int
    downsample: int
    dtype: Any

    def _conv(self, f, k):
        return nn.Conv(f, (k, k), padding="SAME", dtype=self.dtype, param_dtype=self.dtype)

    @nn.compact
    def __call__(self, h, context, corr, disp):
        c = nn.relu(self._conv(64, 1)(corr))
        c = nn.relu(self._conv(48, 3)(c))
        d = nn.relu(self._conv(16, 7)(disp))
        d = nn.relu(self._conv(16, 3)(d))
        motion = nn.relu(self._conv(47, 3)(jnp.concatenate([c, d], -1)))
        x = jnp.concatenate([motion, disp, context], -1)
        hx = jnp.concatenate([h, x], -1)
        z = nn.sigmoid(self._conv(self.hidden_dim, 3)(hx))
        r = nn.sigmoid(self._conv(self.hidden_dim, 3)(hx))
        q = jnp.tanh(self._conv(self.hidden_dim, 3)(jnp.concatenate([r * h, x], -1)))
        h = (1.0 - z) * h + z * q
        delta = self._conv(1, 3)(nn.relu(self._conv(64, 3)(h)))
        mask = 0.25 * self._conv(9 * self.downsample**2, 1)(nn.relu(self._conv(64, 3)(h)))
        return h, delta, mask


class _Refine(nn.Module):
    """One refinement iteration (the same parameters at every iteration)."""

    hidden_dim: int
    downsample: int
    radius: int
    dtype: Any

    @nn.compact
    def __call__(self, carry, pyramids, context):
        h, disp = carry
        disp = jax.lax.stop_gradient(disp)  # as in RAFT: no gradient through the lookup
        corr = jax.vmap(lambda p, d: lookup_pyramid(p, d, self.radius))(pyramids, disp)
        h, delta, mask = _UpdateBlock(self.hidden_dim, self.downsample, self.dtype, name="update")(
            h, context, corr, disp[..., None]
        )
        disp = jnp.maximum(disp + delta[..., 0], 0.0)
        up = jax.vmap(lambda d, m: convex_upsample(d, m, self.downsample))(disp, mask)
        return (h, disp), up


class RAFTStereo(nn.Module):
    """RAFT-Stereo-lite disparity network (flax.linen).

    Call: `model.apply(variables, left, right, n_iters)` with left, right (B, H, W, 3)
    (H, W divisible by `downsample`; pixel values roughly in [0, 1]); returns the
    full-resolution disparity (in pixels, >= 0) after every iteration, shape
    (n_iters, B, H, W). The iterations share their parameters, so the parameters do not
    depend on n_iters. `raft_predictor`/`raft_disparity` in
    jaxlab.stereo wrap this with input checks.

    **Fields:** feature_dim (matching features), hidden_dim (GRU state), context_dim,
    n_levels (correlation pyramid levels), radius (lookup window), downsample (2 or 4),
    dtype (parameters and computation).
    """

    feature_dim: int = 48
    hidden_dim: int = 48
    context_dim: int = 32
    n_levels: int = 4
    radius: int = 4
    downsample: int = 4
    dtype: Any = jnp.float32

    @nn.compact
    def __call__(self, left, right, n_iters: int = 6):
        if self.downsample not in (2, 4):
            raise ValueError(f"downsample: expected 2 or 4, received {self.downsample}")
        check_positive_int("n_iters", n_iters)
        dt = self.dtype
        left = 2.0 * jnp.asarray(left, dt) - 1.0
        right = 2.0 * jnp.asarray(right, dt) - 1.0
        b = left.shape[0]
        fnet = _Encoder(32, self.feature_dim, self.downsample, True, dt, name="fnet")
        feats = fnet(jnp.concatenate([left, right], 0))
        f_l, f_r = feats[:b], feats[b:]
        ctx = _Encoder(
            32, self.hidden_dim + self.context_dim, self.downsample, False, dt, name="cnet"
        )(left)
        h = jnp.tanh(ctx[..., : self.hidden_dim])
        context = nn.relu(ctx[..., self.hidden_dim :])
        pyramids = jax.vmap(
            lambda a, c: correlation_pyramid(correlation_volume(a, c), self.n_levels)
        )(f_l, f_r)
        # a Python loop over one shared module (a lax.scan here runs the backward pass of
        # the convolutions far slower on CPU)
        refine = _Refine(self.hidden_dim, self.downsample, self.radius, dt, name="refine")
        carry, preds = (h, jnp.zeros(f_l.shape[:3], dt)), []
        for _ in range(n_iters):
            carry, up = refine(carry, pyramids, context)
            preds.append(up)
        return jnp.stack(preds)
