"""TransformerLens conveniences on tiny random decoders: hook-name aliases, the per-head
sites (checked against a float64 NumPy attention written from the architecture
description, `lm_reference`), `run_with_cache`'s names_filter, and `patch_activation`'s
exact oracles."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxlab.lm as lm

from .lm_reference import _rms, _rope, tiny_gemma, tiny_llama, tiny_qwen

CONFIGS = {"llama": tiny_llama(), "gemma3": tiny_gemma(), "qwen2": tiny_qwen()}
TOKENS = np.array([3, 5, 7, 1, 2, 9, 11, 4, 8, 6], np.int32)
SOURCE = np.array([10, 2, 13, 4, 6, 1, 9, 12, 3, 7], np.int32)


@pytest.fixture(scope="module", params=sorted(CONFIGS))
def model(request):
    return lm.Transformer.random(CONFIGS[request.param], key=jax.random.key(3))


@pytest.fixture(scope="module")
def llama():
    return lm.Transformer.random(CONFIGS["llama"], key=jax.random.key(3))


def _attention_reference(model, resid_pre, li):
    """(pattern (H, T, T), z (T, H, hd), attn_out (T, d)) of block li from its input, float64,
    per head and per query as in lm_reference.reference_hidden."""
    c = model.config

    def w(name):
        a = getattr(model.layers, name)
        return None if a is None else np.asarray(a[li], np.float64)

    x = np.asarray(resid_pre, np.float64)
    T = x.shape[0]
    h = _rms(x, w("attn_norm"), c.norm_eps)
    q, k, v = h @ w("wq").T, h @ w("wk").T, h @ w("wv").T
    if c.qkv_bias:
        q, k, v = q + w("bq"), k + w("bk"), v + w("bv")
    q = q.reshape(T, c.n_heads, c.head_dim)
    k = k.reshape(T, c.n_kv_heads, c.head_dim)
    v = v.reshape(T, c.n_kv_heads, c.head_dim)
    if c.qk_norm:
        q, k = _rms(q, w("q_norm"), c.norm_eps), _rms(k, w("k_norm"), c.norm_eps)
    pos = np.arange(T, dtype=np.float64)
    base = c.rope_bases[li]
    q, k = _rope(q, pos, base, c.rope_style), _rope(k, pos, base, c.rope_style)
    G, window = c.n_heads // c.n_kv_heads, c.sliding_windows[li]
    pattern = np.zeros((c.n_heads, T, T))
    z = np.zeros((T, c.n_heads, c.head_dim))
    for hh in range(c.n_heads):
        kv = hh // G
        for t in range(T):
            allowed = [s for s in range(t + 1) if window == 0 or t - s < window]
            sc = np.array([q[t, hh] @ k[s, kv] for s in allowed]) * c.attn_scale
            p = np.exp(sc - sc.max())
            pattern[hh, t, allowed] = p / p.sum()
            z[t, hh] = pattern[hh, t] @ v[:, kv]
    a = z.reshape(T, -1) @ w("wo").T
    if c.sandwich_norm:
        a = _rms(a, w("post_attn_norm"), c.norm_eps)
    return pattern, z, a


def test_head_sites_match_numpy_attention(model):
    li = model.config.n_layers - 1
    _, acts = lm.forward(
        model, TOKENS, capture=("resid_pre", "pattern", "z", "attn_out"), layers=(li,)
    )
    pattern, z, a = _attention_reference(model, acts["resid_pre"][0], li)
    assert acts["pattern"].shape == (1, *pattern.shape)
    assert acts["z"].shape == (1, *z.shape)
    np.testing.assert_allclose(np.asarray(acts["pattern"][0]), pattern, atol=2e-5)
    np.testing.assert_allclose(np.asarray(acts["z"][0]), z, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(np.asarray(acts["attn_out"][0]), a, rtol=1e-4, atol=1e-4)


def test_hook_names_alias_sites(llama):
    assert lm.parse_hook_name("blocks.2.hook_resid_post") == ("resid_post", 2)
    assert lm.parse_hook_name("blocks.0.attn.hook_z") == ("z", 0)
    assert lm.parse_hook_name("blocks.1.attn.hook_pattern") == ("pattern", 1)
    assert lm.hook_name("resid_mid", 1) == "blocks.1.hook_resid_mid"
    for name in lm.hook_names(llama):
        assert lm.hook_name(*lm.parse_hook_name(name)) == name
    assert len(lm.hook_names(llama)) == 7 * llama.config.n_layers
    for bad in ("hook_embed", "blocks.0.attn.hook_q", "blocks.0.mlp.hook_post", "blocks.x.hook_z"):
        with pytest.raises(ValueError, match=r"supported: blocks\.\{i\}\..*hook_resid_pre"):
            lm.parse_hook_name(bad)
    with pytest.raises(ValueError, match="names_filter: .*3 blocks"):
        lm.run_with_cache(llama, TOKENS, names_filter="blocks.3.hook_resid_post")
    with pytest.raises(ValueError, match="site"):
        lm.hook_name("embed", 0)


def test_run_with_cache_equals_forward_and_caches_only_what_is_asked(llama):
    names = ["blocks.2.hook_resid_post", "blocks.0.attn.hook_pattern", "blocks.1.hook_mlp_out"]
    logits, cache = lm.run_with_cache(llama, TOKENS, names_filter=names)
    assert list(cache) == names
    ref_logits, _ = lm.forward(llama, TOKENS)
    np.testing.assert_allclose(np.asarray(logits), np.asarray(ref_logits), rtol=1e-6, atol=1e-6)
    for name in names:
        site, layer = lm.parse_hook_name(name)
        _, acts = lm.forward(llama, TOKENS, capture=(site,), layers=(layer,))
        np.testing.assert_allclose(np.asarray(cache[name]), np.asarray(acts[site][0]), atol=1e-6)
    _, one = lm.run_with_cache(llama, TOKENS, names_filter="blocks.1.attn.hook_z")
    assert list(one) == ["blocks.1.attn.hook_z"]
    c = llama.config
    assert one["blocks.1.attn.hook_z"].shape == (len(TOKENS), c.n_heads, c.head_dim)
    _, resid = lm.run_with_cache(llama, TOKENS, names_filter=lambda n: n.endswith("resid_pre"))
    assert list(resid) == [f"blocks.{i}.hook_resid_pre" for i in range(c.n_layers)]
    _, everything = lm.run_with_cache(llama, TOKENS)
    assert set(everything) == set(lm.hook_names(llama))
    # a batch: the cache gains a leading B axis, each row its sequence's values
    batch = np.stack([TOKENS, SOURCE])
    _, bcache = lm.run_with_cache(llama, batch, names_filter=names[:1])
    _, scache = lm.run_with_cache(llama, SOURCE, names_filter=names[:1])
    np.testing.assert_allclose(
        np.asarray(bcache[names[0]][1]), np.asarray(scache[names[0]]), rtol=1e-5, atol=1e-5
    )
    with pytest.raises(ValueError, match="names_filter"):
        lm.run_with_cache(llama, TOKENS, names_filter=lambda n: False)
    with pytest.raises(ValueError, match="names_filter"):
        lm.run_with_cache(llama, TOKENS, names_filter=3)


@pytest.mark.parametrize(
    "hook",
    ["blocks.1.hook_resid_mid", "blocks.0.attn.hook_z", "blocks.2.attn.hook_pattern"],
)
def test_patching_a_site_with_its_own_activations_changes_nothing(llama, hook):
    clean, _ = lm.forward(llama, TOKENS)
    for position in (None, 4, -1):
        got = lm.patch_activation(llama, TOKENS, TOKENS, hook, position=position)
        np.testing.assert_allclose(np.asarray(got), np.asarray(clean), rtol=1e-6, atol=1e-6)


def test_patching_exact_oracles(model):
    c = model.config
    last = c.n_layers - 1
    clean, _ = lm.forward(model, TOKENS)
    src_logits, _ = lm.forward(model, SOURCE)
    # the logits at p read only the last block's output at p: the source's, after the patch
    got = lm.patch_activation(model, TOKENS, SOURCE, f"blocks.{last}.hook_resid_post", position=-1)
    np.testing.assert_allclose(
        np.asarray(got[-1]), np.asarray(src_logits[-1]), rtol=1e-5, atol=1e-5
    )
    # causal: earlier positions keep the target's logits
    np.testing.assert_allclose(np.asarray(got[:-1]), np.asarray(clean[:-1]), rtol=1e-5, atol=1e-5)
    # the first block's input at every position: the whole run is the source's
    got = lm.patch_activation(model, TOKENS, SOURCE, ("resid_pre", 0))
    np.testing.assert_allclose(np.asarray(got), np.asarray(src_logits), rtol=1e-5, atol=1e-5)
    # a different-length source at the last position: the same oracle
    short = SOURCE[:6]
    short_logits, _ = lm.forward(model, short)
    got = lm.patch_activation(model, TOKENS, short, ("resid_post", last), position=-1)
    np.testing.assert_allclose(
        np.asarray(got[-1]), np.asarray(short_logits[-1]), rtol=1e-5, atol=1e-5
    )


def test_head_patch_moves_attn_out_by_that_head_only(llama):
    """Patching head h's z changes the block's attention output by
    (z_src[:, h] - z_tgt[:, h]) @ W_O[:, h]^T (llama: no post-attention norm)."""
    c, li, h = llama.config, 1, 2
    hd = c.head_dim
    _, t_acts = lm.forward(llama, TOKENS, capture=("z", "attn_out", "resid_pre"), layers=(li,))
    _, s_acts = lm.forward(llama, SOURCE, capture=("z",), layers=(li,))
    wo = np.asarray(llama.layers.wo[li], np.float64)[:, h * hd : (h + 1) * hd]
    dz = np.asarray(s_acts["z"][0][:, h], np.float64) - np.asarray(t_acts["z"][0][:, h], np.float64)
    want_attn = np.asarray(t_acts["attn_out"][0], np.float64) + dz @ wo.T
    # the same block, patched, from its (unchanged) input: resid_mid - resid_pre = attn_out
    got = lm.patch_activation(llama, TOKENS, SOURCE, f"blocks.{li}.attn.hook_z", head=h)
    edited = jnp.asarray(want_attn - np.asarray(t_acts["attn_out"][0], np.float64), jnp.float32)
    ref, _ = lm.forward(llama, TOKENS, intervene={("attn_out", li): lambda a: a + edited})
    np.testing.assert_allclose(np.asarray(got), np.asarray(ref), rtol=1e-4, atol=1e-4)
    with pytest.raises(ValueError, match="head"):
        lm.patch_activation(llama, TOKENS, SOURCE, "blocks.0.hook_resid_post", head=0)
    with pytest.raises(ValueError, match="one length"):
        lm.patch_activation(llama, TOKENS, SOURCE[:4], "blocks.0.hook_resid_post")
    with pytest.raises(ValueError, match="position"):
        lm.patch_activation(llama, TOKENS, SOURCE, "blocks.0.hook_resid_post", position=99)
    with pytest.raises(ValueError, match="supported"):
        lm.patch_activation(llama, TOKENS, SOURCE, "blocks.0.hook_embed")


def test_selected_layers_are_all_the_pass_holds():
    """`capture_layers` keeps the asked-for layers only: the compiled pass that returns one
    layer's attention pattern needs less memory than the every-layer stack it avoids."""
    L, T = 8, 256
    cfg = tiny_llama(n_layers=L, rope_bases=(100.0,) * L, sliding_windows=(0,) * L)
    model = lm.Transformer.random(cfg, key=jax.random.key(0))
    tokens, pos = jnp.zeros(T, jnp.int32), jnp.arange(T, dtype=jnp.int32)

    def run(m, layers):
        cache = lm.KVCache.empty(m.config, T)
        return m.run(tokens, pos, cache, capture=("pattern",), capture_layers=layers)[1]

    stats = jax.jit(lambda m: run(m, (1,))).lower(model).compile().memory_analysis()
    if stats is None:
        pytest.skip("this backend reports no memory analysis")
    every_layer = L * cfg.n_heads * T * T * 4
    assert stats.output_size_in_bytes == every_layer // L
    assert stats.temp_size_in_bytes + stats.output_size_in_bytes < every_layer / 2
    got = jax.jit(lambda m: run(m, (1,)))(model)["pattern"]
    full = jax.jit(lambda m: run(m, None))(model)["pattern"]
    np.testing.assert_array_equal(np.asarray(got[0]), np.asarray(full[1]))
