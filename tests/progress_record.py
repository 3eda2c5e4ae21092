"""A progress strategy that records its calls, for tests of resumable jobs."""

from __future__ import annotations

from jaxlab._core import AbstractProgress


class RecordProgress(AbstractProgress):
    """Appends `("start", total, initial)`, `("update", n)` and `("close",)` to `calls`."""

    def __init__(self):
        self.calls = []

    def start(self, total, initial):
        self.calls.append(("start", total, initial))

    def update(self, n, loss=None):
        self.calls.append(("update", n))

    def close(self):
        self.calls.append(("close",))
