"""Architecture hyper-parameters of a decoder-only transformer, read from GGUF metadata."""

from __future__ import annotations

import dataclasses
import math
import re
from typing import Any

import numpy as np

from ._rope_scaling import gguf_rope_factors

__all__ = ["LMConfig", "config_from_gguf"]


@dataclasses.dataclass(frozen=True)
class LMConfig:
    """Static description of a Llama-, Gemma-3- or Qwen2-style decoder.

    **Arguments:**
        arch: "llama", "gemma3" or "qwen2".
        vocab_size, d_model, n_layers, n_heads, n_kv_heads, head_dim, d_ff: sizes.
        norm_eps: RMSNorm epsilon.
        rope_bases: RoPE base per layer (Gemma-3: 10 000 on local, metadata base on global).
        sliding_windows: attention window per layer (0 = global causal attention).
        rope_style: "interleaved" (pairs (2j, 2j+1): llama.cpp's converted Llama Q/K
            weights) or "half" (pairs (j, j + head_dim/2): NeoX, Gemma, Qwen2).
        qk_norm: RMSNorm on each query/key head (Gemma-3).
        qkv_bias: additive biases on the query, key and value projections (Qwen2).
        sandwich_norm: extra RMSNorm on the attention and MLP outputs (Gemma-3).
        activation: "silu" (SwiGLU) or "gelu_tanh" (GeGLU).
        embed_scale: multiply token embeddings by this (Gemma: sqrt(d_model)).
        attn_scale: multiply query-key scores by this (1/sqrt(head_dim) for both).
        tied_embeddings: the output head is the embedding matrix.
        context_length: trained context length (positions beyond it are rejected).
        name: model name from the metadata.
        rope_freq_factors: RoPE frequency divisors, one tuple of `head_dim / 2` per
            layer (pair j of layer i rotates by
            `position * base**(-2j/head_dim) / rope_freq_factors[i][j]`: Llama-3 or
            linear RoPE scaling, see `_rope_scaling`); () = none.
    """

    arch: str
    vocab_size: int
    d_model: int
    n_layers: int
    n_heads: int
    n_kv_heads: int
    head_dim: int
    d_ff: int
    norm_eps: float
    rope_bases: tuple[float, ...]
    sliding_windows: tuple[int, ...]
    rope_style: str = "interleaved"
    qk_norm: bool = False
    qkv_bias: bool = False
    sandwich_norm: bool = False
    activation: str = "silu"
    embed_scale: float = 1.0
    attn_scale: float = 0.0
    tied_embeddings: bool = True
    context_length: int = 2048
    name: str = ""
    rope_freq_factors: tuple[tuple[float, ...], ...] = ()

    def __post_init__(self):
        for f in ("vocab_size", "d_model", "n_layers", "n_heads", "n_kv_heads", "head_dim", "d_ff"):
            v = getattr(self, f)
            if not isinstance(v, int) or v <= 0:
                raise ValueError(f"LMConfig.{f} must be a positive int, got {v!r}")
        if self.n_heads % self.n_kv_heads:
            raise ValueError(
                f"n_heads={self.n_heads} is not a multiple of n_kv_heads={self.n_kv_heads}"
            )
        if self.head_dim % 2:
            raise ValueError(f"head_dim must be even for RoPE, got {self.head_dim}")
        if len(self.rope_bases) != self.n_layers or len(self.sliding_windows) != self.n_layers:
            raise ValueError("rope_bases and sliding_windows need one entry per layer")
        if self.rope_style not in ("interleaved", "half"):
            raise ValueError(f"rope_style must be 'interleaved' or 'half', got {self.rope_style!r}")
        if self.activation not in ("silu", "gelu_tanh"):
            raise ValueError(f"activation must be 'silu' or 'gelu_tanh', got {self.activation!r}")
        if not (isinstance(self.norm_eps, float | int) and math.isfinite(self.norm_eps)) or not (
            self.norm_eps > 0
        ):
            raise ValueError(f"LMConfig.norm_eps must be a finite float > 0, got {self.norm_eps!r}")
        for i, b in enumerate(self.rope_bases):
            if not math.isfinite(b) or b <= 1.0:
                raise ValueError(f"LMConfig.rope_bases[{i}] must be a finite float > 1, got {b!r}")
        if not isinstance(self.context_length, int) or self.context_length <= 0:
            raise ValueError(
                f"LMConfig.context_length must be a positive int, got {self.context_length!r}"
            )
        if self.rope_freq_factors:
            f = self.rope_freq_factors
            if len(f) != self.n_layers or any(len(r) != self.head_dim // 2 for r in f):
                raise ValueError(
                    "LMConfig.rope_freq_factors needs one tuple of head_dim / 2 = "
                    f"{self.head_dim // 2} factors per layer ({self.n_layers} layers)"
                )
            a = np.asarray(f, np.float64)
            if not (np.all(np.isfinite(a)) and np.all(a > 0)):
                raise ValueError("LMConfig.rope_freq_factors must be finite and > 0")
        if self.attn_scale == 0.0:
            object.__setattr__(self, "attn_scale", self.head_dim**-0.5)

    def rope_factor_table(self) -> np.ndarray:
        """(n_layers, head_dim / 2) float32 RoPE frequency divisors (ones when the
        model has no RoPE scaling)."""
        if not self.rope_freq_factors:
            return np.ones((self.n_layers, self.head_dim // 2), np.float32)
        return np.asarray(self.rope_freq_factors, np.float32)

    def layers(self, start: int, stop: int) -> LMConfig:
        """The same config restricted to blocks `start .. stop - 1` (per-layer fields
        sliced)."""
        return dataclasses.replace(
            self,
            n_layers=stop - start,
            rope_bases=self.rope_bases[start:stop],
            sliding_windows=self.sliding_windows[start:stop],
            rope_freq_factors=self.rope_freq_factors[start:stop],
        )


def config_from_gguf(gguf_file) -> LMConfig:
    """`LMConfig` from an open `GGUFFile`'s metadata (architectures llama, gemma3, qwen2).

    **Raises:**
        ValueError: a missing or invalid metadata value (the message names the file).
    """
    try:
        return _config_from_gguf(gguf_file)
    except ValueError as e:
        where = str(gguf_file.path)
        if where in str(e):
            raise
        raise ValueError(f"GGUF file {where!r}: {e}") from e


def _config_from_gguf(gguf_file) -> LMConfig:
    arch = gguf_file.require("general.architecture")
    if arch not in ("llama", "gemma3", "qwen2"):
        raise ValueError(f"GGUF architecture {arch!r} is not supported (llama, gemma3, qwen2)")

    def req(k):
        return gguf_file.require(f"{arch}.{k}")

    def size(k, default=None):
        """A positive integer metadata value (checked before anything is sized by it)."""
        v = req(k) if default is None else gguf_file.get(f"{arch}.{k}", default)
        if isinstance(v, bool) or not isinstance(v, int) or not 0 < v < 2**31:
            raise ValueError(
                f"GGUF file {str(gguf_file.path)!r}: {arch}.{k} must be a positive integer, "
                f"got {v!r}"
            )
        return v

    d = size("embedding_length")
    n_layers = size("block_count")
    blocks = {int(m.group(1)) for n in gguf_file.tensors if (m := re.match(r"blk\.(\d+)\.", n))}
    if n_layers > len(blocks):
        raise ValueError(
            f"GGUF file {str(gguf_file.path)!r}: {arch}.block_count={n_layers} but the file "
            f"holds tensors of {len(blocks)} blocks"
        )
    n_heads = size("attention.head_count")
    n_kv = size("attention.head_count_kv", n_heads)
    if d % n_heads and f"{arch}.attention.key_length" not in gguf_file.metadata:
        raise ValueError(
            f"GGUF file {str(gguf_file.path)!r}: embedding_length={d} is not a multiple of "
            f"head_count={n_heads} (and no attention.key_length is given)"
        )
    head_dim = size("attention.key_length", d // n_heads)
    emb = gguf_file.tensors.get("token_embd.weight")
    if emb is None:
        raise ValueError("GGUF file has no token_embd.weight tensor")
    vocab = size("vocab_size", int(emb.shape[0]))
    base = float(gguf_file.get(f"{arch}.rope.freq_base", 10000.0))
    eps = float(req("attention.layer_norm_rms_epsilon"))
    for key, v in (("rope.freq_base", base), ("attention.layer_norm_rms_epsilon", eps)):
        if not math.isfinite(v) or v <= 0 or (key == "rope.freq_base" and v <= 1.0):
            raise ValueError(
                f"GGUF file {str(gguf_file.path)!r}: {arch}.{key} must be a finite float "
                f"> {1 if key == 'rope.freq_base' else 0}, got {v!r}"
            )
    factors = gguf_rope_factors(gguf_file, arch, head_dim)
    common: dict[str, Any] = dict(
        vocab_size=vocab,
        d_model=d,
        n_layers=n_layers,
        n_heads=n_heads,
        n_kv_heads=n_kv,
        head_dim=head_dim,
        d_ff=size("feed_forward_length"),
        norm_eps=eps,
        tied_embeddings="output.weight" not in gguf_file.tensors,
        context_length=size("context_length", 2048),
        name=str(gguf_file.get("general.name", "")),
    )
    if arch in ("llama", "qwen2"):
        rope_dim = int(gguf_file.get(f"{arch}.rope.dimension_count", head_dim))
        if rope_dim != head_dim:
            raise ValueError(
                f"partial RoPE (dimension_count={rope_dim} != head_dim={head_dim}) is not supported"
            )
        # llama.cpp permutes Llama Q/K weights to interleaved RoPE pairs on conversion;
        # Qwen2 keeps the NeoX pairing (j, j + head_dim/2) and adds Q/K/V biases.
        return llama_family_config(arch, base, freq_factors=factors, **common)
    # Gemma-3: every 6th layer is global (metadata base); the others use a sliding
    # window and RoPE base 10 000 (llama.cpp and transformers hard-code both). RoPE
    # scaling applies to the global layers only (as in llama.cpp and transformers).
    window = size("attention.sliding_window", 512)
    is_global = [(i + 1) % 6 == 0 for i in range(n_layers)]
    return gemma3_config(is_global, base, 10000.0, window, freq_factors=factors, **common)


def llama_family_config(
    arch: str,
    rope_base: float,
    freq_factors: tuple[float, ...] | None = None,
    **common: Any,
) -> LMConfig:
    """A Llama or Qwen2 config from either file format's fields (`common`: the sizes and
    norm settings every architecture has). One RoPE base (its frequencies divided by
    `freq_factors` on every layer when given), no sliding window; Llama's Q/K rows in
    llama.cpp's interleaved RoPE pairs, Qwen2 in NeoX pairs (j, j + head_dim/2) with
    Q/K/V biases."""
    qwen = arch == "qwen2"
    n_layers = int(common["n_layers"])
    return LMConfig(
        arch=arch,
        rope_bases=(rope_base,) * n_layers,
        rope_freq_factors=() if freq_factors is None else (tuple(freq_factors),) * n_layers,
        sliding_windows=(0,) * n_layers,
        qkv_bias=qwen,
        rope_style="half" if qwen else "interleaved",
        **common,
    )


def gemma3_config(
    is_global,
    global_base: float,
    local_base: float,
    window: int,
    freq_factors: tuple[float, ...] | None = None,
    **common: Any,
) -> LMConfig:
    """A Gemma-3 (text) config: global layers (`is_global[i]`) attend to everything with
    RoPE base `global_base` (frequencies divided by `freq_factors` when given), the
    others to a `window`-token sliding window with base `local_base` (never scaled);
    QK norm, sandwich norms, GELU (tanh) and embeddings scaled by sqrt(d_model).
    `common` as `llama_family_config` (plus e.g. `attn_scale`)."""
    half = int(common["head_dim"]) // 2
    factors = (
        ()
        if freq_factors is None
        else tuple(tuple(freq_factors) if g else (1.0,) * half for g in is_global)
    )
    return LMConfig(
        rope_freq_factors=factors,
        arch="gemma3",
        rope_style="half",
        qk_norm=True,
        sandwich_norm=True,
        activation="gelu_tanh",
        embed_scale=float(common["d_model"]) ** 0.5,
        rope_bases=tuple(global_base if g else local_base for g in is_global),
        sliding_windows=tuple(0 if g else window for g in is_global),
        **common,
    )
