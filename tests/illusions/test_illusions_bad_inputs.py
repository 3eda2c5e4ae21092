"""illusions refuses the inputs the issue #59 probe found accepted: option ids that wrap
(negative or beyond the vocabulary) and a resample count that would abort inside XLA."""

from __future__ import annotations

import jax
import numpy as np
import pytest

import jaxlab.illusions as il
import jaxlab.lm as lm

from ..lm.lm_reference import tiny_llama


def test_option_ids_outside_the_vocabulary_raise():
    model = lm.Transformer.random(tiny_llama(), key=jax.random.key(5))
    toks, mask = lm.pad_prompts([[3, 5, 7, 1]])
    V = model.config.vocab_size
    assert np.isfinite(np.asarray(il.option_logprobs(model, toks, mask, [3, 4]))).all()
    for bad in ([3, 999], [3, -1]):
        with pytest.raises(ValueError, match=rf"option_ids: token ids must lie in \[0, {V}\)"):
            il.option_logprobs(model, toks, mask, bad)


def test_framing_feature_shift_bounds_resamples():
    z = np.random.default_rng(0).normal(size=(6, 4))
    key = jax.random.key(0)
    with pytest.raises(ValueError, match="resamples: expected at most 10000000"):
        il.framing_feature_shift(z, z + 1, key=key, k=2, resamples=10**9)
    with pytest.raises(ValueError, match="resamples: needs about"):
        il.framing_feature_shift(
            np.zeros((6, 50_000)), np.ones((6, 50_000)), key=key, k=2, resamples=10**7
        )
    out = il.framing_feature_shift(z, z + 1, key=key, k=2, resamples=200)
    np.testing.assert_allclose(out["shift"], [-1.0, -1.0])
