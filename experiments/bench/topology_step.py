"""One training step (forward + backward over a batch of complexes): HOPSE-M vs HOMP,
on MUTAG, ZINC and FreeSolv in one run.

Both models have the same width and depth and see the same padded batch of
cycle-lifted complexes of each data set; HOPSE uses its precomputed Hasse-route
encodings (a one-time preprocessing, outside the clock), HOMP passes messages
along the same routes. Both steps are one `eqx.filter_jit` of forward+backward
over the whole batch (`jax.vmap` over the graphs). Fields
`speedup_hopse_vs_homp_<dataset>` are HOMP time / HOPSE time per data set (the
paper reports up to 7x).
"""

from __future__ import annotations

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

QUICK = {"batch": 64, "width": 64, "depth": 2, "warmup": 2, "repeats": 10}
FULL = {"batch": 188, "width": 128, "depth": 4, "warmup": 3, "repeats": 30}
DATASETS = ("mutag", "zinc", "freesolv")


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
        data, _ = ts.prepare(f"bench-{ds}", graphs, ts.Encodings())
        batch = tp.standardize_encodings(data, tp.encoding_stats(data))
        y = jnp.asarray(labels)
        step = _step(batch, y, classes)
        for i, name in enumerate(ts.MODELS):
            model = ts.build(
                name,
                batch,
                classes,
                config["width"],
                config["depth"],
                jax.random.fold_in(jax.random.fold_in(key, d), i),
            )
            impls[f"{name}_{ds}"] = lambda step=step, model=model: step(model)
        pairs.append((f"hopse_{ds}", f"homp_{ds}"))
        fields[f"speedup_hopse_vs_homp_{ds}"] = lambda m, ds=ds: m[f"homp_{ds}"] / m[f"hopse_{ds}"]
        real = int(sum(np.asarray(m).sum() for m in batch.mask))
        padded = int(sum(np.asarray(m).size for m in batch.mask))
        size[f"graphs_{ds}"] = len(graphs)
        size[f"cells_real_{ds}"], size[f"cells_padded_{ds}"] = real, padded
    return Bench(
        impls=impls,
        ours=tuple(f"hopse_{ds}" for ds in DATASETS),
        size=size,
        pairs=tuple(pairs),
        fields=fields,
        interleave=True,
        notes="MUTAG (grakel wheel), ZINC (first MOSES SMILES, penalized logP), FreeSolv "
        "(train split); first `batch` graphs each, padded to that batch's largest complex; "
        "cycle lift, default encodings (standardised); float32; "
        "speedup_hopse_vs_homp_<ds> = HOMP time / HOPSE time.",
    )
