"""beliefs refuses token ids outside the vocabulary (issue #59: `generation_states` with
[[999, 4]] returned NaN states)."""

from __future__ import annotations

import jax
import numpy as np
import pytest

import jaxlab.beliefs as bl
import jaxlab.lm as lm

from ..lm.lm_reference import tiny_llama


def test_generation_states_refuses_out_of_vocabulary_ids():
    model = lm.Transformer.random(tiny_llama(), key=jax.random.key(1))
    V = model.config.vocab_size
    states, mask = bl.generation_states(model, [[3, 4]], [[5]], layers=[1], width=2)
    assert np.isfinite(states).all()
    assert mask.tolist() == [[True, True, False]]
    with pytest.raises(ValueError, match=rf"prompts\[0\]: token ids must lie in \[0, {V}\)"):
        bl.generation_states(model, [[999, 4]], [[5]], layers=[1], width=2)
    with pytest.raises(ValueError, match=rf"completions\[0\]: token ids must lie in \[0, {V}\)"):
        bl.generation_states(model, [[3, 4]], [[-1]], layers=[1], width=2)
    with pytest.raises(ValueError, match=r"prompts\[0\]: expected integer token ids"):
        bl.generation_states(model, ["ab"], [[5]], layers=[1], width=2)


def test_partial_correlation_with_a_repeated_covariate_is_finite_in_float32():
    """A covariate that repeats another (found by the contract fuzz) gave NaN in float32:
    the 1e-10 ridge is below float32 resolution. The oracle: a repeated column spans
    nothing new, so the partial correlation equals the one without it."""
    r = np.random.default_rng(41)
    x, y, z = r.standard_normal(8), r.standard_normal(8), r.standard_normal((8, 2))
    once = float(bl.partial_correlation(x, y, z))
    twice = float(bl.partial_correlation(x, y, np.concatenate([z, z[:, :1]], axis=1)))
    assert np.isfinite(twice)
    np.testing.assert_allclose(twice, once, rtol=1e-4)
