"""The model and inputs `test_lm_multihost.py` and its worker processes share."""

from __future__ import annotations

import jax
import numpy as np

from jaxlab import lm

from .lm_reference import tiny_llama

TOKENS = np.array([5, 9, 2, 7, 3, 3, 8, 11, 4], np.int32)
PROMPTS = [[5, 9, 2, 7], [3, 3, 8]]
OPTIONS = [[[1, 2], [3]], [[9, 9, 9], [4], [10, 11]]]


def case_model() -> lm.Transformer:
    """A tiny Llama whose heads (4), FFN (40) and vocabulary (64) split over 4 devices."""
    return lm.Transformer.random(tiny_llama(vocab_size=64), key=jax.random.key(11))
