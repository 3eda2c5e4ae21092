"""SAE-feature ablation for the illusion read-outs: single-token option choice under an
intervention, the ablation mapping (empty = no edit) and matched control latents.

Papers: Templeton et al. 2024 (SAE feature ablation/clamping); the controls (k random
latents, k latents matched in firing frequency) follow the usual practice of comparing
a feature intervention against interventions of the same size.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float, Int, PRNGKeyArray

from .. import interp as ip
from .. import lm
from .._core import (
    as_array,
    check_array,
    check_ids,
    check_nonnegative_int,
    check_positive_int,
    check_real,
)

__all__ = ["option_logprobs", "ablation", "matched_latents"]


def option_logprobs(
    model: lm.Transformer,
    tokens: Int[Array, "B T"],
    mask: Int[Array, "B T"],
    option_ids: Sequence[int],
    *,
    intervene: Mapping[tuple[str, int], Callable] | None = None,
) -> Float[Array, "B K"]:
    """log p(option | sequence) of single-token options at the last position.

    **Arguments:** `model`; `tokens`, `mask` (B, T) left-padded sequences
    (`jaxlab.lm.pad_prompts`; `mask=None`: every token is real); `option_ids` K >= 2
    token ids in [0, vocab_size) (never wrapped); `intervene` as in
    `jaxlab.lm.forward` (e.g. `ablation(...)`).

    **Returns:** (B, K) log-probabilities under the full vocabulary softmax.
    """
    ids = np.asarray(option_ids)
    check_array("option_ids", ids, ndim=1, dtype=np.integer)
    if ids.size < 2:
        raise ValueError(f"option_ids: expected at least 2 token ids, received {ids.tolist()}")
    if not isinstance(model, lm.Transformer):
        raise ValueError(f"model: expected a jaxlab.lm.Transformer, received {type(model)}")
    ids = check_ids("option_ids", ids, model.config.vocab_size, what="token ids")
    logits, _ = lm.forward_batched(model, tokens, mask=mask, intervene=intervene)
    return jax.nn.log_softmax(logits[:, -1, :], axis=-1)[:, jnp.asarray(ids)]


def ablation(
    sae: ip.AbstractSAE,
    latents: Sequence[int],
    *,
    layer: int,
    site: str = "resid_post",
    input_scale: float = 1.0,
) -> dict[tuple[str, int], Callable]:
    """`intervene=` mapping that ablates `latents` of `sae` at (`site`, `layer`)
    (`jaxlab.interp.ablate_features`); no latents gives {} (the plain forward).

    `latents` integer indices >= 0 (not a string; one index or a 1-D sequence, may be
    empty), `layer` an integer >= 0, `input_scale` a finite number > 0; anything else
    raises a `ValueError` naming the argument.

    **Returns:** {(site, layer): `ClampFeatures`} or {}.
    """
    lat = check_ids("latents", latents, None, what="latent indices")
    check_array("latents", lat.reshape(-1) if lat.ndim == 0 else lat, ndim=1)
    lat = lat.reshape(-1).tolist()
    layer = check_nonnegative_int("layer", layer)
    input_scale = check_real("input_scale", input_scale, low=0.0, low_inclusive=False)
    if not lat:
        return {}
    return {(site, int(layer)): ip.ablate_features(sae, lat, input_scale=input_scale)}


def matched_latents(
    density: Float[Array, " m"],
    chosen: Int[Array, " k"],
    *,
    key: PRNGKeyArray,
    matched: bool = True,
) -> np.ndarray:
    """k control latents, none of them in `chosen`: with `matched`, for each chosen
    latent the unused latent of nearest firing density (ties broken at random by `key`);
    otherwise k latents drawn uniformly among those that fire at all.

    **Arguments:** `density` (m,) firing frequency of every latent (finite, >= 0,
    m >= 1); `chosen` (k,) distinct ints in [0, m) (one index or a 1-D sequence);
    `key`; `matched`.

    **Returns:** (k,) int64 latent indices.
    """
    d = np.asarray(
        as_array("density", density, ndim=1, finite=True, nonempty=True, low=0.0), np.float64
    )
    c = np.asarray(chosen)
    check_array("chosen", c.reshape(-1) if c.ndim == 0 else c, ndim=1, dtype=np.integer)
    c = c.reshape(-1)
    check_positive_int("chosen size", c.size)
    if c.min() < 0 or c.max() >= d.size:
        raise ValueError(f"chosen: expected indices in [0, {d.size}), received {c.tolist()}")
    if np.unique(c).size != c.size:
        raise ValueError(f"chosen: expected distinct latent indices, received {c.tolist()}")
    free = np.ones(d.size, bool)
    free[c] = False
    if free.sum() < c.size:
        raise ValueError(f"chosen: {c.size} latents leave fewer free ones for controls")
    noise = np.asarray(jax.random.uniform(key, (d.size,)), np.float64) * 1e-9
    if not matched:
        alive = np.flatnonzero(free & (d > 0))
        pool = alive if alive.size >= c.size else np.flatnonzero(free)
        return np.asarray(pool[np.argsort(noise[pool])[: c.size]], np.int64)
    out = []
    for i in c:
        gap = np.abs(np.log10(d + 1e-12) - np.log10(d[i] + 1e-12)) + noise
        gap[~free] = np.inf
        j = int(np.argmin(gap))
        free[j] = False
        out.append(j)
    return np.asarray(out, np.int64)
