"""One TopK SAE training step (aux-k, Adam, decoder projection): jitted `SAEStep` vs NumPy.

The same step in both: draw a batch of `batch` rows from a data buffer, TopK encode
(k = 32), decode, MSE plus the aux-k loss on the dead latents (a quarter of them,
k_aux = d/2), backward pass, removal of the decoder-parallel gradient, Adam update,
renormalised decoder rows and the fired counters. The NumPy version is written out by
hand (dense float32 matmuls, `argpartition` for the top-k; BLAS threads as NumPy's
default). Tokens/s = batch / median seconds; `speedup_vs_numpy` per width d.
"""

from __future__ import annotations

import equinox as eqx
import jax
import numpy as np
import optax

from experiments._harness import Bench

NAME = "interp_sae_step"
PAPER = "P14"
DESCRIPTION = "TopK SAE step (batch 4096, expansion 16, k 32, aux-k) tokens/s: jaxlab vs NumPy"
QUICK = {
    "dims": [576, 896],
    "expansion": 16,
    "batch": 4096,
    "k": 32,
    "buffer": 8192,
    "warmup": 1,
    "repeats": 3,
}
FULL = {**QUICK, "warmup": 2, "repeats": 10}
TINY = {  # the smoke tier: two widths, both implementations once
    "dims": [16, 32],
    "expansion": 4,
    "batch": 64,
    "k": 4,
    "buffer": 256,
    "warmup": 0,
    "repeats": 1,
}

LR, B1, B2, EPS, AUX_C = 2e-4, 0.9, 0.999, 1e-8, 1.0 / 32


class NumpyTopKStep:
    """The `SAEStep` TopK update in plain NumPy (state held in the object)."""

    def __init__(self, sae, data, batch, dead, seed=0):
        self.p = [np.array(a, np.float32) for a in (sae.W_enc, sae.b_enc, sae.W_dec, sae.b_dec)]
        self.m = [np.zeros_like(a) for a in self.p]
        self.v = [np.zeros_like(a) for a in self.p]
        self.t = 0
        self.k = sae.k
        self.k_aux = min(sae.d_in // 2, sae.d_sae)
        self.data = np.asarray(data, np.float32)
        self.batch = batch
        self.dead = np.asarray(dead, bool)
        self.rng = np.random.default_rng(seed)

    @staticmethod
    def _topk(pre, k):
        idx = np.argpartition(-pre, k - 1, axis=1)[:, :k]
        vals = np.maximum(np.take_along_axis(pre, idx, 1), 0)
        z = np.zeros_like(pre)
        np.put_along_axis(z, idx, vals, 1)
        return z

    def __call__(self, indices=None):
        W_enc, b_enc, W_dec, b_dec = self.p
        if indices is None:
            indices = self.rng.integers(0, self.data.shape[0], self.batch)
        x = self.data[np.asarray(indices)]
        B = x.shape[0]
        xc = x - b_dec
        pre = xc @ W_enc + b_enc
        z = self._topk(pre, self.k)
        x_hat = z @ W_dec + b_dec
        g_xhat = (2.0 / B) * (x_hat - x)
        n_dead = int(self.dead.sum())
        scale = min(n_dead / self.k_aux, 1.0)
        z_aux = self._topk(np.where(self.dead, pre, np.float32(-3e38)), self.k_aux)
        e = x - x_hat
        g_ehat = (2.0 * AUX_C * scale / B) * (z_aux @ W_dec - e)
        g_dec = z.T @ g_xhat + z_aux.T @ g_ehat
        g_pre = (g_xhat @ W_dec.T) * (z > 0) + (g_ehat @ W_dec.T) * (z_aux > 0)
        g_enc = xc.T @ g_pre
        g_benc = g_pre.sum(0)
        g_bdec = g_xhat.sum(0) - W_enc @ g_pre.sum(0)
        g_dec -= np.sum(g_dec * W_dec, axis=1, keepdims=True) * W_dec
        self.t += 1
        for i, g in enumerate((g_enc, g_benc, g_dec, g_bdec)):
            self.m[i] = B1 * self.m[i] + (1 - B1) * g
            self.v[i] = B2 * self.v[i] + (1 - B2) * g * g
            mh = self.m[i] / (1 - B1**self.t)
            vh = self.v[i] / (1 - B2**self.t)
            self.p[i] = self.p[i] - LR * mh / (np.sqrt(vh) + EPS)
        self.p[2] /= np.linalg.norm(self.p[2], axis=1, keepdims=True)
        self.fired = (z > 0).any(0)
        return self.p[2]


def setup(config: dict, key: jax.Array) -> Bench:
    import jaxlab.interp as ip

    impls, fields, size = {}, {}, {}
    B, k = int(config["batch"]), int(config["k"])
    for i, d in enumerate(config["dims"]):
        kd, ks, kk = jax.random.split(jax.random.fold_in(key, i), 3)
        m = int(config["expansion"]) * d
        data = jax.random.normal(kd, (int(config["buffer"]), d), np.float32)
        sae = ip.TopKSAE(d, m, k, key=ks, b_dec=data[:1024])
        step = ip.SAEStep(data, optax.adam(LR), batch_size=B, aux_coefficient=AUX_C, dead_window=1)
        state = step.init(sae, kk)
        # a quarter of the latents dead (aux-k active), as mid-training
        dead = np.arange(m) % 4 == 0
        state = eqx.tree_at(
            lambda s: s.steps_since_fired, state, jax.numpy.asarray(np.where(dead, 5, 0), np.int32)
        )
        jitted = eqx.filter_jit(step.step)
        impls[f"jaxlab_d{d}"] = lambda jitted=jitted, state=state, kk=kk: jitted(state, kk)
        impls[f"numpy_d{d}"] = NumpyTopKStep(sae, data, B, dead)
        fields[f"jaxlab_tokens_per_s_d{d}"] = lambda t, d=d: B / t[f"jaxlab_d{d}"]
        fields[f"numpy_tokens_per_s_d{d}"] = lambda t, d=d: B / t[f"numpy_d{d}"]
        fields[f"speedup_vs_numpy_d{d}"] = lambda t, d=d: t[f"numpy_d{d}"] / t[f"jaxlab_d{d}"]
        size[f"d_sae_d{d}"] = m
    dims = list(config["dims"])
    fields["speedup_vs_numpy"] = lambda t: float(
        np.exp(np.mean([np.log(t[f"numpy_d{d}"] / t[f"jaxlab_d{d}"]) for d in dims]))
    )
    size.update({"batch": B, "k": k, "expansion": int(config["expansion"]), "dims": dims})
    return Bench(
        impls=impls,
        ours=tuple(n for n in impls if n.startswith("jaxlab")),
        size=size,
        pairs=tuple((f"jaxlab_d{d}", f"numpy_d{d}") for d in dims),
        fields=fields,
        notes="float32; random Gaussian buffer of activations; one quarter of the "
        "latents dead so the aux-k branch runs; speedup_vs_numpy is the "
        "geometric mean over the widths. SAELens (PyTorch) not installed: "
        "no PyTorch in the default set-up.",
    )
