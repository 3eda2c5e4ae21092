"""HAPS (P19) on tiny random decoders: the cached-prefix path against the full model, a zero
generated adapter against the base `lm.score`, factor shapes per architecture, gradients
against finite differences, the REINFORCE estimator against the analytic bandit gradient,
and planted rules (a query-dependent shift; an architecture plus a shift) that routing
alone cannot reach."""

from __future__ import annotations

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

from jaxlab import lm, routing

from ..lm.lm_reference import tiny_gemma, tiny_llama, tiny_qwen

CONFIGS = (tiny_llama(), tiny_gemma(), tiny_qwen())
TOP = 2  # adapted blocks
ACTIVE = 2  # activated (last) prompt tokens
OPTIONS = np.array([5, 6, 7], np.int32)
SUFFIX = [9, 4]  # every prompt ends with these ("Answer:")
PREFIX = 6  # random tokens before the suffix (one prompt length: one compile per model)


@pytest.fixture(scope="module")
def models():
    return [lm.Transformer.random(c, key=jax.random.key(11 + i)) for i, c in enumerate(CONFIGS)]


@eqx.filter_jit
def _bottom(lower, toks):
    pos = jnp.arange(toks.shape[0], dtype=jnp.int32)
    return lower.run(toks, pos, lm.KVCache.empty(lower.config, toks.shape[0]))[0]


_run = eqx.filter_jit(lambda m, t, p, c, lora=None: m.run(t, p, c, lora=lora))
_blocks = eqx.filter_jit(lambda m, x, p, c: m.run_blocks(x, p, c))
_option_logits = eqx.filter_jit(routing.adapted_option_logits)


def _prompts(n, seed):
    rng = np.random.default_rng(seed)
    return [list(rng.integers(10, 50, size=PREFIX)) + SUFFIX for _ in range(n)]


def _inputs(model, prompts, size=PREFIX):
    """(upper, stacked AdaptedInputs) of `prompts` for the top TOP blocks of `model`."""
    start = model.config.n_layers - TOP
    lower, upper = lm.layer_slice(model, 0, start), lm.layer_slice(model, start)
    rows = [
        routing.adapted_inputs(
            upper, _bottom(lower, jnp.asarray(p, jnp.int32)), n_active=ACTIVE, size=size
        )
        for p in prompts
    ]
    return upper, jax.tree_util.tree_map(lambda *x: jnp.stack(x), *rows)


def test_layer_slice_run_blocks_equals_run(models):
    toks = jnp.asarray([3, 8, 1, 4, 9, 2, 7], jnp.int32)
    pos = jnp.arange(7, dtype=jnp.int32)
    for m in models[1:2]:  # all three run through this path in the next test
        full = _run(m, toks, pos, lm.KVCache.empty(m.config, 7))[0]
        s = m.config.n_layers - TOP
        lo, up = lm.layer_slice(m, 0, s), lm.layer_slice(m, s)
        r = _run(lo, toks, pos, lm.KVCache.empty(lo.config, 7))[0]
        h = _blocks(up, r, pos, lm.KVCache.empty(up.config, 7))[0]
        np.testing.assert_array_equal(np.asarray(h), np.asarray(full))
        np.testing.assert_allclose(
            np.asarray(m.token_logits(full, jnp.asarray(OPTIONS))),
            np.asarray(m.logits(full))[:, OPTIONS],
            rtol=1e-5,
            atol=1e-5,
        )
    with pytest.raises(ValueError, match="start, stop"):
        lm.layer_slice(models[0], 2, 2)


@eqx.filter_jit
def _full_model_option_logits(m, toks, lora):
    """The oracle: the whole model, base on the prefix, the adapter on the last tokens."""
    n = toks.shape[0]
    cache = lm.KVCache.empty(m.config, n)
    _, _, cache = m.run(toks[:-ACTIVE], jnp.arange(n - ACTIVE, dtype=jnp.int32), cache)
    pos = jnp.arange(n - ACTIVE, n, dtype=jnp.int32)
    h, _, _ = m.run(toks[-ACTIVE:], pos, cache, lora=lora)
    return m.logits(h[-1])[OPTIONS]


_batched_option_logits = eqx.filter_jit(
    jax.vmap(routing.adapted_option_logits, in_axes=(None, 0, None, None))
)


@pytest.mark.slow
def test_cached_prefix_equals_full_forward(models, getkey):
    prompts = _prompts(3, 0)
    toks = jnp.asarray(prompts, jnp.int32)
    for m in models:
        start = m.config.n_layers - TOP
        upper, inputs = _inputs(m, prompts)
        lora = lm.LoRA(
            upper.config, key=getkey(), rank=2, targets=("q", "v", "o", "down"), init_b_scale=0.3
        )
        got = _batched_option_logits(upper, inputs, lora, jnp.asarray(OPTIONS))
        full = routing.pad_lora(lora, start)
        want = jnp.stack([_full_model_option_logits(m, t, full) for t in toks])
        np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=1e-5, atol=1e-5)
        base = _batched_option_logits(upper, inputs, None, jnp.asarray(OPTIONS))
        ref = np.asarray(lm.forward_batched(m, toks)[0][:, -1])[:, OPTIONS]
        np.testing.assert_allclose(np.asarray(base), ref, rtol=1e-5, atol=1e-5)
        assert not np.allclose(np.asarray(base), np.asarray(want), atol=1e-3)  # the adapter acts


def _haps(models, key, **kw):
    uppers = [lm.layer_slice(m, m.config.n_layers - TOP) for m in models]
    return uppers, routing.HAPS(
        5, [u.config for u in uppers], [1.0, 2.0, 3.0][: len(models)], key=key, **kw
    )


def test_factor_shapes_match_each_architecture(models, getkey):
    uppers, haps = _haps(models, getkey(), rank=3, targets=("q", "v", "down"))
    x = jnp.ones(5, jnp.float32)
    for j, u in enumerate(uppers):
        got = eqx.filter_eval_shape(haps.lora, x, j)
        ref = lm.LoRA(u.config, key=getkey(), rank=3, targets=("q", "v", "down"))
        assert jax.tree_util.tree_map(jnp.shape, got) == jax.tree_util.tree_map(jnp.shape, ref)
        assert all(v.dtype == jnp.float32 for v in jax.tree_util.tree_leaves(got))
        n = sum(v.size for v in (*got.a.values(), *got.b.values()))
        assert haps.generators[j].n_generated == n
    with pytest.raises(ValueError, match="targets"):
        routing.LoRAGenerator(uppers[0].config, 4, key=getkey(), targets=("x",))
    z = jnp.zeros((1, 2, 3), jnp.float32)
    with pytest.raises(ValueError, match="a, b"):
        lm.LoRA.from_factors({"q": z}, {"v": z}, jnp.ones(1, jnp.float32))
    with pytest.raises(ValueError, match="below"):
        routing.pad_lora(lm.LoRA.from_factors({"q": z}, {"q": z}, jnp.ones(1, jnp.float32)), -1)
    padded = routing.pad_lora(lm.LoRA.from_factors({"q": z}, {"q": z}, jnp.ones(1)), 2)
    assert padded.a["q"].shape == (3, 2, 3)
    np.testing.assert_array_equal(np.asarray(padded.layer_scale), [0.0, 0.0, 1.0])


@pytest.mark.slow
def test_zero_generated_lora_leaves_score_bit_identical(models, getkey):
    models = models[1:]  # gemma (sandwich norms, windows) and qwen (biases, untied head)
    uppers, haps = _haps(models, getkey())
    prompts = _prompts(3, 1)
    conts = [[[5], [6, 7], [8]]] * 3
    x = jax.random.normal(getkey(), (5,), jnp.float32)
    for j, m in enumerate(models):
        lora = routing.pad_lora(eqx.filter_jit(haps.lora)(x, j), m.config.n_layers - TOP)
        base = lm.score(m, None, prompts, conts, batch_size=2)
        adapted = lm.score(m, None, prompts, conts, batch_size=2, lora=lora)
        for a, b in zip(base.sum, adapted.sum, strict=True):
            np.testing.assert_array_equal(a, b)
        # a nonzero B changes the scores (the comparison can fail)
        g = haps.generators[j]
        g2 = eqx.tree_at(
            lambda g: g.bias_b, g, jax.random.normal(getkey(), g.bias_b.shape, jnp.float32)
        )
        moved = eqx.tree_at(lambda h, j=j: h.generators[j], haps, g2)
        lora2 = routing.pad_lora(eqx.filter_jit(moved.lora)(x, j), m.config.n_layers - TOP)
        changed = lm.score(m, None, prompts, conts, batch_size=2, lora=lora2)
        assert not np.allclose(base.sum[0], changed.sum[0])


def _task_loss(params, static, x, uppers, inputs, answers):
    haps = eqx.combine(params, static)

    def one(xi, inp, y):
        logits = haps.option_logits(xi, uppers, inp, [jnp.asarray(OPTIONS)] * len(uppers))
        return -jnp.sum(jax.nn.log_softmax(logits, axis=-1)[:, y])

    return jnp.sum(jax.vmap(one)(x, inputs, answers))


@pytest.mark.slow
def test_grad_wrt_hypernetwork_matches_finite_differences(models, getkey):
    models = models[:2]
    uppers, haps = _haps(models, getkey())
    # move B off zero (at B = 0 the gradient in A's generator vanishes)
    for j in range(2):
        haps = eqx.tree_at(
            lambda h, j=j: h.generators[j].weight_b,
            haps,
            0.3 * jax.random.normal(getkey(), haps.generators[j].weight_b.shape, jnp.float32),
        )
    prompts = _prompts(2, 2)
    inputs = [_inputs(m, prompts)[1] for m in models]
    x = jax.random.normal(getkey(), (2, 5), jnp.float32)
    y = jnp.asarray([0, 2])
    params, static = eqx.partition(haps, eqx.is_inexact_array)
    params = jax.tree_util.tree_map(lambda a: a.astype(jnp.float32), params)
    loss = eqx.filter_jit(_task_loss)
    g = eqx.filter_jit(jax.grad(_task_loss))(params, static, x, uppers, inputs, y)
    leaves, tdef = jax.tree_util.tree_flatten(params)
    ks = jax.random.split(getkey(), len(leaves))
    v = jax.tree_util.tree_unflatten(
        tdef,
        [jax.random.normal(k, a.shape, jnp.float32) for k, a in zip(ks, leaves, strict=True)],
    )
    # not trained: the cost, and each generator's layer scale (a stop_gradient constant)
    v = eqx.tree_at(
        lambda p: (p.candidate_cost, *(g.layer_scale for g in p.generators)),
        v,
        (
            jnp.zeros_like(params.candidate_cost),
            *(jnp.zeros_like(g.layer_scale) for g in params.generators),
        ),
    )
    analytic = sum(
        float(jnp.vdot(a, b))
        for a, b in zip(jax.tree_util.tree_leaves(g), jax.tree_util.tree_leaves(v), strict=True)
    )
    eps = 1e-2

    def f(s):
        p = jax.tree_util.tree_map(lambda a, b: a + s * eps * b, params, v)
        return float(loss(p, static, x, uppers, inputs, y))

    fd = (f(1.0) - f(-1.0)) / (2 * eps)
    assert abs(analytic) > 1e-2
    assert abs(fd - analytic) <= 2e-2 * abs(analytic)
    # the generators' gradients are nonzero: the task loss reaches the hypernetwork
    assert float(jnp.abs(g.generators[0].weight_a).max()) > 0
    assert float(jnp.abs(g.trunk.layers[0].weight).max()) > 0


def test_reinforce_is_unbiased_on_a_toy_bandit(getkey):
    logits = jnp.asarray([0.3, -1.0, 0.8, 0.0], jnp.float32)
    rewards = jnp.asarray([1.0, 0.2, -0.5, 2.0], jnp.float32)
    pi = jax.nn.softmax(logits)
    analytic = np.asarray(pi * (rewards - jnp.sum(pi * rewards)))
    n = 20000
    keys = jax.random.split(getkey(), n)
    grads = np.asarray(
        jax.vmap(jax.grad(lambda lg, k: routing.reinforce_surrogate(lg, rewards, key=k)))(
            jnp.broadcast_to(logits, (n, 4)), keys
        )
    )
    mean, se = grads.mean(0), grads.std(0) / np.sqrt(n)
    assert np.all(np.abs(mean - analytic) <= 4 * se + 1e-6), (mean, analytic, se)
    assert np.all(se < 0.02)  # the test can tell the analytic gradient from zero
    assert np.max(np.abs(analytic)) > 10 * np.max(se)


def _fit_and_predict(haps, feats, t, cost, uppers, inputs, opts, tr, te, *, key, steps):
    """Fit HAPS on queries `tr` (answers `t`); on `te`: every architecture's adapted
    correctness (n_te, M) and the router's choice (n_te,)."""
    trained, hist = routing.fit_haps(
        haps,
        feats[tr],
        t[tr],
        np.tile(cost, (tr.size, 1)),
        uppers,
        inputs_rows(inputs, tr),
        opts,
        key=key,
        steps=steps,
        optimizer=optax.adamw(1e-2, weight_decay=1e-4),
        batch_size=16,
    )
    assert np.all(np.isfinite(hist.losses))
    logits, logp = routing.haps_predict(trained, feats[te], uppers, inputs_rows(inputs, te), opts)
    correct = np.asarray(jnp.argmax(logits, -1)) == t[te][:, None]
    return correct, np.asarray(jnp.argmax(logp, -1))


@pytest.mark.slow
def test_haps_recovers_a_planted_rule_routing_alone_cannot(models, getkey):
    """The right option is planted in the features (t_i); the base models' choices do not
    know it, so routing among them is capped by their oracle; HAPS generates the adapter."""
    models = models[:2]
    n = 72
    rng = np.random.default_rng(3)
    t = rng.integers(0, 3, n)
    feats = np.concatenate([np.eye(3)[t], rng.normal(size=(n, 2)) * 0.1], 1)
    prompts = _prompts(n, 4)
    pairs = [_inputs(m, prompts) for m in models]
    uppers = [u for u, _ in pairs]
    inputs = [x for _, x in pairs]
    opts = [OPTIONS] * 2
    haps = routing.HAPS(5, [u.config for u in uppers], [1.0, 1.5], key=getkey())
    base_logits, _ = routing.haps_predict(haps, feats, uppers, inputs, opts)
    base_correct = np.asarray(jnp.argmax(base_logits, -1)) == t[:, None]  # (N, M)
    ceiling = base_correct.max(1).mean()  # routing-only oracle over the plain models
    tr, te = np.arange(48), np.arange(48, n)
    correct, choice = _fit_and_predict(
        haps, feats, t, [1.0, 1.5], uppers, inputs, opts, tr, te, key=getkey(), steps=150
    )
    acc = float(correct[np.arange(te.size), choice].mean())
    assert ceiling < 0.9
    assert acc >= 0.95 * 1.0, (acc, ceiling)  # the planted oracle is 1


@pytest.mark.slow
def test_haps_recovers_a_planted_architecture_and_shift(models, getkey):
    """The planted rule has both halves: option t_i is right (the query-dependent shift,
    known only through the features) and, for t_i = 1 or 2, only one architecture can name
    it: architecture 0's option 1 is the same token as its option 0 (a tie, which argmax
    resolves to option 0), architecture 1's option 2 the same as its option 1. So t = 1
    needs architecture 1, t = 2 architecture 0, t = 0 either; the planted oracle is 1.

    Routing-only (a kNN router over the plain models, the same features) cannot exceed the
    plain models' oracle (its planted ceiling); either architecture alone, adapted, cannot
    exceed the share of queries it can name; HAPS must route and adapt."""
    models = models[:2]
    n = 90
    rng = np.random.default_rng(5)
    t = rng.integers(0, 3, n)
    feats = np.concatenate([np.eye(3)[t], rng.normal(size=(n, 2)) * 0.1], 1).astype(np.float32)
    prompts = _prompts(n, 6)
    pairs = [_inputs(m, prompts) for m in models]
    uppers = [u for u, _ in pairs]
    inputs = [x for _, x in pairs]
    opts = [np.array([5, 5, 7], np.int32), np.array([5, 6, 6], np.int32)]
    cost = [1.0, 1.5]
    haps = routing.HAPS(5, [u.config for u in uppers], cost, key=getkey())
    base_logits, _ = routing.haps_predict(haps, feats, uppers, inputs, opts)
    base_correct = np.asarray(jnp.argmax(base_logits, -1)) == t[:, None]  # (N, M)
    assert not base_correct[t == 1, 0].any()
    assert not base_correct[t == 2, 1].any()
    n_tr = 60
    tr, te = np.arange(n_tr), np.arange(n_tr, n)
    ceiling = base_correct[te].max(1).mean()  # the plain models' oracle on the test queries
    table = routing.RoutingTable(
        quality=base_correct[tr].astype(float),
        cost=np.tile(cost, (n_tr, 1)),
        candidates=("arch0", "arch1"),
        features=feats[tr],
    )
    knn = routing.KNNRouter.fit(table, k=5)
    ch = np.asarray(routing.route(knn, feats[te]))
    routed_plain = float(base_correct[te, :][np.arange(te.size), ch].mean())
    adapted_correct, choice = _fit_and_predict(
        haps, feats, t, cost, uppers, inputs, opts, tr, te, key=getkey(), steps=200
    )
    acc = float(adapted_correct[np.arange(te.size), choice].mean())
    single_cap = max(np.mean(t[te] != 2 - j) for j in range(2))  # arch j cannot name 2 - j
    assert adapted_correct.mean(0).max() <= single_cap  # structural: the ties hold
    assert ceiling < 0.9
    assert single_cap < 0.9
    assert routed_plain <= ceiling
    # the router learned the architecture half: t = 1 -> 1, t = 2 -> 0
    need = t[te] != 0
    assert np.mean(choice[need] == (t[te][need] == 1)) >= 0.95, choice[need]
    assert acc >= 0.95 * 1.0, (acc, ceiling, single_cap, routed_plain)


def inputs_rows(inputs, idx):
    return [jax.tree_util.tree_map(lambda a: a[idx], x) for x in inputs]
