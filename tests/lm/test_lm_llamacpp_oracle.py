"""Oracle: llama.cpp (llama-cpp-python) on the same GGUF files (SmolLM2, Qwen2.5-Coder-0.5B).

Runs when the optional peer is installed (`pip install llama-cpp-python`, the
`lm-oracle` extra); slow (it evaluates 8 prompts with both engines).

Tolerance. llama.cpp does not compute what jaxlab computes: for Q4_1/Q8_0 weights
its CPU kernels also quantise every activation vector to 8 bits per block of 32
(Q8_1/Q8_0) before each dot product, i.e. a relative error of up to 1/254 per
block at each of the ~210 matmuls, while jaxlab multiplies the exactly
dequantised weights with float32 activations. The logits therefore agree to a
fraction of a nat, not to float rounding: we require top-5 logits (teacher-forced
on the same tokens) within 1.5 absolute and 0.35 mean, and greedy continuations
that either agree for 16 tokens or first differ where llama.cpp's own top-2 margin
is below 1.0 (a near tie that 8-bit activations can flip).
"""

from __future__ import annotations

import numpy as np
import pytest

import jaxlab.lm as lm

pytestmark = pytest.mark.slow

PROMPTS = [
    "The capital of France is",
    "def fibonacci(n):",
    "Once upon a time, in a small village,",
    "The chemical formula of water is",
    "1, 2, 3, 4, 5,",
    "Translate to French: Good morning ->",
    "The three primary colours are",
    "In 1969, the first humans",
]
N = 16


@pytest.fixture(scope="module")
def engines():
    # Imported here, not at module level, so that the default (non-slow) run deselects
    # these tests instead of reporting a skip; `make peers` installs the oracle.
    llama_cpp = pytest.importorskip(
        "llama_cpp", reason="optional oracle: make peers (llama-cpp-python)"
    )
    model, tok = lm.load("smollm2")
    llm = llama_cpp.Llama(
        model_path=str(lm.model_path("smollm2")),
        n_ctx=128,
        n_threads=2,
        logits_all=True,
        verbose=False,
    )
    return model, tok, llm


def _llama_greedy(llm, ids, n):
    llm.reset()
    out = []
    for t in llm.generate(ids, top_k=1, temp=0.0, reset=True):
        out.append(int(t))
        if len(out) == n:
            break
    # copy: llm.scores is a buffer that the next evaluation overwrites
    return out, np.array(llm.scores[len(ids) - 1 : len(ids) - 1 + n], np.float32, copy=True)


def test_tokenizer_matches_llamacpp(engines):
    _, tok, llm = engines
    chat = tok.apply_chat_template([{"role": "user", "content": "What is the capital of France?"}])
    for text in [*PROMPTS, chat, "naïve café 日本語 🙂  x=12345"]:
        assert tok.encode(text) == llm.tokenize(text.encode(), add_bos=False, special=True)


def test_greedy_and_logits_match_llamacpp(engines):
    model, tok, llm = engines
    prompts = [tok.encode(p) for p in PROMPTS]
    ref = [_llama_greedy(llm, p, N) for p in prompts]
    # teacher forcing: run jaxlab on exactly llama.cpp's sequences
    seqs = [p + r[0] for p, r in zip(prompts, ref, strict=True)]
    toks, mask = lm.pad_prompts(seqs)
    logits, _ = lm.forward_batched(model, toks, mask=mask)
    logits = np.asarray(logits[:, -N - 1 : -1])
    diffs = []
    for i, (out, scores) in enumerate(ref):
        top5 = np.argsort(-scores, axis=1)[:, :5]
        diffs.append(
            np.abs(np.take_along_axis(scores, top5, 1) - np.take_along_axis(logits[i], top5, 1))
        )
        ours = np.argmax(logits[i], axis=1)
        srt = np.sort(scores, axis=1)
        margin = srt[:, -1] - srt[:, -2]
        mismatch = np.nonzero(ours != np.asarray(out))[0]
        # wherever the two argmaxes differ, llama.cpp itself was near a tie
        assert np.all(margin[mismatch] < 1.0), (PROMPTS[i], mismatch, margin[mismatch])
    diffs = np.stack(diffs)
    assert diffs.max() < 1.5, (diffs.max(), diffs.mean())
    assert diffs.mean() < 0.35, (diffs.max(), diffs.mean())
    # free-running greedy: identical for N tokens, or the first split is at a near tie
    gen = np.asarray(lm.generate(model, prompts, max_new_tokens=N).tokens)
    for i, (out, scores) in enumerate(ref):
        split = next((k for k in range(N) if gen[i, k] != out[k]), N)
        if split < N:
            srt = np.sort(scores[split])
            assert srt[-1] - srt[-2] < 1.0, (PROMPTS[i], split)


# ---- Qwen2.5-Coder-0.5B-Instruct (Q4_K_M): tokenizer and teacher-forced top-1 ----
# Measured (llama-cpp-python 0.3.36, 2 threads): tokens identical on all 13 texts;
# top-1 agreement 124/128, the 4 misses at llama.cpp top-2 margins 0.02-0.13.

QWEN_TEXTS = [
    "The capital of France is",
    "naïve café 日本語 🙂  x=12345",
    "def fib(n):\n    if n < 2:\n        return n\n    return fib(n - 1) + fib(n - 2)\n",
    "    four leading spaces,\ttabs\t\tand trailing   \n\n\n",
    "Ünïcödé — “quotes” … Здравствуй, мир! مرحبا بالعالم",
    "I'm sure they'll say we've done it; I'D agree, YOU'RE right.",
    "x=3.14159e-10; y = [1,22,333,4444]  # comment",
    "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n",
    "SELECT name, COUNT(*) FROM users WHERE id>=100 GROUP BY name;",
    "emoji 👩‍💻🏳️‍🌈 and CJK 中文字符 한국어 テスト",
    "\r\nwindows\r\nlines\r\n",
    "   ",
]


@pytest.fixture(scope="module")
def qwen_engines():
    llama_cpp = pytest.importorskip(
        "llama_cpp", reason="optional oracle: make peers (llama-cpp-python)"
    )
    model, tok = lm.load("qwen-0.5b")
    llm = llama_cpp.Llama(
        model_path=str(lm.model_path("qwen-0.5b")),
        n_ctx=256,
        n_threads=2,
        logits_all=True,
        verbose=False,
    )
    return model, tok, llm


def test_qwen_tokenizer_matches_llamacpp(qwen_engines):
    _, tok, llm = qwen_engines
    chat = tok.apply_chat_template([{"role": "user", "content": "Write hello world in C."}])
    for text in [*QWEN_TEXTS, chat]:
        assert tok.encode(text) == llm.tokenize(text.encode(), add_bos=False, special=True), text


def test_qwen_teacher_forced_top1_matches_llamacpp(qwen_engines):
    model, tok, llm = qwen_engines
    prompts = [tok.encode(p) for p in PROMPTS]  # 8 prompts x 16 tokens = 128 positions
    ref = [_llama_greedy(llm, p, N) for p in prompts]
    seqs = [p + r[0] for p, r in zip(prompts, ref, strict=True)]
    toks, mask = lm.pad_prompts(seqs, pad_id=tok.pad_id)
    logits = np.asarray(lm.forward_batched(model, toks, mask=mask)[0][:, -N - 1 : -1])
    agree, total, margins = 0, 0, []
    for i, (out, scores) in enumerate(ref):
        ours = np.argmax(logits[i], axis=1)
        srt = np.sort(scores, axis=1)
        margin = srt[:, -1] - srt[:, -2]
        miss = np.nonzero(ours != np.asarray(out))[0]
        agree += N - len(miss)
        total += N
        margins += margin[miss].tolist()
    print(
        f"Qwen-0.5B teacher-forced top-1 agreement {agree}/{total}, "
        f"llama.cpp margins at the misses {np.round(margins, 3).tolist()}"
    )
    assert total == 128
    assert agree >= 0.95 * total
    assert all(m < 1.0 for m in margins), margins
