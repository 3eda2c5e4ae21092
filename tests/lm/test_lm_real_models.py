"""The real shipped models: SmolLM2-135M-Instruct (default) and Gemma-3-270M (slow)."""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np
import pytest

import jaxlab.lm as lm

CHATML = ("<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging "
          "Face<|im_end|>\n<|im_start|>user\nWhat is the capital of France?<|im_end|>\n"
          "<|im_start|>assistant\n")


@pytest.fixture(scope="module")
def smollm2():
    return lm.load("smollm2")


def test_smollm2_config_and_tokenizer(smollm2):
    model, tok = smollm2
    c = model.config
    assert (c.arch, c.n_layers, c.d_model, c.n_heads, c.n_kv_heads, c.vocab_size) == \
        ("llama", 30, 576, 9, 3, 49152)
    assert c.rope_bases[0] == 100000.0 and c.tied_embeddings
    msgs = [{"role": "user", "content": "What is the capital of France?"}]
    assert tok.apply_chat_template(msgs) == CHATML
    ids = tok.encode(CHATML)
    assert ids[0] == 1 and ids.count(1) == 3 and ids.count(2) == 2  # control tokens whole
    assert tok.decode(ids, skip_special_tokens=False) == CHATML
    for text in ["Hello, world!", "  two  spaces\n\ttab", "naïve café 日本語 🙂", "x = 12345;"]:
        assert tok.decode(tok.encode(text)) == text
    assert len(tok.encode("12345")) == 5  # SmolLM2 splits digits
    with pytest.raises(ValueError, match="ids"):
        tok.decode([10**6])


def test_smollm2_answers_paris_and_cache_matches_full_forward(smollm2):
    model, tok = smollm2
    prompt = tok.encode(CHATML)
    gen = lm.generate(model, [prompt], max_new_tokens=10, stop_tokens=tok.stop_ids,
                      pad_id=tok.pad_id, return_logits=True)
    n = int(gen.lengths[0])
    new = np.asarray(gen.tokens[0, :n]).tolist()
    assert "Paris" in tok.decode(new)
    # oracle: recompute every position with a full (cache-free) forward pass
    toks, mask = lm.pad_prompts([prompt + new], pad_id=tok.pad_id)
    full, _ = lm.forward(model, toks, mask=mask)
    ref = np.asarray(full[0, toks.shape[1] - n - 1:-1])
    got = np.asarray(gen.logits[0, :n])
    assert np.max(np.abs(got - ref)) < 1e-3 * np.max(np.abs(ref))
    assert np.array_equal(np.argmax(ref, -1), np.asarray(new))


@pytest.mark.slow
def test_gemma3_loads_and_completes():
    model, tok = lm.load("gemma3")
    c = model.config
    assert (c.arch, c.n_layers, c.d_model, c.head_dim, c.vocab_size) == \
        ("gemma3", 18, 640, 256, 262144)
    assert c.sliding_windows[:6] == (512,) * 5 + (0,) and c.rope_bases[:6] == (1e4,) * 5 + (1e6,)
    ids = tok.encode("The capital of France is")
    assert ids[0] == tok.bos_id == 2
    with pytest.raises(ValueError, match="chat template"):
        tok.apply_chat_template([{"role": "user", "content": "hi"}])
    gen = lm.generate(model, [ids], max_new_tokens=8, return_logits=True)
    new = np.asarray(gen.tokens[0]).tolist()
    toks, mask = lm.pad_prompts([ids + new])
    full, _ = lm.forward(model, toks, mask=mask)
    ref = np.asarray(full[0, toks.shape[1] - 9:-1])
    assert np.max(np.abs(np.asarray(gen.logits[0]) - ref)) < 1e-3 * np.max(np.abs(ref))
    logp = np.asarray(jnp.asarray(full[0, -9]) - jnp.max(full[0, -9]))
    assert logp[tok.encode(" Paris", add_bos=False)[0]] > -6.0  # Paris is a likely next word
