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


@pytest.fixture(scope="module")
def tiny():
    return lm.Transformer.random(tiny_llama(), key=jax.random.key(0))


@pytest.mark.parametrize("fn", ["generate", "stream", "prefill"])
def test_generation_refuses_empty_prompts(tiny, fn):
    """Before: a (0, P) prompt array ran an empty batch and a (B, 0) one raised an
    IndexError from the left-padding check."""
    call = {
        "generate": lambda p: lm.generate(tiny, p, max_new_tokens=2),
        "stream": lambda p: list(lm.stream(tiny, p, max_new_tokens=2)),
        "prefill": lambda p: lm.prefill(tiny, p),
    }[fn]
    for bad in (np.zeros((0, 3), np.int32), np.zeros((2, 0), np.int32)):
        with pytest.raises(ValueError, match="prompts: expected at least one non-empty"):
            call(bad)


@pytest.mark.parametrize("bad", [True, 2.5, None, "3"])
def test_max_new_tokens_must_be_a_positive_int(tiny, bad):
    """Before: True passed `isinstance(_, int)` and generated one token."""
    with pytest.raises(ValueError, match="max_new_tokens: expected a positive integer"):
        lm.generate(tiny, np.array([[1, 2, 3]]), max_new_tokens=bad)
    with pytest.raises(ValueError, match="max_new_tokens: expected a positive integer"):
        list(lm.stream(tiny, np.array([[1, 2, 3]]), max_new_tokens=bad))


def test_stream_and_prefill_bound_their_cache_before_allocating(tiny):
    """Before: stream allocated a KV cache of prompt + 10**9 slots (no context-length
    check, unlike generate) and prefill one of `cache_size` slots, whatever its size."""
    p = np.array([[1, 2, 3]])
    with pytest.raises(ValueError, match="max_new_tokens: prompt .* exceeds the context"):
        next(lm.stream(tiny, p, max_new_tokens=10**9))
    with pytest.raises(ValueError, match="cache_size: needs about"):
        lm.prefill(tiny, p, cache_size=10**15)
    with pytest.raises(ValueError, match="cache_size: expected a positive integer"):
        lm.prefill(tiny, p, cache_size=True)  # before: int(True) = 1, a misleading error
    assert lm.prefill(tiny, p, cache_size=8)[1].k.shape[-3] == 8  # valid: unchanged


def test_parse_hook_name_refuses_a_non_positive_layer_count():
    """Before: n_layers=2.5 was accepted and n_layers=0 blamed the name."""
    assert lm.parse_hook_name("blocks.1.hook_resid_post", 2) == ("resid_post", 1)
    for bad in (0, -1, 2.5, True):
        with pytest.raises(ValueError, match="n_layers: expected a positive integer"):
            lm.parse_hook_name("blocks.1.hook_resid_post", bad)


def test_layer_slice_refuses_booleans_and_floats(tiny):
    """Before: start=True passed `isinstance(_, int)` and sliced from block 1."""
    assert lm.layer_slice(tiny, 1, 2).config.n_layers == 1
    with pytest.raises(ValueError, match="start: expected an integer >= 0"):
        lm.layer_slice(tiny, True, 2)
    with pytest.raises(ValueError, match="stop: expected a positive integer"):
        lm.layer_slice(tiny, 0, 2.5)


def test_weight_specs_refuses_a_non_positive_model_axis():
    """Before: m=0 raised ZeroDivisionError, m=-1 returned specs, m=None a TypeError."""
    for bad in (0, -1, None, 2.5):
        with pytest.raises(ValueError, match="m: expected a positive integer"):
            lm.weight_specs(tiny_llama(), bad)


def test_shard_batch_refuses_none():
    """Before: shard_batch(None) returned None (an empty pytree) silently."""
    mesh = lm.model_mesh(1, 1)
    with pytest.raises(ValueError, match="x: expected an array"):
        lm.shard_batch(None, mesh)
    assert lm.shard_batch(np.ones((2, 3), np.int32), mesh).shape == (2, 3)


def test_score_names_both_arguments_when_their_lengths_differ(tiny):
    """Before: a prompts/continuations length mismatch named only continuations."""
    with pytest.raises(ValueError, match="continuations.*entry of prompts"):
        lm.score(tiny, None, [[[1, 5], [4, 6]]], [[[3]], [[7]]])


def test_out_of_vocabulary_prompts_are_refused_naming_prompts(tiny):
    """Before: generate/stream/prefill said "tokens must lie ..." for their `prompts`."""
    V = tiny.config.vocab_size
    for bad in (-1, V, 10**9):
        p = np.array([[1, bad, 3]])
        with pytest.raises(ValueError, match=rf"prompts: token ids must lie in \[0, {V}\)"):
            lm.generate(tiny, p, max_new_tokens=1)
        with pytest.raises(ValueError, match=rf"prompts: token ids must lie in \[0, {V}\)"):
            next(lm.stream(tiny, p, max_new_tokens=1))


def test_collect_refuses_boolean_sizes(tiny, tmp_path):
    """Before: shard_rows=True passed `isinstance(_, int)` (one-row shards)."""
    for name in ("shard_rows", "batch_tokens"):
        with pytest.raises(ValueError, match=f"{name}: expected a positive integer"):
            lm.collect(tiny, None, [[1, 2, 3]], layers=[0], path=tmp_path / name, **{name: True})


def test_to_str_tokens_names_an_out_of_vocabulary_id(tiny, tmp_path):
    """Before: the tokenizer's "ids must lie ..." did not name `text_or_tokens`."""
    from .hf_writer import write_hf

    _, tok = lm.load(write_hf(tiny, tmp_path / "hf"))
    assert lm.to_str_tokens(tok, np.array([0, 5, 7])) == ["<bos>", "w5", "w7"]  # valid
    V = tiny.config.vocab_size
    for bad in (-1, V, 10**9):
        with pytest.raises(ValueError, match=rf"text_or_tokens: token ids must lie in \[0, {V}\)"):
            lm.to_str_tokens(tok, np.array([0, bad]))


def test_embed_bounds_its_padded_batch_before_allocating(tiny):
    """Before: batch_size=10**9 padded the one batch to 10**9 rows (a MemoryError)."""
    with pytest.raises(ValueError, match="batch_size: needs about"):
        lm.embed(tiny, None, [[1, 2, 3]], batch_size=10**9)
    assert lm.embed(tiny, None, [[1, 2, 3]], batch_size=2).shape == (1, 24)  # valid
