"""interp.fit_sae refuses NaN activations anywhere in a store (issue #59: only the first
buffer was checked, and a NaN row later trained the SAE to all-NaN silently) and a loss
that turns non-finite, naming the input and the step."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

import jaxlab.interp as ip
import jaxlab.lm as lm

from ..lm.lm_reference import tiny_llama


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    model = lm.Transformer.random(tiny_llama(), key=jax.random.key(0))
    rng = np.random.default_rng(0)
    texts = [rng.integers(0, 61, 20).tolist() for _ in range(12)]
    return lm.collect(model, None, texts, layers=[1], path=tmp_path_factory.mktemp("s") / "st")


def _poison(store, rows):
    """A copy of the store's single shard with NaN at `rows` (written into the .npy)."""
    (shard,) = store.shards()
    path = next(p for p in store.path.glob("*.npy") if np.load(p, mmap_mode="r").ndim == 2)
    a = np.load(path, mmap_mode="r+")
    assert a.shape == shard.shape
    a[rows] = np.nan
    a.flush()
    return type(store)(store.path)


def test_nan_rows_beyond_the_first_buffer_raise_naming_the_buffer(store):
    sae = ip.TopKSAE(24, 48, 4, key=jax.random.key(1))
    key = jax.random.key(2)
    kw = dict(key=key, steps=12, batch_size=16, buffer_size=32, optimizer=optax.adam(1e-3))
    trained, _, hists = ip.fit_sae(store, sae, **kw)
    assert np.isfinite(np.asarray(trained.W_enc)).all()
    assert len(hists) == 6  # 2 steps per 32-row buffer
    # the rows of the first buffer (the same stream fit_sae draws): every other row -> NaN
    first = np.asarray(next(store.batches(32, key=jax.random.fold_in(key, 0), buffer=65536)))
    rows = store.array()
    in_first = (rows[:, None, :] == first[None, :, :]).all(-1).any(1)
    assert in_first.sum() == 32
    bad = _poison(store, np.flatnonzero(~in_first))
    with pytest.raises(ValueError, match=r"source: buffer 1 \(from step 2\): expected finite"):
        ip.fit_sae(bad, sae, **kw)  # trained to an all-NaN SAE before


def test_a_loss_that_turns_nan_names_the_step():
    x = jnp.asarray(np.random.default_rng(0).normal(size=(256, 8)), jnp.float32)
    sae = ip.ReLUSAE(8, 16, key=jax.random.key(0))
    ok, _, _ = ip.fit_sae(x, sae, key=jax.random.key(1), steps=3, batch_size=32)
    assert np.isfinite(np.asarray(ok.W_dec)).all()
    # a learning rate of inf makes the first update NaN: the loss of step 1 is NaN
    with pytest.raises(ValueError, match=r"source: the training loss became non-finite at step 1"):
        ip.fit_sae(x, sae, key=jax.random.key(1), steps=3, batch_size=32, optimizer=optax.sgd(1e30))


def test_fit_sae_checkpointers_go_where_the_source_needs_them(store, tmp_path):
    """An array source checkpoints through its driver; a store, one run per buffer, through
    `buffer_checkpointer` (a driver checkpointer there would be shared by every buffer)."""
    from jaxlab import Checkpointer, Driver

    x = jnp.asarray(np.random.default_rng(0).normal(size=(64, 24)), jnp.float32)
    sae = ip.TopKSAE(24, 48, 4, key=jax.random.key(1))
    with pytest.raises(ValueError, match="^buffer_checkpointer: only for an activation store"):
        ip.fit_sae(x, sae, key=jax.random.key(2), steps=2, buffer_checkpointer=lambda b: None)
    with pytest.raises(ValueError, match="^buffer_checkpointer: expected a callable"):
        ip.fit_sae(x, sae, key=jax.random.key(2), steps=2, buffer_checkpointer=3)  # type: ignore[arg-type]
    ck = Checkpointer(tmp_path / "sae.eqx", resume=True)
    with pytest.raises(ValueError, match="^driver: a store run is one run per buffer"):
        ip.fit_sae(store, sae, key=jax.random.key(2), steps=2, driver=Driver(checkpointer=ck))
    # the array source resumes from its driver's checkpointer to the same SAE
    kw = dict(key=jax.random.key(2), steps=4, batch_size=16, optimizer=optax.adam(1e-3))
    ref, _, _ = ip.fit_sae(x, sae, **kw)
    ip.fit_sae(x, sae, driver=Driver(chunk=2, checkpointer=ck), **kw)
    again, _, (hist,) = ip.fit_sae(x, sae, driver=Driver(chunk=2, checkpointer=ck), **kw)
    assert hist.steps_done == 4
    np.testing.assert_array_equal(np.asarray(again.W_dec), np.asarray(ref.W_dec))
