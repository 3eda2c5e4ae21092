"""Run a Python script in a subprocess on N simulated CPU devices.

`XLA_FLAGS=--xla_force_host_platform_device_count=N` must be set before jax initialises,
so tests of sharded code run their checks in a fresh interpreter (cwd: the repository
root, so `tests.*` and `jaxlab` import as here) and assert on what it prints.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def run_on_devices(script: str, *, devices: int = 4, args=(), timeout: int = 600) -> str:
    """Run `script` (`python -c`) with `args` on `devices` simulated CPU devices; assert it
    exits 0 (its stderr's tail as the message) and return its stdout."""
    env = dict(
        os.environ,
        XLA_FLAGS=f"--xla_force_host_platform_device_count={devices}",
        JAX_PLATFORMS="cpu",
    )
    proc = subprocess.run(
        [sys.executable, "-c", script, *args],
        env=env,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    assert proc.returncode == 0, proc.stderr[-4000:]
    return proc.stdout


def free_port() -> int:
    """A free localhost TCP port (a `jax.distributed` coordinator's)."""
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def multiprocess_env(devices: int = 2) -> dict[str, str]:
    """The environment of one process of a local multi-process job: `devices` simulated
    CPU devices, the repository on the path, and no launcher variables (the process's
    own flags name the job)."""
    env = dict(os.environ)
    env.update(
        JAX_PLATFORMS="cpu",
        XLA_FLAGS=f"--xla_force_host_platform_device_count={devices}",
        PYTHONPATH=str(ROOT),
    )
    for var in ("JAX_COORDINATOR_ADDRESS", "SLURM_JOB_ID", "OMPI_MCA_orte_hnp_uri"):
        env.pop(var, None)
    return env
