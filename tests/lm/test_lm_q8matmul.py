"""The int8-activation matmul (`activations="int8"`): the C++ kernel (native ISA and the
portable C++ build) against a NumPy oracle that quantises x exactly as the kernel does,
takes the integer dot products in int64 and scales in float64; a bound against the
unquantised dequantise-then-float64 product; and the wiring through `project`,
`QuantWeight.activations` and `with_activations`."""

from __future__ import annotations

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxlab.lm as lm
from jaxlab._kernels.lm import q8matmul_cpu, q8matmul_isa, q8matmul_kernel_available

from .lm_reference import random_quant_weight, tiny_llama

EPS32 = 2.0**-23


def _levels(qw: lm.QuantWeight) -> np.ndarray:
    q = np.asarray(qw.q)
    if qw.bits == 4:
        b = q.reshape(*q.shape[:-1], -1, 16)
        q = np.concatenate([b & 0x0F, b >> 4], axis=-1).reshape(*q.shape[:-1], -1)
    return q.astype(np.int64)


def _oracle(x: np.ndarray, qw: lm.QuantWeight):
    """(the kernel's result in float64, the sum of |products| per output that bounds its
    float32 rounding, x's quantisation error bound per output). Quantisation:
    d = max|x| / 127 and a = round_half_away(x * (1/d)) in float32 arithmetic, as ggml's
    quantize_row_q8_0_reference does."""
    m, k = x.shape
    nb = k // 32
    xb = x.astype(np.float32).reshape(m, nb, 32)
    d = np.abs(xb).max(-1) / np.float32(127)
    inv = np.where(d != 0, np.float32(1) / np.where(d != 0, d, np.float32(1)), np.float32(0))
    v = (xb * inv[..., None].astype(np.float32)).astype(np.float64)  # a float32 product
    a = (np.sign(v) * np.floor(np.abs(v) + 0.5)).astype(np.int64)  # half away from zero
    assert np.abs(a).max() <= 127
    lv = _levels(qw).reshape(-1, nb, 32)
    dots = np.einsum("mbj,nbj->mnb", a, lv)  # int64, exact
    sa = a.sum(-1)  # (m, nb)
    scale = np.asarray(qw.scale, np.float64)
    offset = np.asarray(qw.offset, np.float64)
    d64 = d.astype(np.float64)
    terms = d64[:, None, :] * (scale[None] * dots + offset[None] * sa[:, None, :])
    # the float32 evaluation may group the products in any order: its rounding is bounded
    # by the sum of |every product| (lanes of a block's dot, the offset term apart)
    absdots = np.einsum("mbj,nbj->mnb", np.abs(a), np.abs(lv))
    mag = d64[:, None, :] * (
        np.abs(scale[None]) * absdots + np.abs(offset[None]) * np.abs(a).sum(-1)[:, None, :]
    )
    w = lv * scale[..., None] + offset[..., None]  # (n, nb, 32) float64 weights
    bound = np.einsum("mb,nb->mn", d64 / 2, np.abs(w).sum(-1))
    return terms.sum(-1), mag.sum(-1), bound


def _activations(rng, m, k):
    x = rng.standard_normal((m, k)).astype(np.float32)
    x[0, :32] = 0.0  # an all-zero block: d = 0, a = 0
    if m > 1:  # max 127 -> d = 1, 1/d = 1: exact half-way values must round away from zero
        x[1, :32] = np.float32(0.5) + np.arange(-16, 16, dtype=np.float32)
        x[1, 0] = np.float32(127.0)
    if m > 2:
        x[2, -32:] *= np.float32(1e4)  # blocks of very different magnitude in one row
    return x


ISAS = [False, True]  # native build (AVX2 / AVX-512 VNNI here), portable C++ build


@pytest.mark.parametrize("portable", ISAS, ids=["native", "portable"])
@pytest.mark.parametrize("bits", [8, 4])
def test_q8_kernel_equals_integer_oracle(bits, portable):
    """Kernel vs oracle to float32 rounding: |got - ref| <= (K/32 + 8) * 2^-23 * mag per
    output, mag the sum of |d * scale * a * q| and |d * offset * a| (float32 summation of
    K/32 block terms, each rounded a few times, in any grouping)."""
    if not q8matmul_kernel_available():
        pytest.skip("no C++ compiler for kernels/lm")
    assert q8matmul_kernel_available(portable=portable)  # a compiler builds both variants
    assert q8matmul_isa(portable=portable) in (
        ("portable",) if portable else ("avx2", "avx512vnni", "portable")
    )
    rng = np.random.default_rng(100 * bits + portable)
    fn = jax.jit(q8matmul_cpu, static_argnames=("bits", "portable"))
    for k in (32, 896):
        for n in (37, 301):
            qw = random_quant_weight(rng, n, k, bits)
            for m in (1, 3, 8, 9, 33):
                x = _activations(rng, m, k)
                ref, mag, bound = _oracle(x, qw)
                got = np.asarray(
                    fn(jnp.asarray(x), qw.q, qw.scale, qw.offset, bits=bits, portable=portable)
                )
                tol = (k // 32 + 8) * EPS32 * mag
                err = np.abs(got - ref)
                assert np.all(err <= tol), (k, n, m, float((err / (tol + 1e-30)).max()))
                # against the unquantised product: at most the activation rounding
                exact = (
                    x.astype(np.float64)
                    @ (
                        _levels(qw).reshape(n, -1, 32) * np.asarray(qw.scale, np.float64)[..., None]
                        + np.asarray(qw.offset, np.float64)[..., None]
                    )
                    .reshape(n, k)
                    .T
                )
                assert np.all(np.abs(got - exact) <= bound + tol), (k, n, m)
                if m > 3:  # rows 3.. are plain random: x really was quantised
                    assert np.abs(got - exact)[3:].min() > 0


@pytest.mark.parametrize("bits", [8, 4])
def test_jax_emulation_matches_oracle_and_is_straight_through(bits):
    """The pure-JAX path (other backends, > KERNEL_MAX_ROWS rows) rounds x the same way;
    its gradient is the float path's (straight-through estimator)."""
    rng = np.random.default_rng(7 + bits)
    qw = random_quant_weight(rng, 21, 96, bits)
    q8 = lm.with_activations(qw, "int8")
    assert q8.activations == "int8"
    assert qw.activations == "float32"
    big = _activations(rng, lm._quant.KERNEL_MAX_ROWS + 5, 96)
    ref, mag, _ = _oracle(big, qw)
    got = np.asarray(lm.project(jnp.asarray(big), q8))
    assert np.all(np.abs(got - ref) <= 64 * EPS32 * mag + 1e-6)
    x = jnp.asarray(big[:3])
    small = np.asarray(lm.project(x, q8))  # the C++ kernel on CPU
    np.testing.assert_allclose(small, _oracle(big[:3], qw)[0], rtol=1e-5, atol=1e-4)
    g8 = jax.grad(lambda x: jnp.sum(jnp.sin(lm.project(x, q8))))(x)
    w = np.asarray(qw.dequantize(), np.float64)
    ref_g = np.cos(np.asarray(small, np.float64)) @ w  # cos at the int8 forward value
    np.testing.assert_allclose(np.asarray(g8), ref_g, rtol=1e-4, atol=1e-4)
    gv = jax.vmap(lambda x: lm.project(x, q8))(jnp.asarray(big[:6].reshape(2, 3, 96)))
    np.testing.assert_allclose(
        np.asarray(gv).reshape(6, -1), _oracle(big[:6], qw)[0], rtol=1e-5, atol=1e-4
    )


def test_activations_validation_and_model_wiring():
    rng = np.random.default_rng(3)
    qw = random_quant_weight(rng, 8, 64, 8)
    with pytest.raises(ValueError, match="activations"):
        lm.with_activations(qw, "int4")
    with pytest.raises(ValueError, match="activations"):
        lm.QuantWeight(qw.q, qw.scale, qw.offset, 8, activations="fp8")
    cfg = tiny_llama(d_model=32, head_dim=8, d_ff=64, vocab_size=64)
    model = lm.Transformer.random(cfg, key=jax.random.key(2))
    names = ("wq", "wk", "wv", "wo", "w_gate", "w_up", "w_down")
    qs = [lm.quantize(np.asarray(getattr(model.layers, n)), bits=8) for n in names]
    layers = eqx.tree_at(lambda ly: [getattr(ly, n) for n in names], model.layers, qs)
    qmodel = eqx.tree_at(lambda m: m.layers, model, layers)
    q8model = lm.with_activations(qmodel, "int8")
    assert all(
        w.activations == "int8"
        for w in jax.tree_util.tree_leaves(q8model, is_leaf=lambda a: isinstance(a, lm.QuantWeight))
        if isinstance(w, lm.QuantWeight)
    )
    toks = np.array([3, 5, 7, 1, 2, 9, 11, 4], np.int32)
    lf = np.asarray(lm.forward(qmodel, toks)[0])
    l8 = np.asarray(lm.forward(q8model, toks)[0])
    assert 0 < np.abs(l8 - lf).max() <= 0.05 * np.abs(lf).max()
    with pytest.raises(ValueError, match="activations"):
        lm.with_activations(q8model, "float16")
    back = lm.with_activations(q8model, "float32")
    np.testing.assert_array_equal(np.asarray(lm.forward(back, toks)[0]), lf)


def test_load_validates_activations_before_reading_the_file():
    with pytest.raises(ValueError, match="activations"):
        lm.load("smollm2", weights="int8", activations="int4")
    with pytest.raises(ValueError, match="quantised weights"):
        lm.load("smollm2", activations="int8")  # float weights: nothing to quantise against
