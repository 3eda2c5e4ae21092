"""Start `jax.distributed` for a multi-process run of `python -m experiments run/reproduce`.

A run is multi-process when the command line names the job (`--coordinator HOST:PORT
--num-processes N --process-id I`, or `--distributed` for JAX's own cluster detection on
a Cloud TPU pod slice, Slurm, Open MPI or Kubernetes) or when the environment of a
launcher says so, read from the variables JAX's cluster detection reads:

- `JAX_COORDINATOR_ADDRESS` (with our `JAX_NUM_PROCESSES` and `JAX_PROCESS_ID`);
- Slurm: `SLURM_JOB_ID` with `SLURM_NTASKS` > 1;
- Open MPI: `OMPI_MCA_orte_hnp_uri` with `OMPI_COMM_WORLD_SIZE` > 1;
- TPU on GKE: `TPU_WORKER_HOSTNAMES` or `TPU_PROCESS_ADDRESSES` naming > 1 host.

Nothing is started otherwise (one process: nothing changes). The coordinator waits at
most `initialization_timeout` seconds for the others; a process that stops sending
heartbeats for `heartbeat_timeout` seconds fails the job in every process. On the CPU
backend cross-process collectives go through gloo (JAX's default).
"""

from __future__ import annotations

import inspect
import os
from collections.abc import Mapping

import jax

__all__ = ["launcher", "start_distributed"]

_TPU_HOSTS = ("TPU_PROCESS_ADDRESSES", "TPU_WORKER_HOSTNAMES")


def _count(env: Mapping[str, str], name: str) -> int:
    try:
        return int(env.get(name, "1"))
    except ValueError:
        return 1


def launcher(env: Mapping[str, str] | None = None) -> str | None:
    """The multi-process launcher the environment names (None: a single process).

    One of "jax" (JAX_COORDINATOR_ADDRESS), "slurm", "ompi", "gketpu"; a one-task job of
    a launcher is a single process (None)."""
    env = os.environ if env is None else env
    if env.get("JAX_COORDINATOR_ADDRESS"):
        return "jax"
    if "SLURM_JOB_ID" in env and _count(env, "SLURM_NTASKS") > 1:
        return "slurm"
    if "OMPI_MCA_orte_hnp_uri" in env and _count(env, "OMPI_COMM_WORLD_SIZE") > 1:
        return "ompi"
    hosts = next((env[k] for k in _TPU_HOSTS if env.get(k)), "")
    if len([h for h in hosts.split(",") if h.strip()]) > 1:
        return "gketpu"
    return None


def start_distributed(
    *,
    coordinator: str | None = None,
    num_processes: int | None = None,
    process_id: int | None = None,
    auto: bool = False,
    initialization_timeout: int = 300,
    heartbeat_timeout: int = 100,
    env: Mapping[str, str] | None = None,
) -> str | None:
    """Call `jax.distributed.initialize` when this is a multi-process run; say how.

    **Arguments:**

    - `coordinator`, `num_processes`, `process_id`: the job, all three or none.
    - `auto`: JAX's own cluster detection (Cloud TPU pod slices read the metadata server).
    - `initialization_timeout`, `heartbeat_timeout`: seconds, >= 1 (JAX's defaults 300, 100).
    - `env`: the environment to read (default `os.environ`).

    **Returns:** a one-line description of the job ("process 1 of 2 via ..."), or None
    when nothing was started (a single process).

    **Raises:** `ValueError` naming the argument on a partial or bad job description;
    `RuntimeError` from JAX when the coordinator cannot be reached in time.
    """
    env = os.environ if env is None else env
    for name, t in (
        ("initialization_timeout", initialization_timeout),
        ("heartbeat_timeout", heartbeat_timeout),
    ):
        if isinstance(t, bool) or not isinstance(t, int) or not 1 <= t <= 86_400:
            raise ValueError(f"{name}: expected whole seconds in [1, 86400], received {t!r}")
    given = [x is not None for x in (coordinator, num_processes, process_id)]
    if any(given) and not all(given):
        raise ValueError(
            "coordinator, num_processes, process_id: give all three (--coordinator "
            "HOST:PORT --num-processes N --process-id I) or none"
        )
    source = "--coordinator"
    if not all(given):
        source = launcher(env)
        if source == "jax":
            coordinator = env["JAX_COORDINATOR_ADDRESS"]
            for var in ("JAX_NUM_PROCESSES", "JAX_PROCESS_ID"):
                if not env.get(var):
                    raise ValueError(f"{var}: JAX_COORDINATOR_ADDRESS is set, {var} is not")
            try:
                num_processes = int(env["JAX_NUM_PROCESSES"])
                process_id = int(env["JAX_PROCESS_ID"])
            except ValueError as e:
                raise ValueError(f"JAX_NUM_PROCESSES, JAX_PROCESS_ID: not integers ({e})") from e
        elif source is None and not auto:
            return None
        source = source or "JAX's cluster detection"
    if num_processes is not None:
        if isinstance(num_processes, bool) or not 1 <= num_processes <= 65_536:
            raise ValueError(f"num_processes: expected 1..65536, received {num_processes!r}")
        if process_id is None or not 0 <= process_id < num_processes:
            raise ValueError(
                f"process_id: expected 0..{num_processes - 1}, received {process_id!r}"
            )
    if coordinator is not None and (":" not in coordinator or not coordinator.rsplit(":", 1)[1]):
        raise ValueError(f"coordinator: expected HOST:PORT, received {coordinator!r}")
    if getattr(jax.config, "jax_cpu_collectives_implementation", "gloo") is None:  # older jax
        jax.config.update("jax_cpu_collectives_implementation", "gloo")
    kwargs = {}
    if "heartbeat_timeout_seconds" in inspect.signature(jax.distributed.initialize).parameters:
        kwargs["heartbeat_timeout_seconds"] = heartbeat_timeout  # older jax: its default
    jax.distributed.initialize(
        coordinator_address=coordinator,
        num_processes=num_processes,
        process_id=process_id,
        initialization_timeout=initialization_timeout,
        **kwargs,
    )
    return (
        f"process {jax.process_index()} of {jax.process_count()} via {source}; "
        f"{jax.local_device_count()} local of {jax.device_count()} devices"
    )
