"""Model-level metrics and steering on a small random `lm.Transformer`."""

from __future__ import annotations

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxlab.interp as ip
import jaxlab.lm as lm
from tests.lm.lm_reference import tiny_llama


@pytest.fixture(scope="module")
def model():
    return lm.Transformer.random(tiny_llama(), key=jax.random.key(3))


@pytest.fixture(scope="module")
def tokens():
    return jax.random.randint(jax.random.key(4), (3, 12), 0, 61)


class _Identity(eqx.Module):
    def __call__(self, x):
        return x


class _Zero(eqx.Module):
    def __call__(self, x):
        return jnp.zeros_like(x)


def test_ce_loss_score_identity_is_one_zero_is_zero(model, tokens, getkey):
    one = ip.ce_loss_score(model, tokens, _Identity(), layer=1, skip_first=0)
    assert one["ce_loss_score"] == 1.0
    assert one["kl_score"] == 1.0
    assert one["ce_sae"] == one["ce_clean"]
    assert one["kl_sae"] == 0.0
    zero = ip.ce_loss_score(model, tokens, _Zero(), layer=1, input_scale=2.0, skip_first=0)
    assert zero["ce_loss_score"] == 0.0
    assert zero["kl_score"] == 0.0
    # skip_first keeps the leading positions clean in every pass: still exact
    assert (
        ip.ce_loss_score(model, tokens, _Identity(), layer=1, skip_first=1)["ce_loss_score"] == 1.0
    )
    assert ip.ce_loss_score(model, tokens, _Zero(), layer=1, skip_first=1)["ce_loss_score"] == 0.0
    # an SAE in between: the score is the stated ratio of independently computed CEs
    sae = ip.TopKSAE(24, 48, 4, key=getkey())
    out = ip.ce_loss_score(model, tokens, sae, layer=1, batch_size=2, skip_first=0)

    def ce(logits):
        logp = jax.nn.log_softmax(logits[:, :-1], axis=-1)
        return -float(jnp.mean(jnp.take_along_axis(logp, tokens[:, 1:, None], -1)))

    clean = ce(lm.forward_batched(model, tokens)[0])
    abl = ce(lm.forward_batched(model, tokens, intervene={("resid_post", 1): lambda x: 0 * x})[0])
    recon = ce(
        lm.forward_batched(
            model, tokens, intervene={("resid_post", 1): lambda x: jax.vmap(sae)(x)}
        )[0]
    )
    assert out["ce_loss_score"] == pytest.approx((abl - recon) / (abl - clean), rel=1e-4)


def test_kl_score_averages_over_all_positions_like_saelens(model, tokens, getkey):
    # SAELens (decoderesearch/SAELens sae_lens/evals.py at 191d44e): `_kl` returns
    # kl_div(log_softmax(new), softmax(orig), reduction="none").sum(-1) per position, all
    # T of them, and get_downstream_reconstruction_metrics averages them (the CE per token
    # has T-1); kl_div_score = (kl_with_ablation - kl_with_sae) / kl_with_ablation
    sae = ip.TopKSAE(24, 48, 4, key=getkey())
    out = ip.ce_loss_score(model, tokens, sae, layer=1, batch_size=2, skip_first=0)

    def kl_per_position(logits, ref):
        lp, lq = jax.nn.log_softmax(ref, -1), jax.nn.log_softmax(logits, -1)
        return np.asarray(jnp.sum(jnp.exp(lp) * (lp - lq), -1), np.float64)  # (B, T)

    clean = lm.forward_batched(model, tokens)[0]
    abl = lm.forward_batched(model, tokens, intervene={("resid_post", 1): lambda x: 0 * x})[0]
    rec = lm.forward_batched(
        model, tokens, intervene={("resid_post", 1): lambda x: jax.vmap(sae)(x)}
    )[0]
    kl_sae, kl_abl = kl_per_position(rec, clean), kl_per_position(abl, clean)
    assert kl_sae.shape == tokens.shape  # T positions, the last one included
    assert out["kl_sae"] == pytest.approx(kl_sae.mean(), rel=1e-4, abs=1e-7)
    assert out["kl_ablated"] == pytest.approx(kl_abl.mean(), rel=1e-4)
    ref = (kl_abl.mean() - kl_sae.mean()) / kl_abl.mean()
    assert out["kl_score"] == pytest.approx(ref, rel=1e-4)
    # over T-1 positions (the old definition) the value differs
    assert abs(out["kl_ablated"] - kl_abl[:, :-1].mean()) > 1e-4 * kl_abl.mean()


def test_ce_loss_score_default_keeps_the_first_position_clean(model, tokens, getkey):
    # the default (skip_first=1) splices positions 1.. only: the oracle runs the three
    # passes with an intervention that leaves position 0 untouched
    sae = ip.TopKSAE(24, 48, 4, key=getkey())
    out = ip.ce_loss_score(model, tokens, sae, layer=1, batch_size=2)

    def keep_first(edit):
        return lambda x: jnp.concatenate([x[:1], edit(x[1:])], axis=0)

    def ce(logits):
        logp = jax.nn.log_softmax(logits[:, :-1], axis=-1)
        return -float(jnp.mean(jnp.take_along_axis(logp, tokens[:, 1:, None], -1)))

    def run(edit):
        return lm.forward_batched(model, tokens, intervene={("resid_post", 1): keep_first(edit)})[0]

    clean = ce(lm.forward_batched(model, tokens)[0])
    abl, recon = ce(run(lambda x: 0 * x)), ce(run(jax.vmap(sae)))
    assert out["ce_loss_score"] == pytest.approx((abl - recon) / (abl - clean), rel=1e-4)
    assert out == ip.ce_loss_score(model, tokens, sae, layer=1, batch_size=2, skip_first=1)
    all_positions = ip.ce_loss_score(model, tokens, sae, layer=1, batch_size=2, skip_first=0)
    assert out["ce_loss_score"] != all_positions["ce_loss_score"]


def test_ce_loss_score_refuses_left_padding_with_skip_first(model, tokens):
    left_padded = jnp.ones(tokens.shape, jnp.int32).at[0, :2].set(0)
    with pytest.raises(ValueError, match="left-padded"):
        ip.ce_loss_score(model, tokens, _Identity(), layer=1, mask=left_padded)
    out = ip.ce_loss_score(model, tokens, _Identity(), layer=1, mask=left_padded, skip_first=0)
    assert out["ce_loss_score"] == 1.0


def test_ce_loss_score_bad_inputs(model, tokens):
    with pytest.raises(ValueError, match="tokens"):
        ip.ce_loss_score(model, tokens[0], _Identity(), layer=0)
    with pytest.raises(ValueError, match="mask"):
        ip.ce_loss_score(model, tokens, _Identity(), layer=0, mask=jnp.ones((3, 5), jnp.int32))


def test_steering_alpha_zero_is_bit_identical(model, tokens, getkey):
    plain, _ = lm.forward_batched(model, tokens)
    v = jax.random.normal(getkey(), (24,), jnp.float32)
    for positions in (None, [-1, 2]):
        steered, _ = lm.forward_batched(
            model, tokens, intervene=ip.steer(v, 0.0, layers=[0, 2], positions=positions)
        )
        np.testing.assert_array_equal(np.asarray(steered), np.asarray(plain))


def test_steer_at_positions_is_causal_and_matches_manual_add(model, tokens, getkey):
    v = jax.random.normal(getkey(), (24,), jnp.float32)
    plain, acts = lm.forward_batched(model, tokens, capture=["resid_post"], layers=[1])
    out, acts2 = lm.forward_batched(
        model,
        tokens,
        capture=["resid_post"],
        layers=[1],
        intervene=ip.steer(v, 3.0, layers=[1], positions=[5]),
    )
    # earlier positions are untouched (causal), position 5 and later change
    np.testing.assert_array_equal(np.asarray(out[:, :5]), np.asarray(plain[:, :5]))
    assert float(jnp.max(jnp.abs(out[:, 5:] - plain[:, 5:]))) > 1e-3
    np.testing.assert_allclose(
        acts2["resid_post"][:, 0, 5],
        acts["resid_post"][:, 0, 5] + 3 * v[None],
        rtol=1e-5,
        atol=1e-5,
    )


def test_project_out_removes_component(model, tokens, getkey):
    v = jax.random.normal(getkey(), (24,), jnp.float32)
    _, acts = lm.forward_batched(
        model, tokens, capture=["resid_post"], layers=[2], intervene=ip.project_out(v, layers=[2])
    )
    np.testing.assert_allclose(acts["resid_post"] @ v, 0.0, atol=1e-4)


def test_mean_difference_separates_planted_classes(getkey):
    d = 16
    mu = jax.random.normal(getkey(), (d,), jnp.float32)
    labels = jnp.arange(400) % 2 == 0
    x = jax.random.normal(getkey(), (400, d), jnp.float32) + jnp.where(labels[:, None], mu, -mu)
    train = jnp.arange(400) < 300
    fit = ip.mean_difference(x, labels, train=train)
    xn, ln, tn = np.asarray(x), np.asarray(labels), np.asarray(train)
    ref = xn[tn & ln].mean(0) - xn[tn & ~ln].mean(0)
    np.testing.assert_allclose(fit.direction, ref, rtol=1e-5, atol=1e-5)
    assert float(fit.test_auroc) > 0.99
    assert float(fit.test_accuracy) > 0.95
    null = ip.mean_difference(
        jax.random.normal(getkey(), (400, d), jnp.float32), labels, train=train
    )
    assert float(null.test_auroc) < 0.75  # no planted signal: no separation held out
    with pytest.raises(ValueError, match="labels"):
        ip.mean_difference(x, jnp.ones(400, bool), train=train)


def test_clamp_and_ablate_features(getkey):
    sae = ip.TopKSAE(8, 32, 4, key=getkey())
    x = jax.random.normal(getkey(), (5, 8), jnp.float32)
    z = jax.vmap(sae.encode)(x)
    lat = [int(i) for i in jnp.argsort(-z[0])[:2]]
    out = ip.ablate_features(sae, lat)(x)
    ref = x - z[:, lat] @ sae.W_dec[jnp.asarray(lat)]
    np.testing.assert_allclose(out, ref, rtol=1e-5, atol=1e-6)
    # ablating every latent leaves exactly the SAE's error plus b_dec
    full = ip.ablate_features(sae, list(range(32)))(x)
    np.testing.assert_allclose(full, x - jax.vmap(sae)(x) + sae.b_dec[None], rtol=1e-4, atol=1e-5)
    clamped = ip.ClampFeatures(sae, lat, [5.0, 0.0])(x)
    np.testing.assert_allclose(clamped, ref + 5.0 * sae.W_dec[lat[0]][None], rtol=1e-4, atol=1e-5)
    with pytest.raises(ValueError, match="latents"):
        ip.ClampFeatures(sae, [40])


def test_dose_response_with_random_control(model, getkey):
    # behavioural metric: the logit of token 7 at the last position, steering layer 1
    toks = jax.random.randint(getkey(), (10,), 0, 61)
    head = model.embed[7] * model.final_norm  # a direction that raises token 7 after the norm

    def metric(vector):
        logits, _ = lm.forward(model, toks, intervene=ip.steer(vector, 1.0, layers=[2]))
        return logits[-1, 7]

    out = ip.dose_response(metric, head, [0.0, 1.0, 4.0], key=getkey())
    assert out["direction"][0] == out["control"][0] == float(metric(jnp.zeros(24)))
    np.testing.assert_allclose(
        np.linalg.norm(out["random_direction"]), float(jnp.linalg.norm(head)), rtol=1e-5
    )
    assert out["direction"][2] - out["direction"][0] > abs(out["control"][2] - out["control"][0])
