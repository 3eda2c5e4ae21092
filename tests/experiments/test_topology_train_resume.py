"""Issue 30: the topology experiments' `train` resumed after its last checkpoint.

The kill/resume case of topology_mutag (slow) found it: a resume that finds the training
complete runs no epoch, so its train time was 0 s and MUTAG's HOMP/HOPSE time ratio
divided by zero. No epoch timed is "not measured" (NaN, written as null), not 0 s; the
trained state is the checkpoint's.
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np

import jaxlab.topology as T
from experiments._harness import RunContext
from experiments.topology import _setup as ts

SPEC = T.EncodingSpec(lappe_k=2, rwse_steps=3, heat_times=(1.0,), elstatic=True, cycle_lengths=(3,))


def _data(n_graphs=4):
    edges = np.array(sorted([[0, 1], [1, 2], [0, 2], [2, 3], [3, 4], [4, 5], [3, 5]]))
    cxs, arrays = [], []
    for s in range(n_graphs):
        rng = np.random.default_rng(s)
        cx = T.cycle_lift(6, edges)
        feats = T.lift_features(cx, rng.normal(size=(6, 3)), rng.normal(size=(len(edges), 2)))
        cxs.append(cx)
        arrays.append((cx, feats, T.complex_encodings(cx, SPEC)))
    sizes = T.max_sizes(cxs)
    data = T.stack_complex_arrays(
        [T.complex_arrays(c, f, e, cell_sizes=sizes[0], edge_sizes=sizes[1]) for c, f, e in arrays]
    )
    return jax.tree_util.tree_map(
        lambda a: a.astype(jnp.float32) if a.dtype == jnp.float64 else a, data
    )


def test_resume_after_the_last_checkpoint_reports_no_train_time(tmp_path):
    data = _data()
    y = jnp.asarray(np.arange(4) % 2)
    w = jnp.ones(4, jnp.float32)
    model = ts.build("hopse", data, 2, 4, 1, jax.random.key(0))
    trainer = T.Trainer(model, loss="cross_entropy", batch_size=2, learning_rate=1e-2)

    def train(resume):
        ctx = RunContext("topology_test", out_dir=tmp_path, resume=resume)
        return ts.train(
            "t", trainer, model, data, y, w, jax.random.key(1), ctx=ctx, epochs=3, ckpt_every=2
        )

    state, secs, epoch_s, _ = train(resume=False)
    assert secs > 0
    assert epoch_s > 0
    again, secs, epoch_s, _ = train(resume=True)  # complete: no epoch left to run
    assert math.isnan(secs)
    assert math.isnan(epoch_s)
    for a, b in zip(
        jax.tree_util.tree_leaves(state), jax.tree_util.tree_leaves(again), strict=True
    ):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
