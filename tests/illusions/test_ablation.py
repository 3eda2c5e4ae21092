"""SAE ablation plumbing on a tiny random Llama: zero latents = the plain run, control
latents are disjoint and frequency-matched, option log-probs equal a full softmax."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxlab.illusions as il
import jaxlab.interp as ip
import jaxlab.lm as lm

from ..lm.lm_reference import tiny_llama


@pytest.fixture(scope="module")
def model():
    return lm.Transformer.random(tiny_llama(), key=jax.random.key(5))


def test_zero_ablation_equals_plain_run_and_real_ablation_changes_it(model, getkey):
    toks, mask = lm.pad_prompts([[3, 5, 7, 1], [2, 9, 11]])
    d = model.config.d_model
    sae = ip.TopKSAE(d, 4 * d, 4, key=getkey())
    plain = il.option_logprobs(model, toks, mask, [4, 6])
    none = il.option_logprobs(model, toks, mask, [4, 6], intervene=il.ablation(sae, [], layer=1))
    np.testing.assert_array_equal(np.asarray(none), np.asarray(plain))
    # oracle: log-softmax of the full forward's last logits
    logits, _ = lm.forward_batched(model, toks, mask=mask)
    ref = np.asarray(jax.nn.log_softmax(logits[:, -1], -1))[:, [4, 6]]
    np.testing.assert_allclose(np.asarray(plain), ref, rtol=1e-6)
    x = jax.random.normal(getkey(), (64, d), jnp.float32)
    z = np.asarray(jax.vmap(sae.encode)(x))
    busy = [int(i) for i in np.argsort(-(z > 0).sum(0))[:8]]
    abl = il.option_logprobs(model, toks, mask, [4, 6], intervene=il.ablation(sae, busy, layer=1))
    assert not np.allclose(np.asarray(abl), np.asarray(plain))


def test_matched_latents(getkey):
    density = np.array([0.5, 0.0, 0.1, 0.11, 0.3, 0.01, 0.09, 0.0])
    m = il.matched_latents(density, np.array([2, 0]), key=getkey())
    assert set(m.tolist()).isdisjoint({2, 0})
    assert len(set(m.tolist())) == 2
    assert m[0] in (3, 6)
    assert m[1] == 4
    r = il.matched_latents(density, np.array([2, 0]), key=getkey(), matched=False)
    assert set(r.tolist()).isdisjoint({2, 0})
    assert (density[r] > 0).all()
    with pytest.raises(ValueError, match="chosen"):
        il.matched_latents(density, np.array([9]), key=getkey())
    with pytest.raises(ValueError, match="option_ids"):
        il.option_logprobs(None, np.zeros((1, 2), np.int32), np.ones((1, 2), np.int32), [1])


def test_sae_codes_in_blocks_equal_one_block(monkeypatch, getkey):
    """illusions_sae reads its dense SAE codes in blocks of rows (FULL's would not fit in
    memory): the firing counts and chosen columns do not depend on the block size."""
    from experiments.illusions import sae as exp

    x = np.asarray(jax.random.normal(getkey(), (50, 8)), np.float32)
    sae = ip.TopKSAE(8, 16, 3, key=getkey(), b_dec=jnp.asarray(x))
    whole = np.asarray(jax.vmap(sae.encode)(jnp.asarray(x * 0.5)))
    monkeypatch.setattr(exp, "ENCODE_ROWS", 7)
    fired = sum(exp._blocks(sae, x, 0.5, lambda z: np.asarray(z > 0).sum(0)))
    np.testing.assert_array_equal(fired / x.shape[0], (whole > 0).mean(0))
    cols = np.concatenate(exp._blocks(sae, x, 0.5, lambda z: np.asarray(z[:, [1, 4]])))
    np.testing.assert_allclose(cols, whole[:, [1, 4]], rtol=1e-6, atol=1e-6)
