"""Device script: LAPLEX matvec and gradient at N = 1e8 (QUICK) / 1e9 (FULL) on one GPU.

Run with `python -m experiments bench laplex_gpu [--full]` on a GPU machine, or
`python -m experiments.bench.laplex_gpu [--full]` to also print the achieved
bandwidth. The matvec uses the Pallas chunked-scan kernel (`PallasScan`) on
pre-sorted anchors with a reused plan, float32, real kernel, one head, M = N.
The floor is ~20 bytes per element in float32 (read anchors, values and plan
indices, write the output); `achieved_fraction = (bytes / time) / peak`.
Refuses to run on CPU (it would take hours there).
"""

from __future__ import annotations

import argparse
import json

import jax
import jax.numpy as jnp

from experiments._api import Bench
from jaxlab import laplex
from kernels.laplex import PallasScan

NAME = "laplex_gpu"
PAPER = "P9"
DESCRIPTION = "LAPLEX matvec + gradient at N=1e8/1e9 on one GPU (Pallas kernel), bandwidth"

QUICK = {"n": 100_000_000, "warmup": 1, "repeats": 5, "peak_bandwidth_gbs": 4800.0,
         "bytes_per_element": 20}
FULL = {**QUICK, "n": 1_000_000_000, "repeats": 3}


def setup(config, key):
    if jax.default_backend() not in ("gpu", "cuda", "rocm", "tpu"):
        raise RuntimeError("laplex_gpu: needs a GPU/TPU backend; found "
                           f"{jax.default_backend()} (use the laplex_matvec benchmark on CPU)")
    n = int(config["n"])
    k1, k2 = jax.random.split(key)
    x = jnp.sort(jax.random.uniform(k1, (1, n), jnp.float32, 0, n), axis=1)
    v = jax.random.normal(k2, (n,), jnp.float32)
    a = jnp.full((1,), 0.5, jnp.float32)
    c = jnp.ones((1,), jnp.float32)
    plan = jax.block_until_ready(jax.jit(laplex.make_plan)(x, x))
    scan = PallasScan()
    mv = jax.jit(lambda v, x, a, c, p: laplex.matvec(v, x, x, a, None, c, plan=p, scan=scan))

    def loss(v, x, a, c, p):
        return jnp.sum(laplex.matvec(v, x, x, a, None, c, plan=p, scan=scan))

    vg = jax.jit(jax.value_and_grad(loss, argnums=(0, 1, 2, 3)))
    floor = jax.jit(lambda v, x: v * 2 + x[0])  # one fused pass: read 8 B, write 4 B
    return Bench(
        impls={"jaxlab_matvec": lambda: mv(v, x, a, c, plan),
               "jaxlab_matvec_grad": lambda: vg(v, x, a, c, plan),
               "device_stream": lambda: floor(v, x)},
        ours=("jaxlab_matvec", "jaxlab_matvec_grad"),
        size={"N": n, "dtype": "float32", "heads": 1, "device": str(jax.devices()[0]),
              "bytes_per_element": config["bytes_per_element"],
              "peak_bandwidth_gbs": config["peak_bandwidth_gbs"]},
        notes="achieved_fraction = bytes_per_element * N / median_s / peak_bandwidth",
    )


def main():
    from experiments._bench import run_bench

    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--full", action="store_true")
    p.add_argument("--out", default="results")
    args = p.parse_args()
    import sys

    rec = run_bench(sys.modules[__name__], out=args.out, full=args.full)
    n = rec["size"]["N"]
    bytes_ = rec["size"]["bytes_per_element"] * n
    peak = rec["size"]["peak_bandwidth_gbs"] * 1e9
    summary = {name: {"median_s": t["median_s"],
                      "achieved_gbs": bytes_ / t["median_s"] / 1e9,
                      "achieved_fraction": bytes_ / t["median_s"] / peak}
               for name, t in rec["timings"].items()}
    print(json.dumps({"N": n, "summary": summary}, indent=2))


if __name__ == "__main__":
    main()
