"""Checkpoints and result files written atomically (temp file + `os.replace`).

An interrupted write never leaves a half-written file: the previous version
stays in place until the new one is complete on disk.
"""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any, TypeVar

import equinox as eqx

__all__ = ["atomic_write", "write_json", "save_checkpoint", "load_checkpoint"]

T = TypeVar("T")


@contextlib.contextmanager
def atomic_write(path: str | os.PathLike, mode: str = "w") -> Iterator[IO[Any]]:
    """Open a temp file beside `path`; on clean exit fsync and `os.replace` it.

    If the body raises, the temp file is removed and `path` is untouched.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, mode) as f:
            yield f
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise


def write_json(path: str | os.PathLike, obj: Any) -> None:
    """Serialise `obj` to JSON fully in memory, then write it atomically."""
    text = json.dumps(obj, indent=2, sort_keys=False, allow_nan=True)
    with atomic_write(path, "w") as f:
        f.write(text)
        f.write("\n")


def save_checkpoint(path: str | os.PathLike, tree: Any) -> None:
    """Save the array leaves of a pytree with `eqx.tree_serialise_leaves`, atomically."""
    with atomic_write(path, "wb") as f:
        eqx.tree_serialise_leaves(f, tree)


def load_checkpoint(path: str | os.PathLike, like: T) -> T:
    """Load leaves saved by `save_checkpoint` into a pytree shaped like `like`.

    Raises `FileNotFoundError` naming the path if it does not exist, and
    `ValueError` if the file does not match the structure of `like`.
    """
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"checkpoint not found: {path}")
    try:
        with open(path, "rb") as f:
            return eqx.tree_deserialise_leaves(f, like)
    except (RuntimeError, ValueError, OSError, EOFError) as e:
        raise ValueError(f"checkpoint {path} does not match the expected structure: {e}") from e
