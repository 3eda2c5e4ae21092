"""Progress strategies for the training driver: tqdm lives here and nowhere else.

`run_steps` reports to a progress object; the library default is `NoProgress()`
(silent), experiments pass `TqdmProgress(desc=...)`.
"""

from __future__ import annotations

import abc
import dataclasses
from typing import Any

__all__ = ["AbstractProgress", "NoProgress", "TqdmProgress", "progress_bar"]


class AbstractProgress(abc.ABC):
    """How a long loop reports progress: `start`, then `update` per chunk, then `close`."""

    @abc.abstractmethod
    def start(self, total: int, initial: int) -> None:
        """Begin a loop of `total` units of which `initial` are already done (resume)."""

    @abc.abstractmethod
    def update(self, n: int, loss: float | None = None) -> None:
        """`n` more units are done; `loss` is the latest loss when there is one."""

    @abc.abstractmethod
    def close(self) -> None:
        """The loop ended (normally, by a stop criterion, or by an error)."""


@dataclasses.dataclass
class NoProgress(AbstractProgress):
    """Report nothing (the library default)."""

    def start(self, total: int, initial: int) -> None:
        del total, initial

    def update(self, n: int, loss: float | None = None) -> None:
        del n, loss

    def close(self) -> None:
        pass


@dataclasses.dataclass
class TqdmProgress(AbstractProgress):
    """A tqdm bar (`desc` its label; `leave` keeps it on screen after the loop)."""

    desc: str = ""
    leave: bool = False
    _bar: Any = dataclasses.field(default=None, init=False, repr=False)

    def start(self, total: int, initial: int) -> None:
        from tqdm.auto import tqdm

        self.close()
        self._bar = tqdm(total=total, initial=initial, desc=self.desc, leave=self.leave)

    def update(self, n: int, loss: float | None = None) -> None:
        if self._bar is None:
            return
        self._bar.update(n)
        if loss is not None:
            self._bar.set_postfix(loss=f"{loss:.4g}", refresh=False)

    def close(self) -> None:
        if self._bar is not None:
            self._bar.close()
            self._bar = None


def progress_bar(
    iterable: Any, *, total: int | None = None, desc: str = "", enabled: bool = True
) -> Any:
    """Wrap an iterable in a tqdm bar (or return it unchanged when `enabled` is False).

    For loops that are not training steps (data preparation, model calls over items):
    components use this instead of importing tqdm.
    """
    if not enabled:
        return iterable
    from tqdm.auto import tqdm

    return tqdm(iterable, total=total, desc=desc, leave=False)
