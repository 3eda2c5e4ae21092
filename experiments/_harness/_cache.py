"""The on-disk cache shared by runs: results of expensive steps under a content hash."""

from __future__ import annotations

import os
from pathlib import Path


def cache_dir(*parts: str) -> Path:
    """`$JAXLAB_CACHE_DIR/<parts...>` (default `~/.cache/jaxlab/<parts...>`), created.

    Shared by every run and experiment: files in it are named by a hash of everything
    that determines their content, so that a run reuses only what it would compute.
    """
    root = Path(os.environ.get("JAXLAB_CACHE_DIR", Path.home() / ".cache" / "jaxlab"))
    d = root.joinpath(*parts)
    d.mkdir(parents=True, exist_ok=True)
    return d
