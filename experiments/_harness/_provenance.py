"""Where and when a result was produced: machine, date, git commit, versions, config hash.

Every `metrics.json` and benchmark JSON carries these fields, so that a committed result
(the snapshot under `results/quick` and `results/bench`) says which code, config and
machine made it, and a test can tell when the config it ran is no longer the current one.
"""

from __future__ import annotations

import datetime
import hashlib
import json
import os
import platform
import subprocess
from pathlib import Path
from typing import Any

import jax

__all__ = ["config_hash", "git_state", "machine_info", "provenance"]

ROOT = Path(__file__).resolve().parents[2]


def config_hash(values: Any) -> str:
    """SHA-256 (hex) of the canonical JSON of `values` (a config's field values as
    `config_to_json` writes them, or a benchmark's config dict).

    Canonical: keys sorted, no spaces, tuples as lists (`json.dumps` writes both the same),
    so the hash of a frozen config equals the hash of its `config_values` read back from
    a metrics.json.
    """
    try:
        text = json.dumps(values, sort_keys=True, separators=(",", ":"), allow_nan=False)
    except (TypeError, ValueError) as e:
        raise ValueError(f"values: expected JSON-serialisable config values ({e})") from None
    return hashlib.sha256(text.encode()).hexdigest()


def _git(*args: str) -> str | None:
    try:
        out = subprocess.run(
            ["git", *args], cwd=ROOT, capture_output=True, text=True, timeout=30, check=False
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout if out.returncode == 0 else None


def git_state() -> dict[str, Any]:
    """`{"commit": HEAD's hash, "dirty": whether tracked files differ from it}` of the
    repository the harness runs from; both None when it is not a git checkout (or git is
    missing). Untracked files (new results, caches) do not count as dirty."""
    commit = _git("rev-parse", "HEAD")
    if commit is None:
        return {"commit": None, "dirty": None}
    status = _git("status", "--porcelain", "--untracked-files=no")
    return {"commit": commit.strip(), "dirty": None if status is None else bool(status.strip())}


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _memory_gb() -> float | None:
    try:
        return round(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 1e9, 1)
    except (ValueError, OSError, AttributeError):
        return None


def machine_info() -> dict[str, Any]:
    """The host and the device: CPU model, logical CPU count, RAM in GB, OS platform,
    Python version, the kind and count of JAX's devices (the backend and the version of
    JAX are the record's `jax` field, `jax_info()`), and the host's load average over the
    last 1, 5 and 15 minutes when the record is written (`None` where the OS has none):
    timings from a shared machine are read against it."""
    devices = jax.devices()
    return {
        "cpu": _cpu_model(),
        "cpu_count": os.cpu_count(),
        "memory_gb": _memory_gb(),
        "platform": platform.platform(),
        "processor": platform.processor(),
        "python": platform.python_version(),
        "device_kind": devices[0].device_kind if devices else None,
        "device_count": len(devices),
        "load_avg": _load_avg(),
    }


def _load_avg() -> list[float] | None:
    try:
        return [round(x, 2) for x in os.getloadavg()]
    except (AttributeError, OSError):
        return None


def _jaxlab_version() -> str:
    import jaxlab

    return jaxlab.__version__


def provenance() -> dict[str, Any]:
    """`{"date_utc", "git_commit", "git_dirty", "jaxlab_version"}`: when and from which
    code a record is written (the machine is `machine_info()`, JAX's version `jax_info()`,
    the config `config_hash`)."""
    git = git_state()
    return {
        "date_utc": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "git_commit": git["commit"],
        "git_dirty": git["dirty"],
        "jaxlab_version": _jaxlab_version(),
    }
