"""Benchmarks: every implementation timed in one process, medians after warm-up, ratios."""

from __future__ import annotations

import statistics
import time
from pathlib import Path
from types import ModuleType
from typing import Any

import jax

from jaxlab import progress_bar
from jaxlab._core import write_json

from ._api import Bench, log
from ._provenance import config_hash, machine_info, provenance
from ._runner import jax_info

__all__ = [
    "interleaved_stats",
    "interleaved_times",
    "run_bench",
    "time_callable",
    "timing_stats",
]


def time_callable(fn, *, warmup: int, repeats: int, desc: str = "") -> list[float]:
    """Wall-clock seconds of `repeats` calls of `fn` after `warmup` untimed calls (a
    progress bar over the calls, labelled `desc`)."""
    bar = progress_bar(range(warmup + repeats), desc=desc or "timing")
    times = []
    for i in bar:
        t0 = time.perf_counter()
        jax.block_until_ready(fn())
        if i >= warmup:
            times.append(time.perf_counter() - t0)
    return times


def timing_stats(fn, *, warmup: int, repeats: int, desc: str = "") -> dict[str, float | int]:
    """`time_callable` summarised: median, min and max seconds, repeats, warmup."""
    return _stats(time_callable(fn, warmup=warmup, repeats=repeats, desc=desc), warmup, repeats)


def _stats(ts, warmup, repeats):
    return {
        "median_s": statistics.median(ts),
        "min_s": min(ts),
        "max_s": max(ts),
        "repeats": repeats,
        "warmup": warmup,
    }


def interleaved_times(fns, *, warmup: int, repeats: int) -> dict[str, list[float]]:
    """Wall-clock seconds of each callable in `repeats` rounds (one call of each per
    round, after `warmup` untimed calls of each): `name -> [seconds per round]`.

    Every implementation then sees the same drifts of a shared machine (memory
    bandwidth taken by neighbours, frequency changes), so the per-round ratios
    `t_a[r] / t_b[r]` are paired measurements (bootstrap them for an interval).
    """
    # one progress bar over every call: warm-up calls of each, then the timed rounds
    calls = [(n, False) for n in fns for _ in range(warmup)]
    calls += [(n, True) for _ in range(repeats) for n in fns]
    ts = {name: [] for name in fns}
    for name, timed in progress_bar(calls, desc="bench calls (warm-up, then rounds)"):
        t0 = time.perf_counter()
        jax.block_until_ready(fns[name]())
        if timed:
            ts[name].append(time.perf_counter() - t0)
    return ts


def interleaved_stats(fns, *, warmup: int, repeats: int) -> dict[str, dict[str, float | int]]:
    """`timing_stats` for several callables timed in rounds (`interleaved_times`), so
    their ratios are robust to the drifts of a shared machine."""
    ts = interleaved_times(fns, warmup=warmup, repeats=repeats)
    return {name: _stats(t, warmup, repeats) for name, t in ts.items()}


def run_bench(
    mod: ModuleType,
    *,
    out: str | Path = "results",
    full: bool = False,
    seed: int = 0,
    tiny: bool = False,
) -> dict[str, Any]:
    """Run benchmark `mod` and write DIR/bench/NAME.json; returns its content.

    `tiny`: QUICK updated with the module's TINY (the smoke tier: every implementation
    runs once at a tiny size; its timings are not results)."""
    if full and tiny:
        raise ValueError("full and tiny: choose one scale")
    if tiny and not hasattr(mod, "TINY"):
        raise ValueError(f"{mod.NAME} declares no TINY config (the smoke tier's size)")
    t0 = time.perf_counter()
    config = dict(mod.FULL) if full else {**mod.QUICK, **(mod.TINY if tiny else {})}
    hashed = config_hash(config)  # warm-up and repeats included
    warmup = int(config.pop("warmup", 2))
    repeats = int(config.pop("repeats", 7))
    bench = mod.setup(config, jax.random.key(seed))
    if not isinstance(bench, Bench):
        raise TypeError(f"{mod.NAME}.setup must return experiments._harness.Bench")
    unknown = [o for o in bench.ours if o not in bench.impls]
    if unknown:
        raise ValueError(f"{mod.NAME}: ours names {unknown} not among impls {list(bench.impls)}")
    if bench.interleave:
        log.info(
            "bench %s: timing %s in %d interleaved rounds", mod.NAME, list(bench.impls), repeats
        )
        timings = interleaved_stats(bench.impls, warmup=warmup, repeats=repeats)
    else:
        timings = {}
        for impl, fn in bench.impls.items():
            log.info("bench %s: timing %s", mod.NAME, impl)
            timings[impl] = timing_stats(fn, warmup=warmup, repeats=repeats, desc=impl)
    pairs = bench.pairs or tuple(
        (ours, peer) for ours in bench.ours for peer in bench.impls if peer not in bench.ours
    )
    bad = [p for p in pairs if p[0] not in bench.impls or p[1] not in bench.impls]
    if bad:
        raise ValueError(f"{mod.NAME}: pairs {bad} name implementations not in {list(bench.impls)}")
    ratios = {
        f"{ours}_vs_{peer}": timings[peer]["median_s"] / timings[ours]["median_s"]
        for ours, peer in pairs
    }
    medians = {impl: t["median_s"] for impl, t in timings.items()}
    fields = {name: float(fn(medians)) for name, fn in bench.fields.items()}
    record = {
        "bench": mod.NAME,
        "paper": mod.PAPER,
        "description": mod.DESCRIPTION,
        "config": "full" if full else "tiny" if tiny else "quick",
        "config_values": config,
        "config_hash": hashed,
        "seed": seed,
        "size": dict(bench.size),
        "ours": list(bench.ours),
        "timings": timings,
        "ratios": ratios,
        "ratio_meaning": "peer median time / ours median time (>1: ours is faster)",
        "interleaved": bench.interleave,
        "fields": fields,
        "notes": bench.notes,
        "runtime_s": time.perf_counter() - t0,
        "jax": jax_info(),
        "machine": machine_info(),
        "provenance": provenance(),
    }
    write_json(Path(out) / "bench" / f"{mod.NAME}.json", record)
    return record
