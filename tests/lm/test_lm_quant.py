"""Weight-only quantised matmuls: the C++ kernel and the pure-JAX path against a NumPy
dequantise-then-matmul reference, exact GGUF levels, a quantised tiny decoder against the
float decoder with the same (dequantised) weights, and SmolLM2 int8/int4 decode (slow)."""

from __future__ import annotations

import re

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxlab.lm as lm
from jaxlab._kernels.lm import q8matmul_cpu, qmatmul_cpu, qmatmul_isa, qmatmul_kernel_available
from jaxlab.lm._gguf_levels import quantize_tensor
from jaxlab.lm._quant import _reference

from .lm_reference import random_quant_weight, tiny_llama

needs_kernel = pytest.mark.skipif(
    not qmatmul_kernel_available(), reason="no C++ compiler for kernels/lm"
)


def _numpy_dequantize(qw: lm.QuantWeight) -> np.ndarray:
    """Independent of the library: unpack levels and apply the block scales in NumPy."""
    q = np.asarray(qw.q)
    if qw.bits == 4:
        b = q.reshape(*q.shape[:-1], -1, 16)
        q = np.concatenate([b & 0x0F, b >> 4], axis=-1).reshape(*q.shape[:-1], -1)
    lv = q.astype(np.float64).reshape(*np.asarray(qw.scale).shape, 32)
    w = (
        lv * np.asarray(qw.scale, np.float64)[..., None]
        + np.asarray(qw.offset, np.float64)[..., None]
    )
    return w.reshape(qw.shape)


EPS32 = 2.0**-23


@needs_kernel
@pytest.mark.parametrize("portable", [False, True], ids=["native", "portable"])
@pytest.mark.parametrize("bits", [8, 4])
def test_kernel_equals_numpy_dequantise_then_matmul(bits, portable):
    """The native build (AVX-512F / AVX2 + FMA vectors where the CPU has them) and the
    portable C++ build against dequantise-then-float64: per output |got - ref| <=
    (K/8 + 16) * 2^-23 * sum_k |x_k W_nk| (float32 sums of at most K/8 + 5 terms per lane
    in any grouping, and W rounded once to float32), and to 1e-5 relative."""
    assert qmatmul_kernel_available(portable=portable)  # a compiler builds both variants
    assert qmatmul_isa(portable=portable) in (
        ("portable",) if portable else ("avx512", "avx2", "portable")
    )
    rng = np.random.default_rng(bits + 2 * portable)
    fn = jax.jit(qmatmul_cpu, static_argnames=("bits", "portable"))
    # (n, k, m): tiny, odd n, every tile shape (1, 3, 8, 9 = 8 + 1, 13, 19), K = 896 (28
    # blocks), and big enough for several threads
    cases = [(3, 32, 1), (37, 96, 5), (64, 64, 8), (50, 160, 13), (512, 256, 1), (300, 128, 19)]
    cases += [(n, 896, m) for n in (37, 301) for m in (1, 3, 8, 9)]
    for n, k, m in cases:
        qw = random_quant_weight(rng, n, k, bits)
        x = rng.standard_normal((m, k)).astype(np.float32)
        w = _numpy_dequantize(qw)
        ref = x.astype(np.float64) @ w.T
        xj = jnp.asarray(x)
        got = np.asarray(fn(xj, qw.q, qw.scale, qw.offset, bits=bits, portable=portable))
        mag = np.abs(x.astype(np.float64)) @ np.abs(w).T
        err = np.abs(got - ref)
        assert np.all(err <= (k / 8 + 16) * EPS32 * mag), (n, k, m, float((err / mag).max()))
        tol = 1e-5 * np.abs(ref).max()
        np.testing.assert_allclose(got, ref, rtol=1e-5, atol=tol)
        if bits == 8:  # the same bytes as uint8 (the kernel reads q as bytes either way)
            u8 = jnp.asarray(np.asarray(qw.q).view(np.uint8))
            same = fn(xj, u8, qw.scale, qw.offset, bits=bits, portable=portable)
            np.testing.assert_array_equal(np.asarray(same), got)
        if portable:
            continue
        pure = np.asarray(_reference(jnp.asarray(x), qw.q, qw.scale, qw.offset, bits))
        np.testing.assert_allclose(pure, ref, rtol=1e-5, atol=tol)
        np.testing.assert_allclose(
            np.asarray(lm.project(jnp.asarray(x), qw)), ref, rtol=1e-5, atol=tol
        )


@needs_kernel
@pytest.mark.parametrize("kernel", [qmatmul_cpu, q8matmul_cpu], ids=["qmatmul", "q8matmul"])
def test_kernels_take_int8_levels_without_a_copy(kernel):
    """int8 levels go to the custom call as they are: no bitcast_convert to uint8 in the
    compiled program (that was a full copy of the weights per call, ~80 ms for a
    151936 x 896 output head); q of another dtype is refused naming q."""
    rng = np.random.default_rng(5)
    qw = random_quant_weight(rng, 40, 64, 8)
    x = jnp.asarray(rng.standard_normal((2, 64)).astype(np.float32))
    fn = jax.jit(kernel, static_argnames="bits")
    hlo = fn.lower(x, qw.q, qw.scale, qw.offset, bits=8).compile().as_text() or ""
    assert "bitcast-convert" not in hlo
    assert "custom-call" in hlo
    with pytest.raises(ValueError, match="q"):
        kernel(x, qw.q.astype(jnp.int32), qw.scale, qw.offset, bits=8)


@needs_kernel
@pytest.mark.parametrize("portable", [False, True], ids=["native", "portable"])
@pytest.mark.parametrize("bits", [8, 4])
@pytest.mark.parametrize("kernel", [qmatmul_cpu, q8matmul_cpu], ids=["qmatmul", "q8matmul"])
def test_kernels_take_a_layer_of_a_stack(kernel, bits, portable):
    """A stack (L, N, K') with a traced layer index i gives the 2-D call on layer i bit for
    bit (the pointers are offset in C++, nothing is sliced); an index outside [0, L) is an
    error of the call (never a read outside the stack); `layer` is checked in Python."""
    rng = np.random.default_rng(30 + bits + 2 * portable)
    ws = [random_quant_weight(rng, 37, 96, bits) for _ in range(3)]
    q, scale, offset = (jnp.stack([getattr(w, a) for w in ws]) for a in ("q", "scale", "offset"))
    x = jnp.asarray(rng.standard_normal((3, 96)).astype(np.float32))
    fn = jax.jit(kernel, static_argnames=("bits", "portable"))
    for i, w in enumerate(ws):
        got = fn(x, q, scale, offset, bits=bits, layer=jnp.int32(i), portable=portable)
        ref = fn(x, w.q, w.scale, w.offset, bits=bits, portable=portable)
        np.testing.assert_array_equal(np.asarray(got), np.asarray(ref))
    for bad in (3, -1, 2**31 - 1):
        with pytest.raises(Exception, match="layer"):
            fn(x, q, scale, offset, bits=bits, layer=jnp.int32(bad), portable=portable)
    with pytest.raises(ValueError, match="layer"):
        kernel(x, q, scale, offset, bits=bits)  # a stack needs the index
    with pytest.raises(ValueError, match="layer"):
        kernel(x, ws[0].q, ws[0].scale, ws[0].offset, bits=bits, layer=0)
    with pytest.raises(ValueError, match="layer"):
        kernel(x, q, scale, offset, bits=bits, layer=jnp.float32(1))


def _custom_call_weight_producers(hlo: str) -> list[str]:
    """For every jaxlab LM custom call of a compiled HLO module, the opcodes of the
    instructions producing its weight operands (q, scale, offset)."""
    defs = {}
    for line in hlo.splitlines():
        m = re.match(r"\s*(?:ROOT )?%(\S+) = \S+ ([\w-]+)\(", line)
        if m:
            defs[m.group(1)] = m.group(2)
    out = []
    for line in hlo.splitlines():
        if "custom-call(" in line and 'custom_call_target="jaxlab_lm_' in line:
            args = line.split("custom-call(", 1)[1].split(")", 1)[0]
            names = [a.strip().lstrip("%") for a in args.split(",")]
            out += [defs.get(n, "?") for n in names[1:4]]
    return out


@needs_kernel
@pytest.mark.parametrize("activations", ["float32", "int8"])
@pytest.mark.parametrize("bits", [8, 4])
def test_decode_step_passes_the_weight_stacks_to_the_kernel_uncopied(bits, activations):
    """In a compiled decode step (one token per sequence, the layers under lax.scan) every
    kernel call reads its weights straight from the loop-invariant layer stack (a
    get-tuple-element of the loop state or a parameter), not from a dynamic-slice or
    copy of it: a slice of a scanned stack was copied before each custom call, ~130 MB
    per SmolLM2-135M int8 decode step, doubling the bytes the step moved. Also: the
    model's outputs and gradients with respect to a LoRA (float32 activations) are those
    of its dequantised float twin."""
    cfg = tiny_llama(d_model=64, head_dim=16, d_ff=128, vocab_size=64)
    model = lm.Transformer.random(cfg, key=jax.random.key(7))
    qmodel, fmodel = _quantized_tiny(model, bits)
    qmodel = lm.with_activations(qmodel, activations)
    caches = jax.vmap(lambda _: lm.KVCache.empty(cfg, 8))(jnp.arange(2))

    def step(m, tok, pos, caches):
        return jax.vmap(lambda t, p, c: m.run(t, p, c)[0])(tok, pos, caches)

    tok, pos = jnp.asarray([[3], [5]], jnp.int32), jnp.zeros((2, 1), jnp.int32)
    hlo = jax.jit(step).lower(qmodel, tok, pos, caches).compile().as_text() or ""
    producers = _custom_call_weight_producers(hlo)
    assert len(producers) == 3 * 7, producers  # the seven projections of the layer loop
    assert set(producers) <= {"get-tuple-element", "parameter"}, producers
    if activations == "int8":
        return  # the rest compares with the float twin: exact for float32 activations only
    got = step(qmodel, tok, pos, caches)
    want = step(fmodel, tok, pos, caches)
    np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=1e-4, atol=1e-4)
    toks = jnp.asarray([3, 5, 7, 1], jnp.int32)
    lora = lm.LoRA(cfg, key=jax.random.key(3), targets=("q",), init_b_scale=0.1)

    def loss(lo, m):
        return jnp.sum(jnp.sin(lm.forward(m, toks, lora=lo)[0]))

    gq = jax.grad(loss)(lora, qmodel)
    gf = jax.grad(loss)(lora, fmodel)
    for a, b in zip(jax.tree_util.tree_leaves(gq), jax.tree_util.tree_leaves(gf), strict=True):
        tol = 1e-3 * float(np.abs(np.asarray(b)).max() + 1e-6)
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-3, atol=tol)


@pytest.mark.parametrize("bits", [8, 4])
def test_project_vmap_grad_and_large_m(bits):
    rng = np.random.default_rng(10 + bits)
    qw = random_quant_weight(rng, 40, 64, bits)
    w = _numpy_dequantize(qw)
    xb = rng.standard_normal((4, 3, 64)).astype(np.float32)
    got = jax.vmap(lambda x: lm.project(x, qw))(jnp.asarray(xb))  # x batched, weights not
    np.testing.assert_allclose(np.asarray(got), xb @ w.T, rtol=1e-5, atol=1e-5)
    stacked = jax.tree_util.tree_map(lambda a: jnp.stack([a, a]), qw)  # weights batched
    got2 = jax.vmap(lm.project)(jnp.asarray(xb[:2]), stacked)
    np.testing.assert_allclose(np.asarray(got2), xb[:2] @ w.T, rtol=1e-5, atol=1e-5)
    big = rng.standard_normal((lm._quant.KERNEL_MAX_ROWS + 3, 64)).astype(np.float32)
    np.testing.assert_allclose(
        np.asarray(lm.project(jnp.asarray(big), qw)), big @ w.T, rtol=1e-5, atol=1e-5
    )
    g = jax.grad(lambda x: jnp.sum(jnp.sin(lm.project(x, qw))))(jnp.asarray(xb[0]))
    ref = np.cos(xb[0].astype(np.float64) @ w.T) @ w
    np.testing.assert_allclose(np.asarray(g), ref, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("bits", [8, 4])
def test_quantize_error_bound_and_validation(bits):
    rng = np.random.default_rng(bits)
    w = rng.standard_normal((2, 6, 64)).astype(np.float32)
    qw = lm.quantize(w, bits=bits)
    blocks = w.reshape(2, 6, 2, 32)
    step = (blocks.max(-1) - blocks.min(-1)) / (2**bits - 1)
    err = np.abs(_numpy_dequantize(qw) - w).reshape(2, 6, 2, 32).max(-1)
    assert np.all(err <= 0.5 * step * (1 + 1e-4) + 1e-7)
    assert qw.bits == bits
    assert qw.shape == w.shape
    with pytest.raises(ValueError, match="bits"):
        lm.quantize(w, bits=3)
    with pytest.raises(ValueError, match="multiple of 32"):
        lm.quantize(w[..., :40])


def _quantized_tiny(model, bits):
    names = ("wq", "wk", "wv", "wo", "w_gate", "w_up", "w_down")
    qs = [lm.quantize(np.asarray(getattr(model.layers, n)), bits=bits) for n in names]
    layers = eqx.tree_at(lambda ly: [getattr(ly, n) for n in names], model.layers, qs)
    qmodel = eqx.tree_at(
        lambda m: (m.layers, m.embed),
        model,
        (layers, lm.quantize(np.asarray(model.embed), bits=bits)),
    )
    deq = eqx.tree_at(
        lambda ly: [getattr(ly, n) for n in names],
        model.layers,
        [jnp.asarray(_numpy_dequantize(q), jnp.float32) for q in qs],
    )
    fmodel = eqx.tree_at(
        lambda m: (m.layers, m.embed),
        model,
        (deq, jnp.asarray(_numpy_dequantize(qmodel.embed), jnp.float32)),
    )
    return qmodel, fmodel


@pytest.mark.parametrize("bits", [8, 4])
def test_quantized_decoder_equals_float_decoder_on_same_weights(bits):
    cfg = tiny_llama(d_model=32, head_dim=8, d_ff=64, vocab_size=64)
    model = lm.Transformer.random(cfg, key=jax.random.key(2))
    qmodel, fmodel = _quantized_tiny(model, bits)
    toks = jnp.asarray([[3, 5, 7, 1, 2, 9, 11, 4], [0, 0, 8, 6, 10, 12, 1, 2]], jnp.int32)
    mask = jnp.asarray((np.arange(8)[None] >= np.array([[0], [2]])).astype(np.int32))
    lq, aq = lm.forward_batched(qmodel, toks, mask=mask, capture=["resid_post"])
    lf, af = lm.forward_batched(fmodel, toks, mask=mask, capture=["resid_post"])
    np.testing.assert_allclose(np.asarray(lq), np.asarray(lf), rtol=1e-4, atol=1e-4)
    gq = lm.generate(qmodel, [[3, 5, 7], [1, 2]], max_new_tokens=6, return_logits=True)
    gf = lm.generate(fmodel, [[3, 5, 7], [1, 2]], max_new_tokens=6, return_logits=True)
    np.testing.assert_array_equal(np.asarray(gq.tokens), np.asarray(gf.tokens))
    np.testing.assert_allclose(np.asarray(gq.logits), np.asarray(gf.logits), rtol=1e-4, atol=1e-4)
    lora = lm.LoRA(cfg, key=jax.random.key(3), targets=("q", "down"), init_b_scale=0.1)
    np.testing.assert_allclose(
        np.asarray(lm.forward(qmodel, toks[0], lora=lora)[0]),
        np.asarray(lm.forward(fmodel, toks[0], lora=lora)[0]),
        rtol=1e-4,
        atol=1e-4,
    )


def test_smollm2_gguf_levels_are_exact():
    f = lm.read_gguf(lm.model_path("smollm2"))
    for name in ("blk.3.ffn_down.weight", "blk.0.attn_k.weight", "token_embd.weight"):
        ref = f.array(name)
        for bits in (8, 4):
            qw = quantize_tensor(f, name, bits=bits)
            assert qw.bits == (4 if bits == 4 and f.tensors[name].type_name == "Q4_1" else 8)
            np.testing.assert_array_equal(_numpy_dequantize(qw).astype(np.float32), ref)
    with pytest.raises(ValueError, match="weights"):
        lm.load("smollm2", weights="int3")


PROMPTS = [
    "The capital of France is",
    "def fibonacci(n):",
    "Once upon a time, in a small village,",
    "The three primary colours are",
]


@pytest.mark.slow
def test_smollm2_quantized_decode_matches_float32():
    """Greedy 64-token continuations (4 prompts) of int8 and int4 vs float32.

    The GGUF levels are exact, so the logits differ only by float rounding (summation
    order, one fused multiply-add in the dequantisation): tolerance 1e-3 of the logit
    range, and >= 90% of the generated tokens equal (each continuation compared up to
    its first split; after a split at a near-tie the continuations legitimately differ).
    """
    model, tok = lm.load("smollm2")
    ids = [tok.encode(p) for p in PROMPTS]
    ref = lm.generate(model, ids, max_new_tokens=64, return_logits=True)
    ref_t, ref_l = np.asarray(ref.tokens), np.asarray(ref.logits)
    del model
    for weights in ("int8", "int4"):
        qmodel, _ = lm.load("smollm2", weights=weights)
        got = lm.generate(qmodel, ids, max_new_tokens=64, return_logits=True)
        got_t, got_l = np.asarray(got.tokens), np.asarray(got.logits)
        assert (got_t == ref_t).mean() >= 0.9, (weights, (got_t == ref_t).mean())
        for i in range(len(PROMPTS)):
            split = next((k for k in range(64) if got_t[i, k] != ref_t[i, k]), 64)
            diff = np.abs(got_l[i, : split + 1] - ref_l[i, : split + 1]).max()
            assert diff <= 1e-3 * np.abs(ref_l[i]).max(), (weights, i, diff)
        del qmodel


def test_score_on_a_quantised_model_equals_score_on_its_dequantised_weights():
    # score() slices and gathers rows of the output head: it must accept QuantWeight.
    model = lm.Transformer.random(tiny_llama(d_model=32, head_dim=8), key=jax.random.key(0))
    qmodel = eqx.tree_at(lambda m: m.embed, model, lm.quantize(model.embed, bits=8))
    deq = eqx.tree_at(lambda m: m.embed, model, qmodel.embed.dequantize())
    prompts, conts = [[1, 5, 7]], [[[3, 4], [9]]]
    a = lm.score(qmodel, None, prompts, conts, vocab_chunk=16)
    b = lm.score(deq, None, prompts, conts, vocab_chunk=16)
    for x, y in zip(a.sum, b.sum, strict=True):
        np.testing.assert_allclose(x, y, rtol=1e-5, atol=1e-5)
