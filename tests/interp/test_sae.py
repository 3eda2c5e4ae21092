"""SAE modules and SAEStep: initialisation, gradients, planted dictionaries, dead latents."""

from __future__ import annotations

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

import jaxlab.interp as ip


def planted(key, n=8192, d=16, m=48, k=3, dtype=jnp.float32):
    """k-sparse positive codes over a random overcomplete unit-norm dictionary (m > d)."""
    k1, k2, k3 = jax.random.split(key, 3)
    D = jax.random.normal(k1, (m, d), dtype)
    D = D / jnp.linalg.norm(D, axis=1, keepdims=True)
    idx = jax.vmap(lambda kk: jax.random.choice(kk, m, (k,), replace=False))(
        jax.random.split(k2, n)
    )
    mag = jax.random.uniform(k3, (n, k), dtype, 0.5, 1.5)
    Z = jnp.zeros((n, m), dtype).at[jnp.arange(n)[:, None], idx].set(mag)
    return Z @ D, D


def mcc(D, W_dec):
    """Mean over true atoms of the best |cosine| with a learned decoder row."""
    Wn = W_dec / jnp.linalg.norm(W_dec, axis=1, keepdims=True)
    return float(jnp.mean(jnp.max(jnp.abs(D @ Wn.T), axis=1)))


def test_init_conventions(getkey):
    x = jax.random.normal(getkey(), (50, 8), jnp.float32)
    for sae in (
        ip.TopKSAE(8, 32, 4, key=getkey(), b_dec=x),
        ip.ReLUSAE(8, 32, key=getkey()),
        ip.BatchTopKSAE(8, 32, 4, key=getkey(), b_dec=x),
    ):
        np.testing.assert_allclose(jnp.linalg.norm(sae.W_dec, axis=1), 1.0, rtol=1e-6)
        np.testing.assert_array_equal(sae.W_enc, sae.W_dec.T)
        assert sae.d_in == 8
        assert sae.d_sae == 32
    np.testing.assert_allclose(
        ip.TopKSAE(8, 32, 4, key=getkey(), b_dec=x).b_dec, np.asarray(x).mean(0), rtol=1e-6
    )


def test_topk_encode_and_vmap_equals_loop(getkey):
    sae = ip.TopKSAE(8, 32, 5, key=getkey())
    x = jax.random.normal(getkey(), (6, 8), jnp.float32)
    z = jax.vmap(sae.encode)(x)
    pre = np.asarray(jax.vmap(sae.pre_activation)(x))
    for i in range(6):
        top = np.argsort(-pre[i])[:5]
        ref = np.zeros(32, np.float32)
        ref[top] = np.maximum(pre[i, top], 0)
        np.testing.assert_allclose(z[i], ref, rtol=1e-6)
        np.testing.assert_allclose(z[i], sae.encode(x[i]), rtol=1e-6)
    np.testing.assert_allclose(jax.vmap(sae)(x), z @ sae.W_dec + sae.b_dec[None], rtol=1e-5)


def test_sae_bad_inputs(getkey):
    with pytest.raises(ValueError, match="k"):
        ip.TopKSAE(8, 16, 17, key=getkey())
    with pytest.raises(ValueError, match="b_dec"):
        ip.TopKSAE(8, 16, 4, key=getkey(), b_dec=jnp.zeros((5, 7)))
    sae = ip.TopKSAE(8, 16, 4, key=getkey())
    step = ip.SAEStep(jnp.zeros((10, 9)), optax.adam(1e-3), batch_size=4)
    with pytest.raises(ValueError, match="data"):
        step.init(sae, getkey())
    with pytest.raises(ValueError, match="data"):
        ip.SAEStep(jnp.zeros((0, 8)), optax.adam(1e-3))
    with pytest.raises(ValueError, match="aux_k"):
        ip.SAEStep(jnp.zeros((10, 8)), optax.adam(1e-3), aux_k=17).init(sae, getkey())


def test_loss_gradient_equals_finite_differences(getkey):
    # the aux-k residual e is detached: the gradient equals the finite difference of
    # mse(p) + c * min(n_dead / k_aux, 1) * ||e0 - e_hat(p)||^2 with e0 frozen at p0
    x, _ = planted(getkey(), n=64, d=6, m=12, dtype=jnp.float64)
    sae = ip.TopKSAE(6, 12, 3, key=getkey(), dtype=jnp.float64)
    step = ip.SAEStep(x, optax.sgd(1e-2), batch_size=64, aux_k=4, aux_coefficient=0.5)
    dead = jnp.arange(12) < 5
    none = jnp.zeros(12, bool)
    p0 = (sae.W_enc, sae.b_enc, sae.W_dec, sae.b_dec)
    e0 = x - step._loss(p0, sae, x, none)[1][1]

    @jax.jit
    def oracle(p):
        mse = step._loss(p, sae, x, none)[0]
        pre = (x - p[3][None]) @ p[0] + p[1][None]
        pre = jnp.where(dead, pre, -jnp.inf)
        vals, idx = jax.lax.top_k(pre, 4)
        z = jnp.zeros_like(pre).at[jnp.arange(64)[:, None], idx].set(jax.nn.relu(vals))
        aux = jnp.mean(jnp.sum((z @ p[2] - e0) ** 2, axis=1))
        return mse + 0.5 * min(5 / 4, 1.0) * aux

    g = jax.jit(jax.grad(lambda p: step._loss(p, sae, x, dead)[0]))(p0)
    v = jax.tree.map(lambda a: jax.random.normal(getkey(), a.shape, a.dtype), p0)
    eps = 1e-6
    fd = (
        oracle(jax.tree.map(lambda a, b: a + eps * b, p0, v))
        - oracle(jax.tree.map(lambda a, b: a - eps * b, p0, v))
    ) / (2 * eps)
    an = sum(jnp.sum(a * b) for a, b in zip(jax.tree.leaves(g), jax.tree.leaves(v), strict=True))
    assert float(an) == pytest.approx(float(fd), rel=1e-6)
    # and the aux term does contribute (the check is not vacuous)
    g0 = jax.jit(jax.grad(lambda p: step._loss(p, sae, x, none)[0]))(p0)
    assert float(jnp.max(jnp.abs(g[0] - g0[0]))) > 1e-3
    # with no dead latent the aux term is skipped: the loss is the plain MSE, aux 0
    loss0, (_, _, mse0, aux0, _) = step._loss(p0, sae, x, none)
    assert float(aux0) == 0.0
    assert float(loss0) == float(mse0)


@pytest.mark.slow  # the eager step dispatches a few hundred ops one by one
def test_step_jit_equals_eager_and_keeps_unit_decoder(getkey):
    x, _ = planted(getkey(), n=256, d=8, m=16)
    step = ip.SAEStep(x, optax.adam(1e-2), batch_size=32)
    state = step.init(ip.TopKSAE(8, 24, 3, key=getkey()), getkey())
    k = getkey()
    s1, a1 = step.step(state, k)
    s2, a2 = eqx.filter_jit(step.step)(state, k)
    np.testing.assert_allclose(s1.sae.W_dec, s2.sae.W_dec, rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(a1["loss"], a2["loss"], rtol=1e-5)
    np.testing.assert_allclose(jnp.linalg.norm(s2.sae.W_dec, axis=1), 1.0, rtol=1e-5)
    assert int(s2.step) == 1


def test_topk_recovers_planted_dictionary(getkey):
    x, D = planted(getkey())
    sae = ip.TopKSAE(16, 48, 3, key=getkey(), b_dec=x[:1024])
    sae, _, hists = ip.fit_sae(
        x,
        sae,
        key=getkey(),
        steps=1000,
        batch_size=256,
        optimizer=optax.adam(3e-3),
        dead_window=100,
    )
    assert mcc(D, sae.W_dec) > 0.9
    assert float(ip.sae_metrics(sae, x[:4096])["explained_variance"]) > 0.8
    assert hists[0].losses[-1] < 0.3 * hists[0].losses[0]


def _half_dead_topk(key, d, d_sae, k, x):
    # half the latents get encoder columns 100x smaller: positive but never in the top k
    sae = ip.TopKSAE(d, d_sae, k, key=key, b_dec=x[:1024])
    scale = jnp.where(jnp.arange(d_sae) < d_sae // 2, 1e-2, 1.0).astype(x.dtype)
    return eqx.tree_at(lambda s: s.W_enc, sae, sae.W_enc * scale[None, :])


@pytest.mark.parametrize("aux", [1.0 / 32, 0.0])
def test_aux_k_revives_dead_latents(getkey, aux):
    x, _ = planted(getkey(), m=64)
    sae = _half_dead_topk(getkey(), 16, 64, 3, x)
    start = ip.sae_metrics(sae, x[:4096])["dead_fraction"]
    assert float(start) >= 0.5
    sae, _, hists = ip.fit_sae(
        x,
        sae,
        key=getkey(),
        steps=800,
        batch_size=256,
        optimizer=optax.adam(3e-3),
        dead_window=20,
        aux_coefficient=aux,
    )
    dead = float(ip.sae_metrics(sae, x[:4096])["dead_fraction"])
    if aux > 0:
        assert dead < 0.05
        assert hists[0].aux["dead_frac"][-1] < 0.05
    else:  # the control: without aux-k they stay dead
        assert dead >= 0.4


def test_relu_l1_resampling_revives(getkey):
    x, _ = planted(getkey(), m=32)
    sae = ip.ReLUSAE(16, 32, key=getkey(), b_dec=x[:1024])
    dead0 = jnp.arange(32) < 16
    sae = eqx.tree_at(lambda s: s.b_enc, sae, jnp.where(dead0, -100.0, 0.0).astype(x.dtype))
    out = {}
    for every in (100, 0):
        s, _, _ = ip.fit_sae(
            x,
            sae,
            key=getkey(),
            steps=300,
            batch_size=256,
            optimizer=optax.adam(3e-3),
            l1_coefficient=1e-2,
            dead_window=50,
            resample_every=every,
        )
        out[every] = float(ip.sae_metrics(s, x[:4096])["dead_fraction"])
    assert out[0] >= 0.5 > 0.05 > out[100]


def test_batch_topk_mean_l0_and_threshold(getkey):
    x, D = planted(getkey())
    sae = ip.BatchTopKSAE(16, 48, 3, key=getkey(), b_dec=x[:1024])
    sae, _, hists = ip.fit_sae(
        x, sae, key=getkey(), steps=800, batch_size=256, optimizer=optax.adam(3e-3), dead_window=100
    )
    np.testing.assert_allclose(hists[0].aux["l0"], 3.0, rtol=1e-6)  # exactly B*k per batch
    assert float(sae.threshold) > 0
    m = ip.sae_metrics(sae, x[:4096])
    assert 1.5 < float(m["l0"]) < 6
    assert float(m["explained_variance"]) > 0.8
    assert mcc(D, sae.W_dec) > 0.85


@pytest.mark.slow  # compiles four chunk layouts per SAE (run with -m slow)
@pytest.mark.parametrize(
    "kind",
    [
        "topk",
        pytest.param("relu", marks=pytest.mark.slow),
        pytest.param("batchtopk", marks=pytest.mark.slow),
    ],
)
def test_sae_step_passes_shared_step_checks(getkey, tmp_path, kind):
    from tests.step_checks import check_step

    x, _ = planted(getkey(), n=512, d=8, m=16)
    if kind == "topk":
        sae, opts = ip.TopKSAE(8, 24, 3, key=getkey()), {}
    elif kind == "relu":
        sae, opts = ip.ReLUSAE(8, 24, key=getkey()), {"resample_every": 3, "dead_window": 2}
    else:
        sae, opts = ip.BatchTopKSAE(8, 24, 3, key=getkey()), {}
    step = ip.SAEStep(x, optax.adam(1e-2), batch_size=32, **opts)
    check_step(step, step.init(sae, getkey()), key=getkey(), steps=8, tmp_path=tmp_path)


def test_fit_sae_streams_an_activation_store(getkey, tmp_path):
    import jaxlab.lm as lm
    from tests.lm.lm_reference import tiny_llama

    model = lm.Transformer.random(tiny_llama(), key=getkey())
    texts = [list(map(int, jax.random.randint(getkey(), (20,), 0, 61))) for _ in range(30)]
    store = lm.collect(model, None, texts, layers=[1], path=tmp_path / "store")
    assert store.n_tokens == 30 * 19  # skip_first drops each text's attention-sink position
    assert store.d == 24
    sae = ip.TopKSAE(24, 48, 4, key=getkey(), b_dec=jnp.asarray(store.array()[:200]))
    trained, state, hists = ip.fit_sae(
        store,
        sae,
        key=getkey(),
        steps=30,
        batch_size=64,
        buffer_size=256,
        optimizer=optax.adam(1e-2),
    )
    assert len(hists) == 8
    assert int(state.step) == 30  # 4 steps per 256-row buffer
    x = jnp.asarray(store.array())
    before = ip.sae_metrics(sae, x)["explained_variance"]
    assert float(ip.sae_metrics(trained, x)["explained_variance"]) > float(before) + 0.1
    with pytest.raises(ValueError, match="source"):
        ip.fit_sae(store, ip.TopKSAE(16, 32, 4, key=getkey()), key=getkey(), steps=2)
    with pytest.raises(ValueError, match="source"):  # fit_sae's argument (#59)
        ip.fit_sae(jnp.zeros((0, 24), jnp.float32), sae, key=getkey(), steps=2)
