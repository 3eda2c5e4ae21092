"""Data model: subjects x sessions x conditions x channels x time, plus metadata (P10)."""

from __future__ import annotations

import dataclasses

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jax.core import Tracer
from jaxtyping import Array, Float, Int

from jaxlab._core import check_ids

from ._montage import channel_positions

__all__ = ["EEGDataset", "EpochTable", "GROUPS", "SESSIONS", "CONDITIONS"]

GROUPS = ("satanama", "hare_krishna", "breath_focus")
"""The meditation groups of the benchmark."""
SESSIONS = ("pre", "post")
"""The recording sessions: before and after the intervention."""
CONDITIONS = ("rest", "meditation")
"""The recording conditions: rest and meditation."""


class EEGDataset(eqx.Module):
    """Continuous recordings of an L-FAME-style design (P10).

    **Fields:**

    - `signals`: `(subject, session, condition, channel, time)` in microvolts.
    - `group`: `(subject,)` integer group index into `group_names`.
    - `sfreq`: sampling rate in Hz (static).
    - `ch_names`: channel names, 10-20 system (static).
    - `group_names`, `session_names`, `condition_names`: metadata labels (static).
    - `subject_names`: optional subject labels, e.g. BIDS `sub-` labels (static).
    """

    signals: Float[Array, "subject session condition channel time"]
    group: Int[Array, " subject"]
    sfreq: float = eqx.field(static=True)
    ch_names: tuple[str, ...] = eqx.field(static=True)
    group_names: tuple[str, ...] = eqx.field(static=True, default=GROUPS)
    session_names: tuple[str, ...] = eqx.field(static=True, default=SESSIONS)
    condition_names: tuple[str, ...] = eqx.field(static=True, default=CONDITIONS)
    subject_names: tuple[str, ...] | None = eqx.field(static=True, default=None)

    def __check_init__(self):
        if not (np.isfinite(self.sfreq) and self.sfreq > 0):
            raise ValueError(f"sfreq: expected a positive sampling rate in Hz, got {self.sfreq}")
        if self.signals.ndim != 5:
            raise ValueError(
                "signals: expected shape (subject, session, condition, channel, time), "
                f"got {self.signals.shape}"
            )
        s, ns, nc, c, _ = self.signals.shape
        if c != len(self.ch_names):
            raise ValueError(f"ch_names: {len(self.ch_names)} names for {c} channels")
        if len(set(self.ch_names)) != len(self.ch_names):
            raise ValueError(f"ch_names: duplicate channel names in {self.ch_names}")
        channel_positions(self.ch_names)  # raises on unknown channels
        if self.group.shape != (s,):
            raise ValueError(f"group: expected shape ({s},), got {self.group.shape}")
        concrete = isinstance(self.group, np.ndarray | jax.Array)
        if concrete and not isinstance(self.group, Tracer):  # an index into group_names
            check_ids("group", self.group, len(self.group_names), what="group indices")
        if ns != len(self.session_names) or nc != len(self.condition_names):
            raise ValueError("signals: session/condition axes disagree with their names")
        if self.subject_names is not None and len(self.subject_names) != s:
            raise ValueError(f"subject_names: {len(self.subject_names)} names for {s} subjects")
        if not isinstance(self.signals, jnp.ndarray) or not hasattr(self.signals, "devices"):
            return
        if not bool(jnp.all(jnp.isfinite(self.signals))):
            raise ValueError("signals: contains NaN or infinite samples")

    def with_signals(self, signals) -> EEGDataset:
        """The same recordings' metadata with new `signals` (same leading axes)."""
        return dataclasses.replace(self, signals=signals)


class EpochTable(eqx.Module):
    """Epochs flattened into a table with one row of metadata per epoch.

    **Fields:** `x` `(N, C, L)`; `subject`, `session`, `condition`, `group` each `(N,)`;
    `keep` `(N,)` bool, False where amplitude rejection dropped the epoch.
    """

    x: Float[Array, "N C L"]
    subject: Int[Array, " N"]
    session: Int[Array, " N"]
    condition: Int[Array, " N"]
    group: Int[Array, " N"]
    keep: Array
    sfreq: float = eqx.field(static=True)
    ch_names: tuple[str, ...] = eqx.field(static=True)

    def select(self, mask) -> EpochTable:
        """Rows where the boolean `mask` `(N,)` is True (eager, concrete mask)."""
        idx = np.flatnonzero(np.asarray(mask))
        return EpochTable(
            x=self.x[idx],
            subject=self.subject[idx],
            session=self.session[idx],
            condition=self.condition[idx],
            group=self.group[idx],
            keep=self.keep[idx],
            sfreq=self.sfreq,
            ch_names=self.ch_names,
        )
