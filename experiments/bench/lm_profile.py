"""Where a jaxlab.lm decode step and a prefill spend their time: per-op timings.

Each op runs alone, jitted, at the model's real shapes, over all layers as one
`lax.scan` over the stacked layer weights (as in the model), so a row is that op's
share of one step with one dispatch, not n_layers dispatches. Ops per layer: the
RMSNorms and RoPE (`norm_rope`), the q/k/v projections (`qkv`), the output projection
(`o`), the MLP (gate, up, SiLU, down: `mlp`), attention (scores, softmax, weighted sum)
over the whole cache (`attn_full`, S = cache slots) and over the filled part only
(`attn_filled`: the first `READ_BLOCK`-multiple bucket a decode step at the end of the
generation reads), and the cache write (`cache_inplace`: `dynamic_update_slice` into
a donated loop-carried (L, S, kv, hd) buffer; `cache_copy`: the same with a fresh
output buffer, i.e. the whole cache rewritten per step). Once per step: the embedding
row lookup (`embed`) and the final norm + output head for one position (`head`). The
whole step (`step`: `jaxlab.lm` batch-1 decode step from a cache of S slots filled to
S - 1; `prefill`: `jaxlab.lm.prefill` of `prefill_tokens`) is timed the same way;
`overhead_s` = step - (sum of the ops): dispatch, the layer loop, the sampler and what
the isolated ops do not see (fusion across ops makes it negative when ops overlap).
Weights: float32 (dequantised at load) and int8 (`weights="int8"`; the C++ kernel up
to 64 rows, dequantise + XLA dot beyond, i.e. in the prefill).
"""

from __future__ import annotations

import numpy as np

from experiments._harness import Bench

NAME = "lm_profile"
PAPER = "LM"
DESCRIPTION = "per-op timings of one jaxlab.lm decode step and one 512-token prefill"
QUICK = {
    "model": "qwen2.5-coder-0.5b-instruct",
    "weights": ["float32", "int8"],
    "prefill_tokens": 512,
    "cache": 272,  # prompt bucket 16 + 256 new tokens
    "warmup": 1,
    "repeats": 7,
}
FULL = {**QUICK, "repeats": 15}
TINY = {
    "model": "smollm2",
    "weights": ["float32", "int8"],
    "prefill_tokens": 16,
    "cache": 80,
    "warmup": 0,
    "repeats": 1,
}

OPS = ("embed", "norm_rope", "qkv", "o", "mlp", "attn", "cache", "head")


def _ops(lm, model, T: int, S: int, filled: int):
    """name -> zero-argument callable, each op over all layers at (T tokens, S slots)."""
    import jax
    import jax.numpy as jnp

    from jaxlab.lm._model import _rms_norm, _rope, read_buckets
    from jaxlab.lm._quant import embed_rows, project, project_f32

    cfg = model.config
    L, d, H, kv, hd = cfg.n_layers, cfg.d_model, cfg.n_heads, cfg.n_kv_heads, cfg.head_dim
    G = H // kv
    key = jax.random.key(0)
    x = jax.random.normal(key, (T, d), jnp.float32)
    pos = jnp.arange(T, dtype=jnp.int32) + (S - T)
    bases = jnp.asarray(np.asarray(cfg.rope_bases, np.float32))
    ones = jnp.ones((T,), jnp.int32)

    def scan(body, carry, xs):
        return jax.lax.scan(lambda c, a: (body(c, a), None), carry, xs)[0]

    @jax.jit
    def norm_rope(layers, x):
        def body(x, a):
            p, base = a
            h = _rms_norm(x, p.attn_norm, cfg.norm_eps)
            q = _rope(jnp.zeros((T, H, hd)) + h[:, :1, None], pos, base, cfg.rope_style)
            k = _rope(jnp.zeros((T, kv, hd)) + h[:, 1:2, None], pos, base, cfg.rope_style)
            h2 = _rms_norm(x, p.ffn_norm, cfg.norm_eps)
            return x + h2 + 1e-3 * (q.sum() + k.sum())

        return scan(body, x, (layers, bases))

    @jax.jit
    def qkv(layers, x):
        def body(x, p):
            q, k, v = project(x, p.wq), project(x, p.wk), project(x, p.wv)
            return x + 1e-3 * (q[:, :d].sum() + k.sum() + v.sum())

        return scan(body, x, layers)

    @jax.jit
    def o(layers, x):
        xo = jnp.zeros((T, H * hd), jnp.float32) + x[:, :1]
        return scan(lambda c, p: c + 1e-3 * project(xo + c[:, :1], p.wo), x, layers)

    @jax.jit
    def mlp(layers, x):
        def body(x, p):
            g = jax.nn.silu(project(x, p.w_gate))
            return x + 1e-3 * project(g * project(x, p.w_up), p.w_down)

        return scan(body, x, layers)

    K = jax.random.normal(key, (L, S, kv, hd), jnp.float32)
    mask = jnp.arange(S)[None, :] <= pos[:, None]

    def attn_fn(b):
        @jax.jit
        def attn(K, V, x):
            def body(c, i):
                qg = (xq + c).reshape(T, kv, G, hd)
                ck, cv = K[i, :b], V[i, :b]
                s = jnp.einsum("tkgd,skd->kgts", qg, ck) * jnp.float32(cfg.attn_scale)
                s = jnp.where(mask[None, None, :, :b], s, jnp.float32(-1e30))
                out = jnp.einsum("kgts,skd->tkgd", jax.nn.softmax(s, axis=-1), cv)
                return c + 1e-3 * out.reshape(T, H * hd)

            xq = jnp.zeros((T, H * hd), jnp.float32) + x[:, :1]
            return scan(body, jnp.zeros((T, H * hd), jnp.float32), jnp.arange(L))

        return attn

    b_filled = next(b for b in read_buckets(S) if b >= filled)
    attn_full, attn_filled = attn_fn(S), attn_fn(b_filled)
    kvs = jax.random.normal(key, (T, kv, hd), jnp.float32)
    start = S - T

    def cache_write(K, V):
        def body(c, i):
            K, V = c
            K = jax.lax.dynamic_update_slice(K, kvs[None] + i, (i, start, 0, 0))
            V = jax.lax.dynamic_update_slice(V, kvs[None] - i, (i, start, 0, 0))
            return K, V

        return scan(body, (K, V), jnp.arange(L))

    cache_inplace = jax.jit(cache_write, donate_argnums=(0, 1))
    cache_copy = jax.jit(cache_write)
    state = {"kv": (K + 0.0, K + 1.0)}

    def run_inplace():
        state["kv"] = cache_inplace(*state["kv"])
        return state["kv"]

    head_w = model.embed if model.lm_head is None else model.lm_head
    head = jax.jit(
        lambda w, n, x: project_f32(_rms_norm(x[-1:], n, cfg.norm_eps), w)  # one position
    )
    toks = jnp.arange(T, dtype=jnp.int32) % 100 + 10
    embed = jax.jit(lambda w, t: embed_rows(w, t))
    return {
        "embed": lambda: embed(model.embed, toks),
        "norm_rope": lambda: norm_rope(model.layers, x),
        "qkv": lambda: qkv(model.layers, x),
        "o": lambda: o(model.layers, x),
        "mlp": lambda: mlp(model.layers, x),
        "attn_full": lambda: attn_full(K, K, x),
        "attn_filled": lambda: attn_filled(K, K, x),
        "cache_inplace": run_inplace,
        "cache_copy": lambda: cache_copy(K, K),
        "head": lambda: head(head_w, model.final_norm, x),
    }, ones


def setup(config: dict, key) -> Bench:
    import jax

    import jaxlab.lm as lm
    from jaxlab.lm._generate import _step_jit

    T, S = config["prefill_tokens"], config["cache"]
    impls, notes = {}, []
    for w in config["weights"]:
        model, tok = lm.load(config["model"], weights=w)
        words = tok.encode(" ".join(["the cat sat on a mat and looked at the stars"] * 64))
        prompt = np.asarray([(words * (T // len(words) + 1))[:T]], np.int32)
        # decode: one step from a cache of S slots holding S - 1 tokens (the last step of
        # a generation of S - 16 tokens after a 16-token prompt bucket)
        logits, caches = lm.prefill(model, np.asarray([(words * S)[: S - 1]], np.int32))
        caches = lm.KVCache(
            jax.numpy.pad(caches.k, ((0, 0), (0, 0), (0, 1), (0, 0), (0, 0))),
            jax.numpy.pad(caches.v, ((0, 0), (0, 0), (0, 1), (0, 0), (0, 0))),
            jax.numpy.pad(caches.pos, ((0, 0), (0, 1)), constant_values=-1),
            caches.length,
        )
        sampler, k0 = lm.Greedy(), jax.random.key(0)
        impls[f"{w}_decode_step"] = lambda m=model, lg=logits, c=caches, s=sampler, k=k0: _step_jit(
            m, lg, c, k, s, None, {}
        )[1]
        impls[f"{w}_prefill_step"] = lambda m=model, p=prompt: lm.prefill(m, p)[0]
        for job, t in (("decode", 1), ("prefill", T)):
            ops, _ = _ops(lm, model, t, *((S, (S + 16) // 2) if job == "decode" else (T, T)))
            for name, fn in ops.items():
                impls[f"{w}_{job}_{name}"] = fn
    notes.append(
        f"{config['model']}; decode: batch 1, cache S={S} slots (filled S-1); "
        f"prefill: {T} tokens (cache = prompt, so attn_filled = attn_full)."
    )
    fields = {}
    for w in config["weights"]:
        for job in ("decode", "prefill"):
            p = f"{w}_{job}_"
            parts = (
                "embed",
                "norm_rope",
                "qkv",
                "o",
                "mlp",
                "attn_filled",
                "cache_inplace",
                "head",
            )
            for name in (*parts, "attn_full", "cache_copy", "step"):
                fields[f"{p}{name}_ms"] = lambda m, k=p + name: 1e3 * m[k]
            fields[f"{p}overhead_ms"] = lambda m, p=p, parts=parts: (
                1e3 * (m[p + "step"] - sum(m[p + q] for q in parts))
            )
            for name in parts:
                fields[f"{p}{name}_share"] = lambda m, k=p + name, s=p + "step": m[k] / m[s]
    return Bench(
        impls=impls,
        ours=tuple(impls),
        size={"model": config["model"], "prefill_tokens": T, "cache": S, "batch": 1},
        notes=" ".join(notes),
        fields=fields,
    )
