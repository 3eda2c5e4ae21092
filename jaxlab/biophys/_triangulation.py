"""Monopolar triangulation: the SpikeInterface / Boussard et al. (2021) localisation baseline.

A unit's template peak-to-peak amplitude on the sites near its largest one is
modelled as a monopole, `ptp_s ~ alpha / sqrt((x - x_s)^2 + (y - y_s)^2 + z^2)`,
and `(x, y, z, alpha)` are found by bounded least squares (scipy's trust-region
reflective solver), started from the amplitude-weighted centre of mass at
`z = initial_z`. Written from the method's description; the baseline P12's
inverse fit is compared against.
"""

from __future__ import annotations

import numpy as np
import scipy.optimize
from jaxtyping import ArrayLike

from jaxlab._core import as_array, check_real

__all__ = ["template_ptp", "monopolar_triangulation"]


def template_ptp(traces: ArrayLike, spike_idx: ArrayLike, *, before: int, after: int) -> np.ndarray:
    """Peak-to-peak amplitude per site of the mean waveform around `spike_idx`.

    **Arguments:** `traces` `(T, S)`; `spike_idx` sample indices; the window is
    `[idx - before, idx + after)`; spikes whose window leaves the recording are dropped.

    **Returns:** `(S,)` peak-to-peak amplitudes of the template.
    """
    x = np.asarray(as_array("traces", traces, ndim=2, dtype=np.number, finite=True))
    idx = np.asarray(as_array("spike_idx", spike_idx, ndim=1, dtype=np.integer), np.int64)
    idx = idx[(idx - before >= 0) & (idx + after <= x.shape[0])]
    if idx.size == 0:
        raise ValueError("spike_idx: no spike has a full waveform window inside the traces")
    windows = x[idx[:, None] + np.arange(-before, after)[None, :]]  # (K, W, S)
    template = windows.mean(axis=0)
    return template.max(axis=0) - template.min(axis=0)


def monopolar_triangulation(
    ptp: ArrayLike,
    site_positions: ArrayLike,
    *,
    radius_um: float = 75.0,
    max_distance_um: float = 1000.0,
    initial_z: float = 20.0,
) -> np.ndarray:
    """Estimate a unit's `(x, y, z, alpha)` from its per-site peak-to-peak amplitudes.

    **Arguments:**

    - `ptp`: `(S,)` template amplitudes (any unit; alpha comes out in unit x um).
    - `site_positions`: `(S, 2)` site positions (um) on the probe plane.
    - `radius_um`: only sites within this distance of the largest-amplitude site are used.
    - `max_distance_um`: bound on how far the source may be from the centre of mass.
    - `initial_z`: starting distance from the probe plane (um).

    **Returns:** `(4,)` array `[x, y, z, alpha]` with `z >= 0`.
    """
    sizes: dict[str, int] = {}
    # checks only: the fit runs in float64 on the caller's values (the sites first: an
    # amplitude vector of another length is reported as `ptp`)
    as_array(
        "site_positions",
        site_positions,
        shape=("S", 2),
        dtype=np.number,
        sizes=sizes,
        finite=True,
        real=True,
    )
    as_array("ptp", ptp, shape=("S",), dtype=np.number, sizes=sizes, finite=True, low=0.0)
    a, pos = np.asarray(ptp, dtype=np.float64), np.asarray(site_positions, dtype=np.float64)
    if sizes["S"] == 0 or not a.max() > 0:
        raise ValueError("ptp: expected at least one site with a positive amplitude")
    radius_um = check_real("radius_um", radius_um, low=0.0)
    max_distance_um = check_real("max_distance_um", max_distance_um, low=0.0, low_inclusive=False)
    initial_z = check_real("initial_z", initial_z, low=0.0)
    best = int(np.argmax(a))
    local = np.linalg.norm(pos - pos[best], axis=1) <= radius_um
    a, pos = a[local], pos[local]
    com = (a[:, None] * pos).sum(0) / a.sum()
    max_alpha = a.max() * max_distance_um
    x0 = np.array([com[0], com[1], initial_z, a.max() * initial_z])
    lo = np.array([com[0] - max_distance_um, com[1] - max_distance_um, 0.0, 0.0])
    hi = np.array([com[0] + max_distance_um, com[1] + max_distance_um, max_distance_um, max_alpha])
    x0 = np.clip(x0, lo + 1e-9, hi - 1e-9)

    def residual(v):
        d = np.sqrt(((pos - v[None, :2]) ** 2).sum(1) + v[2] ** 2)
        return a - v[3] / d

    sol = scipy.optimize.least_squares(residual, x0=x0, bounds=(lo, hi))
    return sol.x
