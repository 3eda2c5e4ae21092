"""Tiny random decoders: architecture, cache, capture/intervene, LoRA, sampling, generation."""

from __future__ import annotations

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

import jaxlab.lm as lm

from .lm_reference import reference_logits, tiny_gemma, tiny_llama, tiny_qwen

CONFIGS = {"llama": tiny_llama(), "gemma3": tiny_gemma(), "qwen2": tiny_qwen()}
TOKENS = np.array([3, 5, 7, 1, 2, 9, 11, 4, 8, 6, 10, 12], np.int32)


@pytest.fixture(scope="module", params=sorted(CONFIGS))
def model(request):
    """Every architecture: for the oracles that must hold for each."""
    return lm.Transformer.random(CONFIGS[request.param], key=jax.random.key(7))


@pytest.fixture(scope="module")
def llama():
    """One architecture for the API-level tests (the code paths are shared)."""
    return lm.Transformer.random(CONFIGS["llama"], key=jax.random.key(7))


_run = eqx.filter_jit(lambda m, t, p, c: m.run(t, p, c))


def test_forward_matches_numpy_reference(model):
    got = np.asarray(lm.forward(model, TOKENS)[0])
    ref = reference_logits(model, TOKENS)
    np.testing.assert_allclose(got, ref, rtol=1e-4, atol=1e-4 * np.abs(ref).max())


def test_jit_equals_eager(llama):
    model = llama
    eager = model(jnp.asarray(TOKENS))
    jitted = lm.forward(model, TOKENS)[0]
    np.testing.assert_allclose(np.asarray(jitted), np.asarray(eager), rtol=1e-5, atol=1e-5)


def test_left_padded_batch_equals_loop(llama):
    model = llama
    prompts = [TOKENS[:5].tolist(), TOKENS.tolist(), TOKENS[3:9].tolist()]
    toks, mask = lm.pad_prompts(prompts, pad_id=0)
    batched, _ = lm.forward_batched(model, toks, mask=mask)
    for i, p in enumerate(prompts):
        single, _ = lm.forward(model, np.asarray(p, np.int32))
        np.testing.assert_allclose(
            np.asarray(batched[i, -len(p) :]), np.asarray(single), rtol=1e-5, atol=1e-5
        )


def test_forward_is_unbatched_and_vmaps_like_forward_batched(llama):
    """The calling convention: `forward` takes one sequence and vmaps; batches are named."""
    model = llama
    rows = jnp.stack([TOKENS[:6], TOKENS[3:9]])
    vmapped = jax.vmap(lambda t: lm.forward(model, t)[0])(rows)
    batched, _ = lm.forward_batched(model, rows)
    np.testing.assert_allclose(np.asarray(vmapped), np.asarray(batched), rtol=1e-5, atol=1e-5)
    with pytest.warns(DeprecationWarning, match="forward_batched"):
        old, _ = lm.forward(model, rows)
    np.testing.assert_array_equal(np.asarray(old), np.asarray(batched))
    with pytest.raises(ValueError, match=r"\(B, T\)"):
        lm.forward_batched(model, TOKENS)


def test_kv_cache_decode_equals_full_forward(model):
    cfg = model.config
    cache = lm.KVCache.empty(cfg, 16)
    h, _, cache = _run(model, jnp.asarray(TOKENS[:4]), jnp.arange(4, dtype=jnp.int32), cache)
    logits = [model.logits(h)]
    for t in range(4, len(TOKENS)):
        h, _, cache = _run(model, jnp.asarray(TOKENS[t : t + 1]), cache.next_position[None], cache)
        logits.append(model.logits(h))
    got = np.concatenate([np.asarray(x) for x in logits])
    full = np.asarray(lm.forward(model, TOKENS)[0])
    np.testing.assert_allclose(got, full, rtol=1e-5, atol=1e-5)


def test_capture_sites_are_consistent(llama):
    model = llama
    logits, acts = lm.forward(model, TOKENS, capture=lm.SITES)
    L = model.config.n_layers
    assert acts["resid_post"].shape == (L, len(TOKENS), model.config.d_model)
    np.testing.assert_array_equal(acts["resid_pre"][1:], acts["resid_post"][:-1])
    np.testing.assert_allclose(
        acts["resid_mid"], acts["resid_pre"] + acts["attn_out"], rtol=1e-6, atol=1e-6
    )
    np.testing.assert_allclose(
        acts["resid_post"], acts["resid_mid"] + acts["mlp_out"], rtol=1e-6, atol=1e-6
    )
    np.testing.assert_allclose(model.logits(acts["resid_post"][-1]), logits, rtol=1e-6, atol=1e-6)
    _, sel = lm.forward(model, TOKENS, capture=("resid_post",), layers=(2, 0))
    np.testing.assert_array_equal(sel["resid_post"], acts["resid_post"][jnp.array([2, 0])])


def test_identity_intervention_is_bit_identical(llama):
    model = llama
    base, acts = lm.forward(model, TOKENS, capture=("resid_post",))
    ident = {(s, 1): (lambda x: x) for s in lm.SITES}
    out, acts2 = lm.forward(model, TOKENS, capture=("resid_post",), intervene=ident)
    np.testing.assert_array_equal(np.asarray(out), np.asarray(base))
    np.testing.assert_array_equal(np.asarray(acts2["resid_post"]), np.asarray(acts["resid_post"]))


def test_steering_and_ablation(llama, getkey):
    model = llama
    d = model.config.d_model
    vec = jax.random.normal(getkey(), (d,), jnp.float32)
    _, base = lm.forward(model, TOKENS, capture=("resid_post",))
    _, steered = lm.forward(
        model, TOKENS, capture=("resid_post",), intervene={("resid_post", 1): lm.Steer(vec, 2.0)}
    )
    # layers before the edit are untouched, the edited layer is shifted exactly by 2 v
    np.testing.assert_array_equal(steered["resid_post"][0], base["resid_post"][0])
    np.testing.assert_allclose(
        steered["resid_post"][1], base["resid_post"][1] + 2.0 * vec[None], rtol=1e-6, atol=1e-6
    )
    assert not np.allclose(steered["resid_post"][2], base["resid_post"][2])
    _, ablated = lm.forward(
        model, TOKENS, capture=("resid_mid",), intervene={("resid_mid", 2): lm.ProjectOut(vec)}
    )
    proj = np.asarray(ablated["resid_mid"][2]) @ np.asarray(vec)
    assert np.max(np.abs(proj)) < 1e-4 * np.linalg.norm(vec) * np.abs(ablated["resid_mid"][2]).max()
    # a vector of the wrong width names the argument, not a broadcasting error
    short = jnp.ones(d - 1, jnp.float32)
    for edit, name in (
        (lm.Steer(short), r"vector \(the steering direction\)"),
        (lm.ProjectOut(short), "direction"),
    ):
        with pytest.raises(ValueError, match=rf"^{name}: expected shape \({d},\)"):
            lm.forward(model, TOKENS, intervene={("resid_post", 1): edit})
    with pytest.raises(ValueError, match="^vector: expected shape"):
        lm.Steer(jnp.ones((2, d)))


def test_forward_rejects_bad_input(llama):
    model = llama
    with pytest.raises(ValueError, match="tokens"):
        lm.forward(model, np.array([0, model.config.vocab_size], np.int32))
    with pytest.raises(ValueError, match="capture"):
        lm.forward(model, TOKENS, capture=("resid",))
    with pytest.raises(ValueError, match="layer"):
        lm.forward(model, TOKENS, intervene={("resid_post", 99): lambda x: x})
    with pytest.raises(ValueError, match="mask"):
        lm.forward(model, TOKENS, mask=np.ones(3, np.int32))
    with pytest.raises(ValueError, match="n_kv_heads"):
        tiny_llama(n_kv_heads=3)


def test_lora_zero_init_is_identity_and_merge_oracle(llama, getkey):
    model = llama
    cfg = model.config
    base, _ = lm.forward(model, TOKENS)
    lora0 = lm.LoRA(cfg, key=getkey(), rank=2, targets=lm.PROJECTIONS)
    out0, _ = lm.forward(model, TOKENS, lora=lora0)
    np.testing.assert_array_equal(np.asarray(out0), np.asarray(base))
    lora = lm.LoRA(
        cfg,
        key=getkey(),
        rank=2,
        alpha=4.0,
        targets=("q", "v", "down"),
        layers=(0, 2),
        init_b_scale=0.3,
    )
    got, _ = lm.forward(model, TOKENS, lora=lora)
    names = {"q": "wq", "v": "wv", "down": "w_down"}
    merge = {
        names[t]: np.einsum(
            "l,lor,lri->loi",
            np.asarray(lora.layer_scale, np.float64),
            np.asarray(lora.b[t], np.float64),
            np.asarray(lora.a[t], np.float64),
        )
        for t in names
    }
    assert np.all(merge["wq"][1] == 0)
    ref = reference_logits(model, TOKENS, lora_merge=merge)
    np.testing.assert_allclose(np.asarray(got), ref, rtol=1e-4, atol=1e-4 * np.abs(ref).max())


def _lm_loss(lora, model, tokens):
    logits, _ = lm.forward(model, tokens[:-1], lora=lora)
    return -jnp.mean(jax.nn.log_softmax(logits)[jnp.arange(tokens.shape[0] - 1), tokens[1:]])


# one compiled value-and-grad, shared by the finite-difference and the training test
_loss_and_grad = eqx.filter_jit(eqx.filter_value_and_grad(_lm_loss))


def test_lora_grad_matches_finite_differences(llama, getkey):
    model = llama
    lora = lm.LoRA(model.config, key=getkey(), rank=2, targets=("q", "up"), init_b_scale=0.1)
    toks = jnp.asarray(TOKENS)
    _, grads = _loss_and_grad(lora, model, toks)
    direction = jax.tree_util.tree_map(
        lambda g: jax.random.normal(getkey(), g.shape, g.dtype), grads.b
    )
    norm = jnp.sqrt(sum(jnp.sum(u * u) for u in jax.tree_util.tree_leaves(direction)))
    direction = jax.tree_util.tree_map(lambda u: u / norm, direction)  # unit step direction
    eps = 1e-2

    def shifted(s):
        b = jax.tree_util.tree_map(lambda x, u: x + s * u, lora.b, direction)
        return float(_lm_loss(eqx.tree_at(lambda m: m.b, lora, b), model, toks))

    fd = (shifted(eps) - shifted(-eps)) / (2 * eps)
    an = sum(
        float(jnp.sum(g * u))
        for g, u in zip(
            jax.tree_util.tree_leaves(grads.b), jax.tree_util.tree_leaves(direction), strict=True
        )
    )
    assert abs(fd - an) <= 2e-2 * abs(an) + 1e-4


def test_lora_training_updates_only_adapters(llama, getkey):
    model = llama
    lora = lm.LoRA(model.config, key=getkey(), rank=2, targets=("q", "up"))
    params, static = eqx.partition(lora, lm.LoRA.trainable_filter(lora))
    # plain SGD: optax's adam mixes int32 counts with floats, which strict promotion rejects
    opt = optax.sgd(0.5)
    state = opt.init(params)
    toks = jnp.asarray(TOKENS)

    losses = []
    for _ in range(15):
        loss, g = _loss_and_grad(eqx.combine(params, static), model, toks)
        g, _ = eqx.partition(g, lm.LoRA.trainable_filter(lora))
        upd, state = opt.update(g, state, params)
        params = eqx.apply_updates(params, upd)
        losses.append(float(loss))
    assert losses[-1] < 0.7 * losses[0]
    trained = eqx.combine(params, static)
    np.testing.assert_array_equal(trained.layer_scale, lora.layer_scale)


def test_sampler_nucleus_and_frequencies(getkey):
    logits = jnp.log(jnp.asarray([0.5, 0.25, 0.15, 0.1], jnp.float32))
    s = lm.Sample(temperature=1.0, top_p=0.7)
    kept = np.isfinite(np.asarray(s.filtered_logits(logits)))
    np.testing.assert_array_equal(kept, [True, True, False, False])  # 0.5 < 0.7 <= 0.75
    keys = jax.random.split(getkey(), 20000)
    draws = np.asarray(jax.vmap(s)(jnp.broadcast_to(logits, (20000, 4)), keys))
    freq = np.bincount(draws, minlength=4) / draws.size
    np.testing.assert_allclose(freq, [2 / 3, 1 / 3, 0, 0], atol=0.015)
    hot = lm.Sample(temperature=2.0)
    draws = np.asarray(jax.vmap(hot)(jnp.broadcast_to(logits, (20000, 4)), keys))
    p = np.sqrt([0.5, 0.25, 0.15, 0.1])
    np.testing.assert_allclose(
        np.bincount(draws, minlength=4) / draws.size, p / p.sum(), atol=0.015
    )
    assert int(lm.Greedy()(logits, None)) == 0
    with pytest.raises(ValueError, match="top_p"):
        lm.Sample(top_p=0.0)


def _naive_greedy(model, prompt, n):
    """Greedy decoding by full recomputation (no cache): one left-padded shape, one compile."""
    seq = list(prompt)
    for _ in range(n):
        toks, mask = lm.pad_prompts([seq], length=16)
        seq.append(int(jnp.argmax(lm.forward_batched(model, toks, mask=mask)[0][0, -1])))
    return seq[len(prompt) :]


def test_generate_greedy_matches_no_cache_loop_batched_and_streamed(model):
    prompts = [TOKENS[:3].tolist(), TOKENS[2:9].tolist()]
    gen = lm.generate(model, prompts, max_new_tokens=6)
    for i, p in enumerate(prompts):
        assert np.asarray(gen.tokens[i]).tolist() == _naive_greedy(model, p, 6)
    assert np.asarray(gen.lengths).tolist() == [6, 6]
    streamed = list(lm.stream(model, prompts[1], max_new_tokens=6))
    assert streamed == np.asarray(gen.tokens[1]).tolist()


def test_generate_stop_tokens_and_sampling_key(llama, getkey):
    model = llama
    p = TOKENS[:4].tolist()
    free = np.asarray(lm.generate(model, [p], max_new_tokens=6).tokens[0])
    stop = int(free[2])
    first = int(np.argmax(free == stop))
    gen = lm.generate(model, [p], max_new_tokens=6, stop_tokens=(stop,), pad_id=0)
    toks = np.asarray(gen.tokens[0])
    assert int(gen.lengths[0]) == first + 1
    np.testing.assert_array_equal(toks[: first + 1], free[: first + 1])
    assert np.all(toks[first + 1 :] == 0)
    with pytest.raises(ValueError, match="key"):
        lm.generate(model, [p], max_new_tokens=2, sampler=lm.Sample(0.8))
    k = getkey()
    a = lm.generate(model, [p], max_new_tokens=5, sampler=lm.Sample(1.5, 0.9), key=k).tokens
    b = lm.generate(model, [p], max_new_tokens=5, sampler=lm.Sample(1.5, 0.9), key=k).tokens
    np.testing.assert_array_equal(a, b)


def test_generate_does_not_recompile_within_a_bucket(llama, caplog):
    model = llama
    lm.generate(model, [TOKENS[:5].tolist()], max_new_tokens=4)
    with jax.log_compiles(True), caplog.at_level("WARNING", logger="jax"):
        caplog.clear()
        lm.generate(model, [TOKENS[:9].tolist()], max_new_tokens=4)
    assert not [r for r in caplog.records if "Compiling" in r.getMessage()]


@pytest.mark.parametrize("n_new", [150])
def test_long_generation_matches_numpy_reference(model, n_new):
    """A long generation (cache written in place, 166 slots) equals the float64 reference
    forward of prompt + tokens so far at every step, for two left-padded rows."""
    prompts = [TOKENS[:3].tolist(), TOKENS[2:9].tolist()]
    gen = lm.generate(model, prompts, max_new_tokens=n_new, return_logits=True)
    assert gen.logits is not None
    for i, p in enumerate(prompts):
        toks = np.asarray(gen.tokens[i])
        ref = reference_logits(model, np.asarray(p + toks[:-1].tolist(), np.int32))
        got = np.asarray(gen.logits[i])
        np.testing.assert_allclose(got, ref[len(p) - 1 :], rtol=1e-4, atol=1e-4 * np.abs(ref).max())
        # greedy: each token is the argmax of the reference logits it was chosen from
        np.testing.assert_array_equal(toks, np.argmax(ref[len(p) - 1 :], axis=-1))


def test_generate_loop_has_no_host_callbacks(llama):
    """One jitted program: no callbacks (host round trips) inside the decode loop."""
    from jaxlab.lm._generate import _generate_jit

    toks, mask = lm.pad_prompts([TOKENS[:5].tolist()])
    text = str(
        jax.make_jaxpr(
            lambda t, m: _generate_jit(
                llama,
                t,
                m,
                jax.random.key(0),
                lm.Greedy(),
                None,
                {},
                jnp.asarray([-1], jnp.int32),
                max_new=8,
                pad_id=0,
                return_logits=False,
            )
        )(jnp.asarray(toks), jnp.asarray(mask))
    )
    assert "while" in text
    assert "callback" not in text
