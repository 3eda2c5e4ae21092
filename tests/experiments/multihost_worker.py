"""One process of `test_multihost.py`'s jobs (not a test module; run as a script).

    python tests/experiments/multihost_worker.py OUT MODE [python -m experiments flags...]

Runs `python -m experiments run multihost_probe --tiny --out OUT/results ...` through the
real command line (`experiments.__main__.main`: flag parsing, `jax.distributed` start,
the runner's only-process-0-writes, the job's failure handling), with the registry's
lookup pointed at the probe experiment below: a `jaxlab.sweep` over 7 keys (not a
multiple of the device count: padding) and a `cached_items` build of 5 items in this
process's own cache folder OUT/cache-<process> (as on hosts without a shared filesystem),
then a restart of the build after some files were removed.

MODE "ok": run; then write OUT/worker-<process>.npz (sweep output, items, the items this
process computed in each build). MODE "kill": process 1 SIGKILLs itself after the
sweep (the job's first cross-process collective), before the cache build's.
"""

from __future__ import annotations

import dataclasses
import os
import signal
import sys
import types
from pathlib import Path

import jax

jax.config.update("jax_cpu_collectives_implementation", "gloo")

OUT = Path(sys.argv[1])
MODE = sys.argv[2]
N_ITEMS = 5
captured: dict = {}


@dataclasses.dataclass(frozen=True)
class Config:
    batch: int = 7


def _fn(key):
    w = jax.random.normal(key, (16, 16))
    return {"y": jax.numpy.tanh(w @ jax.numpy.sin(w[0])).sum(), "v": w[:3, 0], "k": key}


def _run(config, key, ctx):
    import jax.numpy as jnp
    import matplotlib.pyplot as plt
    import numpy as np

    from experiments._harness import Result, at_least, cached_items, t_mean
    from jaxlab import sweep

    out = sweep(_fn, jax.random.split(key, config.batch))
    if MODE == "kill" and jax.process_index() == 1:
        os.kill(os.getpid(), signal.SIGKILL)  # after one collective, before the cache build
    cache = OUT / f"cache-{jax.process_index()}"
    cache.mkdir(parents=True, exist_ok=True)
    paths = [cache / f"item{i}.npz" for i in range(N_ITEMS)]
    computed: list[list[int]] = [[], []]

    def compute(i, build):
        computed[build].append(i)
        x = jax.random.uniform(ctx.key("item", i), (3 + i,))
        return {"x": np.asarray(jnp.cumsum(x)), "i": np.asarray(i)}

    items = cached_items(paths, lambda i: compute(i, 0))
    # a restart: each process has lost some files (item 2 by both: recomputed once; 1 and 4
    # by one process: read by the other and sent back)
    from jax.experimental import multihost_utils

    if jax.process_count() > 1:
        multihost_utils.sync_global_devices("before removing")
        for i in (1, 2) if jax.process_index() == 0 else (2, 4):
            paths[i].unlink()
        multihost_utils.sync_global_devices("after removing")
    else:
        paths[2].unlink()
    again = cached_items(paths, lambda i: compute(i, 1))
    captured.update(
        y=np.asarray(out["y"]),
        v=np.asarray(out["v"]),
        k=np.asarray(jax.random.key_data(out["k"])),
        items=np.stack([np.pad(it["x"], (0, N_ITEMS + 3 - it["x"].size)) for it in items]),
        again=np.stack([np.pad(it["x"], (0, N_ITEMS + 3 - it["x"].size)) for it in again]),
        files=np.asarray([p.exists() for p in paths]),
        computed0=np.asarray(computed[0], dtype=np.int64),
        computed1=np.asarray(computed[1], dtype=np.int64),
    )
    fig, ax = plt.subplots()
    ax.plot(np.asarray(out["y"]))
    ys = np.asarray(out["y"], dtype=np.float64)
    claim = at_least(
        t_mean(ys), -1e9, null="a bar no finite mean misses", claim="probe", paper="none"
    )
    return Result(
        metrics={"y_sum": float(ys.sum()), "y": t_mean(ys)}, claims=[claim], figures={"sweep": fig}
    )


probe = types.ModuleType("multihost_probe")
probe.__dict__.update(
    NAME="multihost_probe",
    PAPER="P1",
    DESCRIPTION="multi-process probe: a sweep and a cache build",
    Config=Config,
    QUICK=Config(),
    TINY=Config(),
    FULL=Config(),
    run=_run,
)


def main() -> int:
    import numpy as np

    import experiments.__main__ as cli
    from experiments._harness import _registry

    _registry.find = lambda name, bench=False, package="experiments": probe  # the probe only
    argv = ["run", "multihost_probe", "--tiny", "--out", str(OUT / "results"), *sys.argv[3:]]
    status = cli.main(argv)
    if status == 0 and captured:
        np.savez(OUT / f"worker-{jax.process_index()}.npz", **captured)
    return status


if __name__ == "__main__":
    sys.exit(main())
