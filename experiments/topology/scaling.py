"""P18 claim: HOPSE scales linearly with the size of the complex and is faster than HOMP.

Random small-world graphs (connected Watts-Strogatz, k=6, p=0.1, so they have
many triangles) of growing size are clique-lifted to simplicial 2-complexes;
we time one jitted forward+backward pass (gradient of a scalar loss w.r.t. all
parameters) of HOPSE-M and of the HOMP baseline (same width/depth) on the whole
complex, median over repeats after warm-up. Encodings (RWSE on every Hasse
route, sparse products) are preprocessing and not timed.
"""

from __future__ import annotations

import dataclasses
import time

import equinox as eqx
import jax
import jax.numpy as jnp
import matplotlib.pyplot as plt
import networkx as nx
import numpy as np

from experiments._harness import Estimate, Result, RunContext, at_least, equivalent, log
from experiments.topology import _setup as ts
from jaxlab import topology as tp

NAME = "topology_scaling"
PAPER = "P18"
DESCRIPTION = "Forward+backward time vs number of cells: HOPSE-M linear, speedup over HOMP"


@dataclasses.dataclass(frozen=True)
class Config:
    """Settings of one run; the defaults are QUICK (2 CPU cores, minutes)."""

    nodes: tuple[int, ...] = (500, 1000, 2000, 4000, 8000)
    width: int = 64
    depth: int = 2
    repeats: int = 3
    # diag((D^-1 A)^t) needs the t-hop balls, which grow fast on small-world graphs
    rwse_steps: int = 4
    feature_dim: int = 8
    # the claims' bars, fixed before the run: "linear" is a log-log slope within
    # 1 +- linear_margin; "faster" a speed-up of at least min_speedup at the largest size
    linear_margin: float = 0.2
    min_speedup: float = 1.0


QUICK = Config()
TINY = Config(nodes=(60, 120), width=8, depth=1, repeats=1, rwse_steps=2)  # the smoke tier
FULL = Config(
    nodes=(1000, 2000, 4000, 8000, 16000, 32000, 64000, 128000), width=128, repeats=10, rwse_steps=8
)


def full_work(config) -> float:
    """Node passes per size: encodings (one per RWSE step), the fwd+bwd passes (warm-ups
    and repeats, scaled by width x depth), ~2e4 for the two models' compiles."""
    passes = (int(config.repeats) + 2) * int(config.width) * int(config.depth) / 64
    return float(sum(n * (1 + int(config.rwse_steps) + passes) + 2e4 for n in config.nodes))


def _complex_arrays(n: int, config: Config, seed: int):
    g = nx.connected_watts_strogatz_graph(n, 6, 0.1, seed=seed)
    edges = np.array(sorted(tuple(sorted(e)) for e in g.edges()), dtype=np.int64)
    cx = tp.clique_lift(n, edges, max_rank=2)
    spec = tp.EncodingSpec(
        lappe_k=0,
        rwse_steps=int(config.rwse_steps),
        heat_times=(),
        elstatic=False,
        cycle_lengths=(),
    )
    t0 = time.perf_counter()
    enc = tp.complex_encodings(cx, spec)
    enc_s = time.perf_counter() - t0
    x0 = np.random.default_rng(seed).normal(size=(n, int(config.feature_dim)))
    arr = tp.complex_arrays(cx, tp.lift_features(cx, x0), enc, dtype=np.float32)
    arr = tp.standardize_encodings(arr, tp.encoding_stats(arr))
    return cx, arr, enc_s


def _time_fwd_bwd(model, arr, repeats: int) -> float:
    @eqx.filter_jit
    def grad(m, a):
        return eqx.filter_grad(lambda mm: jnp.sum(mm(a) ** 2))(m)

    jax.block_until_ready(grad(model, arr))  # compile + warm-up
    jax.block_until_ready(grad(model, arr))
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        jax.block_until_ready(grad(model, arr))
        times.append(time.perf_counter() - t0)
    return float(np.median(times))


def _slope(cells, times) -> float:
    # fit over the larger half of the sizes: small sizes are dominated by fixed overhead
    k = max(2, (len(cells) + 1) // 2)
    x, y = np.log(np.asarray(cells[-k:], float)), np.log(np.asarray(times[-k:], float))
    return float(np.polyfit(x, y, 1)[0])


def run(config, key: jax.Array, ctx: RunContext) -> Result:
    rows = []
    for i, n in enumerate(config.nodes):
        cx, arr, enc_s = _complex_arrays(int(n), config, seed=i)
        t = {}
        for j, name in enumerate(ts.MODELS):
            model = ts.build(name, arr, 1, config.width, config.depth, jax.random.fold_in(key, j))
            t[name] = _time_fwd_bwd(model, arr, int(config.repeats))
        cells = sum(cx.sizes)
        rows.append(
            {
                "nodes": int(n),
                "cells": cells,
                "hopse": t["hopse"],
                "homp": t["homp"],
                "encode_s": enc_s,
            }
        )
        log.info(
            "n=%d cells=%d hopse %.4f s homp %.4f s (encode %.1f s)",
            n,
            cells,
            t["hopse"],
            t["homp"],
            enc_s,
        )
    cells = [r["cells"] for r in rows]
    th, tm = [r["hopse"] for r in rows], [r["homp"] for r in rows]
    metrics = {
        "loglog_slope_hopse": _slope(cells, th),
        "loglog_slope_homp": _slope(cells, tm),
        "speedup_vs_homp": tm[-1] / th[-1],
        "max_speedup_vs_homp": float(max(m / h for m, h in zip(tm, th, strict=True))),
        "largest_cells": cells[-1],
        "loglog_slope_encode": _slope(cells, [r["encode_s"] for r in rows]),
    }
    for r in rows:
        metrics[f"time_hopse_s/{r['cells']}"] = r["hopse"]
        metrics[f"time_homp_s/{r['cells']}"] = r["homp"]

    fig, ax = plt.subplots(figsize=(5, 3.5))
    ax.loglog(cells, th, "o-", label=f"HOPSE-M (slope {metrics['loglog_slope_hopse']:.2f})")
    ax.loglog(cells, tm, "s-", label=f"HOMP (slope {metrics['loglog_slope_homp']:.2f})")
    ref = np.asarray(cells, float)
    ax.loglog(ref, th[-1] * ref / ref[-1], "k:", label="linear")
    ax.set_xlabel("cells in the complex")
    ax.set_ylabel("forward+backward time (s)")
    ax.legend()
    fig.tight_layout()

    k = max(2, (len(cells) + 1) // 2)  # the sizes `_slope` fits
    claims = [
        equivalent(
            Estimate.point(
                metrics["loglog_slope_hopse"] - 1.0, n=k, method="least-squares log-log slope"
            ),
            "HOPSE log-log slope",
            "linear scaling (slope 1)",
            float(config.linear_margin),
            claim="HOPSE forward+backward time scales linearly with the number of cells",
            paper="scales linearly with the size of the combinatorial representation",
            detail=f"slope {metrics['loglog_slope_hopse']:.2f} (larger half of sizes)",
        ),
        at_least(
            Estimate.point(metrics["speedup_vs_homp"], method="one timing run"),
            float(config.min_speedup),
            null=f"HOMP (speed-up {config.min_speedup:g}x)",
            subject="HOMP / HOPSE time",
            claim="HOPSE is faster than HOMP at the largest complex",
            paper="up to 7x speedup over HOMP",
            detail=(
                f"{metrics['speedup_vs_homp']:.2f}x at {cells[-1]} cells "
                f"(HOMP slope {metrics['loglog_slope_homp']:.2f})"
            ),
        ),
    ]
    notes = (
        "Synthetic complexes: clique lifts of connected Watts-Strogatz graphs (k=6, p=0.1); "
        "random node features; RWSE on every Hasse route as HOPSE's encodings. Timed on this "
        "machine's default JAX device (float32); one complex per size, no batching. HOMP here is "
        "a sparse (gather + segment-sum) implementation, itself linear in the number of incidences."
    )
    return Result(metrics=metrics, claims=claims, figures={"scaling": fig}, notes=notes)
