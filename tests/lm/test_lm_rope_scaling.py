"""RoPE scaling (Llama-3 and linear) in `LMConfig`, the Hugging Face reader and the GGUF
reader (issue #58: the models the LM papers used, Llama-3.1-8B among them, need it).

Oracles:
- Meta's published reference `apply_scaling` (llama-models, Llama 3.1), written out
  here as a plain loop over frequencies, for the Llama-3 factors;
- the semantics of linear scaling: the scaled model at positions f*p gives the logits
  the unscaled model gives at positions p;
- the NumPy reference forward (`lm_reference`, float64) with per-layer divisors;
- each file format's round trip: a folder / file asking for the scaling loads to the
  config built from the same numbers directly.
"""

from __future__ import annotations

import dataclasses
import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxlab.lm as lm
from jaxlab.lm._rope_scaling import hf_rope_factors, linear_factors, llama3_factors

from .hf_writer import write_hf
from .lm_reference import reference_logits, tiny_gemma, tiny_llama
from .test_lm_gguf import _write_model

LLAMA31 = dict(factor=8.0, low_freq_factor=1.0, high_freq_factor=4.0)
LLAMA31_CTX = 8192


def meta_apply_scaling(freqs, scale_factor, low_freq_factor, high_freq_factor, old_context_len):
    """Llama 3.1's reference rule (llama-models `apply_scaling`), frequency by frequency."""
    low_freq_wavelen = old_context_len / low_freq_factor
    high_freq_wavelen = old_context_len / high_freq_factor
    out = []
    for freq in freqs:
        wavelen = 2 * math.pi / freq
        if wavelen < high_freq_wavelen:
            out.append(freq)
        elif wavelen > low_freq_wavelen:
            out.append(freq / scale_factor)
        else:
            smooth = (old_context_len / wavelen - low_freq_factor) / (
                high_freq_factor - low_freq_factor
            )
            out.append((1 - smooth) * freq / scale_factor + smooth * freq)
    return np.array(out)


def test_llama3_factors_equal_metas_reference_rule():
    """Llama-3.1-8B's numbers (head_dim 128, rope_theta 500 000): all three regimes."""
    hd, base = 128, 500_000.0
    freqs = base ** (-np.arange(0, hd, 2, dtype=np.float64) / hd)
    want = meta_apply_scaling(freqs, 8.0, 1.0, 4.0, LLAMA31_CTX)
    s = np.asarray(llama3_factors(hd, base, 8.0, 1.0, 4.0, LLAMA31_CTX))
    np.testing.assert_allclose(freqs / s, want, rtol=1e-12)
    # the rule is exercised in each of its three branches
    assert np.sum(s == 1.0) > 0
    assert np.sum(s == 8.0) > 0
    assert np.sum((s > 1.0) & (s < 8.0)) > 0
    assert np.all(np.diff(s) >= 0)  # lower frequencies are never scaled less


def test_linear_scaling_is_position_interpolation():
    """Linear factor 2: the scaled model at positions 2p equals the unscaled one at p."""
    cfg = tiny_llama()
    model = lm.Transformer.random(cfg, key=jax.random.key(0))
    scaled_cfg = dataclasses.replace(
        cfg, rope_freq_factors=(linear_factors(cfg.head_dim, 2.0),) * cfg.n_layers
    )
    scaled = dataclasses.replace(model, config=scaled_cfg)
    toks = jnp.arange(1, 13, dtype=jnp.int32)
    p = jnp.arange(12, dtype=jnp.int32)
    empty = lm.KVCache.empty(cfg, 12)
    a = scaled.run(toks, 2 * p, empty)[0]
    b = model.run(toks, p, empty)[0]
    np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-6, atol=1e-6)
    # and it is not the unscaled model at the same positions (the test can fail)
    assert not np.allclose(np.asarray(scaled.run(toks, p, empty)[0]), np.asarray(b), atol=1e-4)


@pytest.mark.parametrize("style", ["interleaved", "half"])
def test_per_layer_divisors_match_the_reference_forward(style):
    """Different divisors per layer and per pair, both pairings: model == float64
    reference within float32 rounding."""
    cfg = tiny_gemma(rope_style=style)
    rng = np.random.default_rng(0)
    half = cfg.head_dim // 2
    factors = tuple(tuple(float(v) for v in 1 + 7 * rng.random(half)) for _ in cfg.rope_bases)
    cfg = dataclasses.replace(cfg, rope_freq_factors=factors)
    model = lm.Transformer.random(cfg, key=jax.random.key(2))
    toks = np.array([3, 5, 7, 1, 2, 9, 11, 4, 8, 6], np.int32)
    got = np.asarray(lm.forward(model, jnp.asarray(toks))[0])
    np.testing.assert_allclose(got, reference_logits(model, toks), rtol=2e-4, atol=2e-4)
    # the divisors matter: the unscaled model differs from the reference
    plain = dataclasses.replace(model, config=dataclasses.replace(cfg, rope_freq_factors=()))
    assert not np.allclose(
        np.asarray(lm.forward(plain, jnp.asarray(toks))[0]), got, rtol=1e-3, atol=1e-3
    )


def test_layer_slice_keeps_the_divisors_of_its_layers():
    cfg = tiny_gemma()
    half = cfg.head_dim // 2
    factors = tuple((float(i + 1),) * half for i in range(cfg.n_layers))
    model = lm.Transformer.random(
        dataclasses.replace(cfg, rope_freq_factors=factors), key=jax.random.key(1)
    )
    assert lm.layer_slice(model, 1, 3).config.rope_freq_factors == factors[1:3]


def test_config_validation():
    cfg = tiny_llama()
    with pytest.raises(ValueError, match="one tuple of head_dim / 2"):
        dataclasses.replace(cfg, rope_freq_factors=((1.0, 1.0),) * cfg.n_layers)
    with pytest.raises(ValueError, match="finite and > 0"):
        dataclasses.replace(cfg, rope_freq_factors=((1.0, 0.0, 1.0),) * cfg.n_layers)
    with pytest.raises(ValueError, match="factor must be"):
        llama3_factors(8, 100.0, 0.5, 1.0, 4.0, 64)
    with pytest.raises(ValueError, match="high_freq_factor"):
        llama3_factors(8, 100.0, 8.0, 4.0, 4.0, 64)


# ---------------------------------------------------------------- Hugging Face folders


def _llama3_spec(ctx=64):
    return {"rope_type": "llama3", **LLAMA31, "original_max_position_embeddings": ctx}


def test_hf_llama3_folder_loads_with_the_scaling(tmp_path):
    cfg = tiny_llama(rope_bases=(10000.0,) * 3)
    model = lm.Transformer.random(cfg, key=jax.random.key(3))
    folder = write_hf(model, tmp_path / "m", config={"rope_scaling": _llama3_spec()})
    got, _ = lm.load(folder)
    want = llama3_factors(cfg.head_dim, 10000.0, 8.0, 1.0, 4.0, 64)
    assert got.config.rope_freq_factors == (want,) * cfg.n_layers
    assert len(set(want)) > 1  # the tiny config also has pairs in different regimes
    toks = np.array([3, 5, 7, 1, 2, 9, 11, 4], np.int32)
    ref = reference_logits(dataclasses.replace(model, config=got.config), toks)
    np.testing.assert_allclose(
        np.asarray(lm.forward(got, jnp.asarray(toks))[0]), ref, rtol=2e-4, atol=2e-4
    )


def test_hf_gemma3_linear_scaling_applies_to_global_layers_only(tmp_path):
    cfg = tiny_gemma(attn_scale=0.25)
    model = lm.Transformer.random(cfg, key=jax.random.key(4))
    spec = {"rope_type": "linear", "factor": 8.0}
    got, _ = lm.load(write_hf(model, tmp_path / "g", config={"rope_scaling": spec}))
    half = cfg.head_dim // 2
    want = tuple((8.0 if w == 0 else 1.0,) * half for w in cfg.sliding_windows)
    assert got.config.rope_freq_factors == want
    assert (8.0,) * half in want
    assert (1.0,) * half in want


@pytest.mark.parametrize(
    ("spec", "match"),
    [
        ({"rope_type": "yarn", "factor": 4.0}, "type 'yarn' is not supported"),
        ({"type": "dynamic", "factor": 2.0}, "type 'dynamic' is not supported"),
        ({"rope_type": "llama3", "factor": 8.0}, "original_max_position_embeddings"),
        (_llama3_spec() | {"high_freq_factor": 0.5}, "high_freq_factor"),
        (_llama3_spec() | {"factor": float("nan")}, "'factor'"),
        ({"rope_type": "linear", "factor": 0.5}, "'factor'.*>= 1"),
        ("linear", "rope_scaling must be an object"),
    ],
)
def test_hf_bad_rope_scaling_is_refused_by_name(spec, match):
    with pytest.raises(ValueError, match=match):
        hf_rope_factors(spec, 8, 10000.0, "config.json")


def test_hf_default_type_is_no_scaling():
    assert hf_rope_factors({"rope_type": "default"}, 8, 1e4, "c") is None
    assert hf_rope_factors(None, 8, 1e4, "c") is None


# ---------------------------------------------------------------- GGUF files


def _gguf(tmp_path, cfg, extra):
    model = lm.Transformer.random(cfg, key=jax.random.key(5))
    path = tmp_path / "m.gguf"
    _write_model(path, model, extra=extra)
    return model, path


def test_gguf_rope_freqs_tensor_is_applied(tmp_path):
    """llama.cpp stores Llama-3's divisors as the tensor `rope_freqs.weight`."""
    cfg = tiny_llama(rope_bases=(10000.0,) * 3)
    want = llama3_factors(cfg.head_dim, 10000.0, 8.0, 1.0, 4.0, 64)
    model, path = _gguf(
        tmp_path, cfg, lambda w: w.add_tensor("rope_freqs.weight", np.array(want, np.float32))
    )
    got = lm.load_model(lm.read_gguf(path))
    np.testing.assert_allclose(np.asarray(got.config.rope_freq_factors), [want] * 3, rtol=1e-7)
    toks = np.array([3, 5, 7, 1, 2, 9], np.int32)
    np.testing.assert_allclose(
        np.asarray(lm.forward(got, jnp.asarray(toks))[0]),
        reference_logits(dataclasses.replace(model, config=got.config), toks),
        rtol=2e-4,
        atol=2e-4,
    )


def test_gguf_linear_scaling_and_refusals(tmp_path):
    cfg = tiny_llama()

    def linear(w):
        w.add_string("llama.rope.scaling.type", "linear")
        w.add_float32("llama.rope.scaling.factor", 4.0)

    _, path = _gguf(tmp_path, cfg, linear)
    got = lm.load_model(lm.read_gguf(path))
    assert got.config.rope_freq_factors == ((4.0,) * (cfg.head_dim // 2),) * cfg.n_layers

    def yarn(w):
        w.add_string("llama.rope.scaling.type", "yarn")
        w.add_float32("llama.rope.scaling.factor", 4.0)

    _, path = _gguf(tmp_path, cfg, yarn)
    with pytest.raises(ValueError, match="scaling.type='yarn' is not supported"):
        lm.load_model(lm.read_gguf(path))

    _, path = _gguf(
        tmp_path, cfg, lambda w: w.add_tensor("rope_freqs.weight", np.ones(5, np.float32))
    )
    with pytest.raises(ValueError, match="rope_freqs.weight' has shape"):
        lm.load_model(lm.read_gguf(path))

    bad = np.array([1.0, -1.0, 1.0], np.float32)
    _, path = _gguf(tmp_path, cfg, lambda w: w.add_tensor("rope_freqs.weight", bad))
    with pytest.raises(ValueError, match="finite and > 0"):
        lm.load_model(lm.read_gguf(path))


def test_gguf_without_scaling_is_unchanged(tmp_path):
    cfg = tiny_llama()
    _, path = _gguf(tmp_path, cfg, None)
    assert lm.load_model(lm.read_gguf(path)).config == cfg
