"""HAPS refuses what the independent probe of issue #59 found it accepting silently: option
ids outside the vocabulary (NaN logits), answers beyond the options, feature rows that do
not match the queries, and widths that would abort inside XLA."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxlab import lm, routing

from .test_haps import OPTIONS, TOP, _inputs, _prompts


@pytest.fixture(scope="module")
def pair():
    from ..lm.lm_reference import tiny_llama

    m = lm.Transformer.random(tiny_llama(), key=jax.random.key(4))
    upper, inputs = _inputs(m, _prompts(4, 0))
    return upper, inputs


def test_option_ids_outside_the_vocabulary_raise_never_nan(pair):
    upper, inputs = pair
    one = jax.tree_util.tree_map(lambda x: x[0], inputs)
    ok = routing.adapted_option_logits(upper, one, None, jnp.asarray(OPTIONS))
    assert np.isfinite(np.asarray(ok)).all()
    V = upper.config.vocab_size
    for bad in ([5, V + 938], [5, -1]):
        with pytest.raises(ValueError, match=rf"options: token ids must lie in \[0, {V}\)"):
            routing.adapted_option_logits(upper, one, None, jnp.asarray(bad))
    f = jax.jit(routing.adapted_option_logits)
    with pytest.raises(Exception, match=rf"token ids must lie in \[0, {V}\)"):
        jax.block_until_ready(f(upper, one, None, jnp.asarray([5, V + 938])))


def test_haps_predict_and_fit_check_lengths_and_answers(pair, getkey):
    upper, inputs = pair
    haps = routing.HAPS(3, [upper.config], [1.0], key=getkey())
    feats = np.zeros((4, 3), np.float32)
    logits, _ = routing.haps_predict(haps, feats, [upper], [inputs], [OPTIONS])
    assert logits.shape == (4, 1, OPTIONS.size)
    with pytest.raises(ValueError, match="features, inputs\\[0\\]: expected one length"):
        routing.haps_predict(haps, np.zeros((7, 3)), [upper], [inputs], [OPTIONS])
    with pytest.raises(ValueError, match=r"answers: option indices must lie in \[0, 3\)"):
        routing.fit_haps(
            haps, feats, [0, 1, 2, 3], np.ones((4, 1)), [upper], [inputs], [OPTIONS],
            key=getkey(), steps=1,
        )  # fmt: skip


def test_haps_widths_are_capped_before_allocation(pair, getkey):
    upper, _ = pair
    with pytest.raises(ValueError, match="hidden: expected at most 65536"):
        routing.HAPS(3, [upper.config], [1.0], key=getkey(), hidden=10**9)
    with pytest.raises(ValueError, match="rank: expected at most"):
        routing.HAPS(3, [upper.config], [1.0], key=getkey(), rank=10**7)
    with pytest.raises(ValueError, match="hidden: needs about"):
        routing.HAPS(10**6, [upper.config], [1.0], key=getkey(), hidden=60_000)


assert TOP >= 1  # the imported layout is the one test_haps uses


def test_round4_haps_inputs_are_refused_naming_the_argument(pair, getkey):
    # found when every routing function was declared to the fuzz: NaN features gave NaN
    # logits, a wrong width a TypeError from a matmul, (1, 1, K) options a dot_general
    # TypeError, empty options an empty result, a string resid an unnamed float error,
    # pad_lora(below=True) one padded layer
    upper, inputs = pair
    haps = routing.HAPS(3, [upper.config], [1.0], key=getkey())
    feats = np.zeros((4, 3), np.float32)
    for bad in (np.full((4, 3), np.nan), np.zeros((4, 2))):
        with pytest.raises(ValueError, match="features: expected"):
            routing.haps_predict(haps, bad, [upper], [inputs], [OPTIONS])
    one = jax.tree_util.tree_map(lambda x: x[0], inputs)
    for bad in (OPTIONS[None, None], OPTIONS[:0]):
        with pytest.raises(ValueError, match="options: expected"):
            routing.adapted_option_logits(upper, one, None, bad)
    with pytest.raises(ValueError, match="resid: expected"):
        routing.adapted_inputs(upper, "abc", n_active=1)
    ones = np.ones((4, 1))
    for name, kw in (
        ("features", {"features": np.full((4, 3), np.nan)}),  # trained on NaN before
        ("features", {"features": np.zeros((4, 2))}),  # a dot_general TypeError before
        ("cost", {"cost": np.where(ones > 0, np.inf, ones)}),  # trained on inf before
        ("answers", {"answers": None}),  # "None is not a valid value for jnp.array"
        # 7 queries, inputs for 4: rows 4-6 read clamped inputs before
        (
            "features, inputs\\[0\\]",
            {"features": np.zeros((7, 3)), "cost": np.ones((7, 1)), "answers": [0] * 7},
        ),
    ):
        call = {"features": feats, "answers": [0, 1, 2, 0], "cost": ones} | kw
        with pytest.raises(ValueError, match=f"{name}: "):
            routing.fit_haps(
                haps, **call, uppers=[upper], inputs=[inputs], options=[OPTIONS],
                key=getkey(), steps=1,
            )  # fmt: skip
    lora = haps.lora(feats[0], 0)
    assert routing.pad_lora(lora, 0).layer_scale.shape == lora.layer_scale.shape
    for bad in (True, 2.0, 10**15):
        with pytest.raises(ValueError, match="below: "):
            routing.pad_lora(lora, bad)


def test_adapted_cache_size_is_bounded_before_allocation(pair):
    # found by the slow tier's sizes of 10**9: `adapted_inputs(size=10**9)` asked XLA for a
    # 48 GB cache (RESOURCE_EXHAUSTED from inside JAX, not a ValueError naming `size`)
    upper, _ = pair
    resid = np.zeros((6, upper.config.d_model), np.float32)
    ok = routing.adapted_inputs(upper, resid, n_active=2, size=8)
    assert ok.cache is not None
    with pytest.raises(ValueError, match="size: needs about"):
        routing.adapted_inputs(upper, resid, n_active=2, size=10**9)


def test_haps_predict_pads_a_chunk_to_the_queries_at_most(pair, getkey):
    # found by the slow tier's sizes of 10**9: chunk=10**9 padded 4 queries to 10**9 rows
    upper, inputs = pair
    haps = routing.HAPS(3, [upper.config], [1.0], key=getkey())
    feats = np.zeros((4, 3), np.float32)
    want = routing.haps_predict(haps, feats, [upper], [inputs], [OPTIONS], chunk=3)
    got = routing.haps_predict(haps, feats, [upper], [inputs], [OPTIONS], chunk=10**9)
    for a, b in zip(want, got, strict=True):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-6, atol=1e-6)
