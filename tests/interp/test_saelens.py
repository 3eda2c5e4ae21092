"""SAELens' on-disk format (`cfg.json` + `sae_weights.safetensors`): files written by hand
in SAELens' documented layout load and compute SAELens' encode/decode (a numpy reference),
jaxlab SAEs round-trip, unsupported configs are refused; `normalize_activations`."""

from __future__ import annotations

import json

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from safetensors.numpy import load_file, save_file

from jaxlab import interp as ip

D_IN, D_SAE, K = 6, 10, 3


def _weights(seed=0):
    rng = np.random.default_rng(seed)
    return {
        "W_enc": rng.normal(size=(D_IN, D_SAE)).astype(np.float32),
        "W_dec": rng.normal(size=(D_SAE, D_IN)).astype(np.float32),
        "b_enc": rng.normal(size=(D_SAE,)).astype(np.float32),
        "b_dec": rng.normal(size=(D_IN,)).astype(np.float32),
    }


def _write(folder, cfg, weights):
    folder.mkdir()
    save_file(weights, str(folder / "sae_weights.safetensors"))
    (folder / "cfg.json").write_text(json.dumps(cfg))


def _saelens_encode(w, x, arch, k=None, apply_b_dec=True, threshold=None):
    """SAELens' encode, in numpy: act((x - b_dec * apply) @ W_enc + b_enc)."""
    pre = (x - w["b_dec"] * apply_b_dec) @ w["W_enc"] + w["b_enc"]
    if arch == "standard":
        return np.maximum(pre, 0)
    if arch == "jumprelu":
        return np.where(pre > threshold, np.maximum(pre, 0), 0)
    out = np.zeros_like(pre)
    idx = np.argsort(-pre, axis=-1)[:, :k]
    np.put_along_axis(out, idx, np.maximum(np.take_along_axis(pre, idx, -1), 0), -1)
    return out


def _v6_cfg(arch, **extra):
    return {
        "architecture": arch,
        "d_in": D_IN,
        "d_sae": D_SAE,
        "dtype": "float32",
        "device": "cpu",
        "apply_b_dec_to_input": True,
        "normalize_activations": "none",
        "reshape_activations": "none",
        "meta": {"model_name": "gpt2", "hook_name": "blocks.3.hook_resid_pre", "hook_layer": 3},
        **extra,
    }


@pytest.mark.parametrize(
    ("arch", "cls", "extra"),
    [
        ("topk", ip.TopKSAE, {"k": K, "rescale_acts_by_decoder_norm": False}),
        ("standard", ip.ReLUSAE, {}),
    ],
)
def test_handwritten_saelens_folder_loads_and_matches_saelens_math(tmp_path, arch, cls, extra):
    w = _weights()
    _write(tmp_path / "sae", _v6_cfg(arch, **extra), w)
    sae = ip.load_sae(tmp_path / "sae")
    assert isinstance(sae, cls)
    x = np.random.default_rng(1).normal(size=(5, D_IN)).astype(np.float32)
    z_ref = _saelens_encode(w, x, arch, k=K)
    z = np.asarray(jax.vmap(sae.encode)(jnp.asarray(x)))
    np.testing.assert_allclose(z, z_ref, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(
        np.asarray(jax.vmap(sae)(jnp.asarray(x))),
        z_ref @ w["W_dec"] + w["b_dec"],
        rtol=1e-5,
        atol=1e-5,
    )


def test_pre_v6_config_and_apply_b_dec_false(tmp_path):
    w = _weights(2)
    legacy = {
        "d_in": D_IN,
        "d_sae": D_SAE,
        "model_name": "gpt2",
        "hook_name": "blocks.8.hook_resid_pre",
        "hook_layer": 8,
        "activation_fn_str": "topk",
        "activation_fn_kwargs": {"k": K},
        "apply_b_dec_to_input": False,
        "normalize_activations": "none",
    }
    _write(tmp_path / "old", legacy, w)
    sae = ip.load_sae(tmp_path / "old")
    assert isinstance(sae, ip.TopKSAE)
    assert sae.k == K
    x = np.random.default_rng(3).normal(size=(4, D_IN)).astype(np.float32)
    z_ref = _saelens_encode(w, x, "topk", k=K, apply_b_dec=False)
    np.testing.assert_allclose(
        np.asarray(jax.vmap(sae.encode)(jnp.asarray(x))), z_ref, rtol=1e-4, atol=1e-4
    )


@pytest.mark.parametrize("kind", ["topk", "relu", "batchtopk"])
def test_save_writes_saelens_layout_and_round_trips(tmp_path, kind):
    key = jax.random.key(0)
    sae = {
        "topk": lambda: ip.TopKSAE(D_IN, D_SAE, K, key=key),
        "relu": lambda: ip.ReLUSAE(D_IN, D_SAE, key=key),
        "batchtopk": lambda: ip.BatchTopKSAE(D_IN, D_SAE, K, key=key),
    }[kind]()
    sae = jax.tree.map(lambda a: a + 0.1, sae)  # non-zero biases / threshold
    ip.save_sae(sae, tmp_path / "s", model_name="smollm2", hook_name="blocks.2.hook_resid_post")
    cfg = json.loads((tmp_path / "s" / ip.SAE_CFG_FILENAME).read_text())
    tensors = load_file(str(tmp_path / "s" / ip.SAE_WEIGHTS_FILENAME))
    assert (
        cfg["architecture"] == {"topk": "topk", "relu": "standard", "batchtopk": "jumprelu"}[kind]
    )
    assert (cfg["d_in"], cfg["d_sae"], cfg["apply_b_dec_to_input"]) == (D_IN, D_SAE, True)
    assert cfg["normalize_activations"] == "none"
    assert cfg["meta"]["hook_name"] == "blocks.2.hook_resid_post"
    assert tensors["W_enc"].shape == (D_IN, D_SAE)
    assert tensors["W_dec"].shape == (D_SAE, D_IN)
    np.testing.assert_array_equal(tensors["b_dec"], np.asarray(sae.b_dec))
    x = np.random.default_rng(4).normal(size=(5, D_IN)).astype(np.float32)
    thr = tensors.get("threshold")
    z_ref = _saelens_encode(tensors, x, cfg["architecture"], k=cfg.get("k"), threshold=thr)
    back = ip.load_sae(tmp_path / "s")
    assert type(back) is type(sae)
    np.testing.assert_allclose(
        np.asarray(jax.vmap(back.encode)(jnp.asarray(x))), z_ref, rtol=1e-5, atol=1e-5
    )
    for name in ("W_enc", "W_dec", "b_enc", "b_dec"):
        np.testing.assert_array_equal(np.asarray(getattr(back, name)), getattr(sae, name))


def test_unsupported_configs_are_refused(tmp_path):
    w = _weights()
    _write(tmp_path / "a", _v6_cfg("standard", normalize_activations="layer_norm"), w)
    with pytest.raises(ValueError, match="normalize_activations"):
        ip.load_sae(tmp_path / "a")
    thr = np.linspace(0, 1, D_SAE).astype(np.float32)
    _write(tmp_path / "b", _v6_cfg("jumprelu"), {**w, "threshold": thr})
    with pytest.raises(ValueError, match="threshold"):
        ip.load_sae(tmp_path / "b")
    _write(tmp_path / "c", {**_v6_cfg("standard"), "d_in": D_IN + 1}, w)
    with pytest.raises(ValueError, match="W_enc has shape"):
        ip.load_sae(tmp_path / "c")
    _write(tmp_path / "d", _v6_cfg("gated"), w)
    with pytest.raises(ValueError, match="architecture"):
        ip.load_sae(tmp_path / "d")
    with pytest.raises(ValueError, match="cfg.json"):
        ip.load_sae(tmp_path / "none")


def test_normalize_activations_expected_average_only_in():
    rng = np.random.default_rng(5)
    x = (rng.normal(size=(512, D_IN)) * 40.0 + 3.0).astype(np.float32)
    s = float(np.sqrt(D_IN) / np.linalg.norm(x.astype(np.float64), axis=1).mean())
    assert ip.norm_scaling_factor(x) == pytest.approx(s, rel=1e-9)
    sae0 = ip.TopKSAE(D_IN, D_SAE, K, key=jax.random.key(1))
    key = jax.random.key(2)
    folded, state, _ = ip.fit_sae(
        x, sae0, key=key, steps=3, batch_size=64, normalize_activations="expected_average_only_in"
    )
    ref, _, _ = ip.fit_sae(x, sae0, key=key, steps=3, batch_size=64, scale=s)
    np.testing.assert_allclose(np.asarray(state.sae.W_enc), np.asarray(ref.W_enc), rtol=1e-4)
    xs = jnp.asarray(x[:7])
    np.testing.assert_allclose(
        np.asarray(jax.vmap(folded)(xs)),
        np.asarray(jax.vmap(ref)(xs * s)) / s,
        rtol=1e-3,
        atol=1e-3,
    )
    np.testing.assert_allclose(
        np.asarray(jax.vmap(folded.encode)(xs)),
        np.asarray(jax.vmap(ref.encode)(xs * s)),
        rtol=1e-3,
        atol=1e-3,
    )
    with pytest.raises(ValueError, match="normalize_activations"):
        ip.fit_sae(x, sae0, key=key, steps=1, normalize_activations="constant_norm_rescale")
    with pytest.raises(ValueError, match="scale"):
        ip.fit_sae(
            x, sae0, key=key, steps=1, scale=2.0, normalize_activations="expected_average_only_in"
        )
