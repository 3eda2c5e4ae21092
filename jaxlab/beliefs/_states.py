"""Residual states over a generated answer: the last prompt token and every generated token.

P13 measures a belief's dominance *during generation*: the sequence whose positions the
dominance metric runs over is the last prompt token (where the first answer token is
chosen) followed by the tokens the model generated. One jitted pass per batch runs each
prompt + completion through the blocks (no output head), keeping the chosen layers.
"""

from __future__ import annotations

from collections.abc import Sequence

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from .. import lm
from .._core import check_id_lists, check_memory, check_positive_int

__all__ = ["generation_states"]


@eqx.filter_jit
def _states_jit(model, tokens, mask, *, layers, site):
    def one(t, m):
        cache = lm.KVCache.empty(model.config, t.shape[0])
        _, acts, _ = model.run(t, lm.positions_from_mask(m), cache, capture=(site,))
        return acts[site][jnp.asarray(layers, jnp.int32)]

    return jax.vmap(one)(tokens, mask)


def generation_states(
    model: lm.Transformer,
    prompts: Sequence[Sequence[int]],
    completions: Sequence[Sequence[int]],
    *,
    layers: Sequence[int],
    width: int,
    site: str = "resid_post",
) -> tuple[np.ndarray, np.ndarray]:
    """Activations at the last prompt token and the generated tokens of each item (P13).

    **Arguments:**

    - `model`: a `jaxlab.lm.Transformer`.
    - `prompts`: B prompt token lists (non-empty).
    - `completions`: B generated token lists, each of at most `width` tokens.
    - `layers`: layer indices to keep; `site` among `jaxlab.lm.SITES`.
    - `width`: the generated length to pad to (e.g. `max_new_tokens`); a width whose
      result would not fit in memory is refused naming `width`.

    `prompts` and `completions` are sequences of flat integer lists (or (B, T) arrays);
    ids outside [0, vocab_size) are refused, never wrapped.

    **Returns:** `states` (B, len(layers), 1 + width, d) float32, position 0 the last
    prompt token and position j the j-th generated token (zeros past the end), and
    `mask` (B, 1 + width) bool, True on real positions.
    """
    if not isinstance(model, lm.Transformer):
        raise ValueError(f"model: expected a jaxlab.lm.Transformer, received {type(model)}")
    if site not in lm.SITES:
        raise ValueError(f"site: expected one of {lm.SITES}, received {site!r}")
    width = check_positive_int("width", width)
    cfg = model.config
    layers = tuple(int(i) for i in layers)
    if not layers or any(not 0 <= i < cfg.n_layers for i in layers):
        raise ValueError(f"layers: expected ints in [0, {cfg.n_layers}), received {layers}")
    V = cfg.vocab_size
    ps = check_id_lists("prompts", prompts, V, what="token ids")
    cs = check_id_lists("completions", completions, V, what="token ids")
    if len(ps) != len(cs):
        raise ValueError(
            f"completions: expected one list per prompt ({len(ps)}), received {len(cs)}"
        )
    if any(not p for p in ps):
        raise ValueError("prompts: expected non-empty token lists")
    if any(len(c) > width for c in cs):
        raise ValueError(f"completions: expected at most width={width} tokens each")
    # the (B, L, 1 + width, d) float32 result, refused before it is allocated
    check_memory("width", 4.0 * len(ps) * len(layers) * (1 + width) * cfg.d_model)
    full = [p + c for p, c in zip(ps, cs, strict=True)]
    tokens, mask = lm.pad_prompts(full, length=lm.prompt_bucket(max(len(f) for f in full)))
    acts = np.asarray(
        _states_jit(model, jnp.asarray(tokens), jnp.asarray(mask), layers=layers, site=site)
    )
    T = tokens.shape[1]
    B, L, d = len(full), len(layers), cfg.d_model
    states = np.zeros((B, L, 1 + width, d), np.float32)
    out_mask = np.zeros((B, 1 + width), bool)
    for i, c in enumerate(cs):
        start = T - len(c) - 1  # left padding: the sequence ends at the last column
        states[i, :, : len(c) + 1] = acts[i, :, start:]
        out_mask[i, : len(c) + 1] = True
    return states, out_mask
