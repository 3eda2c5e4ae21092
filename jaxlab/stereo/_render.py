"""Calibrated rectified stereo rig and a sphere-tracing renderer for signed-distance scenes.

Camera convention (both cameras, rectified, no vergence): x right, y down, z forward
(optical axis). The left camera sits at the origin, the right camera at (baseline, 0, 0);
both have the same focal length `focal` (pixels) and principal point (cx, cy). A point
(X, Y, Z) projects to u_left = f X / Z + cx, u_right = f (X - B) / Z + cx, v = f Y / Z + cy,
so a left pixel (v, u) matches the right pixel (v, u - d) with disparity d = f B / Z
(the convention of `census_cost_volume`). "Depth" is the metric Z coordinate (mm).

Paper: P15 (the rectified stereo configurations of its synthetic face data set).
"""

from __future__ import annotations

from collections.abc import Callable

import equinox as eqx
import jax
import jax.numpy as jnp
from jaxtyping import Array, Bool, Float

from jaxlab._core import (
    as_array,
    check_instance,
    check_memory,
    check_positive_int,
    check_real,
    check_size,
)

__all__ = [
    "StereoRig",
    "camera_rays",
    "project_points",
    "backproject",
    "sphere_trace",
    "sdf_normals",
]


class StereoRig(eqx.Module):
    """A rectified stereo pair: focal length (px), principal point (px), baseline (mm).

    All fields are arrays so that a batch of rigs (one per pair) can be vmapped.
    """

    focal: Float[Array, ""]
    cx: Float[Array, ""]
    cy: Float[Array, ""]
    baseline: Float[Array, ""]

    @staticmethod
    def centred(focal: float, baseline: float, height: int, width: int) -> StereoRig:
        """Rig whose principal point is the image centre ((W-1)/2, (H-1)/2)."""
        check_positive_int("height", height)
        check_positive_int("width", width)
        if not (focal > 0 and baseline > 0):
            raise ValueError(f"focal, baseline: expected positive, received {focal}, {baseline}")
        f = jnp.asarray(focal, float)
        return StereoRig(
            f,
            jnp.asarray((width - 1) / 2, f.dtype),
            jnp.asarray((height - 1) / 2, f.dtype),
            jnp.asarray(baseline, f.dtype),
        )


MAX_TRACE_STEPS = 100_000
"""Most sphere-tracing iterations per ray (`sphere_trace`, `render_pair`): the work grows
with it; a converging scene needs a few hundred."""


def check_rig(rig: StereoRig) -> StereoRig:
    """A `StereoRig` with finite scalar fields, focal length and baseline > 0 (values
    checked when concrete: inside `jit`/`vmap` only the shapes); lists/NumPy/Python
    numbers converted to JAX floats. Raises a `ValueError` naming `rig.<field>`."""
    check_instance("rig", rig, StereoRig)
    out = {}
    for field in ("focal", "cx", "cy", "baseline"):
        positive = field in ("focal", "baseline")
        out[field] = as_array(
            f"rig.{field}",
            getattr(rig, field),
            shape=(),
            dtype=jnp.floating,
            finite=True,
            low=0.0 if positive else None,
            low_inclusive=not positive,
        )
    return StereoRig(**out)


def check_image_size(height, width, *, bytes_per_pixel: float) -> tuple[int, int]:
    """`height`, `width` positive integers whose image of `bytes_per_pixel` (an estimate
    of the work arrays per pixel) fits in memory (`check_memory`, before allocating)."""
    height = check_positive_int("height", height)
    width = check_positive_int("width", width)
    check_memory("height, width", float(height) * width * bytes_per_pixel)
    return height, width


def camera_rays(rig: StereoRig, height: int, width: int, *, right: bool = False):
    """Ray origins and unit directions through every pixel centre.

    **Arguments:** `rig` (`check_rig`: finite fields, focal and baseline > 0); `height`,
    `width` positive integers whose rays fit in memory (a `ValueError` otherwise).

    **Returns:**
        origins (H*W, 3), directions (H*W, 3), row-major over (v, u).
    """
    rig = check_rig(rig)
    height, width = check_image_size(height, width, bytes_per_pixel=16 * 8)
    v, u = jnp.meshgrid(
        jnp.arange(height, dtype=rig.focal.dtype),
        jnp.arange(width, dtype=rig.focal.dtype),
        indexing="ij",
    )
    d = jnp.stack([(u - rig.cx) / rig.focal, (v - rig.cy) / rig.focal, jnp.ones_like(u)], -1)
    d = d.reshape(-1, 3)
    d = d / jnp.linalg.norm(d, axis=-1, keepdims=True)
    ox = rig.baseline if right else jnp.zeros_like(rig.baseline)
    origin = jnp.stack([ox, jnp.zeros_like(ox), jnp.zeros_like(ox)])
    return jnp.broadcast_to(origin, d.shape), d


def project_points(rig: StereoRig, points: Float[Array, "K 3"]) -> Float[Array, "K 3"]:
    """Pinhole projection of left-camera points: columns (u_left, u_right, v) in pixels.

    `points` `(..., 3)` finite, in front of the camera (z > 0; values checked when
    concrete); `rig` as in `check_rig`."""
    rig = check_rig(rig)
    points = as_array("points", points, dtype=jnp.floating, finite=True, nonempty=True)
    if points.ndim < 1 or points.shape[-1] != 3:
        raise ValueError(f"points: expected shape (..., 3), received {tuple(points.shape)}")
    as_array("points[..., 2]", points[..., 2], low=0.0, low_inclusive=False)
    x, y, z = points[..., 0], points[..., 1], points[..., 2]
    ul = rig.focal * x / z + rig.cx
    ur = rig.focal * (x - rig.baseline) / z + rig.cx
    v = rig.focal * y / z + rig.cy
    return jnp.stack([ul, ur, v], -1)


def backproject(
    rig: StereoRig, u: Float[Array, "*B"], v: Float[Array, "*B"], depth: Float[Array, "*B"]
) -> Float[Array, "*B 3"]:
    """Left-camera 3-D point of pixel (u, v) at metric depth Z: (Z (u-cx)/f, Z (v-cy)/f, Z).

    `u`, `v`, `depth`: finite arrays of one shape (`depth` > 0; a rendered depth map's
    NaN pixels, without a surface, must be masked out first); `rig` as in `check_rig`."""
    rig = check_rig(rig)
    u = as_array("u", u, dtype=jnp.floating, finite=True)
    v = as_array("v", v, shape=tuple(u.shape), dtype=jnp.floating, finite=True)
    depth = as_array(
        "depth",
        depth,
        shape=tuple(u.shape),
        dtype=jnp.floating,
        finite=True,
        low=0.0,
        low_inclusive=False,
    )
    return jnp.stack(
        [depth * (u - rig.cx) / rig.focal, depth * (v - rig.cy) / rig.focal, depth], -1
    )


def sphere_trace(
    sdf: Callable[[Float[Array, " 3"]], Float[Array, ""]],
    origins: Float[Array, "N 3"],
    directions: Float[Array, "N 3"],
    *,
    t_max: float | Float[Array, ""],
    n_steps: int = 128,
    eps: float = 1e-3,
    step_scale: float = 1.0,
) -> tuple[Float[Array, " N"], Bool[Array, " N"]]:
    """March each ray by the signed distance until |sdf| < eps or t > t_max (Hart, 1996).

    `sdf` maps one point (3,) to a scalar; it is vmapped over rays. `step_scale` < 1
    under-relaxes the steps for SDFs that are only bounds (smooth unions, ellipsoids).
    `origins`, `directions`: finite `(N, 3)`; `t_max`, `eps`, `step_scale` finite and
    > 0; `n_steps` a positive integer up to `MAX_TRACE_STEPS` (ValueErrors otherwise).

    **Returns:**
        t (N,): distance along each unit ray to the surface, `hit` (N,): converged and
        within t_max.
    """
    sizes: dict[str, int] = {}
    origins = as_array(
        "origins", origins, shape=("N", 3), dtype=jnp.floating, sizes=sizes, finite=True
    )
    directions = as_array(
        "directions", directions, shape=("N", 3), dtype=jnp.floating, sizes=sizes, finite=True
    )
    n_steps = check_size("n_steps", n_steps, cap=MAX_TRACE_STEPS, why="MAX_TRACE_STEPS")
    t_max = check_real("t_max", t_max, low=0.0, low_inclusive=False)
    eps = check_real("eps", eps, low=0.0, low_inclusive=False)
    step_scale = check_real("step_scale", step_scale, low=0.0, low_inclusive=False)

    def one(o, d):
        def body(_, carry):
            t, done = carry
            dist = sdf(o + t * d)
            done = done | (jnp.abs(dist) < eps) | (t > t_max)
            return jnp.where(done, t, t + step_scale * dist), done

        t, _ = jax.lax.fori_loop(0, n_steps, body, (jnp.zeros((), o.dtype), jnp.array(False)))
        final = sdf(o + t * d)
        return t, (jnp.abs(final) < 10 * eps) & (t <= t_max)

    return jax.vmap(one)(origins, directions)


def sdf_normals(sdf, points: Float[Array, "N 3"]) -> Float[Array, "N 3"]:
    """Unit surface normals: normalised autodiff gradient of the SDF at finite `points`
    `(N, 3)`."""
    points = as_array(
        "points", points, shape=(None, 3), dtype=jnp.floating, finite=True, nonempty=True
    )
    g = jax.vmap(jax.grad(sdf))(points)
    return g / jnp.maximum(jnp.linalg.norm(g, axis=-1, keepdims=True), 1e-12)
