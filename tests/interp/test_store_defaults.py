"""On the real SmolLM2-135M (data wheel `smollm2`): activation stores leave out position 0
(the attention sink, whose residual norm dwarfs the others) and special tokens by default,
and keep them when asked."""

from __future__ import annotations

import numpy as np
import pytest

import jaxlab.lm as lm

TEXTS = [
    "The capital of France is Paris, and the capital of Italy is Rome.",
    "Sparse autoencoders split activations into features.<|endoftext|>",
]


@pytest.fixture(scope="module")
def smollm2():
    return lm.load("smollm2")


def test_first_position_and_special_tokens_are_left_out_by_default(smollm2, tmp_path):
    model, tok = smollm2
    layer = 15
    full = lm.collect(
        model,
        tok,
        TEXTS,
        layers=[layer],
        path=tmp_path / "full",
        skip_first=False,
        exclude_special=False,
    )
    default = lm.collect(model, tok, TEXTS, layers=[layer], path=tmp_path / "default")
    lengths = [len(tok.encode(t)) for t in TEXTS]
    assert full.n_tokens == sum(lengths)
    assert np.sum(full.positions == 0) == len(TEXTS)
    # the reason for the default: position 0's residual norm is an outlier
    norms = np.linalg.norm(np.asarray(full.array(), np.float64), axis=1)
    assert norms[full.positions == 0].min() > 10 * np.median(norms[full.positions > 0])
    # the default store: no position-0 row, no special-token row, everything else kept
    special = sorted(tok.special_ids)
    assert int(tok.eos_id) in special
    assert np.isin(full.tokens, special).any(), "the test text holds a special token"
    keep = (full.positions > 0) & ~np.isin(full.tokens, special)
    assert not np.any(default.positions == 0)
    assert not np.isin(default.tokens, special).any()
    np.testing.assert_array_equal(default.positions, full.positions[keep])
    np.testing.assert_allclose(default.array(), full.array()[keep], rtol=1e-5, atol=1e-4)
    assert default.metadata["skip_first"] is True
    assert default.metadata["excluded_ids"] == special
    # asked for: position 0 kept, special tokens still left out
    first = lm.collect(model, tok, TEXTS, layers=[layer], path=tmp_path / "first", skip_first=False)
    assert np.sum(first.positions == 0) == len(TEXTS)
    assert first.n_tokens == int((~np.isin(full.tokens, special)).sum())
