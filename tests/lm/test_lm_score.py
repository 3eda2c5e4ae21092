"""`score`: option log-likelihoods equal log-softmax sums of a full forward (every family)."""

from __future__ import annotations

import jax
import numpy as np
import pytest

import jaxlab.lm as lm

from .lm_reference import tiny_gemma, tiny_llama, tiny_qwen

# the test_lm_model configs (vocabularies 61, 53, 67) with a vocabulary chunk of 16:
# the chunked log-sum-exp runs, shifted last chunk included
CONFIGS = {"llama": tiny_llama(), "gemma3": tiny_gemma(), "qwen2": tiny_qwen()}
PROMPTS = [[3, 5, 7, 1], [2, 9, 11, 4, 8, 6, 10], [12]]
OPTIONS = [[[5], [6, 7, 8], [50, 2, 3, 4, 5]], [[9, 9, 9, 9, 9]], [[1, 2], [3]]]


def _reference(model):
    """Per-token log p(option | prompt) from full forwards of the concatenations."""
    pairs = [(p, o) for p, opts in zip(PROMPTS, OPTIONS, strict=True) for o in opts]
    toks, mask = lm.pad_prompts([p + o for p, o in pairs])
    logp = np.asarray(jax.nn.log_softmax(lm.forward_batched(model, toks, mask=mask)[0], -1))
    T = toks.shape[1]
    return [
        row[np.arange(T - len(o) - 1, T - 1), o] for row, (_, o) in zip(logp, pairs, strict=True)
    ]


@pytest.fixture(scope="module", params=sorted(CONFIGS))
def model(request):
    return lm.Transformer.random(CONFIGS[request.param], key=jax.random.key(3))


def test_score_equals_full_forward_log_softmax(model):
    # batch_size=2: a full batch and a padded one; items of different option counts
    got = lm.score(model, None, PROMPTS, OPTIONS, batch_size=2, vocab_chunk=16)
    refs = iter(_reference(model))
    for i, opts in enumerate(OPTIONS):
        assert got.sum[i].shape == (len(opts),)
        for j in range(len(opts)):
            ref = next(refs)
            np.testing.assert_allclose(got.tokens[i][j], ref, rtol=1e-5, atol=1e-5)
            np.testing.assert_allclose(got.sum[i][j], ref.sum(), rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(got.mean[i], [t.mean() for t in got.tokens[i]])


def test_score_rejects_bad_input():
    model = lm.Transformer.random(tiny_qwen(), key=jax.random.key(0))
    ok = dict(prompts=[[1, 2]], continuations=[[[3]]])
    cases = [
        (dict(prompts=[]), "prompts"),
        (dict(prompts=[[]]), r"prompts\[0\] is empty"),
        (dict(prompts=[[1, 67]]), r"prompts\[0\].*\[0, 67\)"),
        (dict(continuations=[[[3], [-1]]]), r"continuations\[0\]\[1\].*\[0, 67\)"),
        (dict(continuations=[[[3], []]]), r"continuations\[0\]\[1\] is empty"),
        (dict(continuations=[[]]), r"continuations\[0\]"),
        (dict(continuations=[[[3]], [[4]]]), "continuations must be a list of 1"),
        (dict(continuations=[[[1] * 255]]), r"continuations\[0\]\[0\].*context length 256"),
        (dict(prompts=["text"]), "tokenizer"),
    ]
    for change, match in cases:
        with pytest.raises(ValueError, match=match):
            lm.score(model, None, **{**ok, **change})
    with pytest.raises(ValueError, match="batch_size"):
        lm.score(model, None, **ok, batch_size=0)


def _full_forward_logprobs(model, prompts, options):
    """Per-token log p(option | prompt): plain full forwards of every (prompt + option),
    no cache, no shared prefix (one left-padded `forward_batched` call)."""
    pairs = [(list(p), list(o)) for p, opts in zip(prompts, options, strict=True) for o in opts]
    toks, mask = lm.pad_prompts([p + o for p, o in pairs])
    logp = np.asarray(jax.nn.log_softmax(lm.forward_batched(model, toks, mask=mask)[0], -1))
    T = toks.shape[1]
    flat = iter(
        row[np.arange(T - len(o) - 1, T - 1), o] for row, (_, o) in zip(logp, pairs, strict=True)
    )
    return [[next(flat) for _ in opts] for opts in options]


def _assert_scores(got, refs, tol):
    for i, ref in enumerate(refs):
        for j, r in enumerate(ref):
            np.testing.assert_allclose(got.tokens[i][j], r, rtol=tol, atol=tol)
            np.testing.assert_allclose(got.sum[i][j], r.sum(), rtol=tol, atol=tol)


PREAMBLE = [(7 * i + 3) % 50 + 1 for i in range(21)]  # a 21-token shared "few-shot" prefix
SHARED_PROMPTS = [PREAMBLE + [4, 9], PREAMBLE + [11], PREAMBLE + [2, 8, 6, 1, 30], PREAMBLE]
SHARED_OPTIONS = [[[5], [6, 7]], [[9, 9, 9]], [[1, 2], [3], [40, 41, 42, 43]], [[8], [12, 13]]]


def test_score_shared_prefix_equals_full_forward(model):
    from jaxlab.lm._score import _plan

    # the planner does share the preamble (otherwise this test would not test it)
    plan = _plan(SHARED_PROMPTS, 4, True)
    assert [b.shared for b in plan] == [len(PREAMBLE) - 1]
    got = lm.score(model, None, SHARED_PROMPTS, SHARED_OPTIONS, batch_size=4, vocab_chunk=16)
    _assert_scores(got, _full_forward_logprobs(model, SHARED_PROMPTS, SHARED_OPTIONS), 1e-4)
    # distinct prompts (no common prefix): the shared-prefix path is the per-item path
    assert all(b.shared == 0 for b in _plan(PROMPTS, 2, True))
    got = lm.score(model, None, PROMPTS, OPTIONS, batch_size=2, vocab_chunk=16)
    per_item = lm.score(
        model, None, PROMPTS, OPTIONS, batch_size=2, vocab_chunk=16, share_prefix=False
    )
    _assert_scores(got, _full_forward_logprobs(model, PROMPTS, OPTIONS), 1e-5)
    for a, b in zip(got.sum, per_item.sum, strict=True):
        np.testing.assert_array_equal(a, b)


def test_score_shared_prefix_on_smollm2():
    # the real model: a few-shot preamble shared by every item, one batch of all items
    model, tok = lm.load("smollm2")
    pre = (
        "Q: What colour is the sky on a clear day? A: blue\n"
        "Q: How many legs does a spider have? A: eight\n"
        "Q: What do bees make? A: honey\n"
    )
    qs = ["Q: What is frozen water called? A:", "Q: Which animal barks? A:", "Q: 2 + 2 = ? A:"]
    opts = [[" ice", " steam", " sand"], [" a dog", " a cat"], [" four", " five", " 22"]]
    prompts = [tok.encode(pre + q) for q in qs]
    options = [[tok.encode(o, add_bos=False) for o in os] for os in opts]
    from jaxlab.lm._score import _plan

    assert _plan(prompts, 8, True)[0].shared >= 16
    got = lm.score(model, tok, prompts, options)
    _assert_scores(got, _full_forward_logprobs(model, prompts, options), 1e-4)


def test_score_returns_callers_order(model):
    # whatever order the planner runs the batches in, item i's scores come back at i
    prompts, options = SHARED_PROMPTS + PROMPTS, SHARED_OPTIONS + OPTIONS
    got = lm.score(model, None, prompts, options, batch_size=3, vocab_chunk=16)
    perm = [5, 2, 0, 6, 3, 1, 4]
    shuffled = lm.score(
        model, None, [prompts[i] for i in perm], [options[i] for i in perm], batch_size=3
    )
    for k, i in enumerate(perm):
        assert shuffled.sum[k].shape == (len(options[i]),)
        np.testing.assert_allclose(shuffled.sum[k], got.sum[i], rtol=1e-4, atol=1e-4)
    # and each batch size gives the same scores
    one = lm.score(model, None, prompts, options, batch_size=1)
    for a, b in zip(one.sum, got.sum, strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-4)


def test_score_bounds_before_allocation():
    model = lm.Transformer.random(tiny_qwen(), key=jax.random.key(0))
    with pytest.raises(ValueError, match=r"continuations\[1\] has 65 options: at most 64"):
        lm.score(model, None, [[1, 2], [3]], [[[3]], [[4]] * (lm.MAX_SCORE_OPTIONS + 1)])
    lm.score(model, None, [[1, 2]], [[[4]] * lm.MAX_SCORE_OPTIONS], batch_size=1)  # at the bound
    with pytest.raises(ValueError, match="batch_size must be at most 256, got 257"):
        lm.score(model, None, [[1, 2]], [[[3]]], batch_size=lm.MAX_SCORE_BATCH + 1)
    with pytest.raises(ValueError, match="share_prefix"):
        lm.score(model, None, [[1, 2]], [[[3]]], share_prefix=1)  # pyright: ignore


def test_fine_bucket_and_plan():
    from jaxlab.lm._score import _fine_bucket, _plan

    lengths = [_fine_bucket(n) for n in range(1, 2049)]
    assert all(b >= max(n, 16) for n, b in zip(range(1, 2049), lengths, strict=True))
    assert all(b <= 1.19 * n + 1 for n, b in zip(range(16, 2049), lengths[15:], strict=True))
    assert len(set(lengths)) == 4 * 7 + 1  # four buckets per octave, 16 .. 2048
    # two prompt families and a loner: each family in its own batch, sharing its prefix
    a, b = [1] * 20, [2] * 30
    prompts = [a + [3], b + [4, 5], [9, 9], a + [6, 7], b + [8]]
    plan = _plan(prompts, 2, True)
    assert sorted(i for p in plan for i in p.idx) == list(range(5))
    assert {tuple(sorted(p.idx)): p.shared for p in plan} == {(0, 3): 20, (1, 4): 30, (2,): 0}
