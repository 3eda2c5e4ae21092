"""`load_sae` on damaged or hostile SAELens folders: sizes from cfg.json and the
safetensors header are bounded and checked against the file before any tensor is read;
a missing or mis-shaped tensor is named; half-precision files (SAELens saves its
`dtype`) load. The files are written byte by byte from the safetensors layout
(8-byte little-endian header length, JSON header of dtype/shape/data_offsets, data)."""

from __future__ import annotations

import json
import struct

import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np
import pytest

from jaxlab import interp as ip

D_IN, D_SAE = 4, 6
CODES = {np.dtype(np.float32): "F32", np.dtype(np.float16): "F16"}
CODES[np.dtype(ml_dtypes.bfloat16)] = "BF16"


def _safetensors(tensors: dict[str, np.ndarray], claim: dict | None = None) -> bytes:
    """A safetensors file; `claim` overrides header entries (a file that lies)."""
    header, data, off = {}, b"", 0
    for name, a in tensors.items():
        raw = np.ascontiguousarray(a).tobytes()
        header[name] = {
            "dtype": CODES[a.dtype],
            "shape": list(a.shape),
            "data_offsets": [off, off + len(raw)],
        }
        data, off = data + raw, off + len(raw)
    header.update(claim or {})
    h = json.dumps(header).encode()
    h += b" " * (-len(h) % 8)
    return struct.pack("<Q", len(h)) + h + data


def _cfg(**kw):
    return {
        "architecture": "standard",
        "d_in": D_IN,
        "d_sae": D_SAE,
        "dtype": "float32",
        "apply_b_dec_to_input": True,
        "normalize_activations": "none",
        "meta": {"hook_name": "blocks.1.hook_resid_post"},
        **kw,
    }


def _weights(dtype=np.float32):
    # multiples of 1/8 in [-2, 2]: exact in float16 and bfloat16
    rng = np.random.default_rng(0)
    shapes = {"W_enc": (D_IN, D_SAE), "W_dec": (D_SAE, D_IN), "b_enc": (D_SAE,), "b_dec": (D_IN,)}
    return {n: (rng.integers(-16, 17, s) / 8).astype(dtype) for n, s in shapes.items()}


def _folder(tmp_path, name, cfg, blob):
    f = tmp_path / name
    f.mkdir()
    (f / "cfg.json").write_text(json.dumps(cfg))
    (f / "sae_weights.safetensors").write_bytes(blob)
    return f


@pytest.mark.parametrize("dtype", [np.float16, ml_dtypes.bfloat16])
def test_half_precision_files_load_exactly(tmp_path, dtype):
    w = _weights(dtype)
    sae = ip.load_sae(_folder(tmp_path, "h", _cfg(dtype=str(np.dtype(dtype))), _safetensors(w)))
    for name, a in w.items():
        got = np.asarray(getattr(sae, name))
        assert got.dtype == np.float32
        np.testing.assert_array_equal(got, a.astype(np.float32))
    x = jnp.asarray(np.random.default_rng(1).normal(size=(3, D_IN)), jnp.float32)
    want = np.maximum(
        (np.asarray(x) - w["b_dec"].astype(np.float32)) @ _f32(w["W_enc"]) + _f32(w["b_enc"]), 0
    )
    np.testing.assert_allclose(np.asarray(jax.vmap(sae.encode)(x)), want, rtol=1e-5, atol=1e-5)


def _f32(a):
    return a.astype(np.float32)


def test_sizes_are_bounded_before_reading(tmp_path, monkeypatch):
    reads = []
    real = np.fromfile
    monkeypatch.setattr(np, "fromfile", lambda *a, **k: reads.append(a) or real(*a, **k))
    w = _weights()
    # cfg.json claims an absurd width: refused from the config alone
    f = _folder(tmp_path, "a", _cfg(d_in=1 << 40), _safetensors(w))
    with pytest.raises(ValueError, match=r"d_in must be an int in \[1, "):
        ip.load_sae(f)
    # config and header agree on a large SAE that the file does not hold
    big = {"W_enc": {"dtype": "F32", "shape": [4096, 1 << 20], "data_offsets": [0, 4096 << 22]}}
    f = _folder(tmp_path, "b", _cfg(d_in=4096, d_sae=1 << 20), _safetensors(w, claim=big))
    with pytest.raises(ValueError, match="needs 17179869184 bytes"):
        ip.load_sae(f)
    # a header whose byte range does not match its shape
    lie = {"b_dec": {"dtype": "F32", "shape": [D_IN], "data_offsets": [0, 4]}}
    f = _folder(tmp_path, "c", _cfg(), _safetensors(w, claim=lie))
    with pytest.raises(ValueError, match="b_dec"):
        ip.load_sae(f)
    # a header length beyond the file
    f = _folder(tmp_path, "d", _cfg(), struct.pack("<Q", 1 << 40) + b"{}")
    with pytest.raises(ValueError, match="not a safetensors file"):
        ip.load_sae(f)
    f = _folder(tmp_path, "e", _cfg(), struct.pack("<Q", 4) + b"{no}")
    with pytest.raises(ValueError, match="unreadable safetensors header"):
        ip.load_sae(f)
    assert reads == [], "no tensor may be read from a file that fails its checks"


def test_missing_and_mismatched_tensors_are_named(tmp_path):
    w = _weights()
    f = _folder(tmp_path, "a", _cfg(), _safetensors({k: v for k, v in w.items() if k != "b_enc"}))
    with pytest.raises(ValueError, match=r"lacks the tensors \['b_enc'\]"):
        ip.load_sae(f)
    f = _folder(tmp_path, "b", _cfg(architecture="jumprelu"), _safetensors(w))
    with pytest.raises(ValueError, match=r"lacks the tensors \['threshold'\]"):
        ip.load_sae(f)
    swapped = {**w, "W_dec": w["W_enc"]}
    f = _folder(tmp_path, "c", _cfg(), _safetensors(swapped))
    with pytest.raises(ValueError, match=r"W_dec has shape \(4, 6\), cfg.json .* says \(6, 4\)"):
        ip.load_sae(f)
    f = _folder(tmp_path, "d", _cfg(architecture="topk", k=0), _safetensors(w))
    with pytest.raises(ValueError, match="k must be"):
        ip.load_sae(f)
    # the intact file loads (the checks above fail for their stated reason only)
    sae = ip.load_sae(_folder(tmp_path, "ok", _cfg(), _safetensors(w)))
    np.testing.assert_array_equal(np.asarray(sae.W_dec), w["W_dec"])


# SAELens' `SAEMetadata` dataclass fields (jbloomAus/SAELens sae_lens/saes/sae.py, class
# SAEMetadata): releases where it is a dataclass raise TypeError on any other `meta` key
SAELENS_META_FIELDS = {
    "model_name",
    "hook_name",
    "model_class_name",
    "hook_layer",
    "hook_head_index",
    "model_from_pretrained_kwargs",
    "prepend_bos",
    "exclude_special_tokens",
    "neuronpedia_id",
    "context_size",
    "seqpos_slice",
    "dataset_path",
    "sae_lens_version",
    "sae_lens_training_version",
}


def test_saved_meta_holds_only_saelens_metadata_fields(tmp_path):
    sae = ip.TopKSAE(D_IN, D_SAE, 2, key=jax.random.key(0))
    ip.save_sae(
        sae,
        tmp_path / "s",
        model_name="smollm2",
        hook_name="blocks.3.hook_resid_post",
        hook_layer=3,
        seqpos_slice=(1, None),
        exclude_special_tokens=True,
    )
    cfg = json.loads((tmp_path / "s" / "cfg.json").read_text())
    assert set(cfg["meta"]) <= SAELENS_META_FIELDS
    assert cfg["meta"]["seqpos_slice"] == [1, None]
    with pytest.raises(ValueError, match="unknown SAELens meta fields"):
        ip.save_sae(sae, tmp_path / "t", saved_with="jaxlab")
