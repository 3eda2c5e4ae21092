"""`lm.describe`: a model's config, tokenizer, parameter count and weight files, read
without its weights.

Oracles: the loaded model (`lm.load`) of the same file or folder: its config, its
tokenizer's encoding and its arrays' element count; the registry's parameter counts of
the shipped models (summed from the GGUF tensors by another route).
"""

from __future__ import annotations

import jax
import numpy as np
import pytest

import jaxlab.lm as lm

from .hf_writer import write_hf
from .lm_reference import tiny_gemma, tiny_llama, tiny_qwen

CONFIGS = {"llama": tiny_llama(), "qwen2": tiny_qwen(), "gemma3": tiny_gemma(attn_scale=0.25)}


def _elements(model: lm.Transformer) -> int:
    return sum(int(np.size(x)) for x in jax.tree_util.tree_leaves(model) if hasattr(x, "shape"))


@pytest.mark.parametrize("arch", sorted(CONFIGS))
@pytest.mark.parametrize("shards", [1, 2])
def test_hf_folder_card_equals_the_loaded_model(arch, shards, tmp_path):
    model = lm.Transformer.random(CONFIGS[arch], key=jax.random.key(2))
    folder = write_hf(model, tmp_path / arch, shards=shards)
    card = lm.describe(folder)
    loaded, tok = lm.load(folder)
    assert card.source == "hf"
    assert card.config == loaded.config
    assert card.n_params == _elements(loaded)
    assert card.tokenizer.encode("w5 w7 <eos>") == tok.encode("w5 w7 <eos>")
    names = sorted(p.name for p in card.files)
    if shards == 1:
        assert names == ["model.safetensors"]
    else:
        assert names == [
            "model-00001-of-00002.safetensors",
            "model-00002-of-00002.safetensors",
            "model.safetensors.index.json",
        ]
    assert "B params" in repr(card)


def test_pool_model_card_equals_the_registry_and_the_loaded_model():
    card = lm.describe("smollm2")
    assert card.source == "pool"
    assert card.name == "smollm2-135m-instruct"
    assert card.n_params == lm.MODELS["smollm2-135m-instruct"].n_params
    model, tok = lm.load("smollm2")
    assert card.config == model.config
    assert card.n_params == _elements(model)
    text = "The capital of France is Paris."
    assert card.tokenizer.encode(text) == tok.encode(text)
    assert card.files == (lm.model_path("smollm2"),)
    # the same file by path: a GGUF source, the same numbers
    by_path = lm.describe(str(lm.model_path("smollm2")))
    assert by_path.source == "gguf"
    assert by_path.n_params == card.n_params
    assert by_path.config == card.config


@pytest.mark.parametrize("bad", [3, None, True, ["smollm2"]])
def test_describe_refuses_what_is_not_a_name_or_path(bad):
    with pytest.raises(ValueError, match="name_or_path"):
        lm.describe(bad)


def test_describe_names_an_unknown_model(tmp_path):
    with pytest.raises((ValueError, FileNotFoundError)):
        lm.describe("no-such-model")
    (tmp_path / "m").mkdir()
    (tmp_path / "m" / "config.json").write_text("{")
    with pytest.raises(ValueError, match="config.json"):
        lm.describe(tmp_path / "m")


def test_pool_takes_a_folder_beside_registry_names(tmp_path):
    model = lm.Transformer.random(CONFIGS["qwen2"], key=jax.random.key(4))
    folder = write_hf(model, tmp_path / "q")
    pool = lm.Pool([str(folder)])
    info = pool.info(str(folder))
    assert info.name == str(folder)
    assert info.family == "qwen2"
    assert info.n_params == _elements(model)
    assert info.packages == ()
    [(got_info, got, _)] = list(pool)
    assert got_info == info
    np.testing.assert_array_equal(np.asarray(got.embed), np.asarray(model.embed))
    with pytest.raises(ValueError, match="a .gguf file or a Hugging Face folder"):
        lm.Pool([str(tmp_path / "absent")])
