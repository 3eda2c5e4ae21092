"""Issue 30 finding 5: GGUF files and metadata that lie are refused with one clear
`ValueError` naming the file / key, never loaded into NaN logits or huge allocations.

The corrupted files are tiny F32 models written with the `gguf` package and then
patched byte by byte (the tensor-info table and metadata values sit at known offsets).
"""

from __future__ import annotations

import struct

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxlab.lm as lm

from .lm_reference import tiny_llama
from .test_lm_gguf import _write_model


@pytest.fixture(scope="module")
def tiny_file(tmp_path_factory):
    path = tmp_path_factory.mktemp("gguf") / "tiny.gguf"
    _write_model(path, lm.Transformer.random(tiny_llama(), key=jax.random.key(3)))
    return path.read_bytes()


def _name_at(data: bytes, name: str) -> int:
    key = name.encode()
    pos = data.find(struct.pack("<Q", len(key)) + key)
    assert pos >= 0, name
    return pos + 8 + len(key)


def _tensor_fields(data: bytes, name: str):
    """Byte offsets of the type id and data offset of tensor `name` in the info table."""
    p = _name_at(data, name)
    (n_dims,) = struct.unpack_from("<I", data, p)
    type_at = p + 4 + 8 * n_dims
    return type_at, type_at + 4


def _patched(tmp_path, data: bytes, at: int, fmt: str, value) -> str:
    out = bytearray(data)
    struct.pack_into(fmt, out, at, value)
    path = tmp_path / "bad.gguf"
    path.write_bytes(bytes(out))
    return str(path)


def _meta_value_at(data: bytes, key: str) -> int:
    return _name_at(data, key) + 4  # skip the value-type id


def test_tiny_file_loads(tiny_file, tmp_path):
    path = tmp_path / "ok.gguf"
    path.write_bytes(tiny_file)
    model = lm.load_model(lm.read_gguf(path))
    assert np.all(np.isfinite(np.asarray(lm.forward(model, jnp.arange(5))[0])))


def test_gguf_tensor_offset_misaligned(tiny_file, tmp_path):
    _, off_at = _tensor_fields(tiny_file, "blk.0.attn_q.weight")
    (off,) = struct.unpack_from("<Q", tiny_file, off_at)
    path = _patched(tmp_path, tiny_file, off_at, "<Q", off + 4)
    with pytest.raises(ValueError, match=r"bad.gguf.*blk.0.attn_q.weight.* not a multiple"):
        lm.read_gguf(path)


def test_gguf_tensor_offsets_overlap(tiny_file, tmp_path):
    _, off_a = _tensor_fields(tiny_file, "blk.0.attn_q.weight")
    _, off_b = _tensor_fields(tiny_file, "blk.1.attn_q.weight")
    (a,) = struct.unpack_from("<Q", tiny_file, off_a)
    path = _patched(tmp_path, tiny_file, off_b, "<Q", a)  # two tensors share their bytes
    with pytest.raises(ValueError, match=r"bad.gguf.*overlap"):
        lm.read_gguf(path)


def test_gguf_tensor_out_of_bounds(tiny_file, tmp_path):
    _, off_at = _tensor_fields(tiny_file, "token_embd.weight")
    path = _patched(tmp_path, tiny_file, off_at, "<Q", 1 << 40)
    with pytest.raises(ValueError, match=r"bad.gguf.*truncated: tensor 'token_embd.weight'"):
        lm.read_gguf(path)


@pytest.mark.parametrize("type_id", [1, 8, 30])  # F16, Q8_0, BF16 for an F32 tensor
def test_gguf_changed_tensor_type_is_refused(tiny_file, tmp_path, type_id):
    type_at, _ = _tensor_fields(tiny_file, "blk.1.ffn_up.weight")
    path = _patched(tmp_path, tiny_file, type_at, "<I", type_id)
    with pytest.raises(ValueError, match=r"bad.gguf.*(does not match|row length)"):
        lm.load_model(lm.read_gguf(path))


def test_gguf_nan_tensor_data_is_refused(tiny_file, tmp_path):
    f = lm.read_gguf(_patched(tmp_path, tiny_file, 0, "<4s", b"GGUF"))
    _, begin, _, _ = f._raw["output_norm.weight"]
    del f
    path = _patched(tmp_path, tiny_file, begin, "<f", float("nan"))
    with pytest.raises(ValueError, match=r"bad.gguf.*'output_norm.weight'.*1 NaN/inf"):
        lm.load_model(lm.read_gguf(path))


@pytest.mark.parametrize(
    ("key", "fmt", "value", "match"),
    [
        ("llama.attention.head_count", "<I", 0, "head_count must be a positive integer"),
        ("llama.attention.head_count_kv", "<I", 0, "head_count_kv must be a positive"),
        ("llama.block_count", "<I", 10**9, "block_count=1000000000 but the file holds"),
        ("llama.embedding_length", "<I", 0, "embedding_length must be a positive"),
        ("llama.attention.layer_norm_rms_epsilon", "<f", float("nan"), "rms_epsilon must be"),
        ("llama.attention.layer_norm_rms_epsilon", "<f", -1e-5, "rms_epsilon must be"),
        ("llama.rope.freq_base", "<f", float("nan"), "freq_base must be a finite float"),
        ("llama.rope.freq_base", "<f", 0.0, "freq_base must be a finite float"),
        ("llama.context_length", "<I", 0, "context_length must be a positive"),
    ],
)
def test_gguf_bad_metadata_values(tiny_file, tmp_path, key, fmt, value, match):
    path = _patched(tmp_path, tiny_file, _meta_value_at(tiny_file, key), fmt, value)
    with pytest.raises(ValueError, match=match):
        lm.load_model(lm.read_gguf(path))


def test_lmconfig_rejects_nonfinite_eps_and_rope_base():
    with pytest.raises(ValueError, match="norm_eps must be a finite float > 0"):
        tiny_llama(norm_eps=float("nan"))
    with pytest.raises(ValueError, match=r"rope_bases\[1\] must be a finite float > 1"):
        tiny_llama(rope_bases=(100.0, 0.0, 100.0))


@pytest.fixture(scope="module")
def smollm_tokenizer():
    return lm.Tokenizer.from_gguf(lm.read_gguf(lm.model_path("smollm2")))


@pytest.mark.parametrize(
    "template",
    [
        "{{ 'x' * 10000000000 }}",
        "{{ ['x'] * 10000000000 }}",
        "{{ 9 ** 9999999 }}",
        "{% for i in range(100000) %}{{ 'abcdefghij' * 100 }}{% endfor %}",
    ],
)
def test_chat_template_output_is_bounded(smollm_tokenizer, template):
    tok = smollm_tokenizer
    saved = tok.chat_template
    tok.chat_template = template
    try:
        with pytest.raises(ValueError, match="chat template"):
            tok.apply_chat_template([{"role": "user", "content": "hi"}])
    finally:
        tok.chat_template = saved
    assert "hi" in tok.apply_chat_template([{"role": "user", "content": "hi"}])


def test_token_ids_beyond_int32_do_not_wrap(tiny_file, tmp_path):
    path = tmp_path / "ok.gguf"
    path.write_bytes(tiny_file)
    model = lm.load_model(lm.read_gguf(path))
    for big in (2**32, 2**32 + 3, 2**31):
        with pytest.raises(ValueError, match="tokens"):
            lm.forward(model, np.array([1, big], np.int64))
        with pytest.raises(ValueError, match="prompts"):
            lm.generate(model, [[1, big]], max_new_tokens=1)


def test_tokenizer_ids_in_metadata_are_range_checked(tmp_path):
    # the real tokenizer (its metadata lies in the first 4 MiB of the file), with an
    # EOS id that a 32-bit reader would wrap to a valid-looking one
    data = bytearray(lm.model_path("smollm2").read_bytes())
    at = _meta_value_at(bytes(data[: 4 << 20]), "tokenizer.ggml.eos_token_id")
    out = tmp_path / "tok.gguf"
    struct.pack_into("<I", data, at, 2**32 - 1)
    out.write_bytes(bytes(data))
    with pytest.raises(ValueError, match=r"eos_token_id must be a token id in \[0, 49152\)"):
        lm.Tokenizer.from_gguf(lm.read_gguf(out))
