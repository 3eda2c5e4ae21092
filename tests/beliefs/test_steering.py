"""Last-token steering / ablation read as option choice, against `lm.forward` (the oracle)."""

from __future__ import annotations

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxlab import beliefs as bl
from jaxlab import interp, lm
from tests.lm.lm_reference import tiny_llama

PROMPTS = [[3, 5, 7, 1, 2, 9], [4, 8, 6], [10, 12, 11, 3, 5]]
OPTIONS = np.array([[1, 2], [7, 9], [4, 5]])
LAYER = 1


@pytest.fixture(scope="module")
def model():
    return lm.Transformer.random(tiny_llama(), key=jax.random.key(7))


def _forward_logprobs(model, intervene=None):
    tokens, mask = lm.pad_prompts(PROMPTS)
    logits, _ = lm.forward_batched(model, tokens, mask=mask, intervene=intervene)
    lp = jax.nn.log_softmax(logits[:, -1, :], axis=-1)
    return np.take_along_axis(np.asarray(lp), OPTIONS, axis=1)


def test_alpha_zero_steering_is_the_plain_run_bit_for_bit(model, getkey):
    d = model.config.d_model
    u = np.asarray(jax.random.normal(getkey(), (d,)), np.float32)
    plain = bl.option_logprobs(model, PROMPTS, OPTIONS, mode="none")
    assert plain.shape == (1, 3, 2)
    vectors = np.stack([0 * u, 3 * u, -3 * u])
    steered = bl.option_logprobs(model, PROMPTS, OPTIONS, vectors, layers=[LAYER])
    # alpha = 0 equals the plain run bit for bit (the same cached program path)
    np.testing.assert_array_equal(steered[0], plain[0])
    assert not np.allclose(steered[1], plain[0], atol=1e-3)
    assert not np.allclose(steered[1], steered[2], atol=1e-3)


@pytest.mark.slow
def test_option_logprobs_match_forward(model, getkey):
    u = np.asarray(jax.random.normal(getkey(), (model.config.d_model,)), np.float32)
    plain = bl.option_logprobs(model, PROMPTS, OPTIONS, mode="none")
    np.testing.assert_allclose(plain[0], _forward_logprobs(model), atol=1e-5)
    vectors = np.stack([0 * u, 3 * u, -3 * u])
    steered = bl.option_logprobs(model, PROMPTS, OPTIONS, vectors, layers=[LAYER])
    # steering the last token equals lm.forward with interp.SteerAt at position -1
    for c, a in ((1, 3.0), (2, -3.0)):
        ref = _forward_logprobs(model, interp.steer(u, a, layers=[LAYER], positions=[-1]))
        np.testing.assert_allclose(steered[c], ref, atol=1e-5)
        assert not np.allclose(steered[c], plain[0], atol=1e-3)


@pytest.mark.slow
def test_ablation_matches_forward_and_forward_alpha_zero(model, getkey):
    d = model.config.d_model
    u = np.asarray(jax.random.normal(getkey(), (d,)), np.float32)
    # lm.forward with alpha = 0 steering is the plain forward bit for bit
    np.testing.assert_array_equal(
        _forward_logprobs(model, interp.steer(u, 0.0, layers=[LAYER])), _forward_logprobs(model)
    )
    abl = bl.option_logprobs(
        model, PROMPTS, OPTIONS, u[None], layers=[LAYER, 2], mode="project_out", batch_size=2
    )
    ref = _forward_logprobs(
        model,
        {("resid_post", i): _LastOnly(u) for i in (LAYER, 2)},
    )
    np.testing.assert_allclose(abl[0], ref, atol=1e-5)


class _LastOnly(eqx.Module):
    """Projection of `direction` out of the last position only (written out here)."""

    direction: jax.Array

    def __call__(self, x):
        u = self.direction / jnp.linalg.norm(self.direction)
        return x.at[-1].add(-(x[-1] @ u) * u)


def test_option_logprobs_rejects_bad_input(model):
    d = model.config.d_model
    with pytest.raises(ValueError, match="mode"):
        bl.option_logprobs(model, PROMPTS, OPTIONS, mode="clamp")
    with pytest.raises(ValueError, match="option_ids"):
        bl.option_logprobs(model, PROMPTS, OPTIONS[:2], mode="none")
    with pytest.raises(ValueError, match="prompts"):
        bl.option_logprobs(model, [[3]], OPTIONS[:1], mode="none")
    with pytest.raises(ValueError, match="layers"):
        bl.option_logprobs(model, PROMPTS, OPTIONS, np.ones((1, d)), layers=[9])
    with pytest.raises(ValueError, match="vectors"):
        bl.option_logprobs(model, PROMPTS, OPTIONS, np.ones((1, d + 1)), layers=[0])
    with pytest.raises(ValueError, match="vectors"):
        bl.option_logprobs(
            model, PROMPTS, OPTIONS, np.zeros((1, d)), layers=[0], mode="project_out"
        )
    with pytest.raises(ValueError, match="option_ids"):
        bl.option_logprobs(model, PROMPTS, OPTIONS + 100, mode="none")
