"""Llama, Gemma-3 and Qwen2 decoders as one equinox module with layer-stacked weights.

The per-layer weights are stacked along a leading layer axis and the layers run
under `lax.scan` (one compiled block, fast compiles). Architectural differences
(RoPE pairing, QK-norm, Q/K/V biases, sandwich norms, GeGLU, embedding scale,
sliding windows and per-layer RoPE bases) are fields of the static `LMConfig`.

Every forward pass goes through a key/value cache: a full forward is a prefill
into an empty cache of its own length, and decoding writes one slot per step.
Cache slots carry their token's position (-1 for empty or padding slots), so left
padding, causality and sliding windows are all one mask:
`pos_k >= 0 and slot_k <= slot_q and (window == 0 or pos_q - pos_k < window)`.

Papers: Llama (Touvron et al. 2023), Gemma 3 (Gemma Team 2025), Qwen2 (Yang et
al. 2024), RoPE (Su et al. 2021), GQA (Ainslie et al. 2023).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float, Int

from .._core import check_ids, check_nonnegative_int, check_positive_int
from ._config import LMConfig
from ._lora import LoRA, adapted_weight
from ._quant import LayerWeight, QuantWeight, embed_rows, kernel_rows, project, project_f32

__all__ = ["Transformer", "Layers", "KVCache", "SITES", "HEAD_SITES", "layer_slice"]

_Z = np.int32(0)

SITES = ("resid_pre", "attn_out", "resid_mid", "mlp_out", "resid_post")
"""Activation sites of residual width that `forward(capture=...)` and `intervene=`
address, per layer: each is (T, d_model)."""

HEAD_SITES = ("z", "pattern")
"""Per-head attention sites that `forward(capture=...)` and `intervene=` also address,
per layer: `"z"`, each head's attention output before the output projection
(T, n_heads, head_dim); `"pattern"`, the attention probabilities (n_heads, T, S) over
the S cached keys (S = T in a full forward). Query head h reads key/value head
h // (n_heads // n_kv_heads)."""


class Layers(eqx.Module):
    """All blocks' weights, stacked on a leading layer axis L (2-D weights are (out, in))."""

    attn_norm: Float[Array, "L d"]
    wq: Float[Array, "L hq d"]
    wk: Float[Array, "L hkv d"]
    wv: Float[Array, "L hkv d"]
    wo: Float[Array, "L d hq"]
    ffn_norm: Float[Array, "L d"]
    w_gate: Float[Array, "L f d"]
    w_up: Float[Array, "L f d"]
    w_down: Float[Array, "L d f"]
    q_norm: Float[Array, "L hd"] | None
    k_norm: Float[Array, "L hd"] | None
    post_attn_norm: Float[Array, "L d"] | None
    post_ffn_norm: Float[Array, "L d"] | None
    bq: Float[Array, "L hq"] | None = None
    bk: Float[Array, "L hkv"] | None = None
    bv: Float[Array, "L hkv"] | None = None


class KVCache(eqx.Module):
    """Keys/values of one sequence (vmap it for a batch).

    **Attributes:**
        k, v: (n_layers, S, n_kv_heads, head_dim).
        pos: (S,) int32 position of the token in each slot; -1 = empty or padding.
        length: () int32, the next slot to write.
    """

    k: Float[Array, "L S kv hd"]
    v: Float[Array, "L S kv hd"]
    pos: Int[Array, " S"]
    length: Int[Array, ""]

    @staticmethod
    def empty(config: LMConfig, size: int, dtype=jnp.float32) -> KVCache:
        """An empty cache of `size` slots."""
        shape = (config.n_layers, size, config.n_kv_heads, config.head_dim)
        return KVCache(
            jnp.zeros(shape, dtype),
            jnp.zeros(shape, dtype),
            jnp.full((size,), -1, jnp.int32),
            jnp.zeros((), jnp.int32),
        )

    @property
    def next_position(self) -> Int[Array, ""]:
        """Position of the next token: the number of real tokens cached."""
        return jnp.sum(self.pos >= 0).astype(jnp.int32)


def model_dtype(dtype) -> jnp.dtype:
    """`dtype` as a model dtype: float32 or bfloat16 (ValueError naming `dtype` otherwise)."""
    try:
        dt = jnp.dtype(dtype)
    except TypeError:
        dt = None
    if dt is None or dt not in (jnp.dtype(jnp.float32), jnp.dtype(jnp.bfloat16)):
        raise ValueError(f"dtype must be float32 or bfloat16, got {dtype}")
    return dt


def _rms_norm(x, w, eps):
    """RMSNorm computed in float32 (mean of squares, rsqrt, scale); returned in x's dtype."""
    x32 = x.astype(jnp.float32)
    y = x32 * jax.lax.rsqrt(jnp.mean(x32 * x32, axis=-1, keepdims=True) + eps)
    return (y * jnp.broadcast_to(w.astype(jnp.float32), y.shape)).astype(x.dtype)


def _rope(x, pos, base, style, factors=None):
    """Rotate (T, H, hd) by positions (T,) with a traced base and optional per-pair
    frequency divisors `factors` (hd/2,); pairs per `style` (angles and rotation in
    float32, returned in x's dtype)."""
    dtype, x = x.dtype, x.astype(jnp.float32)
    hd = x.shape[-1]
    exponent = jnp.arange(0, hd, 2, dtype=jnp.float32) / hd
    inv_freq = jnp.power(base.astype(jnp.float32), -exponent)
    if factors is not None:
        inv_freq = inv_freq / factors.astype(jnp.float32)
    ang = pos.astype(jnp.float32)[:, None] * inv_freq[None, :]
    cos, sin = jnp.cos(ang)[:, None, :], jnp.sin(ang)[:, None, :]
    if style == "interleaved":
        x2 = x.reshape(*x.shape[:-1], hd // 2, 2)
        x0, x1 = x2[..., 0], x2[..., 1]
        out = jnp.stack([x0 * cos - x1 * sin, x0 * sin + x1 * cos], axis=-1)
        return out.reshape(x.shape).astype(dtype)
    x0, x1 = x[..., : hd // 2], x[..., hd // 2 :]
    return jnp.concatenate([x0 * cos - x1 * sin, x0 * sin + x1 * cos], axis=-1).astype(dtype)


#: the projections of `Layers` and their names in a `LoRA`.
_PROJECTIONS = {
    "wq": "q",
    "wk": "k",
    "wv": "v",
    "wo": "o",
    "w_gate": "gate",
    "w_up": "up",
    "w_down": "down",
}


def _kernel_stacks(layers: Layers, rows: int, lora: LoRA | None) -> dict[str, QuantWeight]:
    """The stacked `QuantWeight` projections that `project` multiplies in the C++ kernel
    for `rows` rows of x (and that no adapter of `lora` merges into): these stay whole
    (loop invariants) in the scan over layers, each layer reaching the kernel as a
    `LayerWeight` view, so XLA copies no slice of them per layer."""
    out = {}
    for field, name in _PROJECTIONS.items():
        w = getattr(layers, field)
        adapted = lora is not None and name in lora.a
        if isinstance(w, QuantWeight) and not adapted and kernel_rows(rows, w.activations):
            out[field] = w
    return out


def _linear(x, w, lora_layer, name):
    if isinstance(w, QuantWeight) and lora_layer is not None and name in lora_layer.a:
        w = w.dequantize()  # an adapter merges into the float weight
    return project(x, adapted_weight(w, lora_layer, name))


def _add_bias(x, b):
    return x + jnp.broadcast_to(b.astype(x.dtype), x.shape)


def _edit(x, site, layer_idx, intervene):
    """Apply the edits registered at `site`; an edit sees the activation in float32 (also
    in a bfloat16 model) and its result is rounded back to the activation's dtype."""
    for (s, layer), fn in intervene.items():
        if s == site:
            edited = fn(x.astype(jnp.float32)).astype(x.dtype)
            x = jnp.where(layer_idx == layer, edited, x)
    return x


class Transformer(eqx.Module):
    """A decoder-only language model (Llama, Gemma-3 or Qwen2 family).

    **Attributes:**
        config: static `LMConfig`.
        embed: (vocab, d_model) token embeddings (also the output head when tied).
        layers: `Layers`, stacked on the layer axis.
        final_norm: (d_model,) weights of the last RMSNorm.
        lm_head: (vocab, d_model) untied output head, or None.

    Calling `model(tokens)` on (T,) int tokens returns (T, vocab) float32 logits;
    use `jaxlab.lm.forward` for batches, masks, captured activations,
    interventions and LoRA.

    The compute dtype (`dtype`) is the embedding's: a float32 model runs in float32; a
    bfloat16 model (`load(..., dtype=jnp.bfloat16)`) keeps its residual stream,
    projections, captured activations and KV cache in bfloat16, while the matmuls
    accumulate in float32 and RMSNorm (mean of squares), RoPE, the attention scores and
    softmax, the MLP nonlinearity and the logits are computed in float32.
    """

    config: LMConfig = eqx.field(static=True)
    embed: Float[Array, "V d"]
    layers: Layers
    final_norm: Float[Array, " d"]
    lm_head: Float[Array, "V d"] | None

    @property
    def dtype(self) -> jnp.dtype:
        """Compute dtype: the embedding's float dtype (float32 for a `QuantWeight`)."""
        if isinstance(self.embed, QuantWeight):
            return jnp.dtype(jnp.float32)
        return jnp.dtype(self.embed.dtype)

    def astype(self, dtype) -> Transformer:
        """The same model with its float parameters in `dtype`, which is then also its
        compute dtype (see the class docstring); `QuantWeight` levels and scales are kept.

        **Arguments:**
            dtype: float32 or bfloat16.

        **Returns:**
            a `Transformer` (`astype(jnp.bfloat16)` equals `load(..., dtype=jnp.bfloat16)`).
        """
        dt = model_dtype(dtype)

        def cast(a):
            if isinstance(a, QuantWeight) or not eqx.is_array(a):
                return a
            return a.astype(dt) if jnp.issubdtype(a.dtype, jnp.floating) else a

        return jax.tree_util.tree_map(cast, self, is_leaf=lambda a: isinstance(a, QuantWeight))

    def __call__(self, tokens: Int[Array, " T"]) -> Float[Array, "T V"]:
        tokens = jnp.asarray(tokens)
        cache = KVCache.empty(self.config, tokens.shape[0], self.dtype)
        pos = jnp.arange(tokens.shape[0], dtype=jnp.int32)
        h, _, _ = self.run(tokens, pos, cache)
        return self.logits(h)

    @staticmethod
    def random(config: LMConfig, *, key, dtype=jnp.float32) -> Transformer:
        """Randomly initialised weights (N(0, 1/fan_in); norms near 1), for tests."""
        return _random_init(config, key, jnp.dtype(dtype))

    def logits(self, h: Float[Array, "... d"]) -> Float[Array, "... V"]:
        """Output logits (float32) from final hidden states (before the final norm)."""
        hn = _rms_norm(h, self.final_norm, self.config.norm_eps)
        head = self.embed if self.lm_head is None else self.lm_head
        return project_f32(hn, head)

    def token_logits(
        self, h: Float[Array, "... d"], tokens: Int[Array, " K"]
    ) -> Float[Array, "... K"]:
        """`logits(h)[..., tokens]` without the rest of the vocabulary (e.g. K option
        letters: K head rows instead of the whole output matrix). Ids outside the
        vocabulary raise (an `equinox.error_if` under jit): never a wrapped row."""
        tokens = check_ids("tokens", tokens, self.config.vocab_size, what="token ids")
        hn = _rms_norm(h, self.final_norm, self.config.norm_eps).astype(jnp.float32)
        head = self.embed if self.lm_head is None else self.lm_head
        return hn @ embed_rows(head, tokens).astype(jnp.float32).T

    def run(
        self,
        tokens: Int[Array, " T"],
        positions: Int[Array, " T"],
        cache: KVCache,
        *,
        capture: tuple[str, ...] = (),
        intervene: Mapping[tuple[str, int], Callable] | None = None,
        lora: LoRA | None = None,
        capture_layers: tuple[int, ...] | None = None,
    ) -> tuple[Float[Array, "T d"], dict[str, Float[Array, "L T d"]], KVCache]:
        """Run all blocks on a chunk of one sequence, writing it into `cache`.

        **Arguments:**
            tokens: (T,) ids of the chunk.
            positions: (T,) int32 position ids; -1 marks padding (never attended to).
            cache: the sequence's `KVCache`; the chunk goes to slots
                [cache.length, cache.length + T).
            capture: sites (see `SITES`, `HEAD_SITES`) whose per-layer values to return.
            intervene: {(site, layer): fn} editing that activation (T, d) -> (T, d)
                (a head site: its own shape -> the same shape).
            lora: adapters added to the projections.
            capture_layers: the layers whose captured values to keep, in this order
                (static ints); None keeps all. Only these are held in memory inside the
                pass (the values ride in the loop's carry), not every layer's.

        **Returns:**
            hidden states (T, d) before the final norm, {site: (n_layers, T, d)}
            ((len(capture_layers), T, d) with `capture_layers`)
            (head sites: (n_layers, T, n_heads, head_dim) and (n_layers, n_heads, T, S)),
            and the updated cache.
        """
        x = embed_rows(self.embed, tokens)
        if self.config.embed_scale != 1.0:
            x = x * jnp.float32(self.config.embed_scale)
        x = x.astype(self.dtype)
        return self.run_blocks(
            x,
            positions,
            cache,
            capture=capture,
            intervene=intervene,
            lora=lora,
            capture_layers=capture_layers,
        )

    def run_blocks(
        self,
        x: Float[Array, "T d"],
        positions: Int[Array, " T"],
        cache: KVCache,
        *,
        capture: tuple[str, ...] = (),
        intervene: Mapping[tuple[str, int], Callable] | None = None,
        lora: LoRA | None = None,
        capture_layers: tuple[int, ...] | None = None,
    ) -> tuple[Float[Array, "T d"], dict[str, Float[Array, "L T d"]], KVCache]:
        """`run` from a residual stream instead of token ids (the blocks only).

        With `layer_slice(model, start, stop)` this runs a model's top layers on the
        cached residual entering layer `start` (`run` is embedding + `run_blocks`).

        **Arguments:**
            x: (T, d_model) residual stream entering the first block.
            positions, cache, capture, intervene, lora, capture_layers: as `run`.

        **Returns:** as `run`.
        """
        cfg = self.config
        intervene = dict(intervene or {})
        x = x.astype(self.dtype)
        T = x.shape[0]
        start = cache.length
        positions = positions.astype(jnp.int32)
        kpos = jax.lax.dynamic_update_slice(cache.pos, positions, (start,))
        S = kpos.shape[0]
        qslot = start + jnp.arange(T, dtype=jnp.int32)
        kslot = jnp.arange(S, dtype=jnp.int32)
        base_mask = (kpos[None, :] >= 0) & (kslot[None, :] <= qslot[:, None])
        dist = positions[:, None] - kpos[None, :]
        G = cfg.n_heads // cfg.n_kv_heads
        pattern = "pattern" in capture or any(s == "pattern" for s, _ in intervene)
        # quantised projections for the kernel: whole stacks indexed in C++, not scanned
        stacks = _kernel_stacks(self.layers, T, lora)
        xs = (
            dataclasses.replace(self.layers, **dict.fromkeys(stacks)),
            lora,
            jnp.arange(cfg.n_layers, dtype=jnp.int32),
            jnp.asarray(np.asarray(cfg.rope_bases, np.float32)),
            jnp.asarray(np.asarray(cfg.sliding_windows, np.int32)),
            jnp.asarray(cfg.rope_factor_table()),
        )

        def attend(qg, mask, K, V, idx):
            # layer idx's keys and values, read from the loop-carried cache
            ck, cv = K[idx], V[idx]
            scores = jnp.einsum("tkgd,skd->kgts", qg, ck.astype(jnp.float32))
            scores = scores * jnp.float32(cfg.attn_scale)
            scores = jnp.where(mask[None, None], scores, jnp.float32(-1e30))
            probs = jax.nn.softmax(scores, axis=-1)  # float32 (scores are)
            return probs, cv

        def block(carry, inputs):
            x, K, V = carry
            p, lo, idx, base, window, freq_div = inputs
            if stacks:
                p = dataclasses.replace(p, **{f: LayerWeight(w, idx) for f, w in stacks.items()})
            acts = {}

            def site(name, val):
                val = _edit(val, name, idx, intervene)
                if name in capture:
                    acts[name] = val
                return val

            x = site("resid_pre", x)
            h = _rms_norm(x, p.attn_norm, cfg.norm_eps)
            q = _linear(h, p.wq, lo, "q")
            k = _linear(h, p.wk, lo, "k")
            v = _linear(h, p.wv, lo, "v")
            if cfg.qkv_bias:
                q, k, v = _add_bias(q, p.bq), _add_bias(k, p.bk), _add_bias(v, p.bv)
            q = q.reshape(T, cfg.n_heads, cfg.head_dim)
            k = k.reshape(T, cfg.n_kv_heads, cfg.head_dim)
            v = v.reshape(T, cfg.n_kv_heads, cfg.head_dim)
            if cfg.qk_norm:
                q = _rms_norm(q, p.q_norm, cfg.norm_eps)
                k = _rms_norm(k, p.k_norm, cfg.norm_eps)
            q = _rope(q, positions, base, cfg.rope_style, freq_div)
            k = _rope(k, positions, base, cfg.rope_style, freq_div)
            # in place: one slot range of the loop-carried (L, S, kv, hd) cache
            K = jax.lax.dynamic_update_slice(K, k.astype(K.dtype)[None], (idx, start, _Z, _Z))
            V = jax.lax.dynamic_update_slice(V, v.astype(V.dtype)[None], (idx, start, _Z, _Z))
            mask = base_mask & ((window == 0) | (dist < window))
            qg = q.reshape(T, cfg.n_kv_heads, G, cfg.head_dim).astype(jnp.float32)
            probs, cv = attend(qg, mask, K, V, idx)
            if pattern:
                pat = site("pattern", probs.reshape(cfg.n_heads, T, S))
                probs = pat.reshape(probs.shape)
            o = jnp.einsum("kgts,skd->tkgd", probs, cv.astype(jnp.float32))
            z = site("z", o.reshape(T, cfg.n_heads, cfg.head_dim).astype(x.dtype))
            a = _linear(z.reshape(T, cfg.n_heads * cfg.head_dim), p.wo, lo, "o")
            if cfg.sandwich_norm:
                a = _rms_norm(a, p.post_attn_norm, cfg.norm_eps)
            a = site("attn_out", a)
            x = site("resid_mid", x + a)
            h = _rms_norm(x, p.ffn_norm, cfg.norm_eps)
            g = _linear(h, p.w_gate, lo, "gate")
            g32 = g.astype(jnp.float32)
            g32 = (
                jax.nn.silu(g32) if cfg.activation == "silu" else jax.nn.gelu(g32, approximate=True)
            )
            g = g32.astype(g.dtype)
            m = _linear(g * _linear(h, p.w_up, lo, "up"), p.w_down, lo, "down")
            if cfg.sandwich_norm:
                m = _rms_norm(m, p.post_ffn_norm, cfg.norm_eps)
            m = site("mlp_out", m)
            x = site("resid_post", x + m)
            return (x, K, V), acts

        sel = None if capture_layers is None else tuple(int(i) for i in capture_layers)
        if sel is not None and not all(0 <= i < cfg.n_layers for i in sel):
            raise ValueError(f"capture_layers must lie in [0, {cfg.n_layers}), got {sel}")
        carry = (x, cache.k, cache.v)
        if not capture or sel is None or sel == tuple(range(cfg.n_layers)):
            (x, ks, vs), acts = jax.lax.scan(block, carry, xs)
            if sel is not None:
                acts = {k: v[jnp.asarray(sel, jnp.int32)] for k, v in acts.items()}
        else:
            # keep only the selected layers' values: a (len(sel), ...) buffer in the carry,
            # where the stacked scan output would hold every layer's
            first = jax.tree_util.tree_map(lambda a: a[0], xs)
            spec = jax.eval_shape(block, carry, first)[1]
            bufs = {k: jnp.zeros((len(sel), *v.shape), v.dtype) for k, v in spec.items()}
            want = jnp.asarray(sel, jnp.int32)

            def block_kept(carry, inputs):
                carry, bufs = carry
                carry, acts = block(carry, inputs)
                hit = want == inputs[2]
                bufs = {
                    k: jnp.where(hit.reshape(-1, *(1,) * acts[k].ndim), acts[k][None], b)
                    for k, b in bufs.items()
                }
                return (carry, bufs), None

            ((x, ks, vs), acts), _ = jax.lax.scan(block_kept, (carry, bufs), xs)
        new_cache = KVCache(ks, vs, kpos, (start + T).astype(jnp.int32))
        return x, acts, new_cache


@eqx.filter_jit
def _random_init(config: LMConfig, key, dtype) -> Transformer:
    # one compiled program instead of a dispatch (and compile) per random array
    L, d, f = config.n_layers, config.d_model, config.d_ff
    hq, hkv = config.n_heads * config.head_dim, config.n_kv_heads * config.head_dim
    ks = iter(jax.random.split(key, 16))

    def w(shape, fan_in):
        return (jax.random.normal(next(ks), shape, jnp.float32) * fan_in**-0.5).astype(dtype)

    def norm(shape):
        return (1.0 + 0.1 * jax.random.normal(next(ks), shape, jnp.float32)).astype(dtype)

    gemma = config.sandwich_norm
    layers = Layers(
        attn_norm=norm((L, d)),
        wq=w((L, hq, d), d),
        wk=w((L, hkv, d), d),
        wv=w((L, hkv, d), d),
        wo=w((L, d, hq), hq),
        ffn_norm=norm((L, d)),
        w_gate=w((L, f, d), d),
        w_up=w((L, f, d), d),
        w_down=w((L, d, f), f),
        q_norm=norm((L, config.head_dim)) if config.qk_norm else None,
        k_norm=norm((L, config.head_dim)) if config.qk_norm else None,
        post_attn_norm=norm((L, d)) if gemma else None,
        post_ffn_norm=norm((L, d)) if gemma else None,
        bq=0.1 * w((L, hq), 1) if config.qkv_bias else None,
        bk=0.1 * w((L, hkv), 1) if config.qkv_bias else None,
        bv=0.1 * w((L, hkv), 1) if config.qkv_bias else None,
    )
    embed = jax.random.normal(next(ks), (config.vocab_size, d), jnp.float32).astype(dtype)
    head = None if config.tied_embeddings else w((config.vocab_size, d), d)
    return Transformer(config, embed, layers, norm((d,)), head)


def layer_slice(model: Transformer, start: int, stop: int | None = None) -> Transformer:
    """The same model restricted to blocks `start .. stop - 1` (embedding and head kept).

    `layer_slice(m, 0, s).run(tokens, ...)` returns the residual entering block `s`, and
    `layer_slice(m, s).run_blocks(that residual, ...)` the final hidden states: together
    they equal `m.run` (so the frozen bottom of a model can be cached per input and only
    the top blocks run while training adapters on them). Its `KVCache` and `LoRA` have
    `stop - start` layers.

    **Arguments:**
        model: a `Transformer`.
        start: first block kept, an int in [0, n_layers).
        stop: one past the last block kept, an int in (start, n_layers] (default
            n_layers). Booleans, floats and strings are refused (ValueError naming them).

    **Returns:** a `Transformer` with `stop - start` layers.
    """
    n = model.config.n_layers
    start = check_nonnegative_int("start", start)
    stop = n if stop is None else check_positive_int("stop", stop)
    if not 0 <= start < stop <= n:
        raise ValueError(
            f"start, stop: expected ints with 0 <= start < stop <= {n}, got {start!r}, {stop!r}"
        )
    cfg = model.config.layers(start, stop)
    layers = jax.tree_util.tree_map(lambda w: w[start:stop], model.layers)
    return Transformer(cfg, model.embed, layers, model.final_norm, model.lm_head)
