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
