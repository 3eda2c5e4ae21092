"""bfloat16 compute (`load(dtype=jnp.bfloat16)`, `Transformer.astype`): parameters,
residual stream, activations and KV cache in bfloat16; norms, softmax, logits and
`score`'s log-probabilities in float32.

Oracles: the float64 NumPy reference forward (`lm_reference`) of the same
bfloat16-rounded weights, and the float32 SmolLM2-135M. Tolerances (measured values in
brackets, on this machine's CPU):

- tiny random Llama / Qwen2 / Gemma-3: max |logit error| <= 8 * 2**-8 (= 0.031) times
  max |logit| against the float64 reference [0.004 - 0.009]; the float32 model is within
  1e-5 [2e-7].
- SmolLM2-135M (weights rounded to bfloat16 as well as computed in it), 3 x 16 positions:
  per-position KL(float32 || bfloat16) <= 0.05 nats [max 0.014, mean 0.0012],
  max |logit difference| <= 0.1 times max |logit| [0.038].
- `score` on a bfloat16 model: per-token log-probabilities within 0.05 nats of the
  log-softmax of the same model's full forward (prompt KV cache vs one pass, both bf16).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxlab.lm as lm

from .lm_reference import reference_logits, tiny_gemma, tiny_llama, tiny_qwen

CONFIGS = {"llama": tiny_llama(), "gemma3": tiny_gemma(), "qwen2": tiny_qwen()}
TOKENS = np.array([3, 5, 7, 1, 2, 9, 11, 4, 8, 6, 10, 12], np.int32)
BF16 = jnp.dtype(jnp.bfloat16)


def _log_softmax(x):
    x = np.asarray(x, np.float64)
    m = x.max(-1, keepdims=True)
    return x - m - np.log(np.exp(x - m).sum(-1, keepdims=True))


@pytest.mark.parametrize("arch", sorted(CONFIGS))
def test_bf16_logits_against_float64_reference(arch):
    m16 = lm.Transformer.random(CONFIGS[arch], key=jax.random.key(0)).astype(jnp.bfloat16)
    m32 = m16.astype(jnp.float32)  # the same (bfloat16-exact) weights
    assert (m16.dtype, m32.dtype) == (BF16, jnp.dtype(jnp.float32))
    ref = reference_logits(m32, TOKENS)
    scale = np.abs(ref).max()
    got32 = np.asarray(lm.forward(m32, TOKENS)[0])
    got16, acts = lm.forward(m16, TOKENS, capture=("resid_post", "z", "pattern"))
    assert got16.dtype == jnp.float32  # logits in float32
    assert acts["resid_post"].dtype == BF16
    assert acts["z"].dtype == BF16
    assert acts["pattern"].dtype == jnp.float32  # softmax in float32
    assert np.abs(got32 - ref).max() <= 1e-5 * scale
    err = np.abs(np.asarray(got16) - ref).max()
    assert err <= 8 * 2.0**-8 * scale, err / scale
    assert err > 0  # bfloat16 compute really happened (float32 is ~1e-7 here)


def test_bf16_cache_score_and_grad():
    m16 = lm.Transformer.random(CONFIGS["qwen2"], key=jax.random.key(1)).astype("bfloat16")
    logits, cache = lm.prefill(m16, TOKENS[None], cache_size=16)
    assert cache.k.dtype == BF16
    assert logits.dtype == jnp.float32
    # the full-forward logits of the prompt's last position equal the prefill's
    full = lm.forward(m16, TOKENS)[0][-1]
    np.testing.assert_allclose(np.asarray(logits[0]), np.asarray(full), rtol=0, atol=1e-5)

    def loss(v):
        steer = lm.Steer(v)
        out, _ = lm.forward(m16, TOKENS, intervene={("resid_post", 1): steer})
        return jax.nn.logsumexp(out[-1])

    g = jax.grad(loss)(jnp.zeros(m16.config.d_model, jnp.float32))
    assert g.dtype == jnp.float32
    assert bool(jnp.all(jnp.isfinite(g)))
    assert float(jnp.abs(g).max()) > 0
    # score: float32 log-probabilities, equal to the log-softmax of the full forward
    prompt, option = TOKENS[:8].tolist(), TOKENS[8:11].tolist()
    s = lm.score(m16, None, [prompt], [[option]])
    logp = _log_softmax(np.asarray(lm.forward(m16, np.asarray(prompt + option, np.int32))[0]))
    want = logp[np.arange(7, 10), option]
    np.testing.assert_allclose(s.tokens[0][0], want, rtol=0, atol=0.05)


def test_astype_refuses_other_dtypes():
    m = lm.Transformer.random(CONFIGS["llama"], key=jax.random.key(2))
    with pytest.raises(ValueError, match="dtype must be float32 or bfloat16"):
        m.astype(jnp.float16)


@pytest.fixture(scope="module")
def smollm2():
    m32, tok = lm.load("smollm2")
    return m32, m32.astype(jnp.bfloat16), tok  # = lm.load("smollm2", dtype=jnp.bfloat16)


def test_smollm2_bf16_close_to_float32(smollm2):
    m32, m16, tok = smollm2
    texts = ("The capital of France is", "def f(x):\n    return x * 2", "Once upon a time")
    seqs = np.stack([(tok.encode(t) * 8)[:16] for t in texts]).astype(np.int32)
    a = np.asarray(lm.forward_batched(m32, seqs)[0], np.float64)
    b = np.asarray(lm.forward_batched(m16, seqs)[0], np.float64)
    la, lb = _log_softmax(a), _log_softmax(b)
    kl = (np.exp(la) * (la - lb)).sum(-1)
    assert kl.max() <= 0.05, kl.max()
    assert np.abs(a - b).max() <= 0.1 * np.abs(a).max()
