"""GGUF reader: header parsing vs the gguf package, dequantisation vs the format spec,
loader round trip, and malformed files -> ValueError."""

from __future__ import annotations

import gguf
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxlab.lm as lm

from .lm_reference import tiny_gemma, tiny_llama, tiny_qwen


def _write_model(path, model, *, corrupt=None, extra=None):
    """Write a Transformer as an F32 GGUF file (the layout llama.cpp uses); `extra(w)`
    adds further metadata or tensors to the writer."""
    c = model.config
    w = gguf.GGUFWriter(str(path), c.arch)
    a = c.arch
    w.add_uint32(f"{a}.block_count", c.n_layers)
    w.add_uint32(f"{a}.embedding_length", c.d_model)
    w.add_uint32(f"{a}.feed_forward_length", c.d_ff)
    w.add_uint32(f"{a}.attention.head_count", c.n_heads)
    w.add_uint32(f"{a}.attention.head_count_kv", c.n_kv_heads)
    w.add_uint32(f"{a}.attention.key_length", c.head_dim)
    w.add_uint32(f"{a}.context_length", c.context_length)
    w.add_float32(f"{a}.attention.layer_norm_rms_epsilon", c.norm_eps)
    w.add_float32(f"{a}.rope.freq_base", c.rope_bases[-1])
    if a == "gemma3":
        w.add_uint32("gemma3.attention.sliding_window", c.sliding_windows[0])
    names = {
        "attn_norm": "attn_norm",
        "wq": "attn_q",
        "wk": "attn_k",
        "wv": "attn_v",
        "wo": "attn_output",
        "ffn_norm": "ffn_norm",
        "w_gate": "ffn_gate",
        "w_up": "ffn_up",
        "w_down": "ffn_down",
        "q_norm": "attn_q_norm",
        "k_norm": "attn_k_norm",
        "post_attn_norm": "post_attention_norm",
        "post_ffn_norm": "post_ffw_norm",
        "bq": "attn_q",
        "bk": "attn_k",
        "bv": "attn_v",
    }
    w.add_tensor("token_embd.weight", np.asarray(model.embed, np.float32))
    w.add_tensor("output_norm.weight", np.asarray(model.final_norm, np.float32))
    if model.lm_head is not None:
        w.add_tensor("output.weight", np.asarray(model.lm_head, np.float32))
    for field, gname in names.items():
        arr = getattr(model.layers, field)
        if arr is None:
            continue
        for i in range(c.n_layers):
            t = np.asarray(arr[i], np.float32)
            if corrupt == (gname, i):
                t = t[:-1]
            kind = "bias" if field.startswith("b") and field[1:] in "qkv" else "weight"
            w.add_tensor(f"blk.{i}.{gname}.{kind}", t)
    if extra is not None:
        extra(w)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def _gemma6():
    # six layers so the GGUF's 5-local : 1-global pattern reproduces the config
    return tiny_gemma(
        n_layers=6,
        rope_bases=(10000.0,) * 5 + (1000.0,),
        sliding_windows=(3,) * 5 + (0,),
        embed_scale=4.0,
        attn_scale=8**-0.5,
    )


@pytest.mark.parametrize(
    "cfg", [tiny_llama(), _gemma6(), tiny_qwen()], ids=["llama", "gemma3", "qwen2"]
)
def test_roundtrip_through_gguf(tmp_path, cfg):
    model = lm.Transformer.random(cfg, key=jax.random.key(1))
    path = tmp_path / "tiny.gguf"
    _write_model(path, model)
    loaded = lm.load_model(lm.read_gguf(path))
    assert loaded.config == cfg
    toks = jnp.arange(9, dtype=jnp.int32)
    np.testing.assert_array_equal(
        np.asarray(lm.forward(loaded, toks)[0]), np.asarray(lm.forward(model, toks)[0])
    )


def test_header_parser_agrees_with_gguf_package(tmp_path):
    path = tmp_path / "meta.gguf"
    w = gguf.GGUFWriter(str(path), "llama")
    w.add_string("x.s", "héllo")
    w.add_array("x.strs", ["a", "", "<|im_start|>", "日本"])
    w.add_array("x.ints", [1, -2, 3])
    w.add_array("x.floats", [0.5, -1.25])
    w.add_bool("x.flag", True)
    w.add_uint64("x.big", 2**40)
    w.add_float64("x.f64", 1e-300)
    rng = np.random.default_rng(0)
    data = rng.normal(size=(4, 64)).astype(np.float32)
    w.add_tensor("f32", data)
    w.add_tensor("f16", data.astype(np.float16))
    for name in ("Q8_0", "Q4_1", "Q5_0"):
        qt = gguf.GGMLQuantizationType[name]
        w.add_tensor(name, gguf.quants.quantize(data, qt), raw_dtype=qt)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    ours = lm.read_gguf(path)
    ref = gguf.GGUFReader(path)
    for key, field in ref.fields.items():
        if not key.startswith("GGUF."):
            assert ours.metadata[key] == pytest.approx(field.contents()), key
    for t in ref.tensors:
        assert ours.tensors[t.name].type_name == t.tensor_type.name
        np.testing.assert_array_equal(
            ours.array(t.name), gguf.quants.dequantize(t.data, t.tensor_type).reshape(4, 64)
        )
    np.testing.assert_array_equal(ours.array("f32"), data)
    # Q8_0 error bound: half a quantisation step, step = max|x| / 127 per block of 32
    blocks = data.reshape(-1, 32)
    err = np.abs(ours.array("Q8_0").reshape(-1, 32) - blocks)
    assert np.all(err <= 0.5 * np.abs(blocks).max(axis=1, keepdims=True) / 127 * 1.01 + 1e-7)


def _decode_q8_0(raw):
    blocks = raw.reshape(-1, 34)
    d = blocks[:, :2].copy().view(np.float16).astype(np.float32)
    return (d * blocks[:, 2:].copy().view(np.int8).astype(np.float32)).reshape(-1)


def _decode_q4_1(raw):
    blocks = raw.reshape(-1, 20)
    d = blocks[:, 0:2].copy().view(np.float16).astype(np.float32)
    m = blocks[:, 2:4].copy().view(np.float16).astype(np.float32)
    q = blocks[:, 4:]
    nib = np.concatenate([q & 0x0F, q >> 4], axis=1).astype(np.float32)
    return (d * nib + m).reshape(-1)


def test_real_file_dequantisation_matches_format_spec():
    f = lm.read_gguf(lm.model_path("smollm2"))
    assert len(f.tensors) == 272
    assert f.metadata["general.architecture"] == "llama"
    _, begin, nbytes, _ = f._raw["blk.0.attn_k.weight"]
    want = _decode_q4_1(np.asarray(f._buf[begin : begin + nbytes]))
    np.testing.assert_array_equal(f.array("blk.0.attn_k.weight").reshape(-1), want)
    assert f.tensors["blk.0.attn_k.weight"].shape == (192, 576)
    _, begin, _, _ = f._raw["token_embd.weight"]
    want = _decode_q8_0(np.asarray(f._buf[begin : begin + 34 * 18 * 40]))
    np.testing.assert_array_equal(f.array("token_embd.weight")[:40].reshape(-1), want)


def test_malformed_files_raise_value_error(tmp_path):
    src = lm.model_path("smollm2").read_bytes()[: 4 << 20]
    bad = tmp_path / "bad.gguf"
    bad.write_bytes(b"GGML" + src[4:4096])
    with pytest.raises(ValueError, match="magic"):
        lm.read_gguf(bad)
    # truncated inside the header, the vocabulary, the tensor table and the tensor data
    for cut in (2, 20, 1000, 600_000, 1_780_000, 1_800_000, len(src)):
        bad.write_bytes(src[:cut])
        with pytest.raises(ValueError, match="truncated"):
            lm.read_gguf(bad)
    # an absurd tensor count must not make the parser loop or allocate
    bad.write_bytes(src[:8] + (2**60).to_bytes(8, "little") + src[16:4096])
    with pytest.raises(ValueError, match="impossible"):
        lm.read_gguf(bad)
    with pytest.raises(ValueError, match="does not exist"):
        lm.read_gguf(tmp_path / "missing.gguf")


def test_inconsistent_shapes_and_unsupported_arch(tmp_path):
    model = lm.Transformer.random(tiny_llama(), key=jax.random.key(2))
    path = tmp_path / "corrupt.gguf"
    _write_model(path, model, corrupt=("attn_q", 1))
    with pytest.raises(ValueError, match="blk.1.attn_q.weight"):
        lm.load_model(lm.read_gguf(path))
    w = gguf.GGUFWriter(str(tmp_path / "arch.gguf"), "mamba")
    w.add_tensor("token_embd.weight", np.zeros((4, 8), np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    with pytest.raises(ValueError, match="mamba"):
        lm.load_model(lm.read_gguf(tmp_path / "arch.gguf"))
    with pytest.raises(ValueError, match="unknown model"):
        lm.model_path("not-a-model")
