"""Stand-in for `jaxlab._core.Checkpointer` until the shared driver lands (same interface)."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any, TypeVar

from jaxlab._core import load_checkpoint, save_checkpoint

T = TypeVar("T")


@dataclasses.dataclass(frozen=True)
class Checkpointer:
    path: Path
    every: int | None = None
    resume: bool = False

    def __post_init__(self):
        object.__setattr__(self, "path", Path(self.path))

    def exists(self) -> bool:
        return self.path.is_file()

    def save(self, tree: Any) -> None:
        save_checkpoint(self.path, tree)

    def load(self, like: T) -> T:
        return load_checkpoint(self.path, like)
