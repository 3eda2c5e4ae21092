"""GGUF blocks -> QuantWeight levels (`jaxlab.lm._gguf_levels`) against the `gguf`
package's own dequantisation: bit-exact float32 for the formats that map exactly
(Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q4_K, Q5_K, and the Q6_K blocks whose two sub-block
scales allow it), within half a re-quantisation step for the rest; no float32 copy of
a weight at load; quantised models (tied and untied heads, the head a `QuantWeight`
through the kernel) against the same file loaded as float32."""

from __future__ import annotations

import gguf
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxlab.lm as lm
from jaxlab.lm import _gguf_levels, _quant
from jaxlab.lm._gguf import GGUFFile
from jaxlab.lm._gguf_levels import bits_for, tensor_levels

from .lm_reference import tiny_llama, tiny_qwen

EXACT = ("Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q8_0", "Q4_K", "Q5_K")
REQUANTISED = ("Q2_K", "Q3_K", "F16", "BF16", "F32")
QTYPE = gguf.GGMLQuantizationType


def _f16_bytes(x) -> np.ndarray:
    return np.atleast_1d(np.asarray(x, np.float16)).view(np.uint8).reshape(-1, 2)


def _q6k_blocks(rng, n_blocks: int, amp: float = 1.0) -> np.ndarray:
    """Random Q6_K super-blocks: a third with sub-block scale pairs that map exactly
    (equal, or ratio <= 4 after their gcd), a third random, and edge cases (zero
    scales; -128 with q = -32, whose exact level 128 does not fit int8)."""
    raw = rng.integers(0, 256, (n_blocks, 210), dtype=np.uint8)
    s = raw[:, 192:208].view(np.int8).reshape(n_blocks, 8, 2)
    third = n_blocks // 3
    base = rng.integers(-20, 21, (third, 8))
    s[:third, :, 0] = base
    s[:third, :, 1] = base * rng.choice([1, 2, -3, 4, 0], (third, 8))
    s[third : third + 1, 0] = (0, 0)
    s[third : third + 1, 1] = (-128, -32)
    raw[third, :128] = 0  # q = -32 where qh's bits are 0 too
    raw[third, 128:192] = 0
    d = rng.uniform(1e-4, 2e-3, n_blocks) * amp * rng.choice([-1, 1], n_blocks)
    raw[:, 208:210] = _f16_bytes(d)
    return raw


def _raw_blocks(rng, type_name: str, n: int, k: int, amp: float = 1.0) -> np.ndarray:
    """(n, row bytes) uint8 blocks of `type_name` holding a tensor of shape (n, k) (random
    bytes for the k-quants, their super-block scales multiplied by `amp`)."""
    qt = QTYPE[type_name]
    w = (rng.standard_normal((n, k)) * 0.05).astype(np.float32)
    w[0, :32] = 0.0  # an all-zero block (scale 0)
    if type_name in ("Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q8_0", "BF16"):
        return gguf.quants.quantize(w, qt)
    if type_name == "F16":
        return w.astype(np.float16).view(np.uint8)
    if type_name == "F32":
        return w.view(np.uint8)
    block, size = gguf.GGML_QUANT_SIZES[qt]
    nb = n * k // block
    if type_name == "Q6_K":
        return _q6k_blocks(rng, nb, amp).reshape(n, -1)
    raw = rng.integers(0, 256, (nb, size), dtype=np.uint8)
    d = rng.uniform(1e-4, 2e-3, nb) * amp
    if type_name in ("Q4_K", "Q5_K"):
        raw[:, 0:2], raw[:, 2:4] = _f16_bytes(d), _f16_bytes(d * rng.uniform(0.5, 2, nb))
    elif type_name == "Q2_K":
        raw[:, 80:82], raw[:, 82:84] = _f16_bytes(d), _f16_bytes(d)
    elif type_name == "Q3_K":
        raw[:, 108:110] = _f16_bytes(d)
    return raw.reshape(n, -1)


def _write(path, tensors: dict[str, tuple[str, np.ndarray]], meta=None, arch="llama") -> None:
    w = gguf.GGUFWriter(str(path), arch)
    if meta is not None:
        meta(w)
    for name, (type_name, raw) in tensors.items():
        if type_name in ("F32", "F16"):
            w.add_tensor(name, raw.view(np.float32 if type_name == "F32" else np.float16))
        else:
            w.add_tensor(name, raw, raw_dtype=QTYPE[type_name])
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def _unpack(q: np.ndarray, bits: int) -> np.ndarray:
    """Levels (N, K) from QuantWeight storage, independently of the library."""
    if bits == 8:
        return q.astype(np.int32)
    b = q.reshape(q.shape[0], -1, 16).astype(np.int32)
    return np.concatenate([b & 0x0F, b >> 4], axis=-1).reshape(q.shape[0], -1)


def _recon(q, scale, offset, bits) -> np.ndarray:
    """levels * scale + offset in float32, per block of 32."""
    lv = _unpack(np.asarray(q), bits).astype(np.float32).reshape(*np.shape(scale), 32)
    w = lv * np.asarray(scale)[..., None] + np.asarray(offset)[..., None]
    return w.reshape(lv.shape[0], -1)


N, K = 7, 512


@pytest.fixture(scope="module")
def block_file(tmp_path_factory):
    rng = np.random.default_rng(57)
    tensors = {}
    for t in (*EXACT, "Q6_K", *REQUANTISED):
        tensors[t] = (t, _raw_blocks(rng, t, N, K))
    path = tmp_path_factory.mktemp("levels") / "blocks.gguf"
    _write(path, tensors)
    return lm.read_gguf(path), tensors


def _oracle(type_name: str, raw: np.ndarray) -> np.ndarray:
    return np.asarray(gguf.quants.dequantize(raw, QTYPE[type_name]), np.float32).reshape(N, K)


@pytest.mark.parametrize("small_chunks", [False, True], ids=["one-chunk", "row-chunks"])
@pytest.mark.parametrize("type_name", EXACT)
@pytest.mark.parametrize("bits", [8, 4])
def test_exact_formats_equal_gguf_dequantisation_bit_for_bit(
    block_file, type_name, bits, small_chunks, monkeypatch
):
    """Every product in these formats is exact in float32 and the one addition rounds
    as gguf's does, so levels * scale + offset must equal gguf's values exactly (also
    through JAX's `dequantize`)."""
    if small_chunks:
        monkeypatch.setattr(_gguf_levels, "CHUNK_BYTES", 300)  # about one row per chunk
    f, tensors = block_file
    ref = _oracle(type_name, tensors[type_name][1])
    q, scale, offset = tensor_levels(f, type_name, bits=bits)
    b = bits_for([type_name], bits)
    assert b == (4 if bits == 4 and type_name in ("Q4_0", "Q4_1", "Q4_K") else 8)
    assert q.shape == (N, K // 2 if b == 4 else K)
    assert scale.shape == (N, K // 32)
    np.testing.assert_array_equal(_recon(q, scale, offset, b), ref)
    qw = _gguf_levels.quantize_tensor(f, type_name, bits=bits)
    assert qw.bits == b
    np.testing.assert_array_equal(np.asarray(qw.dequantize()), ref)
    np.testing.assert_array_equal(f.array(type_name), ref)  # the float path agrees


def _half_step(ref: np.ndarray) -> np.ndarray:
    blocks = ref.reshape(-1, 32)
    return (blocks.max(-1) - blocks.min(-1)) / 510


def test_q6k_exact_blocks_bit_for_bit_others_within_half_a_step(block_file):
    f, tensors = block_file
    raw = tensors["Q6_K"][1]
    ref = _oracle("Q6_K", raw)
    for bits in (8, 4):  # 6-bit blocks never become 4-bit levels
        q, scale, offset = tensor_levels(f, "Q6_K", bits=bits)
        assert q.dtype == np.int8
        got = _recon(q, scale, offset, 8).reshape(-1, 32)
        err = np.abs(got - ref.reshape(-1, 32)).max(-1)
        assert np.all(err <= _half_step(ref) * (1 + 1e-4) + 1e-12)
        s = raw.reshape(-1, 210)[:, 192:208].view(np.int8).astype(np.int64).reshape(-1, 2)
        g = np.maximum(np.gcd(s[:, 0], s[:, 1]), 1)
        fits = np.abs(s).max(-1) // g <= 3  # ratio <= 3: levels within +-96, always int8
        assert fits.sum() >= len(fits) // 4  # the generator made such blocks
        assert np.array_equal(got[fits], ref.reshape(-1, 32)[fits])
        assert np.all(offset.reshape(-1)[fits] == 0)
        assert (err > 0).any()  # and some blocks were re-quantised


@pytest.mark.parametrize("type_name", REQUANTISED)
def test_other_formats_requantised_within_half_a_step(block_file, type_name, monkeypatch):
    monkeypatch.setattr(_gguf_levels, "CHUNK_BYTES", 1000)
    f, tensors = block_file
    ref = _oracle(type_name, tensors[type_name][1])
    q, scale, offset = tensor_levels(f, type_name, bits=4)
    assert q.dtype == np.int8
    err = np.abs(_recon(q, scale, offset, 8) - ref).reshape(-1, 32).max(-1)
    assert np.all(err <= _half_step(ref) * (1 + 1e-4) + 1e-12)


def test_corrupted_scales_raise_value_error(tmp_path):
    rng = np.random.default_rng(0)
    raw = _raw_blocks(rng, "Q4_K", 2, 256)
    raw.reshape(-1, 144)[1, 0:2] = _f16_bytes(np.inf)
    _write(tmp_path / "bad.gguf", {"w": ("Q4_K", raw)})
    with pytest.raises(ValueError, match="NaN/inf"):
        tensor_levels(lm.read_gguf(tmp_path / "bad.gguf"), "w", bits=8)


# --- whole models -------------------------------------------------------------------------

# one format per weight, varied per layer so a stacked field mixes 4-bit and 8-bit blocks;
# "exact": only formats that map exactly, "q6k": Q6_K (partly re-quantised) as llama.cpp's
# Q4_K_M files use it (attn_v, ffn_down, the embedding)
_TYPES = {
    "attn_q": ("Q4_K", "Q4_K"),
    "attn_k": ("Q5_K", "Q8_0"),
    "attn_v": ("Q5_1", "Q4_K"),
    "attn_output": ("Q4_0", "Q4_1"),
    "ffn_gate": ("Q4_K", "Q4_0"),
    "ffn_up": ("Q5_0", "Q5_1"),
    "ffn_down": ("Q5_K", "Q4_K"),
    "token_embd": ("Q5_K",),
    "output": ("Q4_K",),
}
_Q6K = _TYPES | {"attn_v": ("Q6_K", "Q4_K"), "ffn_down": ("Q6_K", "Q4_K"), "token_embd": ("Q6_K",)}
# k-quant super-block scales giving weights of size ~0.03 (well-conditioned logits)
_AMP = {"Q4_K": 0.1, "Q5_K": 0.05, "Q6_K": 0.03}


def _model_file(path, cfg, rng, types=_TYPES):
    a = cfg.arch

    def meta(w):
        w.add_uint32(f"{a}.block_count", cfg.n_layers)
        w.add_uint32(f"{a}.embedding_length", cfg.d_model)
        w.add_uint32(f"{a}.feed_forward_length", cfg.d_ff)
        w.add_uint32(f"{a}.attention.head_count", cfg.n_heads)
        w.add_uint32(f"{a}.attention.head_count_kv", cfg.n_kv_heads)
        w.add_uint32(f"{a}.attention.key_length", cfg.head_dim)
        w.add_uint32(f"{a}.context_length", cfg.context_length)
        w.add_float32(f"{a}.attention.layer_norm_rms_epsilon", cfg.norm_eps)
        w.add_float32(f"{a}.rope.freq_base", cfg.rope_bases[-1])

    d, hq, hkv, ff = (
        cfg.d_model,
        cfg.n_heads * cfg.head_dim,
        cfg.n_kv_heads * cfg.head_dim,
        cfg.d_ff,
    )
    shapes = {
        "attn_q": (hq, d),
        "attn_k": (hkv, d),
        "attn_v": (hkv, d),
        "attn_output": (d, hq),
        "ffn_gate": (ff, d),
        "ffn_up": (ff, d),
        "ffn_down": (d, ff),
    }

    def blocks(ty, n, k):
        return ty, _raw_blocks(rng, ty, n, k, _AMP.get(ty, 1.0))

    t = {"token_embd.weight": blocks(types["token_embd"][0], cfg.vocab_size, d)}
    if not cfg.tied_embeddings:
        t["output.weight"] = blocks(types["output"][0], cfg.vocab_size, d)
    t["output_norm.weight"] = ("F32", (1 + 0.1 * rng.standard_normal(d)).astype(np.float32))
    for i in range(cfg.n_layers):
        for name, (n, k) in shapes.items():
            t[f"blk.{i}.{name}.weight"] = blocks(types[name][i % 2], n, k)
        for norm in ("attn_norm", "ffn_norm"):
            t[f"blk.{i}.{norm}.weight"] = ("F32", np.ones(d, np.float32))
        if cfg.qkv_bias:
            for name, n in (("attn_q", hq), ("attn_k", hkv), ("attn_v", hkv)):
                t[f"blk.{i}.{name}.bias"] = ("F32", 0.1 * rng.standard_normal(n).astype(np.float32))
    _write(path, {k: (ty, np.asarray(v).view(np.uint8)) for k, (ty, v) in t.items()}, meta, a)


def _bits(w) -> int:
    assert isinstance(w, lm.QuantWeight)
    return w.bits


def _cfg(tied: bool):
    kw = dict(d_model=256, n_heads=4, n_kv_heads=2, head_dim=64, d_ff=512, vocab_size=96)
    kw |= dict(n_layers=2, rope_bases=(1e4,) * 2, sliding_windows=(0,) * 2)
    return tiny_llama(**kw) if tied else tiny_qwen(**kw)


@pytest.mark.parametrize("formats", ["exact", "q6k"])
@pytest.mark.parametrize("tied", [True, False], ids=["tied-head", "untied-head"])
def test_quantised_load_reads_blocks_and_matches_the_float_model(
    tmp_path, tied, formats, monkeypatch
):
    """The same file loaded as float32 (gguf's dequantisation) and as int8 / int4: equal
    logits up to float32 summation order (2e-5 of the largest logit) when every format
    maps exactly; with Q6_K tensors (the generator's random sub-block scales make most
    blocks re-quantised, error half an 8-bit step) within 3% of it, same top-1."""
    cfg = _cfg(tied)
    path = tmp_path / "m.gguf"
    _model_file(path, cfg, np.random.default_rng(3), _TYPES if formats == "exact" else _Q6K)
    fmodel = lm.load_model(lm.read_gguf(path))
    assert fmodel.config == cfg
    toks = jnp.asarray([1, 5, 9, 2, 77, 40, 3, 95], jnp.int32)
    ref = np.asarray(lm.forward(fmodel, toks)[0])

    read_as_float = []
    original = GGUFFile.array

    def spy(self, name, *args, **kw):
        read_as_float.append(name)
        return original(self, name, *args, **kw)

    monkeypatch.setattr(GGUFFile, "array", spy)
    for weights in ("int8", "int4"):
        read_as_float.clear()
        model = lm.load_model(lm.read_gguf(path), weights=weights)
        # only norms and biases go through the float32 dequantisation
        assert all(n.endswith(("norm.weight", ".bias")) for n in read_as_float), read_as_float
        assert read_as_float
        head = model.embed if tied else model.lm_head
        assert isinstance(head, lm.QuantWeight)
        assert isinstance(model.embed, lm.QuantWeight)
        # 4-bit only where every layer's blocks are 4-bit (attn_q: Q4_K in both layers)
        assert _bits(model.layers.wq) == (4 if weights == "int4" else 8)
        assert _bits(model.layers.w_gate) == (4 if weights == "int4" else 8)
        assert _bits(model.layers.wv) == 8  # Q5_1 / Q6_K in layer 0
        assert _bits(model.layers.w_up) == 8
        if not tied:
            assert head.bits == (4 if weights == "int4" else 8)
        got = np.asarray(lm.forward(model, toks)[0])
        tol = (2e-5 if formats == "exact" else 3e-2) * np.abs(ref).max()
        np.testing.assert_allclose(got, ref, rtol=0, atol=tol)
        assert (got.argmax(-1) == ref.argmax(-1)).all()


@pytest.mark.skipif(not _quant._kernel_ready(), reason="no C++ compiler for kernels/lm")
@pytest.mark.parametrize("tied", [True, False], ids=["tied-head", "untied-head"])
def test_quantised_head_goes_through_the_kernel(tmp_path, tied, monkeypatch):
    cfg = _cfg(tied)
    path = tmp_path / "m.gguf"
    _model_file(path, cfg, np.random.default_rng(4))
    model = lm.load_model(lm.read_gguf(path), weights="int4")
    calls = []
    kernel_op = _quant._kernel_op

    def spy(bits, activations="float32"):
        op = kernel_op(bits, activations)

        def call(x, q, scale, offset, layer):
            calls.append(scale.shape[-2])
            return op(x, q, scale, offset, layer)

        return call

    monkeypatch.setattr(_quant, "_kernel_op", spy)
    h = np.random.default_rng(5).standard_normal((2, cfg.d_model)).astype(np.float32)
    logits = np.asarray(model.logits(jnp.asarray(h)))
    assert calls == [cfg.vocab_size]  # the head's rows: one kernel call
    jitted = np.asarray(jax.jit(lambda m, x: m.logits(x))(model, jnp.asarray(h)))
    assert calls == [cfg.vocab_size] * 2  # traced under jit: the kernel again
    head = model.embed if tied else model.lm_head
    assert isinstance(head, lm.QuantWeight)
    hn = h / np.sqrt((h.astype(np.float64) ** 2).mean(-1, keepdims=True) + cfg.norm_eps)
    hn = hn * np.asarray(model.final_norm, np.float64)
    ref = hn @ _recon(head.q, head.scale, head.offset, head.bits).astype(np.float64).T
    for got in (logits, jitted):
        np.testing.assert_allclose(got, ref, rtol=1e-4, atol=1e-4 * np.abs(ref).max())
