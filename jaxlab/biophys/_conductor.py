"""Volume conductor: point-source and line-source potentials in an infinite homogeneous medium.

With currents in nA, distances in um and conductivity `sigma` in S/m,
`I / (4 pi sigma r)` is in mV; the functions here return uV (x 1000), the unit
of extracellular recordings. Distances are clamped below at `r_min` (the
source cannot sit inside an electrode; also keeps gradients finite).

- Point source: `phi = I / (4 pi sigma max(r, r_min))`.
- Line source (Holt 1998; Holt & Koch 1999): current `I` spread uniformly
  along a segment of length `L`; integrating the point-source kernel along the
  segment gives `phi = I / (4 pi sigma L) [asinh(s1/rho) - asinh(s0/rho)]`,
  with `s0, s1` the signed axial coordinates of the segment ends relative to
  the foot of the perpendicular from the electrode and `rho` the (clamped)
  perpendicular distance. The `asinh` form is the same logarithm as Holt's
  `ln((sqrt(h^2+rho^2) - h) / (sqrt(l^2+rho^2) - l))` but has no cancellation.

Used by P12's forward model (transmembrane currents -> probe traces).
"""

from __future__ import annotations

import jax.numpy as jnp
from jaxtyping import Array, ArrayLike, Float

from jaxlab._core import as_array, check_array, check_finite, check_range

__all__ = [
    "point_source_gain",
    "line_source_gain",
    "point_source_potential",
    "line_source_potential",
    "SIGMA_CORTEX",
]

#: Extracellular conductivity of cortical grey matter (S/m) used throughout P12.
SIGMA_CORTEX = 0.3
"""Extracellular conductivity of cortical grey matter (S/m) used throughout P12."""


def _check_common(sigma, r_min):
    check_range("sigma", sigma, low=0.0, low_inclusive=False)
    check_range("r_min", r_min, low=0.0, low_inclusive=False)


def point_source_gain(
    sources: Float[ArrayLike, "M 3"],
    electrodes: Float[ArrayLike, "S 3"],
    *,
    sigma: float = SIGMA_CORTEX,
    r_min: float = 1.0,
) -> Float[Array, "S M"]:
    """Potential (uV) at each electrode per nA at each point source.

    **Arguments:**

    - `sources`: `(M, 3)` source positions (um).
    - `electrodes`: `(S, 3)` electrode positions (um).
    - `sigma`: conductivity in S/m (> 0).
    - `r_min`: minimum distance in um (> 0).

    **Returns:** `(S, M)` gain matrix `G`, so `phi = G @ I`.
    """
    check_array("sources", sources, shape=(None, 3), dtype=jnp.floating)
    check_array("electrodes", electrodes, shape=(None, 3), dtype=jnp.floating)
    check_finite("sources", sources)
    check_finite("electrodes", electrodes)
    _check_common(sigma, r_min)
    sources, electrodes = jnp.asarray(sources), jnp.asarray(electrodes)
    d = electrodes[:, None, :] - sources[None, :, :]
    r = jnp.sqrt(jnp.sum(d**2, axis=-1) + 1e-12)
    return 1000.0 / (4 * jnp.pi * sigma * jnp.maximum(r, r_min))


def line_source_gain(
    starts: Float[ArrayLike, "M 3"],
    ends: Float[ArrayLike, "M 3"],
    electrodes: Float[ArrayLike, "S 3"],
    *,
    sigma: float = SIGMA_CORTEX,
    r_min: float = 1.0,
) -> Float[Array, "S M"]:
    """Potential (uV) at each electrode per nA spread uniformly along each segment (Holt 1998).

    **Arguments:**

    - `starts`, `ends`: `(M, 3)` segment end points (um); segments must have positive length.
    - `electrodes`: `(S, 3)` electrode positions (um).
    - `sigma`: conductivity in S/m (> 0).
    - `r_min`: minimum perpendicular distance in um (> 0).

    **Returns:** `(S, M)` gain matrix.
    """
    sizes = check_array("starts", starts, shape=("M", 3), dtype=jnp.floating)
    check_array("ends", ends, shape=("M", 3), dtype=jnp.floating, sizes=sizes)
    check_array("electrodes", electrodes, shape=(None, 3), dtype=jnp.floating)
    for name, x in (("starts", starts), ("ends", ends), ("electrodes", electrodes)):
        check_finite(name, x)
    _check_common(sigma, r_min)
    starts, ends, electrodes = jnp.asarray(starts), jnp.asarray(ends), jnp.asarray(electrodes)
    seg = ends - starts
    length = jnp.linalg.norm(seg, axis=-1)
    u = seg / length[:, None]
    rel = starts[None, :, :] - electrodes[:, None, :]  # (S, M, 3)
    s0 = jnp.sum(rel * u[None], axis=-1)
    s1 = s0 + length[None, :]
    perp = rel - s0[..., None] * u[None]
    rho = jnp.maximum(jnp.sqrt(jnp.sum(perp**2, axis=-1) + 1e-12), r_min)
    integral = jnp.arcsinh(s1 / rho) - jnp.arcsinh(s0 / rho)
    return 1000.0 * integral / (4 * jnp.pi * sigma * length[None, :])


def point_source_potential(
    sources: Float[ArrayLike, "M 3"],
    currents: Float[ArrayLike, "*T M"],
    electrodes: Float[ArrayLike, "S 3"],
    *,
    sigma: float = SIGMA_CORTEX,
    r_min: float = 1.0,
) -> Float[Array, "*T S"]:
    """Extracellular potential (uV) of point-source currents (nA), one per source."""
    currents = as_array("currents", currents, dtype=jnp.floating, finite=True)
    gain = point_source_gain(sources, electrodes, sigma=sigma, r_min=r_min)
    if jnp.shape(currents)[-1:] != (gain.shape[1],):
        raise ValueError(
            f"currents: expected last axis {gain.shape[1]} (one per source), "
            f"received shape {jnp.shape(currents)}"
        )
    return currents @ gain.T


def line_source_potential(
    starts: Float[ArrayLike, "M 3"],
    ends: Float[ArrayLike, "M 3"],
    currents: Float[ArrayLike, "*T M"],
    electrodes: Float[ArrayLike, "S 3"],
    *,
    sigma: float = SIGMA_CORTEX,
    r_min: float = 1.0,
) -> Float[Array, "*T S"]:
    """Extracellular potential (uV) of line-source currents (nA), one per segment."""
    currents = as_array("currents", currents, dtype=jnp.floating, finite=True)
    gain = line_source_gain(starts, ends, electrodes, sigma=sigma, r_min=r_min)
    if jnp.shape(currents)[-1:] != (gain.shape[1],):
        raise ValueError(
            f"currents: expected last axis {gain.shape[1]} (one per segment), "
            f"received shape {jnp.shape(currents)}"
        )
    return currents @ gain.T
