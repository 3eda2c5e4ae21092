"""Child process of `test_kill_resume.py`: run one experiment with a tiny config and
SIGKILL itself at a chosen point (not a test module; run as a script).

    python tests/experiments/killrun.py NAME OUT POINT OVERRIDES_JSON [--resume]

POINT: "none" (run to the end; print the number of checkpoint saves), "save:K" (die
right after the K-th checkpoint save: K=1 is mid-training, K=last right after the last
checkpoint, before the metrics), "metrics" (die inside the atomic metrics.json write,
after the temp file is complete and before the rename).
"""

from __future__ import annotations

import dataclasses
import json
import os
import signal
import sys


def _tuples(v):
    if isinstance(v, dict):
        return {k: _tuples(x) for k, x in v.items()}
    return tuple(_tuples(x) for x in v) if isinstance(v, list) else v


def main() -> None:
    name, out, point, overrides = sys.argv[1:5]
    resume = "--resume" in sys.argv[5:]

    import jaxlab._core._checkpoint as ckpt
    from experiments._harness import _registry
    from experiments._harness._runner import run_experiment

    mod = _registry.find(name)
    # JSON has no tuples: lists become the tuples the config fields hold
    mod.QUICK = dataclasses.replace(mod.QUICK, **_tuples(json.loads(overrides)))
    saves = [0]
    save = ckpt.Checkpointer.save

    def counting_save(self, tree):
        save(self, tree)
        saves[0] += 1
        if point == f"save:{saves[0]}":
            os.kill(os.getpid(), signal.SIGKILL)

    ckpt.Checkpointer.save = counting_save  # type: ignore[method-assign]
    replace = os.replace

    def dying_replace(src, dst, *a, **k):
        if point == "metrics" and str(dst).endswith("metrics.json"):
            os.kill(os.getpid(), signal.SIGKILL)
        return replace(src, dst, *a, **k)

    ckpt.os.replace = dying_replace  # type: ignore[attr-defined]
    run_experiment(mod, out=out, resume=resume)
    print(f"SAVES={saves[0]}")


if __name__ == "__main__":
    main()
