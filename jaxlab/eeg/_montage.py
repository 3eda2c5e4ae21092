"""The standard 10-20 montage used by the simulator and the loaders (P10)."""

from __future__ import annotations

import numpy as np

from jaxlab._core import check_strings

__all__ = ["STANDARD_1020", "channel_positions", "channel_indices"]

# 19-channel 10-20 montage: name -> (x, y) on the unit head disc (x right, y nose).
STANDARD_1020: dict[str, tuple[float, float]] = {
    "Fp1": (-0.31, 0.95),
    "Fp2": (0.31, 0.95),
    "F7": (-0.81, 0.59),
    "F3": (-0.40, 0.55),
    "Fz": (0.0, 0.50),
    "F4": (0.40, 0.55),
    "F8": (0.81, 0.59),
    "T7": (-1.0, 0.0),
    "C3": (-0.50, 0.0),
    "Cz": (0.0, 0.0),
    "C4": (0.50, 0.0),
    "T8": (1.0, 0.0),
    "P7": (-0.81, -0.59),
    "P3": (-0.40, -0.55),
    "Pz": (0.0, -0.50),
    "P4": (0.40, -0.55),
    "P8": (0.81, -0.59),
    "O1": (-0.31, -0.95),
    "O2": (0.31, -0.95),
}
"""The 19-channel 10-20 montage: channel name -> (x, y) on the unit head disc (x right, y
towards the nose)."""


def channel_indices(ch_names, wanted) -> list[int]:
    """Positions of `wanted` channel names inside `ch_names` (case-insensitive).

    Both are sequences of strings (a bare string, None or non-string entries raise a
    `ValueError` naming the argument: `wanted="Fz"` would be the letters F and z);
    `ch_names` non-empty, `wanted` may be empty.

    **Raises:** `ValueError` naming any channel that is not present.
    """
    ch_names = check_strings("ch_names", ch_names)
    wanted = check_strings("wanted", wanted, nonempty=False)
    lower = [c.lower() for c in ch_names]
    out = []
    for w in wanted:
        if w.lower() not in lower:
            raise ValueError(
                f"wanted: channel {str(w)!r} not found; available ch_names: "
                f"{[str(c) for c in ch_names]}"
            )
        out.append(lower.index(w.lower()))
    return out


def channel_positions(ch_names) -> np.ndarray:
    """(x, y) positions of `ch_names` in the 10-20 system, shape `(C, 2)`.

    **Raises:** `ValueError` for a channel name outside the 19-channel 10-20 montage, and
    for `ch_names` that is not a non-empty sequence of strings.
    """
    ch_names = check_strings("ch_names", ch_names)
    table = {k.lower(): v for k, v in STANDARD_1020.items()}
    unknown = [c for c in ch_names if c.lower() not in table]
    if unknown:
        raise ValueError(
            f"ch_names: unknown channel(s) {unknown}; expected names from the 10-20 montage "
            f"{list(STANDARD_1020)}"
        )
    return np.asarray([table[c.lower()] for c in ch_names], dtype=np.float64)
