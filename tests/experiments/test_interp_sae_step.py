"""The benchmark's NumPy SAE step equals `SAEStep` (so the timing compares the same work)."""

from __future__ import annotations

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import optax

import jaxlab.interp as ip
from experiments.bench import interp_sae_step as bench


def test_numpy_step_equals_sae_step(getkey):
    d, m, B = 8, 32, 16
    data = jax.random.normal(getkey(), (64, d), jnp.float32)
    sae = ip.TopKSAE(d, m, 3, key=getkey(), b_dec=data)
    step = ip.SAEStep(
        data, optax.adam(bench.LR), batch_size=B, aux_coefficient=bench.AUX_C, dead_window=1
    )
    dead = np.arange(m) % 4 == 0
    state = eqx.tree_at(
        lambda s: s.steps_since_fired,
        step.init(sae, getkey()),
        jnp.asarray(np.where(dead, 5, 0), jnp.int32),
    )
    ref = bench.NumpyTopKStep(sae, data, B, dead)
    key = getkey()
    for i in range(3):
        k = jax.random.fold_in(key, i)
        idx = jax.random.randint(jax.random.split(k)[0], (B,), 0, 64)
        ref(np.asarray(idx))
        state, _ = eqx.filter_jit(step.step)(state, k)
        ref.dead = np.asarray(state.steps_since_fired >= 1)
    for a, b in zip(
        ref.p, (state.sae.W_enc, state.sae.b_enc, state.sae.W_dec, state.sae.b_dec), strict=True
    ):
        np.testing.assert_allclose(a, b, rtol=2e-4, atol=2e-6)
