"""The `jaxlab.lm` pool as the routing experiments load it: one model in memory at a time."""

from __future__ import annotations


class ModelLoader:
    """Loads one model at a time, only when a chunk is missing."""

    def __init__(self):
        self.name, self.pair = None, None

    def __call__(self, name):
        from jaxlab import lm

        if self.name != name:
            self.pair = None
            self.pair = lm.load(name, mesh="auto")
            self.name = name
        return self.pair
