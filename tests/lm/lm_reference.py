"""Independent numpy (float64) reference decoder and tiny configs for the lm tests.

Written directly from the architecture descriptions, with RoPE as complex
multiplication and attention as explicit per-head loops, sharing no code with
jaxlab.lm.
"""

from __future__ import annotations

import math

import jax.numpy as jnp
import numpy as np

from jaxlab.lm import LMConfig, QuantWeight


def tiny_llama(**kw) -> LMConfig:
    base = dict(
        arch="llama",
        vocab_size=61,
        d_model=24,
        n_layers=3,
        n_heads=4,
        n_kv_heads=2,
        head_dim=6,
        d_ff=40,
        norm_eps=2.0**-17,
        rope_bases=(100.0,) * 3,
        sliding_windows=(0,) * 3,
        context_length=256,
    )
    base.update(kw)
    return LMConfig(**base)


def tiny_gemma(**kw) -> LMConfig:
    base = dict(
        arch="gemma3",
        vocab_size=53,
        d_model=16,
        n_layers=4,
        n_heads=2,
        n_kv_heads=1,
        head_dim=8,
        d_ff=32,
        norm_eps=2.0**-20,
        rope_bases=(50.0, 50.0, 50.0, 1000.0),
        sliding_windows=(3, 3, 3, 0),
        rope_style="half",
        qk_norm=True,
        sandwich_norm=True,
        activation="gelu_tanh",
        embed_scale=4.0,
        attn_scale=0.3,
        context_length=256,
    )
    base.update(kw)
    return LMConfig(**base)


def tiny_qwen(**kw) -> LMConfig:
    base = dict(
        arch="qwen2",
        vocab_size=67,
        d_model=24,
        n_layers=3,
        n_heads=6,
        n_kv_heads=2,
        head_dim=4,
        d_ff=36,
        norm_eps=2.0**-20,
        rope_bases=(1000.0,) * 3,
        sliding_windows=(0,) * 3,
        rope_style="half",
        qkv_bias=True,
        tied_embeddings=False,
        context_length=256,
    )
    base.update(kw)
    return LMConfig(**base)


def random_quant_weight(rng, n: int, k: int, bits: int) -> QuantWeight:
    """A random (n, k) `QuantWeight`: every int8 level (or every byte of 4-bit pairs), block
    scales in [0.001, 0.02), offsets ~ N(0, 0.05)."""
    q = (
        rng.integers(-128, 128, (n, k)).astype(np.int8)
        if bits == 8
        else rng.integers(0, 256, (n, k // 2)).astype(np.uint8)
    )
    scale = rng.uniform(0.001, 0.02, (n, k // 32)).astype(np.float32)
    offset = rng.normal(0, 0.05, (n, k // 32)).astype(np.float32)
    return QuantWeight(jnp.asarray(q), jnp.asarray(scale), jnp.asarray(offset), bits)


def _rms(x, w, eps):
    return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps) * w


def _rope(x, pos, base, style, divisors=None):
    hd = x.shape[-1]
    inv = base ** (-np.arange(0, hd, 2) / hd)
    if divisors is not None:  # RoPE scaling: pair j's frequency divided by divisors[j]
        inv = inv / np.asarray(divisors, np.float64)
    rot = np.exp(1j * pos[:, None] * inv[None, :])[:, None, :]
    if style == "interleaved":
        z = (x[..., 0::2] + 1j * x[..., 1::2]) * rot
        out = np.empty_like(x)
        out[..., 0::2], out[..., 1::2] = z.real, z.imag
        return out
    z = (x[..., : hd // 2] + 1j * x[..., hd // 2 :]) * rot
    return np.concatenate([z.real, z.imag], axis=-1)


def _gelu_tanh(x):
    return 0.5 * x * (1 + np.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x**3)))


def reference_logits(model, tokens, lora_merge=None) -> np.ndarray:
    """(T, V) float64 logits of one unpadded sequence."""
    hn = reference_hidden(model, tokens, lora_merge)
    head = model.embed if model.lm_head is None else model.lm_head
    return np.concatenate(
        [hn @ np.asarray(head[i : i + 8192], np.float64).T for i in range(0, head.shape[0], 8192)],
        axis=1,
    )


def reference_hidden(model, tokens, lora_merge=None) -> np.ndarray:
    """(T, d) float64 final hidden states (after the final norm) of one unpadded sequence."""
    c = model.config
    delta = lora_merge or {}

    def weight(name, li):
        # one layer at a time in float64 (a real 0.5B model would need 5 GB at once)
        arr = getattr(model.layers, name)
        if arr is None:
            return None
        w = np.asarray(arr[li], np.float64)
        return w + delta[name][li] if name in delta else w

    P = {k: _Layer(weight, k) for k in vars(model.layers)}
    tokens = np.asarray(tokens)
    T = len(tokens)
    pos = np.arange(T, dtype=np.float64)
    x = np.asarray(model.embed, np.float32)[tokens].astype(np.float64) * c.embed_scale
    G = c.n_heads // c.n_kv_heads
    for li in range(c.n_layers):
        h = _rms(x, P["attn_norm"][li], c.norm_eps)
        q, k, v = h @ P["wq"][li].T, h @ P["wk"][li].T, h @ P["wv"][li].T
        if c.qkv_bias:
            q, k, v = q + P["bq"][li], k + P["bk"][li], v + P["bv"][li]
        q = q.reshape(T, c.n_heads, c.head_dim)
        k = k.reshape(T, c.n_kv_heads, c.head_dim)
        v = v.reshape(T, c.n_kv_heads, c.head_dim)
        if c.qk_norm:
            q, k = _rms(q, P["q_norm"][li], c.norm_eps), _rms(k, P["k_norm"][li], c.norm_eps)
        base = c.rope_bases[li]
        div = c.rope_freq_factors[li] if c.rope_freq_factors else None
        q, k = _rope(q, pos, base, c.rope_style, div), _rope(k, pos, base, c.rope_style, div)
        o = np.zeros((T, c.n_heads, c.head_dim))
        w = c.sliding_windows[li]
        for hh in range(c.n_heads):
            kv = hh // G
            for t in range(T):
                allowed = [s for s in range(t + 1) if w == 0 or t - s < w]
                sc = np.array([q[t, hh] @ k[s, kv] for s in allowed]) * c.attn_scale
                p = np.exp(sc - sc.max())
                p /= p.sum()
                o[t, hh] = sum(pi * v[s, kv] for pi, s in zip(p, allowed, strict=True))
        a = o.reshape(T, -1) @ P["wo"][li].T
        if c.sandwich_norm:
            a = _rms(a, P["post_attn_norm"][li], c.norm_eps)
        x = x + a
        h = _rms(x, P["ffn_norm"][li], c.norm_eps)
        g = h @ P["w_gate"][li].T
        g = g / (1 + np.exp(-g)) if c.activation == "silu" else _gelu_tanh(g)
        m = (g * (h @ P["w_up"][li].T)) @ P["w_down"][li].T
        if c.sandwich_norm:
            m = _rms(m, P["post_ffn_norm"][li], c.norm_eps)
        x = x + m
    return _rms(x, np.asarray(model.final_norm, np.float64), c.norm_eps)


class _Layer:
    def __init__(self, weight, name):
        self.weight, self.name = weight, name

    def __getitem__(self, li):
        return self.weight(self.name, li)


# ---------------------------------------------------------------- BERT sentence encoder
# Written from the BERT description (Devlin et al. 2019) and the sentence-transformers
# modules (mean pooling over real tokens, then L2 normalisation), on the safetensors
# tensor names directly; per-head loops, float64, no padding (one sentence at a time).

_erf = np.vectorize(math.erf)


def _layer_norm64(x, w, b, eps):
    mu = x.mean(axis=-1, keepdims=True)
    var = ((x - mu) ** 2).mean(axis=-1, keepdims=True)
    return (x - mu) / np.sqrt(var + eps) * w + b


def reference_bert_states(weights, tokens, n_heads: int, eps: float) -> np.ndarray:
    """(T, d) final hidden states of BertModel on one unpadded sequence, token type 0."""
    tokens = np.asarray(tokens)
    T = len(tokens)
    # rows of the tables first (converting the whole vocabulary table would dominate)
    w = {
        k: np.asarray(v, np.float64)
        for k, v in weights.items()
        if k.startswith("encoder.layer.") or "LayerNorm" in k
    }
    x = (
        np.asarray(weights["embeddings.word_embeddings.weight"][tokens], np.float64)
        + np.asarray(weights["embeddings.position_embeddings.weight"][np.arange(T)], np.float64)
        + np.asarray(
            weights["embeddings.token_type_embeddings.weight"][np.zeros(T, int)], np.float64
        )
    )
    x = _layer_norm64(x, w["embeddings.LayerNorm.weight"], w["embeddings.LayerNorm.bias"], eps)
    n_layers = 1 + max(int(k.split(".")[2]) for k in w if k.startswith("encoder.layer."))
    d = x.shape[1]
    hd = d // n_heads
    for i in range(n_layers):
        p = f"encoder.layer.{i}."

        def lin(v, name, p=p):
            return v @ w[p + name + ".weight"].T + w[p + name + ".bias"]

        q = lin(x, "attention.self.query")
        k = lin(x, "attention.self.key")
        v = lin(x, "attention.self.value")
        ctx = np.zeros_like(x)
        for h in range(n_heads):
            sl = slice(h * hd, (h + 1) * hd)
            s = q[:, sl] @ k[:, sl].T / math.sqrt(hd)
            s = np.exp(s - s.max(axis=1, keepdims=True))
            ctx[:, sl] = (s / s.sum(axis=1, keepdims=True)) @ v[:, sl]
        x = _layer_norm64(
            x + lin(ctx, "attention.output.dense"),
            w[p + "attention.output.LayerNorm.weight"],
            w[p + "attention.output.LayerNorm.bias"],
            eps,
        )
        u = lin(x, "intermediate.dense")
        u = 0.5 * u * (1.0 + _erf(u / math.sqrt(2.0)))
        x = _layer_norm64(
            x + lin(u, "output.dense"),
            w[p + "output.LayerNorm.weight"],
            w[p + "output.LayerNorm.bias"],
            eps,
        )
    return x


def reference_sentence_embedding(weights, tokens, n_heads: int, eps: float) -> np.ndarray:
    """(d,) mean of the final states over all tokens of one sequence, L2-normalised."""
    m = reference_bert_states(weights, tokens, n_heads, eps).mean(axis=0)
    return m / np.linalg.norm(m)
