"""A model sharded over the devices of two processes (`jax.distributed`, gloo).

Two local processes with 2 simulated CPU devices each load the same Hugging Face folder
with `lm.load(folder, mesh=)` on a (1, 4) mesh spanning both, so every split weight has
slices in both processes, and run `forward` and `score`. Oracle: the same model unsharded
in this process (logits and option log-probabilities within 1e-5 relative, the split
sums' rounding). Each process is bounded by a timeout: a hang fails the test.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np

from jaxlab import lm
from tests.simulated_devices import free_port, multiprocess_env

from .multihost_lm_case import OPTIONS, PROMPTS, TOKENS, case_model

ROOT = Path(__file__).resolve().parents[2]
WORKER = Path(__file__).with_name("multihost_lm_worker.py")
TIMEOUT = 180


def test_model_sharded_over_two_processes_equals_one_device(tmp_path):
    env = multiprocess_env(2)
    coord = f"localhost:{free_port()}"
    procs = [
        subprocess.Popen(
            [sys.executable, str(WORKER), str(tmp_path), coord, "2", str(i)],
            cwd=ROOT,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for i in range(2)
    ]
    try:
        for p in procs:
            _, err = p.communicate(timeout=TIMEOUT)
            assert p.returncode == 0, err[-3000:]
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.communicate()
    got = np.load(tmp_path / "lm.npz")
    assert int(got["processes"]) == 2
    assert int(got["devices"]) == 4
    # wq split by query heads: 4 devices, each its own slice, 2 in each process
    owners = got["owners"].reshape(-1, 2)
    assert sorted(owners[:, 0].tolist()) == [0, 0, 1, 1]
    assert sorted(owners[:, 1].tolist()) == [0, 6, 12, 18]  # 4 heads x head_dim 6

    model = case_model()
    want = np.asarray(lm.forward(model, TOKENS)[0], np.float64)
    rel = np.max(np.abs(got["logits"] - want)) / np.max(np.abs(want))
    assert rel < 1e-5, rel
    ref = lm.score(model, None, PROMPTS, OPTIONS)
    want_s = np.concatenate([np.asarray(s) for s in ref.sum])
    np.testing.assert_allclose(got["scores"], want_s, rtol=1e-5, atol=1e-5)
