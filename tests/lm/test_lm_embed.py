"""`embed`: mean-pooled final hidden states equal the NumPy reference decoder's (every family)."""

from __future__ import annotations

import jax
import numpy as np
import pytest

import jaxlab.lm as lm

from .lm_reference import reference_hidden, tiny_gemma, tiny_llama, tiny_qwen

CONFIGS = {"llama": tiny_llama(), "gemma3": tiny_gemma(), "qwen2": tiny_qwen()}
# lengths 1..17: one bucket boundary (16 -> 24) crossed, a padded last batch
TEXTS = [[3, 5, 7, 1], [2, 9, 11, 4, 8, 6, 10], [12], list(range(1, 18)), [4, 4]]


@pytest.fixture(scope="module", params=sorted(CONFIGS))
def model(request):
    return lm.Transformer.random(CONFIGS[request.param], key=jax.random.key(5))


def test_embed_equals_reference_mean_of_final_states(model):
    got = lm.embed(model, None, TEXTS, batch_size=2)
    assert got.shape == (len(TEXTS), model.config.d_model)
    assert got.dtype == np.float32
    for i, t in enumerate(TEXTS):
        ref = reference_hidden(model, t).mean(axis=0)
        np.testing.assert_allclose(got[i], ref, rtol=2e-4, atol=2e-5)


def test_embed_does_not_depend_on_batch_company(model):
    # the same text embedded alone and among longer, left-padded texts
    alone = lm.embed(model, None, [TEXTS[0]], batch_size=1)[0]
    mixed = lm.embed(model, None, TEXTS, batch_size=4)[0]
    np.testing.assert_allclose(alone, mixed, rtol=1e-5, atol=1e-6)


def test_embed_rejects_bad_input():
    model = lm.Transformer.random(tiny_qwen(), key=jax.random.key(0))
    cases = [
        (dict(texts=[]), "texts"),
        (dict(texts="abc"), "texts"),
        (dict(texts=[[]]), r"texts\[0\] is empty"),
        (dict(texts=[[1, 67]]), r"texts\[0\].*\[0, 67\)"),
        (dict(texts=[[1] * 257]), r"texts\[0\].*context length 256"),
        (dict(texts=["abc"]), "pass a tokenizer"),
        (dict(texts=[[1]], batch_size=0), "batch_size"),
        (dict(texts=[[1]], batch_size=True), "batch_size"),
    ]
    for kw, match in cases:
        with pytest.raises(ValueError, match=match):
            lm.embed(model, None, **kw)
    with pytest.raises(ValueError, match="Transformer"):
        lm.embed("model", None, [[1]])
