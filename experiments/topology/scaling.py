"""P18 claim: HOPSE scales linearly with the size of the complex and is faster than HOMP.

Random small-world graphs (connected Watts-Strogatz, k=6, p=0.1, so they have
many triangles) of growing size are clique-lifted to simplicial 2-complexes;
we time one jitted forward+backward pass (gradient of a scalar loss w.r.t. all
parameters) of HOPSE-M and of the HOMP baseline (same width/depth) on the whole
complex, in `repeats` interleaved rounds (one pass of each per round) after warm-up;
the speed claim bootstraps the per-round HOMP / HOPSE ratios at the largest size, and
XLA's cost-analysis FLOP ratio of the same executables is reported with it. Encodings
(RWSE on every Hasse route, sparse products) are preprocessing and not timed.
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

from experiments._harness import (
    Result,
    RunContext,
    at_least,
    bootstrap,
    equivalent,
    interleaved_times,
    log,
    loglog_slope,
)
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
    # interleaved timing rounds per size (>= 5: the speed claim bootstraps them)
    repeats: int = 7
    # diag((D^-1 A)^t) needs the t-hop balls, which grow fast on small-world graphs
    rwse_steps: int = 4
    feature_dim: int = 8
    # the claims' bars, fixed before the run: "linear" is a log-log slope within
    # 1 +- linear_margin; "faster" a median HOMP / HOPSE time ratio at the largest size
    # whose bootstrap interval (two-sided 2 * speed_level - 1) lies at or above
    # 1 + speed_margin
    linear_margin: float = 0.2
    speed_margin: float = 0.1
    speed_level: float = 0.95
    # "linear" is a TOST at 1 - linear_level on the slope's two-sided 2 * linear_level - 1
    # percentile bootstrap interval (rounds resampled, the slope re-fitted per resample)
    linear_level: float = 0.95


QUICK = Config()
TINY = Config(nodes=(60, 120), width=8, depth=1, repeats=5, rwse_steps=2)  # the smoke tier
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


def _fwd_bwd(model, arr):
    """The compiled forward+backward pass of `model` on `arr` (a thunk) and XLA's
    cost-analysis FLOPs of it."""
    params, static = eqx.partition(model, eqx.is_array)

    def grad(p):
        return eqx.filter_grad(lambda mm: jnp.sum(mm(arr) ** 2))(eqx.combine(p, static))

    compiled = jax.jit(grad).lower(params).compile()
    return (lambda: compiled(params)), ts.compiled_flops(compiled)


def _slope(cells, times) -> float:
    # fit over the larger half of the sizes: small sizes are dominated by fixed overhead
    k = max(2, (len(cells) + 1) // 2)
    x, y = np.log(np.asarray(cells[-k:], float)), np.log(np.asarray(times[-k:], float))
    return float(np.polyfit(x, y, 1)[0])


def run(config, key: jax.Array, ctx: RunContext) -> Result:
    rows, rounds = [], {name: [] for name in ts.MODELS}
    ratios_last = np.array([])
    for i, n in enumerate(config.nodes):
        cx, arr, enc_s = _complex_arrays(int(n), config, seed=i)
        fns, flops = {}, {}
        for j, name in enumerate(ts.MODELS):
            model = ts.build(name, arr, 1, config.width, config.depth, jax.random.fold_in(key, j))
            fns[name], flops[name] = _fwd_bwd(model, arr)
        times = interleaved_times(fns, warmup=2, repeats=int(config.repeats))
        for name in ts.MODELS:
            rounds[name].append(times[name])
        ratios_last = np.asarray(times["homp"]) / np.asarray(times["hopse"])
        t = {name: float(np.median(v)) for name, v in times.items()}
        cells = sum(cx.sizes)
        rows.append(
            {
                "nodes": int(n),
                "cells": cells,
                "hopse": t["hopse"],
                "homp": t["homp"],
                "flop_ratio": flops["homp"] / flops["hopse"],
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
    seed = int(jax.random.randint(jax.random.fold_in(key, 99), (), 0, 2**31 - 1))
    slope_level = 2 * float(config.linear_level) - 1
    k = max(2, (len(cells) + 1) // 2)  # the larger half of the sizes, as `_slope`
    slopes = {
        name: loglog_slope(cells[-k:], rounds[name][-k:], level=slope_level, seed=seed + j)
        for j, name in enumerate(ts.MODELS)
    }
    metrics = {
        "loglog_slope_hopse": slopes["hopse"],
        "loglog_slope_homp": slopes["homp"],
        "speedup_vs_homp": tm[-1] / th[-1],
        # the per-round HOMP / HOPSE ratios at the largest size: median, bootstrap interval
        "speedup_largest": bootstrap(
            ratios_last, np.median, seed=0, level=2 * float(config.speed_level) - 1
        ),
        "flop_ratio_homp_over_hopse": rows[-1]["flop_ratio"],
        "max_speedup_vs_homp": float(max(m / h for m, h in zip(tm, th, strict=True))),
        "largest_cells": cells[-1],
        "loglog_slope_encode": _slope(cells, [r["encode_s"] for r in rows]),
    }
    for r in rows:
        metrics[f"time_hopse_s/{r['cells']}"] = r["hopse"]
        metrics[f"time_homp_s/{r['cells']}"] = r["homp"]

    fig, ax = plt.subplots(figsize=(5, 3.5))
    ax.loglog(cells, th, "o-", label=f"HOPSE-M (slope {slopes['hopse'].value:.2f})")
    ax.loglog(cells, tm, "s-", label=f"HOMP (slope {slopes['homp'].value:.2f})")
    ref = np.asarray(cells, float)
    ax.loglog(ref, th[-1] * ref / ref[-1], "k:", label="linear")
    ax.set_xlabel("cells in the complex")
    ax.set_ylabel("forward+backward time (s)")
    ax.legend()
    fig.tight_layout()

    sh = slopes["hopse"]
    claims = [
        equivalent(
            dataclasses.replace(sh, value=sh.value - 1.0, low=sh.low - 1.0, high=sh.high - 1.0),
            "HOPSE log-log slope",
            "linear scaling (slope 1)",
            float(config.linear_margin),
            claim="HOPSE forward+backward time scales linearly with the number of cells",
            paper="scales linearly with the size of the combinatorial representation",
            detail=f"slope {sh:.2f} (larger half of sizes; {config.repeats} rounds per size)",
        ),
        at_least(
            metrics["speedup_largest"],
            1.0 + float(config.speed_margin),
            null=(
                f"HOMP as fast (time ratio 1; bar 1 + margin {config.speed_margin:g}, fixed "
                "in the config)"
            ),
            subject="HOMP / HOPSE forward+backward time",
            claim="HOPSE is faster than HOMP at the largest complex",
            paper="up to 7x speedup over HOMP",
            detail=(
                f"median of {config.repeats} interleaved rounds at {cells[-1]} cells; XLA "
                f"FLOP ratio HOMP / HOPSE {metrics['flop_ratio_homp_over_hopse']:.2f} "
                f"(HOMP slope {slopes['homp']:.2f})"
            ),
            timing=True,
        ),
    ]
    notes = (
        "Synthetic complexes: clique lifts of connected Watts-Strogatz graphs (k=6, p=0.1); "
        "random node features; RWSE on every Hasse route as HOPSE's encodings. Timed on this "
        "machine's default JAX device (float32); one complex per size, no batching. HOMP here is "
        "a sparse (gather + segment-sum) implementation, itself linear in the number of incidences."
    )
    return Result(metrics=metrics, claims=claims, figures={"scaling": fig}, notes=notes)
