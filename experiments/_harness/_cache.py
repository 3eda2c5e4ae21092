"""The on-disk cache shared by runs: results of expensive steps under a content hash."""

from __future__ import annotations

import functools
import hashlib
import io
import logging
import os
from pathlib import Path

import numpy as np

from jaxlab._core import atomic_write, read_npz

log = logging.getLogger("experiments")


def cache_dir(*parts: str) -> Path:
    """`$JAXLAB_CACHE_DIR/<parts...>` (default `~/.cache/jaxlab/<parts...>`), created.

    Shared by every run and experiment: files in it are named by a hash of everything
    that determines their content, so that a run reuses only what it would compute.
    """
    root = Path(os.environ.get("JAXLAB_CACHE_DIR", Path.home() / ".cache" / "jaxlab"))
    d = root.joinpath(*parts)
    d.mkdir(parents=True, exist_ok=True)
    return d


def load_npz(path: Path) -> dict[str, np.ndarray] | None:
    """The arrays of a cached `.npz` file, or None when it is missing or unreadable.

    A corrupt or truncated file is recomputed by the caller, never trusted; pickled
    objects are refused (`allow_pickle=False`).
    """
    if not path.exists():
        return None
    try:
        return read_npz(path, "cache file")
    except ValueError as e:
        log.warning("%s: recomputing", e)
        return None


def save_npz(path: Path, arrays: dict[str, np.ndarray]) -> None:
    """Write `arrays` to `path` as one `.npz`, atomically (a kill leaves no partial file)."""
    buf = io.BytesIO()
    np.savez(buf, **arrays)
    with atomic_write(path, "wb") as f:
        f.write(buf.getvalue())


def file_sha256(path: str | os.PathLike) -> str:
    """SHA-256 (hex) of a file's bytes, read in 4 MiB blocks."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 22), b""):
            h.update(block)
    return h.hexdigest()


@functools.cache
def model_sha256(name: str) -> str:
    """SHA-256 of a `jaxlab.lm` model's GGUF file: its identity in cache keys (once per run)."""
    from jaxlab import lm

    return file_sha256(lm.model_path(name))


def model_tag(model: str) -> str:
    """Short tag of a `jaxlab.lm` model for metric names: smollm2, gemma3, qwen-0.5b, ..."""
    from jaxlab import lm

    name = lm.Pool([model]).names[0]  # the registry name of a name or alias
    if name.startswith("smollm"):
        return "smollm2"
    if name.startswith("gemma"):
        return "gemma3"
    return name.replace("qwen2.5-coder-", "qwen-").replace("-instruct", "")
