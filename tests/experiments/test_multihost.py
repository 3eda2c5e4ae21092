"""Multi-process runs on `jax.distributed`, two local CPU processes (gloo collectives).

Oracle: the same experiment run by one process (2 simulated CPU devices) against a job of
two processes (2 simulated devices each, 4 global, localhost coordinator) through
`python -m experiments run`: the sweep's output and the cached items are equal bit for
bit, metrics.json is written by process 0 only and equals the one-process record's
metrics; every cache item is computed by one process only, and after a restart only the
item no process kept is recomputed. A process killed mid-job makes the other exit with
an error, bounded by subprocess timeouts (never a hang).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np

from tests.simulated_devices import free_port, multiprocess_env

ROOT = Path(__file__).resolve().parents[2]
WORKER = Path(__file__).with_name("multihost_worker.py")
N_ITEMS = 5
TIMEOUT = 120  # seconds per process: a hang fails the test instead of blocking CI


def _start(out: Path, mode: str, *flags: str) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, str(WORKER), str(out), mode, *flags],
        cwd=ROOT,
        env=multiprocess_env(2),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _wait(procs: list[subprocess.Popen]) -> list[tuple[int, str]]:
    got = []
    try:
        for p in procs:
            _, err = p.communicate(timeout=TIMEOUT)
            got.append((p.returncode, err))
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.communicate()
    return got


def _job(out: Path, mode: str, heartbeat: str = "10") -> list[subprocess.Popen]:
    coord = f"localhost:{free_port()}"
    common = ("--coordinator", coord, "--num-processes", "2", "--init-timeout", "60")
    return [
        _start(out, mode, *common, "--process-id", str(i), "--heartbeat-timeout", heartbeat)
        for i in range(2)
    ]


def test_two_processes_equal_one_process(tmp_path):
    one, two = tmp_path / "one", tmp_path / "two"
    procs = [_start(one, "ok"), *_job(two, "ok")]
    for rc, err in _wait(procs):
        assert rc == 0, err[-3000:]

    ref = np.load(one / "worker-0.npz")
    rec_one = json.loads((one / "results/multihost_probe/metrics.json").read_text())
    run_dir = two / "results/multihost_probe"
    rec_two = json.loads((run_dir / "metrics.json").read_text())
    assert rec_two["jax"]["processes"] == 2
    assert len(rec_two["jax"]["devices"]) == 4
    assert rec_one["metrics"] == rec_two["metrics"]  # bit for bit (JSON round-trips floats)
    assert (run_dir / "sweep.png").is_file()
    assert (run_dir / "run.log").is_file()
    # process 1 wrote its log apart and no results
    assert sorted(p.name for p in (run_dir / ".process-1").iterdir()) == ["run.log"]

    workers = [np.load(two / f"worker-{i}.npz") for i in range(2)]
    for w in workers:
        for k in ("y", "v", "k", "items", "again"):
            np.testing.assert_array_equal(w[k], ref[k], err_msg=k)
        assert w["files"].all()  # every process's own cache holds every item again
    # first build: every item computed once in the job, split by process_slice
    c0 = [w["computed0"].tolist() for w in workers]
    assert c0 == [[0, 1, 2], [3, 4]]
    assert ref["computed0"].tolist() == list(range(N_ITEMS))
    # the restart: only item 2 was missing everywhere; computed by one process
    assert sorted(w["computed1"].tolist() for w in workers) == [[], [2]]
    for i in range(2):
        assert len(list((two / f"cache-{i}").glob("item*.npz"))) == N_ITEMS


def test_killed_process_ends_the_other_with_an_error(tmp_path):
    procs = _job(tmp_path, "kill", heartbeat="5")
    (rc0, err0), (rc1, _) = _wait(procs)
    assert rc1 == -9  # SIGKILL
    assert rc0 != 0, err0[-3000:]
    assert (
        "multi-process job failed" in err0
        or "JAX distributed service detected fatal errors" in err0
    ), err0[-3000:]
    assert not (tmp_path / "results/multihost_probe/metrics.json").exists()


def test_launcher_environment_and_bad_jobs():
    import pytest

    from experiments._harness._distributed import launcher, start_distributed

    assert launcher({}) is None
    assert launcher({"SLURM_JOB_ID": "7", "SLURM_NTASKS": "1"}) is None  # one task
    assert launcher({"SLURM_JOB_ID": "7", "SLURM_NTASKS": "4"}) == "slurm"
    assert launcher({"OMPI_MCA_orte_hnp_uri": "x", "OMPI_COMM_WORLD_SIZE": "2"}) == "ompi"
    assert launcher({"TPU_WORKER_HOSTNAMES": "a,b"}) == "gketpu"
    assert launcher({"TPU_WORKER_HOSTNAMES": "a"}) is None
    assert launcher({"JAX_COORDINATOR_ADDRESS": "h:1"}) == "jax"
    # one process: nothing is started (and JAX's backend stays as it is)
    assert start_distributed(env={}) is None
    with pytest.raises(ValueError, match="give all three"):
        start_distributed(coordinator="h:1", env={})
    with pytest.raises(ValueError, match="process_id"):
        start_distributed(coordinator="h:1", num_processes=2, process_id=2, env={})
    with pytest.raises(ValueError, match="JAX_PROCESS_ID"):
        start_distributed(env={"JAX_COORDINATOR_ADDRESS": "h:1", "JAX_NUM_PROCESSES": "2"})
    with pytest.raises(ValueError, match="initialization_timeout"):
        start_distributed(initialization_timeout=0, env={})


def test_process_i_keeps_its_checkpoints_and_log_apart(tmp_path):
    from experiments._harness import RunContext

    zero = RunContext("probe", out_dir=tmp_path)
    one = RunContext("probe", out_dir=tmp_path, process_index=1)
    assert zero.writes_results
    assert not one.writes_results
    assert zero.checkpoint_dir == tmp_path / "checkpoints"
    assert one.checkpoint_dir == tmp_path / ".process-1" / "checkpoints"
    assert one.checkpointer("fit").path.parent == one.checkpoint_dir
