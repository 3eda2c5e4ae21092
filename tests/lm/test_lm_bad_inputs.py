"""lm's pure helpers refuse bad inputs with a ValueError naming the argument (issue #59:
the public-API fuzz met AttributeErrors, a silent NaN and a 10**9-step loop before)."""

from __future__ import annotations

import jax
import numpy as np
import pytest

from jaxlab import lm

from .lm_reference import tiny_llama


def test_project_refuses_none_nan_and_mismatched_widths():
    x, w = np.ones((2, 4)), np.arange(12.0).reshape(3, 4)
    np.testing.assert_allclose(np.asarray(lm.project(x, w)), x @ w.T, rtol=1e-6)
    assert lm.project(np.ones((0, 4)), w).shape == (0, 3)  # no rows: valid
    with pytest.raises(ValueError, match="x: expected an array"):
        lm.project(None, w)
    with pytest.raises(ValueError, match="w: expected finite"):
        lm.project(x, np.full((3, 4), np.nan))
    with pytest.raises(ValueError, match="x: expected last axis K = 4"):
        lm.project(np.ones((2, 5)), w)


def test_prompt_bucket_and_pad_prompts_refuse_bad_sizes():
    assert lm.prompt_bucket(0) == 16
    assert lm.prompt_bucket(17) == 32
    with pytest.raises(ValueError, match="n: expected an integer >= 0"):
        lm.prompt_bucket(None)
    with pytest.raises(ValueError, match="n: expected an integer >= 0"):
        lm.prompt_bucket(2.5)
    tokens, mask = lm.pad_prompts(np.array([[1, 2, 3], [4, 5, 6]]), length=4)  # a 2-D array
    assert tokens.tolist() == [[0, 1, 2, 3], [0, 4, 5, 6]]
    assert mask[:, 0].tolist() == [0, 0]
    with pytest.raises(ValueError, match="prompts: expected a sequence"):
        lm.pad_prompts("abc")
    with pytest.raises(ValueError, match="length: expected a positive integer"):
        lm.pad_prompts([[1, 2]], length=2.5)
    with pytest.raises(ValueError, match="length: needs about"):
        lm.pad_prompts([[1, 2]], length=10**15)


def test_model_axis_size_caps_the_device_count():
    cfg = tiny_llama(vocab_size=62)  # 4 heads, d_ff 40: a model axis of 2 on 4 devices
    assert lm.model_axis_size(cfg, 4) == 2
    with pytest.raises(ValueError, match="n: expected at most"):  # before: a 10**9-step loop
        lm.model_axis_size(cfg, 10**9)


def test_forward_refuses_a_string_mask():
    cfg = tiny_llama()
    model = lm.Transformer.random(cfg, key=jax.random.key(0))
    with pytest.raises(ValueError, match="mask: expected a numeric array"):
        lm.forward(model, np.array([1, 2, 3]), mask=np.array(["a", "b", "c"]))
