"""The real shipped models: SmolLM2-135M-Instruct (default), Gemma-3-270M and
Qwen2.5-Coder-0.5B/1.5B-Instruct (slow: loading them takes 10-100 s)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxlab.lm as lm

from .lm_reference import reference_logits

CHATML = (
    "<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging "
    "Face<|im_end|>\n<|im_start|>user\nWhat is the capital of France?<|im_end|>\n"
    "<|im_start|>assistant\n"
)


@pytest.fixture(scope="module")
def smollm2():
    return lm.load("smollm2")


def test_smollm2_config_and_tokenizer(smollm2):
    model, tok = smollm2
    c = model.config
    assert (c.arch, c.n_layers, c.d_model, c.n_heads, c.n_kv_heads, c.vocab_size) == (
        "llama",
        30,
        576,
        9,
        3,
        49152,
    )
    assert c.rope_bases[0] == 100000.0
    assert c.tied_embeddings
    msgs = [{"role": "user", "content": "What is the capital of France?"}]
    assert tok.apply_chat_template(msgs) == CHATML
    ids = tok.encode(CHATML)
    assert ids[0] == 1
    assert ids.count(1) == 3
    assert ids.count(2) == 2  # control tokens whole
    assert tok.decode(ids, skip_special_tokens=False) == CHATML
    for text in ["Hello, world!", "  two  spaces\n\ttab", "naïve café 日本語 🙂", "x = 12345;"]:
        assert tok.decode(tok.encode(text)) == text
    assert len(tok.encode("12345")) == 5  # SmolLM2 splits digits
    with pytest.raises(ValueError, match="ids"):
        tok.decode([10**6])


def test_smollm2_answers_paris_and_cache_matches_full_forward(smollm2):
    model, tok = smollm2
    prompt = tok.encode(CHATML)
    gen = lm.generate(
        model,
        [prompt],
        max_new_tokens=10,
        stop_tokens=tok.stop_ids,
        pad_id=tok.pad_id,
        return_logits=True,
    )
    n = int(gen.lengths[0])
    new = np.asarray(gen.tokens[0, :n]).tolist()
    assert "Paris" in tok.decode(new)
    # oracle: recompute every position with a full (cache-free) forward pass
    toks, mask = lm.pad_prompts([prompt + new], pad_id=tok.pad_id)
    full, _ = lm.forward_batched(model, toks, mask=mask)
    ref = np.asarray(full[0, toks.shape[1] - n - 1 : -1])
    got = np.asarray(gen.logits[0, :n])
    assert np.max(np.abs(got - ref)) < 1e-3 * np.max(np.abs(ref))
    assert np.array_equal(np.argmax(ref, -1), np.asarray(new))


@pytest.mark.slow
def test_gemma3_loads_and_completes():
    model, tok = lm.load("gemma3")
    c = model.config
    assert (c.arch, c.n_layers, c.d_model, c.head_dim, c.vocab_size) == (
        "gemma3",
        18,
        640,
        256,
        262144,
    )
    assert c.sliding_windows[:6] == (512,) * 5 + (0,)
    assert c.rope_bases[:6] == (1e4,) * 5 + (1e6,)
    ids = tok.encode("The capital of France is")
    assert ids[0] == tok.bos_id == 2
    with pytest.raises(ValueError, match="chat template"):
        tok.apply_chat_template([{"role": "user", "content": "hi"}])
    gen = lm.generate(model, [ids], max_new_tokens=8, return_logits=True)
    new = np.asarray(gen.tokens[0]).tolist()
    toks, mask = lm.pad_prompts([ids + new])
    full, _ = lm.forward_batched(model, toks, mask=mask)
    ref = np.asarray(full[0, toks.shape[1] - 9 : -1])
    assert np.max(np.abs(np.asarray(gen.logits[0]) - ref)) < 1e-3 * np.max(np.abs(ref))
    logp = np.asarray(jnp.asarray(full[0, -9]) - jnp.max(full[0, -9]))
    assert logp[tok.encode(" Paris", add_bos=False)[0]] > -6.0  # Paris is a likely next word
    # a base model: greedy continues "The capital of France is" with " the" (Paris is its
    # third choice), so the known-answer checks use a question and the option scores
    qa = tok.encode("Q: What is the capital of France?\nA:")
    answer = tok.decode(np.asarray(lm.generate(model, [qa], max_new_tokens=6).tokens[0]).tolist())
    assert answer.startswith(" The capital of France is Paris")
    cities = [" Paris", " London", " Berlin", " Lyon"]
    assert np.argmax(lm.score(model, tok, ["The capital of France is"], [cities]).sum[0]) == 0


def _score_reference(model, tok, prompt, options):
    """Per-token log p(option | prompt) from one padded full forward, and its logits."""
    ids = tok.encode(prompt)
    oids = [tok.encode(o, add_bos=False) for o in options]
    toks, mask = lm.pad_prompts([ids + o for o in oids], pad_id=tok.pad_id)
    logits, _ = lm.forward_batched(model, toks, mask=mask)
    logp = np.asarray(jax.nn.log_softmax(logits, -1))
    T = toks.shape[1]
    refs = [row[np.arange(T - len(o) - 1, T - 1), o] for row, o in zip(logp, oids, strict=True)]
    # the next-token logits after the prompt in row 0 (what greedy decoding picks from)
    return refs, np.asarray(logits[0, T - len(oids[0]) - 1])


def _check_score(model, tok, prompt, options):
    got = lm.score(model, tok, [prompt], [options])
    refs, next_logits = _score_reference(model, tok, prompt, options)
    for j, ref in enumerate(refs):
        np.testing.assert_allclose(got.tokens[0][j], ref, rtol=1e-4, atol=1e-4)
    return got, next_logits


def test_smollm2_completes_paris_and_scores_like_forward(smollm2):
    model, tok = smollm2
    # score = sum of log-softmax of a full forward (the real-model check)
    got, next_logits = _check_score(
        model, tok, "The capital of France is", [" Paris", " London", " the city of Lyon"]
    )
    assert tok.decode([int(np.argmax(next_logits))]) == " Paris"  # the greedy next token
    assert np.argmax(got.sum[0]) == 0


@pytest.fixture(scope="module")
def qwen05():
    return lm.load("qwen-0.5b")


@pytest.mark.slow
def test_qwen05_matches_numpy_reference_and_answers_paris(qwen05):
    model, tok = qwen05
    ids = tok.encode("The capital of France is")
    got = np.asarray(lm.forward(model, np.asarray(ids, np.int32))[0])
    ref = reference_logits(model, ids)
    np.testing.assert_allclose(got, ref, rtol=1e-4, atol=1e-4 * np.abs(ref).max())
    gen = lm.generate(model, [ids], max_new_tokens=1)
    assert tok.decode(np.asarray(gen.tokens[0]).tolist()) == " Paris"
    answer = lm.generate_text(
        model, tok, "What is the capital of France?", chat=True, max_new_tokens=12
    )
    assert "Paris" in answer


@pytest.mark.slow
def test_qwen05_score_equals_forward(qwen05):
    model, tok = qwen05
    got, _ = _check_score(model, tok, "def add(a, b):\n    return", [" a + b", " a - b", " None"])
    assert np.argmax(got.sum[0]) == 0


@pytest.mark.slow
def test_qwen15_answers_paris():
    try:  # the wheels come from `make models`, outside the default set-up
        lm.model_path("qwen-1.5b")
    except FileNotFoundError as e:
        pytest.skip(str(e))
    model, tok = lm.load("qwen-1.5b")
    assert (
        model.config.n_layers,
        model.config.d_model,
        model.config.n_heads,
        model.config.n_kv_heads,
    ) == (28, 1536, 12, 2)
    ids = tok.encode("The capital of France is")
    gen = lm.generate(model, [ids], max_new_tokens=1)
    assert tok.decode(np.asarray(gen.tokens[0]).tolist()) == " Paris"
