"""topology's encodings refuse a complex adjacency (the contract fuzz of issue #59: its
imaginary part was dropped with only a ComplexWarning)."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

import jaxlab.topology as tp
from jaxlab.topology._encodings import RWSE_MAX_STEPS

PATH3 = np.array([[0.0, 1.0, 0.0], [1.0, 0.0, 1.0], [0.0, 1.0, 0.0]])


def test_encodings_refuse_a_complex_adjacency():
    # by hand: from an end, 2 steps return with probability 1 * 1/2; from the middle, 1
    np.testing.assert_allclose(tp.rwse(PATH3, 2)[:, 1], [0.5, 1.0, 0.5])
    for adj in (PATH3 + 1j, sp.csr_array(PATH3 + 1j)):
        with pytest.raises(ValueError, match="adj: expected real weights"):
            tp.rwse(adj, 2)
        with pytest.raises(ValueError, match="adj: expected real weights"):
            tp.lap_pe(adj, 1)


def test_huge_steps_and_k_are_refused_before_allocation():
    """Issue #59 (contract fuzz): steps=10**9 / k=10**9 allocated [n, steps] / [n, 2k]."""
    assert tp.lap_pe(PATH3, 1).shape == (3, 2)
    with pytest.raises(ValueError, match=f"^steps: expected at most {RWSE_MAX_STEPS}"):
        tp.rwse(PATH3, 10**9)
    with pytest.raises(ValueError, match="^k: needs about"):
        tp.lap_pe(PATH3, 10**12)


def test_lift_features_refuses_nan_strings_and_complex():
    """Issue #59 round 3: before, NaN/inf edge features were lifted silently, a string
    failed with NumPy's "could not convert string to float" and complex features were
    cast to real with a ComplexWarning."""
    import numpy as np

    from jaxlab.topology import cycle_lift, lift_features

    cx = cycle_lift(4, np.array([[0, 1], [1, 2], [2, 3], [3, 0], [0, 2]]), max_length=4)
    x0, ef = np.ones((4, 3)), np.ones((5, 2))
    assert [x.shape for x in lift_features(cx, x0, ef)] == [(4, 3), (5, 5), (2, 5)]
    bad = ef.copy()
    bad[2, 1] = np.nan
    with pytest.raises(ValueError, match="^edge_features: expected finite"):
        lift_features(cx, x0, bad)
    with pytest.raises(ValueError, match="^node_features: expected"):
        lift_features(cx, "abc")
    with pytest.raises(ValueError, match="^node_features: expected real"):
        lift_features(cx, x0 + 1j)


def test_lift_sizes_are_bounded():
    """Issue #59 round 3: a node count or a rank of 10**9 would build 10**9 Python sets
    or empty ranks; both are refused before any work."""
    import numpy as np

    from jaxlab.topology import clique_lift

    with pytest.raises(ValueError, match="^num_nodes: needs about"):
        clique_lift(10**9, np.zeros((0, 2), int))
    with pytest.raises(ValueError, match="^max_rank: needs about"):
        clique_lift(3, np.array([[0, 1]]), max_rank=10**12)


def test_issue59_round_bad_inputs_are_refused_naming_the_argument():
    """Issue #59 (fuzz of the rest of topology): each call returned garbage or failed
    without naming its argument before the check (source rank -1 for a node's boundary,
    NaN features packed silently, batch_size 0 taken, huge encoding sizes named `k`)."""
    from jaxlab.topology._encodings import LAPPE_MAX_K

    with pytest.raises(ValueError, match="^rank: expected >= 1"):
        tp.source_rank(0, "boundary")
    with pytest.raises(ValueError, match="^route:"):
        tp.source_rank(1, "sideways")
    with pytest.raises(ValueError, match="^rank:"):
        tp.source_rank(-1, "up")
    edges = np.array([[0, 1], [1, 2], [0, 2]])
    cx = tp.cycle_lift(3, edges, max_length=3)
    feats = list(tp.lift_features(cx, np.ones((3, 2))))
    assert tp.complex_arrays(cx, feats).x[0].shape == (3, 2)
    feats[1] = feats[1].copy()
    feats[1][0, 0] = np.nan
    with pytest.raises(ValueError, match=r"^features\[1\]: expected finite"):
        tp.complex_arrays(cx, feats)
    with pytest.raises(ValueError, match="^lappe_k: expected at most"):
        tp.EncodingSpec(lappe_k=LAPPE_MAX_K + 1)
    with pytest.raises(ValueError, match="^rwse_steps: expected at most"):
        tp.EncodingSpec(rwse_steps=RWSE_MAX_STEPS + 1)
    with pytest.raises(ValueError, match="^n_train:"):
        tp.load_zinc_subset(0, 1, 1)
    with pytest.raises(ValueError, match=r"^n_train \+ n_val \+ n_test: expected at most"):
        tp.load_zinc_subset(1_000_000, 1_000_000, 1)


def test_training_refuses_nan_targets_huge_steps_and_a_zero_batch():
    import jax

    from jaxlab import MAX_RUN_STEPS

    edges = np.array([[0, 1], [1, 2], [0, 2]])
    cx = tp.cycle_lift(3, edges, max_length=3)
    arr = tp.complex_arrays(cx, tp.lift_features(cx, np.ones((3, 2))))
    data = tp.stack_complex_arrays([arr, arr])
    model = tp.HOMP([x.shape[-1] for x in data.x], 1, width=4, depth=1, key=jax.random.key(0))
    trainer = tp.Trainer(model, loss="mse", batch_size=2)
    key = jax.random.key(1)
    with pytest.raises(ValueError, match="^targets: expected finite"):
        tp.fit(trainer, model, data, np.array([np.nan, 1.0]), key=key, steps=1)
    with pytest.raises(ValueError, match="^weights: expected values in"):
        tp.fit(trainer, model, data, np.ones(2), -np.ones(2), key=key, steps=1)
    with pytest.raises(ValueError, match="^steps: expected at most"):
        tp.fit(trainer, model, data, np.ones(2), key=key, steps=MAX_RUN_STEPS + 1)
    with pytest.raises(ValueError, match="^batch_size: expected a positive integer"):
        tp.predict(model, data, batch_size=0)


def test_standardize_encodings_of_stacked_data_under_strict_rank_promotion():
    """Issue #59 (its fuzz entry): stacked `[g, n, d]` encodings minus a `(d,)` mean
    relied on rank promotion (an error where it is 'raise', as in jaxlab's tests)."""
    import jax

    edges = np.array([[0, 1], [1, 2], [0, 2]])
    cx = tp.cycle_lift(3, edges, max_length=3)
    spec = tp.EncodingSpec(lappe_k=1, rwse_steps=2, heat_times=(1.0,), cycle_lengths=(3,))
    arr = tp.complex_arrays(
        cx, tp.lift_features(cx, np.ones((3, 2))), tp.complex_encodings(cx, spec)
    )
    data = tp.stack_complex_arrays([arr, arr])
    with jax.numpy_rank_promotion("raise"):
        out = tp.standardize_encodings(data, tp.encoding_stats(data))
    assert out.enc[0][0].shape == data.enc[0][0].shape
    assert np.all(np.isfinite(np.asarray(out.enc[0][0])))
