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
