"""Device script: LAPLEX matvec and gradient at N = 1e8 (QUICK) / 1e9 (FULL) on one GPU.

`python -m experiments bench laplex_gpu [--full]` times one size through the
shared benchmark runner. `python -m experiments.bench.laplex_gpu --out DIR`
is the device check: it first verifies the Pallas path on the GPU against a
float64 dense oracle (values and gradients, real and phased, real gradients also with
tied anchors; `PallasBlockScan` also for M = N/2 targets tied with sources), then times every
implementation at N = 1e8 and N = 1e9 one by one (an out-of-memory error in
one is recorded, not fatal) and rewrites DIR/bench/laplex_gpu.json after each
step, so a run cut short still reports what it measured.

Implementations (float32, one head, M = N, t = s pre-sorted, reused plan, unless said):

- `block_matvec`, `block_matvec_grad`, `block_matvec_phased`,
  `block_matvec_phased_grad`: `PallasBlockScan`, the reduce-then-scan kernels in the
  natural order (issue #31; the gradient in v, anchors, a, c by the same kind of kernels,
  `pallas_sym_grad`; the phased (complex) matvec by `pallas_sym_matvec_phased`, its value
  and gradient in v, anchors, a, b, c by `pallas_sym_grad_phased`);
- `block_merge_matvec`, `block_merge_matvec_grad`: `PallasBlockScan` for M = N/2 targets
  `t` other than the N sources (sorted, reused plan): the symmetric kernels on the merged
  sequence of both (M + N elements; value and gradient in v, t, s, a, c), beside
  `pallas_merge_matvec`, `pallas_merge_matvec_grad`: `PallasScan`'s M != N path (scans
  with XLA gathers); `block_merge_phased_matvec`, `block_merge_phased_matvec_grad`: the
  same with a phase (the phased kernels on the merged sequence; gradient also in b);
- `pallas_matvec`, `pallas_matvec_grad` (value and gradient in v, anchors, a, c),
  `pallas_matvec_phased` (complex kernel): the previous Pallas chunked-scan kernel;
- `blocked_matvec` (`BlockedScan`, pure JAX) and `assoc_matvec`
  (`jax.lax.associative_scan`): the same operator through XLA's own scans;
- `plan_sort`: `make_plan` on shuffled anchors (the sort, from scratch); `lax_sort_pairs`
  (`jax.lax.sort` of (key, index) pairs), `argsort` (`jnp.argsort`): the device sorts it
  could use; `plan_reuse`: `update_plan` when the order did not change (the check only);
- `device_stream`: one fused elementwise pass reading two arrays and writing one
  (12 bytes/element), the bandwidth this GPU actually delivers.

The matvec's floor is ~20 bytes per element (read anchors and values, plan
indices, write the output): `achieved_gbs = 20 N / t` and
`achieved_fraction = achieved_gbs / peak` (H200: 4.8 TB/s).

Prepared for the next session with a device (not yet run on one; `--dry-run` runs the
whole script on CPU in interpret mode): `timeout 540 env PYTHONPATH=. python -m
experiments.bench.laplex_gpu --out docs/gpu-run` (then copy
`docs/gpu-run/bench/laplex_gpu.json` to `docs/gpu/laplex_gpu_block.json`). After the
sizes it sweeps the previous kernel's chunk lengths (`--chunks`) and `PallasBlockScan`'s
tiles for the matvec (`--tiles`) and for matvec + gradient (`--grad-tiles`) at the first
size.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import platform
import sys
import time
import traceback
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np

from experiments._harness import Bench, timing_stats
from jaxlab import laplex, write_json
from jaxlab.laplex import AssociativeScan, BlockedScan, PallasBlockScan, PallasScan

NAME = "laplex_gpu"
PAPER = "P9"
DESCRIPTION = "LAPLEX matvec + gradient at N=1e8/1e9 on one GPU (Pallas kernel), bandwidth"

QUICK = {
    "n": 100_000_000,
    "warmup": 1,
    "repeats": 5,
    "peak_bandwidth_gbs": 4800.0,
    "bytes_per_element": 20,
    "decay": 0.5,
    "phase": 0.3,
    "interpret": False,  # True: the Pallas kernels in interpret mode (runs on CPU)
}
FULL = {**QUICK, "n": 1_000_000_000, "repeats": 3}
# the smoke tier: every implementation once on CPU, the Pallas kernels in interpret mode
# (the tiles of `--dry-run`)
TINY = {"n": 1024, "warmup": 0, "repeats": 1, "interpret": True}
_GPU = ("gpu", "cuda", "rocm", "tpu")


def _problem(n, key, decay, phase):
    k1, k2, k3 = jax.random.split(key, 3)
    x = jnp.sort(jax.random.uniform(k1, (1, n), jnp.float32, 0, n), axis=1)
    v = jax.random.normal(k2, (n,), jnp.float32)
    a = jnp.full((1,), decay, jnp.float32)
    b = jnp.full((1,), phase, jnp.float32)
    c = jnp.ones((1,), jnp.float32)
    return x, v, a, b, c, k3


def setup(config, key, *, scan=None, block=None):
    """Bench at size `config["n"]`; `scan` and `block` override the previous and the new
    Pallas strategies (CPU dry runs); `config["interpret"]` runs both in interpret mode
    with the dry run's small tiles (any backend)."""
    if config.get("interpret", False):
        scan = PallasScan(chunk=64, interpret=True) if scan is None else scan
        block = PallasBlockScan(rows=8, lanes=16, interpret=True) if block is None else block
    if scan is None and jax.default_backend() not in _GPU:
        raise RuntimeError(
            "laplex_gpu: needs a GPU/TPU backend; found "
            f"{jax.default_backend()} (use the laplex_matvec benchmark on CPU)"
        )
    n = int(config["n"])
    x, v, a, b, c, k3 = _problem(n, key, float(config["decay"]), float(config["phase"]))
    plan = jax.block_until_ready(jax.jit(laplex.make_plan)(x, x))
    pallas = PallasScan() if scan is None else scan
    block = PallasBlockScan() if block is None else block

    def mv(strategy, phased=False):
        return jax.jit(
            lambda v, x, p: laplex.matvec(
                v, x, x, a, b if phased else None, c, plan=p, scan=strategy
            )
        )

    def value_and_grad(strategy):
        def loss(v, x, a, c, p):
            return jnp.sum(laplex.matvec(v, x, x, a, c=c, plan=p, scan=strategy))

        return jax.jit(jax.value_and_grad(loss, argnums=(0, 1, 2, 3)))

    mv_pallas, mv_phased = mv(pallas), mv(pallas, phased=True)
    mv_blocked, mv_assoc = mv(BlockedScan()), mv(AssociativeScan())
    mv_block, mv_block_phased = mv(block), mv(block, phased=True)
    vg, vg_block = value_and_grad(pallas), value_and_grad(block)

    def loss_phased(v, x, a, b, c, p):
        return jnp.sum(jnp.real(laplex.matvec(v, x, x, a, b, c, plan=p, scan=block)))

    vg_block_phased = jax.jit(jax.value_and_grad(loss_phased, argnums=(0, 1, 2, 3, 4)))

    merge_inputs = {}

    def merge_call(strategy, grad, phased=False):
        """M != N: M = N/2 sorted targets over the sources' range, a reused plan (made on
        the first, untimed warm-up call, so the other timings do not hold its memory);
        `phased`: the complex kernel (phase `b`, gradient also in `b`)."""

        def value(v, t, s, a, b, c, p):
            return laplex.matvec(v, t, s, a, b if phased else None, c, plan=p, scan=strategy)

        def loss(*args):
            return jnp.sum(jnp.real(value(*args)))

        argnums = (0, 1, 2, 3, 4, 5) if phased else (0, 1, 2, 3, 5)
        f = jax.jit(jax.value_and_grad(loss, argnums=argnums) if grad else value)

        def call():
            if not merge_inputs:
                k = jax.random.fold_in(key, 1)
                tm = jnp.sort(jax.random.uniform(k, (1, n // 2), jnp.float32, 0, n), axis=1)
                merge_inputs["t"] = tm
                merge_inputs["plan"] = jax.block_until_ready(jax.jit(laplex.make_plan)(tm, x))
            return f(v, merge_inputs["t"], x, a, b, c, merge_inputs["plan"])

        return call

    pairs = jax.jit(
        lambda t: jax.lax.sort((t[0], jnp.arange(t.shape[1], dtype=jnp.int32)), num_keys=1)
    )
    argsort = jax.jit(lambda t: jnp.argsort(t[0]))
    reuse = jax.jit(lambda p, t: laplex.update_plan(p, t, t))
    stream = jax.jit(lambda v, x: v * 2 + x[0])  # one fused pass: read 8 B, write 4 B
    sort = jax.jit(lambda t: laplex.make_plan(t, t))
    shuffled = {}

    def plan_sort():
        if "x" not in shuffled:  # made on first (untimed warm-up) call, kept for the rest
            shuffled["x"] = jax.block_until_ready(jax.random.permutation(k3, x, axis=1))
        return sort(shuffled["x"])

    def sorted_input(fn):
        def call():
            if "x" not in shuffled:
                shuffled["x"] = jax.block_until_ready(jax.random.permutation(k3, x, axis=1))
            return fn(shuffled["x"])

        return call

    impls = {
        "block_matvec": lambda: mv_block(v, x, plan),
        "block_matvec_grad": lambda: vg_block(v, x, a, c, plan),
        "block_matvec_phased": lambda: mv_block_phased(v, x, plan),
        "block_matvec_phased_grad": lambda: vg_block_phased(v, x, a, b, c, plan),
        "pallas_matvec": lambda: mv_pallas(v, x, plan),
        "pallas_matvec_grad": lambda: vg(v, x, a, c, plan),
        "device_stream": lambda: stream(v, x),
        "plan_sort": plan_sort,
        "lax_sort_pairs": sorted_input(pairs),
        "argsort": sorted_input(argsort),
        "plan_reuse": lambda: reuse(plan, x),
        "pallas_matvec_phased": lambda: mv_phased(v, x, plan),
        "blocked_matvec": lambda: mv_blocked(v, x, plan),
        "assoc_matvec": lambda: mv_assoc(v, x, plan),
        # last: at 1e9 the merged sequence (1.5e9) and its gradient may run out of memory
        "block_merge_matvec": merge_call(block, grad=False),
        "block_merge_matvec_grad": merge_call(block, grad=True),
        "pallas_merge_matvec": merge_call(pallas, grad=False),
        "pallas_merge_matvec_grad": merge_call(pallas, grad=True),
        "block_merge_phased_matvec": merge_call(block, grad=False, phased=True),
        "block_merge_phased_matvec_grad": merge_call(block, grad=True, phased=True),
    }
    bpe = float(config["bytes_per_element"])
    peak = float(config["peak_bandwidth_gbs"])
    fields = {
        "t_matvec_s": lambda m: m["pallas_matvec"],
        "t_matvec_grad_s": lambda m: m["pallas_matvec_grad"],
        "t_matvec_phased_s": lambda m: m["pallas_matvec_phased"],
        "t_blocked_s": lambda m: m["blocked_matvec"],
        "t_assoc_scan_s": lambda m: m["assoc_matvec"],
        "t_sort_s": lambda m: m["plan_sort"],
        "t_stream_s": lambda m: m["device_stream"],
        "speedup_vs_assoc_scan": lambda m: m["assoc_matvec"] / m["pallas_matvec"],
        "speedup_vs_blocked": lambda m: m["blocked_matvec"] / m["pallas_matvec"],
        "achieved_gbs_matvec": lambda m: bpe * n / m["pallas_matvec"] / 1e9,
        "achieved_fraction_matvec": lambda m: bpe * n / m["pallas_matvec"] / 1e9 / peak,
        "stream_gbs": lambda m: 12 * n / m["device_stream"] / 1e9,
        "ratio_to_stream_floor": lambda m: m["pallas_matvec"] / (m["device_stream"] * bpe / 12),
        "grad_over_matvec": lambda m: m["pallas_matvec_grad"] / m["pallas_matvec"],
        "t_block_matvec_s": lambda m: m["block_matvec"],
        "t_block_matvec_grad_s": lambda m: m["block_matvec_grad"],
        "block_speedup_vs_assoc_scan": lambda m: m["assoc_matvec"] / m["block_matvec"],
        "block_speedup_vs_previous_pallas": lambda m: m["pallas_matvec"] / m["block_matvec"],
        "block_achieved_fraction": lambda m: bpe * n / m["block_matvec"] / 1e9 / peak,
        "block_ratio_to_stream_floor": lambda m: (
            m["block_matvec"] / (m["device_stream"] * bpe / 12)
        ),
        "block_grad_over_matvec": lambda m: m["block_matvec_grad"] / m["block_matvec"],
        "t_block_matvec_phased_s": lambda m: m["block_matvec_phased"],
        "block_phased_over_real": lambda m: m["block_matvec_phased"] / m["block_matvec"],
        "block_phased_speedup_vs_previous": lambda m: (
            m["pallas_matvec_phased"] / m["block_matvec_phased"]
        ),
        "t_block_merge_matvec_s": lambda m: m["block_merge_matvec"],
        "t_block_merge_matvec_grad_s": lambda m: m["block_merge_matvec_grad"],
        "t_pallas_merge_matvec_s": lambda m: m["pallas_merge_matvec"],
        "t_pallas_merge_matvec_grad_s": lambda m: m["pallas_merge_matvec_grad"],
        "block_merge_speedup_vs_previous": lambda m: (
            m["pallas_merge_matvec"] / m["block_merge_matvec"]
        ),
        "block_merge_grad_speedup_vs_previous": lambda m: (
            m["pallas_merge_matvec_grad"] / m["block_merge_matvec_grad"]
        ),
        "block_merge_grad_over_matvec": lambda m: (
            m["block_merge_matvec_grad"] / m["block_merge_matvec"]
        ),
        # the merged sequence has M + N = 1.5 N elements (the symmetric one N)
        "block_merge_over_sym_matvec": lambda m: m["block_merge_matvec"] / m["block_matvec"],
        "t_block_merge_phased_matvec_s": lambda m: m["block_merge_phased_matvec"],
        "t_block_merge_phased_matvec_grad_s": lambda m: m["block_merge_phased_matvec_grad"],
        "block_merge_phased_over_real": lambda m: (
            m["block_merge_phased_matvec"] / m["block_merge_matvec"]
        ),
        "block_merge_phased_grad_over_phased": lambda m: (
            m["block_merge_phased_matvec_grad"] / m["block_merge_phased_matvec"]
        ),
        "block_phased_grad_t_s": lambda m: m["block_matvec_phased_grad"],
        "block_phased_grad_over_phased": lambda m: (
            m["block_matvec_phased_grad"] / m["block_matvec_phased"]
        ),
        "block_phased_grad_over_real_grad": lambda m: (
            m["block_matvec_phased_grad"] / m["block_matvec_grad"]
        ),
        "block_phased_grad_over_matvec": lambda m: (
            m["block_matvec_phased_grad"] / m["block_matvec"]
        ),
        "t_lax_sort_pairs_s": lambda m: m["lax_sort_pairs"],
        "t_argsort_s": lambda m: m["argsort"],
        "t_plan_reuse_s": lambda m: m["plan_reuse"],
        "sort_over_block_matvec": lambda m: m["plan_sort"] / m["block_matvec"],
        "fastest_sort_over_block_matvec": lambda m: (
            min(m["plan_sort"], m["lax_sort_pairs"], m["argsort"]) / m["block_matvec"]
        ),
    }
    return Bench(
        impls=impls,
        ours=(
            "block_matvec",
            "block_matvec_grad",
            "block_matvec_phased",
            "block_matvec_phased_grad",
            "block_merge_matvec",
            "block_merge_matvec_grad",
            "block_merge_phased_matvec",
            "block_merge_phased_matvec_grad",
            "pallas_matvec",
            "pallas_matvec_grad",
            "pallas_matvec_phased",
            "plan_sort",
        ),
        pairs=(
            ("block_matvec", "assoc_matvec"),
            ("block_matvec", "pallas_matvec"),
            ("block_merge_matvec", "pallas_merge_matvec"),
            ("pallas_matvec", "blocked_matvec"),
            ("pallas_matvec", "assoc_matvec"),
        ),
        fields=fields,
        size={
            "N": n,
            "dtype": "float32",
            "heads": 1,
            "M_merge": n // 2,
            "device": str(jax.devices()[0]),
            "bytes_per_element": bpe,
            "peak_bandwidth_gbs": peak,
        },
        notes=(
            "t = s pre-sorted with a reused plan (block_merge_* / pallas_merge_*: M = N/2 "
            "sorted targets, a reused plan); achieved_fraction = bytes_per_element * N "
            "/ median_s / peak_bandwidth; ratio_to_stream_floor compares with the measured "
            "device_stream pass scaled to the same bytes per element."
        ),
    )


def exactness(n, key, *, scan):
    """A Pallas strategy's matvec (real, phased) and gradients vs a float64 dense oracle
    at size n."""
    x, v, a, b, c, _ = _problem(n, key, 0.05, 0.3)
    x = x * (64.0 / n)  # ~64 decay lengths across the domain (mixed near/far couplings)
    out = {}
    xd, vd = np.asarray(x, np.float64), np.asarray(v, np.float64)
    for phased in (False, True):
        bb = b if phased else None
        y = laplex.matvec(v, x, x, a, bb, c, scan=scan)
        kd = np.asarray(
            laplex.dense_matrix(
                jnp.asarray(xd),
                jnp.asarray(xd),
                jnp.asarray(a, jnp.float64),
                None if bb is None else jnp.asarray(bb, jnp.float64),
                jnp.asarray(c, jnp.float64),
            )
        )
        ref = kd @ vd
        out["max_rel_err_phased" if phased else "max_rel_err_real"] = float(
            np.max(np.abs(np.asarray(y) - ref)) / np.max(np.abs(ref))
        )

    def f_fast(v, x, a, c):
        return jnp.sum(jnp.sin(laplex.matvec(v, x, x, a, c=c, scan=scan)))

    def f_dense(v, x, a, c):
        return jnp.sum(jnp.sin(laplex.dense_matrix(x, x, a, c=c) @ v))

    # tied anchors: x on a grid of 1/8 decay length (~16 anchors per tie run at 8192)
    for key, xs in (("max_grad_rel_err", x), ("max_grad_rel_err_ties", jnp.round(x * 8) / 8)):
        g = jax.grad(f_fast, argnums=(0, 1, 2, 3))(v, xs, a, c)
        args64 = [jnp.asarray(np.asarray(z, np.float64)) for z in (v, xs, a, c)]
        g_ref = jax.grad(f_dense, argnums=(0, 1, 2, 3))(*args64)
        out[key] = max(
            float(
                np.max(np.abs(np.asarray(gi, np.float64) - np.asarray(ri)))
                / np.max(np.abs(np.asarray(ri)))
            )
            for gi, ri in zip(g, g_ref, strict=True)
        )

    # the phased operator's gradient in every argument (v, anchors, a, b, c)
    def g_phased(matrix):
        def loss(v, x, a, b, c):
            return jnp.sum(jnp.sin(jnp.real(matrix(v, x, a, b, c))))

        return jax.grad(loss, argnums=(0, 1, 2, 3, 4))

    g = g_phased(lambda v, x, a, b, c: laplex.matvec(v, x, x, a, b, c, scan=scan))(v, x, a, b, c)
    args64 = [jnp.asarray(np.asarray(z, np.float64)) for z in (v, x, a, b, c)]
    dense = lambda v, x, a, b, c: laplex.dense_matrix(x, x, a, b, c) @ v.astype(jnp.complex128)  # noqa: E731
    g_ref = g_phased(dense)(*args64)
    out["max_grad_rel_err_phased"] = max(
        float(np.max(np.abs(np.asarray(gi, np.float64) - ri)) / np.max(np.abs(ri)))
        for gi, ri in zip(g, (np.asarray(r) for r in g_ref), strict=True)
    )
    return out


def exactness_merge(n, key, *, scan):
    """M = n/2 targets other than the n sources: value and gradients in v, t, s, a, c
    (real kernel) and in v, t, s, a, b, c (phased) vs a float64 dense oracle, with half
    the targets tied with sources."""
    x, v, a, b, c, _ = _problem(n, key, 0.05, 0.3)
    # sources on a grid of 1/8 decay length (tie runs); targets every other source
    # anchor, every second one moved off the grid by 1/32
    xg = jnp.round(x * (64.0 / n) * 8) / 8
    shift = jnp.where(jnp.arange(n // 2) % 2 == 0, 0.0, 1 / 32)[None, :]
    tg = (xg[:, ::2] + shift).astype(x.dtype)
    out = {}
    y = laplex.matvec(v, tg, xg, a, c=c, scan=scan)
    args64 = [jnp.asarray(np.asarray(z, np.float64)) for z in (v, tg, xg, a, c)]
    ref = np.asarray(laplex.dense_matrix(*args64[1:4], c=args64[4]) @ args64[0])
    out["max_rel_err_merge"] = float(np.max(np.abs(np.asarray(y) - ref)) / np.max(np.abs(ref)))

    def m_fast(v, t, s, a, c):
        return jnp.sum(jnp.sin(laplex.matvec(v, t, s, a, c=c, scan=scan)))

    def m_dense(v, t, s, a, c):
        return jnp.sum(jnp.sin(laplex.dense_matrix(t, s, a, c=c) @ v))

    g = jax.grad(m_fast, argnums=(0, 1, 2, 3, 4))(v, tg, xg, a, c)
    g_ref = jax.grad(m_dense, argnums=(0, 1, 2, 3, 4))(*args64)
    out["max_grad_rel_err_merge"] = max(
        float(
            np.max(np.abs(np.asarray(gi, np.float64) - np.asarray(ri)))
            / np.max(np.abs(np.asarray(ri)))
        )
        for gi, ri in zip(g, g_ref, strict=True)
    )
    # the phased operator (a phase b, real v) on the same anchors: value and gradients in
    # v, t, s, a, b, c
    y = laplex.matvec(v, tg, xg, a, b, c, scan=scan)
    b64 = jnp.asarray(np.asarray(b, np.float64))
    k64 = laplex.dense_matrix(*args64[1:4], b64, args64[4])
    ref = np.asarray(k64 @ args64[0].astype(k64.dtype))
    out["max_rel_err_merge_phased"] = float(
        np.max(np.abs(np.asarray(y) - ref)) / np.max(np.abs(ref))
    )

    def p_fast(v, t, s, a, b, c):
        y = laplex.matvec(v, t, s, a, b, c, scan=scan)
        return jnp.sum(jnp.sin(jnp.real(y)) + jnp.cos(jnp.imag(y)))

    def p_dense(v, t, s, a, b, c):
        k = laplex.dense_matrix(t, s, a, b, c)
        y = k @ v.astype(k.dtype)
        return jnp.sum(jnp.sin(jnp.real(y)) + jnp.cos(jnp.imag(y)))

    g = jax.grad(p_fast, argnums=(0, 1, 2, 3, 4, 5))(v, tg, xg, a, b, c)
    g_ref = jax.grad(p_dense, argnums=(0, 1, 2, 3, 4, 5))(*args64[:4], b64, args64[4])
    out["max_grad_rel_err_merge_phased"] = max(
        float(
            np.max(np.abs(np.asarray(gi, np.float64) - np.asarray(ri)))
            / np.max(np.abs(np.asarray(ri)))
        )
        for gi, ri in zip(g, g_ref, strict=True)
    )
    return out


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--out", default="results")
    p.add_argument("--sizes", default="1e8,1e9", help="comma-separated N values")
    p.add_argument("--check-n", type=int, default=8192)
    p.add_argument(
        "--chunks",
        default="64,128,512,1024",
        help="previous Pallas kernel's chunk lengths timed at the first size",
    )
    p.add_argument(
        "--tiles",
        default="64x16,32x32,128x16,256x8,128x32",
        help="PallasBlockScan rows x lanes timed at the first size",
    )
    p.add_argument(
        "--grad-tiles",
        default="64x16,32x16,16x16,64x8",
        help="PallasBlockScan rows x lanes timed for matvec + gradient at the first size",
    )
    p.add_argument(
        "--dry-run",
        action="store_true",
        help="CPU: Pallas in interpret mode at tiny sizes (tests the script)",
    )
    args = p.parse_args(argv)
    jax.config.update("jax_enable_x64", True)  # float64 oracle; the benchmark stays float32
    scan = PallasScan(chunk=64, interpret=True) if args.dry_run else None
    block = PallasBlockScan(rows=8, lanes=16, interpret=True) if args.dry_run else None
    record = {
        "bench": NAME,
        "paper": PAPER,
        "description": DESCRIPTION,
        "device": str(jax.devices()[0]),
        "backend": jax.default_backend(),
        "jax": jax.__version__,
        "machine": platform.platform(),
        "dry_run": args.dry_run,
        "exactness": {},
        "sizes": {},
    }
    path = Path(args.out) / "bench" / f"{NAME}.json"

    def save():
        write_json(path, record)
        print(f"[{time.strftime('%H:%M:%S')}] wrote {path}", flush=True)

    for name, strategy in (("block", block or PallasBlockScan()), ("pallas", scan or PallasScan())):
        try:
            record["exactness"][name] = exactness(args.check_n, jax.random.key(1), scan=strategy)
        except Exception:  # noqa: BLE001 - recorded, the timings still run
            record["exactness"][name] = {"error": traceback.format_exc()[-3000:]}
        if name == "block":  # M != N by the merged sequence (PallasScan's path: own tests)
            try:
                merge = exactness_merge(args.check_n, jax.random.key(2), scan=strategy)
            except Exception:  # noqa: BLE001
                merge = {"merge_error": traceback.format_exc()[-3000:]}
            record["exactness"][name].update(merge)
        print("exactness", name, record["exactness"][name], flush=True)
        save()
    for n in (int(float(s)) for s in args.sizes.split(",")):
        config = {**(FULL if n >= 10**9 else QUICK), "n": n}
        warmup, repeats = int(config.pop("warmup")), int(config.pop("repeats"))
        entry = record["sizes"][str(n)] = {"timings": {}, "errors": {}}
        try:
            bench = setup(config, jax.random.key(0), scan=scan, block=block)
        except Exception:  # noqa: BLE001
            entry["errors"]["setup"] = traceback.format_exc()[-3000:]
            save()
            continue
        entry["size"] = dict(bench.size)
        for impl, fn in bench.impls.items():
            t0 = time.perf_counter()
            try:
                entry["timings"][impl] = timing_stats(fn, warmup=warmup, repeats=repeats)
            except Exception:  # noqa: BLE001 - e.g. out of memory at 1e9
                entry["errors"][impl] = traceback.format_exc()[-2000:]
            print(
                f"N={n:.0e} {impl}: {entry['timings'].get(impl, 'ERROR')} "
                f"({time.perf_counter() - t0:.1f} s incl. compile)",
                flush=True,
            )
            med = {k: t["median_s"] for k, t in entry["timings"].items()}
            entry["fields"] = {}
            for name, f in bench.fields.items():
                with contextlib.suppress(KeyError):
                    entry["fields"][name] = float(f(med))
            save()
        del bench
    n = int(float(args.sizes.split(",")[0]))
    x, v, a, _, c, _ = _problem(n, jax.random.key(0), QUICK["decay"], QUICK["phase"])
    plan = jax.block_until_ready(jax.jit(laplex.make_plan)(x, x))

    def sweep(key, label, settings, make_call):
        """Time `make_call(setting)()` for each setting into `record[key]`, saving after each
        (an error is recorded, the sweep goes on)."""
        out = record[key] = {"N": n}
        for name, setting in settings:
            call = make_call(setting)
            try:
                out[name] = timing_stats(call, warmup=1, repeats=5)["median_s"]
            except Exception:  # noqa: BLE001
                out[name] = traceback.format_exc()[-1500:]
            print(f"{label} {name}: {out[name]}", flush=True)
            save()

    def matvec_call(strategy):
        f = jax.jit(lambda v, x, p: laplex.matvec(v, x, x, a, c=c, plan=p, scan=strategy))
        return lambda: f(v, x, plan)

    def grad_call(strategy):
        def loss(v, x, a, c, p):
            return jnp.sum(laplex.matvec(v, x, x, a, c=c, plan=p, scan=strategy))

        f = jax.jit(jax.value_and_grad(loss, argnums=(0, 1, 2, 3)))
        return lambda: f(v, x, a, c, plan)

    def tiles(spec):
        for tile in (t for t in spec.split(",") if t):
            rows, lanes = (int(z) for z in tile.split("x"))
            yield tile, PallasBlockScan(rows=rows, lanes=lanes, interpret=args.dry_run)

    chunks = [
        (str(k), PallasScan(chunk=k, interpret=args.dry_run))
        for k in (int(z) for z in args.chunks.split(",") if z)
    ]
    sweep("chunk_sweep", "chunk", chunks, matvec_call)
    sweep("tile_sweep", "tile", list(tiles(args.tiles)), matvec_call)
    sweep("grad_tile_sweep", "grad tile", list(tiles(args.grad_tiles)), grad_call)
    return record


if __name__ == "__main__":
    os.environ.setdefault("XLA_PYTHON_CLIENT_MEM_FRACTION", "0.95")
    main(sys.argv[1:])
