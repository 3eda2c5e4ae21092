"""One training step (forward + backward over a batch of MUTAG complexes): HOPSE-M vs HOMP.

Both models have the same width and depth and see the same padded batch of
cycle-lifted MUTAG complexes; HOPSE uses its precomputed Hasse-route
encodings, HOMP passes messages along the same routes. Ratio
`hopse_vs_homp` is HOMP time / HOPSE time (the paper reports up to 7x).
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
DESCRIPTION = "Forward+backward over a MUTAG batch: HOPSE-M vs HOMP (same width/depth)"

QUICK = {"batch": 64, "width": 64, "depth": 2, "warmup": 2, "repeats": 10}
FULL = {"batch": 188, "width": 128, "depth": 4, "warmup": 3, "repeats": 30}


def setup(config: dict, key: jax.Array) -> Bench:
    graphs, labels = tp.load_mutag()
    data, _ = ts.prepare("mutag", graphs, ts.Encodings())
    data = tp.standardize_encodings(data, tp.encoding_stats(data))
    b = int(config["batch"])
    batch = jax.tree_util.tree_map(lambda a: a[:b], data)
    y = jnp.asarray(labels[:b])
    impls = {}
    for i, name in enumerate(ts.MODELS):
        model = ts.build(
            name, data, 2, config["width"], config["depth"], jax.random.fold_in(key, i)
        )

        @eqx.filter_jit
        def step(m, batch=batch):
            def loss(mm):
                out = jax.vmap(mm)(batch)
                return jnp.mean(
                    jax.nn.logsumexp(out, -1) - jnp.take_along_axis(out, y[:, None], axis=1)[:, 0]
                )

            return eqx.filter_value_and_grad(loss)(m)

        impls[name] = lambda step=step, model=model: step(model)
    return Bench(
        impls=impls,
        ours=("hopse",),
        size={
            "graphs": b,
            "width": int(config["width"]),
            "depth": int(config["depth"]),
            "cells_padded": int(sum(np.asarray(m).shape[-1] for m in data.mask)) * b,
        },
        notes="MUTAG (grakel wheel), cycle lift, default encodings; float32; ratio homp/hopse "
        "= HOPSE's speedup.",
    )
