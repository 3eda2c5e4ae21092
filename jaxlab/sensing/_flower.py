"""Parametric hawkmoth flowers: geometry, nectar-guide patterns, and what a probe senses.

A flower is a corolla disc of radius `radius` centred at the origin of the action
plane, with height profile `h(p) = curvature * depth0 * (|p| / radius)^2` (flat when
`curvature = 0`, a cup when `> 0`), a nectar tube of radius `TUBE_RADIUS` at
`nectary` (height `-TUBE_DEPTH` inside the tube) and a nectar-guide pattern on
the corolla whose kind is radial stripes converging on the nectary (0), concentric
rings around it (1) or a spot on it (2), with an orientation `phase` and a
`contrast`.

The action is the proboscis tip: a 2-D position plus an approach angle. A probe
returns two modalities (the set-up follows P4's flower tasks; the simulator itself
is ours and synthetic):

- visual: a 3x3 low-resolution, blurred patch of the pattern around the tip;
- mechanosensory: [contact, tip height, surface normal x, y, force along the
  approach direction, tube entry].

Reward is tube entry (the nectary is reached). Gaussian sensor noise is added
by `observe`; `observe_mean` is the noiseless signal.

Paper: P4 (multimodal predictive coding of uncertainty-reduction maps).
"""

from __future__ import annotations

import equinox as eqx
import jax
import jax.core
import jax.numpy as jnp
from jaxtyping import Array, Float, Int

from jaxlab._core import as_array, check_ids

__all__ = [
    "Flower",
    "sample_flower",
    "surface_height",
    "pattern_intensity",
    "observe_mean",
    "observe",
    "nectar_reward",
    "VISUAL_DIM",
    "MECHANO_DIM",
    "ACTION_DIM",
    "TUBE_RADIUS",
]

TUBE_RADIUS = 0.12
"""Radius of a flower's nectar tube (action-plane units; the corolla's radius is a flower
parameter)."""
TUBE_DEPTH = 0.5
DEPTH0 = 0.4
VISUAL_DIM = 9
"""Size of the visual observation: a 3x3 blurred patch of the nectar-guide pattern."""
MECHANO_DIM = 6
"""Size of the mechanosensory observation: contact, tip height, surface normal x and y, force
along the approach, tube entry."""
ACTION_DIM = 3  # x, y, approach angle
"""Size of an action (the proboscis tip): x, y and the approach angle."""
_PATCH = jnp.array([(dx, dy) for dy in (-0.12, 0.0, 0.12) for dx in (-0.12, 0.0, 0.12)])
_BLUR = jnp.array([(0.0, 0.0), (0.04, 0.0), (-0.04, 0.0), (0.0, 0.04), (0.0, -0.04)])


class Flower(eqx.Module):
    """One flower's parameters (all scalars except `nectary`)."""

    curvature: Float[Array, ""]
    radius: Float[Array, ""]
    nectary: Float[Array, 2]
    kind: Int[Array, ""]
    phase: Float[Array, ""]
    contrast: Float[Array, ""]


def sample_flower(
    *,
    key: jax.Array,
    kinds: tuple[int, ...] = (0, 2),
    curvature_range: tuple[float, float] = (0.0, 1.0),
    contrast_range: tuple[float, float] = (0.4, 1.0),
) -> Flower:
    """Draw a random flower. Training conditions by default; pass other ranges/kinds
    (e.g. `kinds=(1,)`, `curvature_range=(1.0, 1.6)`) for unseen conditions.

    **Arguments:** `key` (keyword-only); `kinds` a non-empty sequence of pattern kinds
    in {0, 1, 2} (stripes, rings, spot); `curvature_range`, `contrast_range` finite
    `(low, high)` with `low <= high`.
    """
    kind_ids = check_ids("kinds", kinds, 3, what="pattern kinds")
    if kind_ids.ndim != 1 or kind_ids.shape[0] == 0:
        raise ValueError(
            f"kinds: expected a non-empty 1-D sequence, received shape {kind_ids.shape}"
        )
    curv = _interval("curvature_range", curvature_range)
    contrast = _interval("contrast_range", contrast_range)
    ks = jax.random.split(key, 6)
    radius = jax.random.uniform(ks[0], (), minval=0.7, maxval=0.9)
    r = 0.35 * jnp.sqrt(jax.random.uniform(ks[1], ()))
    ang = jax.random.uniform(ks[2], (), maxval=2 * jnp.pi)
    return Flower(
        curvature=jax.random.uniform(ks[3], (), minval=curv[0], maxval=curv[1]),
        radius=radius,
        nectary=jnp.stack([r * jnp.cos(ang), r * jnp.sin(ang)]),
        kind=jax.random.choice(ks[4], jnp.asarray(kind_ids)),
        phase=jax.random.uniform(ks[5], (), maxval=jnp.pi),
        contrast=jax.random.uniform(
            jax.random.fold_in(key, 7), (), minval=contrast[0], maxval=contrast[1]
        ),
    )


def _interval(name: str, x) -> jax.Array:
    """A finite `(low, high)` pair with `low <= high` (concrete values checked)."""
    x = as_array(name, x, shape=(2,), dtype=jnp.floating, finite=True)
    if not isinstance(x, jax.core.Tracer) and float(x[0]) > float(x[1]):
        raise ValueError(f"{name}: expected low <= high, received {x.tolist()}")
    return x


def _in_tube(flower: Flower, p: Float[Array, 2]) -> Float[Array, ""]:
    return (jnp.linalg.norm(p - flower.nectary) < TUBE_RADIUS).astype(p.dtype)


def surface_height(flower: Flower, p: Float[Array, 2]) -> Float[Array, ""]:
    """Corolla surface height at `p` (zero outside the corolla, `-TUBE_DEPTH` in the tube)."""
    p = as_array("p", p, shape=(2,), dtype=jnp.floating, finite=True)
    r2 = jnp.sum(p**2) / flower.radius**2
    cup = flower.curvature * DEPTH0 * r2
    on = (r2 < 1.0).astype(p.dtype)
    tube = _in_tube(flower, p)
    return on * ((1 - tube) * cup + tube * (-TUBE_DEPTH))


def pattern_intensity(flower: Flower, q: Float[Array, 2]) -> Float[Array, ""]:
    """Brightness of the corolla (0.3 base + contrast x nectar guide) at point `q`."""
    q = as_array("q", q, shape=(2,), dtype=jnp.floating, finite=True)
    d = q - flower.nectary
    dist = jnp.linalg.norm(d) + 1e-12
    radial = 0.5 * (1 + jnp.cos(6 * jnp.arctan2(d[1], d[0]) + flower.phase))
    rings = 0.5 * (1 + jnp.cos(2 * jnp.pi * dist / 0.18 + flower.phase))
    spot = jnp.exp(-(dist**2) / 0.03)
    guide = jnp.stack([radial * jnp.exp(-dist / 0.5), rings, spot])[flower.kind]
    inside = (jnp.sum(q**2) < flower.radius**2).astype(q.dtype)
    return inside * (0.3 + flower.contrast * guide)


def observe_mean(
    flower: Flower, action: Float[Array, 3]
) -> tuple[Float[Array, 9], Float[Array, 6]]:
    """Noiseless (visual, mechanosensory) signals for a probe at `action = (x, y, angle)`."""
    action = as_array("action", action, shape=(ACTION_DIM,), dtype=jnp.floating, finite=True)
    p, angle = action[:2], action[2]

    def blurred(offset):
        return jnp.mean(jax.vmap(lambda b: pattern_intensity(flower, p + offset + b))(_BLUR))

    visual = jax.vmap(blurred)(_PATCH)
    h = surface_height(flower, p)
    # Outward surface normal of the smooth corolla (the tube wall is treated as vertical).
    grad = jax.grad(lambda x: flower.curvature * DEPTH0 * jnp.sum(x**2) / flower.radius**2)(p)
    contact = (jnp.sum(p**2) < flower.radius**2).astype(p.dtype)
    normal = contact * (-grad) / jnp.sqrt(1 + jnp.sum(grad**2))
    approach = jnp.stack([jnp.cos(angle), jnp.sin(angle)])
    force = contact * jnp.dot(normal, approach)
    mech = jnp.stack([contact, h, normal[0], normal[1], force, _in_tube(flower, p)])
    return visual, mech


def observe(
    flower: Flower,
    action: Float[Array, 3],
    *,
    key: jax.Array,
    noise: tuple[float, float] = (0.05, 0.05),
) -> tuple[Float[Array, 9], Float[Array, 6]]:
    """`observe_mean` plus Gaussian sensor noise (std `noise` = (visual, mechano), finite,
    >= 0)."""
    action = as_array("action", action, shape=(ACTION_DIM,), dtype=jnp.floating, finite=True)
    std = as_array("noise", noise, shape=(2,), dtype=jnp.floating, finite=True, low=0.0)
    kv, km = jax.random.split(key)
    v, m = observe_mean(flower, action)
    return (
        v + std[0] * jax.random.normal(kv, v.shape, v.dtype),
        m + std[1] * jax.random.normal(km, m.shape, m.dtype),
    )


def nectar_reward(flower: Flower, action: Float[Array, 3]) -> Float[Array, ""]:
    """1 when the tip is inside the nectar tube, else 0."""
    action = as_array("action", action, shape=(ACTION_DIM,), dtype=jnp.floating, finite=True)
    return _in_tube(flower, action[:2])
