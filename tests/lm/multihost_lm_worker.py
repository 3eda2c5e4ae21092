"""One process of `test_lm_multihost.py`'s job (not a test module; run as a script).

    python tests/lm/multihost_lm_worker.py OUT COORDINATOR NUM_PROCESSES PROCESS_ID

Starts `jax.distributed` (gloo CPU collectives, 2 simulated devices per process), writes
the same tiny random Llama (fixed key) as a Hugging Face folder in its own folder (as on
hosts without a shared filesystem), loads it with `lm.load(folder, mesh=)` on a
(1, 2 * NUM_PROCESSES) mesh over every process's devices, so each weight's slices live
in both processes, and runs `lm.forward` and `lm.score`. Process 0 writes OUT/lm.npz:
the logits (gathered from both processes), the option log-probabilities, and which
process held which slice of `wq`.
"""

from __future__ import annotations

import sys
from pathlib import Path

import jax

jax.config.update("jax_cpu_collectives_implementation", "gloo")


def main() -> None:
    out, coord, n, pid = Path(sys.argv[1]), sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
    jax.distributed.initialize(
        coordinator_address=coord, num_processes=n, process_id=pid, initialization_timeout=60
    )
    import numpy as np
    from jax.experimental import multihost_utils

    from jaxlab import lm
    from tests.lm.hf_writer import write_hf
    from tests.lm.multihost_lm_case import OPTIONS, PROMPTS, TOKENS, case_model

    mesh = lm.model_mesh(1, len(jax.devices()))
    folder = write_hf(case_model(), out / f"hf-{pid}")
    model, _ = lm.load(folder, mesh=mesh)
    logits = lm.forward(model, TOKENS)[0]
    full = multihost_utils.process_allgather(logits, tiled=True)
    scores = lm.score(model, None, PROMPTS, OPTIONS)
    owners = sorted(
        (jax.process_index(), s.index[1].start or 0) for s in model.layers.wq.addressable_shards
    )
    everyone = multihost_utils.process_allgather(np.asarray(owners), tiled=True)
    if jax.process_index() == 0:
        np.savez(
            out / "lm.npz",
            logits=np.asarray(full),
            scores=np.concatenate([np.asarray(s) for s in scores.sum]),
            owners=np.asarray(everyone),
            processes=jax.process_count(),
            devices=len(jax.devices()),
        )
    multihost_utils.sync_global_devices("done")


if __name__ == "__main__":
    main()
