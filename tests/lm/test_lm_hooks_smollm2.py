"""TransformerLens conveniences on the real SmolLM2-135M (data wheel `smollm2`):
`to_str_tokens`, the hook-name cache against the site API, and patching's exact oracles."""

from __future__ import annotations

import numpy as np
import pytest

import jaxlab.lm as lm

TARGET = "The capital of France is"
SOURCE = "The capital of Italy is"


@pytest.fixture(scope="module")
def smollm2():
    return lm.load("smollm2")


def test_to_str_tokens(smollm2):
    _, tok = smollm2
    text = "Sparse autoencoders split activations."
    pieces = lm.to_str_tokens(tok, text, prepend_bos=False)
    assert len(pieces) == len(tok.encode(text, add_bos=False))
    assert "".join(pieces) == text
    (start,) = tok.encode("<|im_start|>", add_bos=False)
    assert start in tok.special_ids
    ids = tok.encode("<|im_start|>user")
    shown = lm.to_str_tokens(tok, np.asarray(ids))  # special tokens shown as their text
    assert shown[ids.index(start)] == "<|im_start|>"
    assert "".join(shown).endswith("<|im_start|>user")
    with pytest.raises(ValueError, match="text_or_tokens"):
        lm.to_str_tokens(tok, np.ones((2, 2), np.int32))


def test_cache_and_patching_on_smollm2(smollm2):
    model, tok = smollm2
    target, source = np.asarray(tok.encode(TARGET)), np.asarray(tok.encode(SOURCE))
    assert target.shape == source.shape  # one token differs: France / Italy
    last = model.config.n_layers - 1
    names = [f"blocks.{last}.hook_resid_post", "blocks.3.attn.hook_pattern"]
    logits, cache = lm.run_with_cache(model, target, names_filter=names)
    assert list(cache) == names
    clean, acts = lm.forward(model, target, capture=("resid_post", "pattern"), layers=(3, last))
    np.testing.assert_allclose(np.asarray(logits), np.asarray(clean), rtol=1e-5, atol=1e-4)
    np.testing.assert_allclose(np.asarray(cache[names[0]]), np.asarray(acts["resid_post"][1]))
    np.testing.assert_allclose(np.asarray(cache[names[1]]), np.asarray(acts["pattern"][0]))
    src_logits, _ = lm.forward(model, source)
    got = lm.patch_activation(model, target, source, names[0], position=-1)
    np.testing.assert_allclose(
        np.asarray(got[-1]), np.asarray(src_logits[-1]), rtol=1e-4, atol=1e-3
    )
    np.testing.assert_allclose(np.asarray(got[:-1]), np.asarray(clean[:-1]), rtol=1e-5, atol=1e-4)
    same = lm.patch_activation(model, target, target, "blocks.10.hook_resid_mid")
    np.testing.assert_allclose(np.asarray(same), np.asarray(clean), rtol=1e-5, atol=1e-4)
