"""Probe geometry: planar multi-electrode arrays, with the Neuropixels 1.0 layout.

A `Probe` holds electrode-site centres `(S, 2)` in um on the probe plane
(x across the shank, y along it); the plane is z = 0, and neurons sit at
z != 0 in an infinite homogeneous medium. Used by P12's volume conductor.
"""

from __future__ import annotations

import equinox as eqx
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, ArrayLike, Float

from jaxlab._core import check_array, check_finite, check_size

__all__ = ["Probe", "neuropixels_1"]

NP1_SITES = 960
"""Recording sites on a Neuropixels 1.0 shank (384 of them are recorded at once)."""


class Probe(eqx.Module):
    """A planar probe: electrode-site centres `positions` `(S, 2)` (um) on the plane z = 0."""

    positions: Float[Array, "S 2"]

    def __init__(self, positions: Float[ArrayLike, "S 2"]):
        check_array("positions", positions, shape=(None, 2), dtype=jnp.floating)
        check_finite("positions", positions)
        if np.shape(positions)[0] < 1:
            raise ValueError("positions: expected at least one site, received 0")
        self.positions = jnp.asarray(positions)

    @property
    def n_sites(self) -> int:
        return int(self.positions.shape[0])

    def electrodes(self) -> Float[Array, "S 3"]:
        """Site centres as 3-D points `(x, y, 0)` (um)."""
        zero = jnp.zeros((self.n_sites, 1), dtype=self.positions.dtype)
        return jnp.concatenate([self.positions, zero], axis=1)

    def select(self, indices: ArrayLike) -> Probe:
        """The probe restricted to the sites `indices` (in the given order)."""
        idx = np.asarray(indices)
        if idx.ndim != 1 or idx.size == 0 or idx.min() < 0 or idx.max() >= self.n_sites:
            raise ValueError(
                f"indices: expected 1-D site indices in [0, {self.n_sites}), received {idx!r:.80}"
            )
        return Probe(self.positions[idx])

    def sites_between(self, y_low: float, y_high: float) -> np.ndarray:
        """Indices of the sites whose depth y lies in `[y_low, y_high]`."""
        y = np.asarray(self.positions[:, 1])
        return np.nonzero((y >= y_low) & (y <= y_high))[0]


def neuropixels_1(n_sites: int = 384, *, dtype=jnp.float32) -> Probe:
    """Neuropixels 1.0 recording sites: 2 per row, 32 um column pitch, 20 um row pitch.

    Alternate rows are staggered by 16 um (x = 11, 43 on even rows; 27, 59 on odd
    rows, as in probeinterface's NP1 layout); `n_sites` defaults to the 384
    channels recorded at once, at most `NP1_SITES` = 960 (the sites on the shank).
    y starts at 20 um.
    """
    n_sites = check_size("n_sites", n_sites, cap=NP1_SITES, why="sites on a Neuropixels 1.0 shank")
    k = np.arange(n_sites)
    row = k // 2
    x = 11.0 + 32.0 * (k % 2) + 16.0 * (row % 2)
    y = 20.0 + 20.0 * row
    return Probe(jnp.asarray(np.stack([x, y], axis=1), dtype=dtype))
