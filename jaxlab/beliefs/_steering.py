"""Steering and ablation of a belief direction at the answer token, read as option choice.

P13 tests whether belief formation drives action selection: a direction is added to (or
projected out of) the residual stream at the last prompt token, where the answer is
chosen, and the action is read from the options' next-token log-probabilities. Each
prompt is run once into a KV cache up to its last token; every condition (a steering
vector or an ablated direction) then re-runs only that token, vmapped, inside one jitted
call (`jaxlab.lm.Steer`, `jaxlab.lm.ProjectOut`; Turner et al. 2023, Arditi et al. 2024).
With vector 0 the steered run is the plain run bit for bit (`x + 0 = x`).
"""

from __future__ import annotations

from collections.abc import Sequence

import equinox as eqx
import jax
import jax.core
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float, Int

from .. import lm
from .._core import (
    as_array,
    check_array,
    check_finite,
    check_id_lists,
    check_ids,
    check_positive_int,
)
from ._monitoring import _check_total_weight


def _float_dtype(*arrays):
    """float64 when any input is float64 (x64 tests, oracles), else float32."""
    return jnp.float64 if any(a.dtype == jnp.float64 for a in arrays) else jnp.float32


__all__ = ["option_logprobs", "MODES", "dose_slope"]

#: how a condition's vector edits the activation: "add" it, or "project_out" its direction
MODES = ("add", "project_out", "none")
"""How a condition's vector edits the activation: `"add"` it, `"project_out"` its direction, or
`"none"`."""


def _edit(mode, vector):
    if mode == "add":
        return lm.Steer(vector, 1.0)
    return lm.ProjectOut(vector)


@eqx.filter_jit
def _conditions_jit(model, last, caches, ids, vectors, *, layers, site, mode):
    def condition(vec):
        intervene = (
            {}
            if mode == "none"
            else {(site, layer): _edit(mode, vec[i]) for i, layer in enumerate(layers)}
        )

        def one(t, cache, opt):
            pos = cache.next_position
            h, _, _ = model.run(t[None], pos[None], cache, intervene=intervene)
            return jax.nn.log_softmax(model.logits(h[0]))[opt]

        return jax.vmap(one)(last, caches, ids)

    return jax.lax.map(condition, vectors)


def option_logprobs(
    model: lm.Transformer,
    prompts: Sequence[Sequence[int]],
    option_ids: Int[Array, "B K"],
    vectors: Float[Array, "C n_layers d"] | None = None,
    *,
    layers: Sequence[int] = (),
    site: str = "resid_post",
    mode: str = "add",
    batch_size: int = 16,
) -> np.ndarray:
    """log p(option | prompt) of single-token options under C edits at the last token (P13).

    **Arguments:**

    - `model`: a `jaxlab.lm.Transformer`.
    - `prompts`: B token-id lists (at least 2 tokens each).
    - `option_ids`: (B, K) the token id of each option of each prompt.
    - `vectors`: (C, len(layers), d) one vector per condition and layer (or (C, d), the same
      at every layer): added (`mode="add"`) or projected out (`"project_out"`, non-zero)
      at `site` of each of `layers`, at the last prompt token only. Ignored for
      `mode="none"` (one condition, the plain run).
    - `layers`, `site`: where to edit (`jaxlab.lm.SITES`).
    - `batch_size`: prompts per compiled batch (the last batch is padded); at most B
      are used (a larger value gives the same result).

    **Returns:** (C, B, K) float32 log-probabilities under the full-vocabulary softmax.
    """
    if not isinstance(model, lm.Transformer):
        raise ValueError(f"model: expected a jaxlab.lm.Transformer, received {type(model)}")
    if mode not in MODES:
        raise ValueError(f"mode: expected one of {MODES}, received {mode!r}")
    if site not in lm.SITES:
        raise ValueError(f"site: expected one of {lm.SITES}, received {site!r}")
    batch_size = check_positive_int("batch_size", batch_size)
    cfg = model.config
    toks = check_id_lists("prompts", prompts, cfg.vocab_size, what="token ids")
    # padding to batch_size only keeps one compiled shape: more rows than prompts is waste
    batch_size = min(batch_size, len(toks))
    if any(len(p) < 2 for p in toks):
        raise ValueError("prompts: expected a non-empty list of token lists of >= 2 tokens")
    ids = check_ids("option_ids", option_ids, cfg.vocab_size, what="token ids")
    check_array("option_ids", ids, shape=(len(toks), "K"))
    layers = tuple(int(i) for i in layers)
    if mode == "none":
        vecs = jnp.zeros((1, 0, cfg.d_model), jnp.float32)
        layers = ()
    else:
        if not layers or any(not 0 <= i < cfg.n_layers for i in layers):
            raise ValueError(f"layers: expected ints in [0, {cfg.n_layers}), received {layers}")
        if vectors is None:
            raise ValueError(f"vectors: expected a (C, d) or (C, L, d) array for mode={mode!r}")
        vecs = as_array("vectors", vectors, nonempty=True).astype(jnp.float32)
        if vecs.ndim == 2:
            vecs = jnp.broadcast_to(vecs[:, None, :], (vecs.shape[0], len(layers), vecs.shape[1]))
        check_array("vectors", vecs, shape=("C", len(layers), cfg.d_model))
        check_finite("vectors", vecs)
        if mode == "project_out" and not bool(jnp.all(jnp.linalg.norm(vecs, axis=-1) > 0)):
            raise ValueError("vectors: expected non-zero directions to project out")
    out = []
    for b0 in range(0, len(toks), batch_size):
        chunk = toks[b0 : b0 + batch_size]
        n = len(chunk)
        chunk = chunk + [chunk[0]] * (batch_size - n)
        bids = np.concatenate([ids[b0 : b0 + n], np.repeat(ids[b0 : b0 + 1], batch_size - n, 0)])
        prefix = [p[:-1] for p in chunk]
        P = lm.prompt_bucket(max(len(p) for p in prefix))
        _, caches = lm.prefill(model, [p for p in prefix], cache_size=P + 1, pad_id=0)
        last = jnp.asarray([p[-1] for p in chunk], jnp.int32)
        lp = _conditions_jit(
            model,
            last,
            caches,
            jnp.asarray(bids, jnp.int32),
            vecs,
            layers=layers,
            site=site,
            mode=mode,
        )
        out.append(np.asarray(lp)[:, :n])
    return np.concatenate(out, axis=1)


def dose_slope(
    alphas: Float[Array, " A"], values: Float[Array, "n A"], *, weights=None
) -> Float[Array, ""]:
    """Least-squares slope of the item-mean response against the steering strength.

    `slope = sum_a (alpha_a - mean alpha) (ybar_a - mean ybar) / sum_a (alpha_a - mean alpha)^2`
    with `ybar_a` the (weighted) mean over items of `values[:, a]`; `weights` (n,) replicate
    items, so `jaxlab.interp.bootstrap_ci` resamples it over items.

    **Arguments:** `alphas` (A,) at least two distinct values; `values` (n, A) per-item
    responses (e.g. logit P(choose A)); `weights` (n,) >= 0.

    **Returns:** () the slope.
    """
    a = as_array("alphas", alphas, ndim=1, finite=True)
    v = as_array("values", values, shape=(None, a.shape[0]), finite=True, nonempty=True)
    if not isinstance(a, jax.core.Tracer) and len(np.unique(np.asarray(a))) < 2:
        raise ValueError(f"alphas: expected at least two distinct values, received {a}")
    dt = _float_dtype(a, v)
    a, v = a.astype(dt), v.astype(dt)
    if weights is None:
        w = jnp.ones((v.shape[0],), dt)
    else:
        w = as_array("weights", weights, shape=(v.shape[0],), finite=True, low=0.0).astype(dt)
        _check_total_weight(w)
    ybar = (w @ v) / jnp.sum(w)
    da = a - jnp.mean(a)
    return jnp.sum(da * (ybar - jnp.mean(ybar))) / jnp.sum(da**2)
