"""Test helper: write a `Transformer` (GGUF conventions) as a Hugging Face model folder.

Written from the formats' documentation, independently of `jaxlab.lm._hf`:
Hugging Face tensor names (`model.layers.{i}.self_attn.q_proj.weight`, ...), the
inverse of llama.cpp's Llama Q/K permutation (`convert_hf_to_gguf.py` permutes
`W.reshape(H, 2, hd/2, d).swapaxes(1, 2)`; undone here by
`W.reshape(H, hd/2, 2, d).swapaxes(1, 2)`), and Gemma's `(1 + w)` RMSNorm (GGUF stores
`1 + w`, Hugging Face `w`).
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

import jaxlab.lm as lm

_LAYER = {
    "attn_norm": "input_layernorm.weight",
    "wq": "self_attn.q_proj.weight",
    "wk": "self_attn.k_proj.weight",
    "wv": "self_attn.v_proj.weight",
    "wo": "self_attn.o_proj.weight",
    "w_gate": "mlp.gate_proj.weight",
    "w_up": "mlp.up_proj.weight",
    "w_down": "mlp.down_proj.weight",
    "bq": "self_attn.q_proj.bias",
    "bk": "self_attn.k_proj.bias",
    "bv": "self_attn.v_proj.bias",
    "q_norm": "self_attn.q_norm.weight",
    "k_norm": "self_attn.k_norm.weight",
    "post_ffn_norm": "post_feedforward_layernorm.weight",
}


def unpermute(w: np.ndarray, n_heads: int) -> np.ndarray:
    """Inverse of llama.cpp's `permute(weights, n_head)` for Q/K rows."""
    return (
        w.reshape(n_heads, w.shape[0] // n_heads // 2, 2, *w.shape[1:])
        .swapaxes(1, 2)
        .reshape(w.shape)
    )


def hf_config(cfg: lm.LMConfig) -> dict:
    """config.json for `cfg` (Llama / Qwen2 / Gemma-3 text)."""
    out = dict(
        model_type={"llama": "llama", "qwen2": "qwen2", "gemma3": "gemma3_text"}[cfg.arch],
        vocab_size=cfg.vocab_size,
        hidden_size=cfg.d_model,
        num_hidden_layers=cfg.n_layers,
        num_attention_heads=cfg.n_heads,
        num_key_value_heads=cfg.n_kv_heads,
        head_dim=cfg.head_dim,
        intermediate_size=cfg.d_ff,
        rms_norm_eps=cfg.norm_eps,
        max_position_embeddings=cfg.context_length,
        tie_word_embeddings=cfg.tied_embeddings,
        rope_scaling=None,
        eos_token_id=1,
        bos_token_id=0,
    )
    if cfg.arch == "gemma3":
        glob = [w == 0 for w in cfg.sliding_windows]
        out |= dict(
            hidden_activation="gelu_pytorch_tanh",
            layer_types=["full_attention" if g else "sliding_attention" for g in glob],
            rope_theta=next(b for b, g in zip(cfg.rope_bases, glob, strict=True) if g),
            rope_local_base_freq=next(
                b for b, g in zip(cfg.rope_bases, glob, strict=True) if not g
            ),
            sliding_window=max(cfg.sliding_windows),
            query_pre_attn_scalar=cfg.attn_scale**-2,
            final_logit_softcapping=None,
            attn_logit_softcapping=None,
        )
    else:
        out |= dict(hidden_act="silu", rope_theta=cfg.rope_bases[0])
    return out


def hf_tensors(model: lm.Transformer, dtype=np.float32) -> dict[str, np.ndarray]:
    """Hugging Face name -> array (in `dtype`) of every parameter of `model`."""
    cfg = model.config
    gemma = cfg.arch == "gemma3"
    names = dict(_LAYER)
    names["ffn_norm"] = (
        "pre_feedforward_layernorm.weight" if gemma else ("post_attention_layernorm.weight")
    )
    if gemma:
        names["post_attn_norm"] = "post_attention_layernorm.weight"
    out = {}
    for field, suffix in names.items():
        stacked = getattr(model.layers, field)
        if stacked is None:
            continue
        for i in range(cfg.n_layers):
            w = np.asarray(stacked[i], np.float32)
            if cfg.arch == "llama" and field in ("wq", "wk"):
                w = unpermute(w, cfg.n_heads if field == "wq" else cfg.n_kv_heads)
            if gemma and suffix.endswith("norm.weight"):
                w = w - np.float32(1.0)
            out[f"model.layers.{i}.{suffix}"] = w
    out["model.embed_tokens.weight"] = np.asarray(model.embed, np.float32)
    final = np.asarray(model.final_norm, np.float32)
    out["model.norm.weight"] = final - np.float32(1.0) if gemma else final
    if model.lm_head is not None:
        out["lm_head.weight"] = np.asarray(model.lm_head, np.float32)
    return {k: np.ascontiguousarray(v.astype(dtype)) for k, v in out.items()}


def tiny_tokenizer_json(vocab_size: int) -> str:
    """A word-level tokenizer.json: "<bos>" = 0, "<eos>" = 1 (special), "w2".."w{n-1}"."""
    from tokenizers import AddedToken, Tokenizer, models, pre_tokenizers

    vocab = {"<bos>": 0, "<eos>": 1, **{f"w{i}": i for i in range(2, vocab_size)}}
    tok = Tokenizer(models.WordLevel(vocab, unk_token="w2"))
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    tok.add_special_tokens([AddedToken("<bos>", special=True), AddedToken("<eos>", special=True)])
    return tok.to_str()


def write_hf(
    model: lm.Transformer,
    folder: Path,
    *,
    tokenizer_json: str | None = None,
    tokenizer_config: dict | None = None,
    shards: int = 1,
    dtype=np.float32,
    config: dict | None = None,
) -> Path:
    """Write `model` as a Hugging Face folder; `shards` > 1 writes an index and shards."""
    from safetensors.numpy import save_file

    folder.mkdir(parents=True, exist_ok=True)
    cfg = hf_config(model.config) | (config or {})
    (folder / "config.json").write_text(json.dumps(cfg))
    tensors = hf_tensors(model, dtype)
    if shards == 1:
        save_file(tensors, str(folder / "model.safetensors"), metadata={"format": "pt"})
    else:
        names = sorted(tensors)
        parts = [names[i::shards] for i in range(shards)]
        weight_map = {}
        for j, part in enumerate(parts, start=1):
            fname = f"model-{j:05d}-of-{shards:05d}.safetensors"
            save_file({k: tensors[k] for k in part}, str(folder / fname), metadata={"format": "pt"})
            weight_map |= {k: fname for k in part}
        index = {"metadata": {"total_size": sum(t.nbytes for t in tensors.values())}}
        index["weight_map"] = weight_map
        (folder / "model.safetensors.index.json").write_text(json.dumps(index))
    (folder / "tokenizer.json").write_text(
        tokenizer_json or tiny_tokenizer_json(model.config.vocab_size)
    )
    tcfg = {"bos_token": "<bos>", "eos_token": "<eos>", "add_bos_token": True}
    (folder / "tokenizer_config.json").write_text(json.dumps(tokenizer_config or tcfg))
    return folder
