"""The frozen prefix of a query for one architecture, and the adapted top blocks run on it.

HAPS trains generated LoRA adapters on the top blocks of frozen LMs. Running the whole model
per training step is what makes that expensive, so the part that does not change is cached
per input: the residual stream entering the first adapted block (computed once by the
frozen bottom blocks) and, in the adapted blocks, the base model's keys and values of the
prompt prefix. Only the last `n_active` prompt tokens (the "invocation", here the tokens of
"Answer:") then run through the adapted blocks, attending to the cached prefix. The
adapter is thus active on those tokens only: the activated LoRA of Greenewald et al. 2025
("Activated LoRA: fine-tuned LLMs for intrinsics"), which reuses the base model's cache
of the prompt. With `n_active` = the prompt length nothing is cached and the adapter sees
every token (ordinary LoRA); with the adapted blocks = all blocks, gradients flow through
the whole frozen model.
"""

from __future__ import annotations

import equinox as eqx
import jax
import jax.core
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float, Int

from jaxlab import lm
from jaxlab._core import as_array, check_ids, check_memory, check_positive_int

__all__ = ["AdaptedInputs", "adapted_inputs", "adapted_option_logits"]


class AdaptedInputs(eqx.Module):
    """What the adapted top blocks need of one query (stack the leaves for N queries).

    **Attributes:**
        resid: (A, d_model) residual stream entering the first adapted block at the A
            activated (last) prompt tokens.
        positions: (A,) their position ids.
        cache: the top blocks' `jaxlab.lm.KVCache` holding the base model's keys and
            values of the prompt prefix (padding slots at position -1), with A free slots.
    """

    resid: Float[Array, "A d"]
    positions: Int[Array, " A"]
    cache: lm.KVCache


def _bucket(n: int) -> int:
    """16, 24, 32, 48, 64, ...: few compiled prefix lengths, at most 1/3 padding."""
    b = 16
    while b < n:
        b = b * 3 // 2 if b & (b - 1) == 0 else b * 4 // 3
    return b


@eqx.filter_jit
def _prefill(upper, x, pos, size):
    return upper.run_blocks(x, pos, lm.KVCache.empty(upper.config, size))[2]


def adapted_inputs(
    upper: lm.Transformer, resid, *, n_active: int, size: int | None = None
) -> AdaptedInputs:
    """Cache one query's prompt prefix in the adapted blocks `upper`.

    **Arguments:**
        upper: the adapted top blocks of a model (`jaxlab.lm.layer_slice(model, start)`).
        resid: (T, d_model) finite, T >= 2: the residual entering block `start` at every
            prompt token (what the frozen bottom blocks computed; cache it per input).
        n_active: A, how many last prompt tokens run through the adapted blocks (1 <= A < T).
        size: cache slots for the prefix (>= T - A; default T - A). Queries stacked
            together need one `size`; a cache larger than the memory available is refused
            before it is allocated.

    **Returns:** an `AdaptedInputs`.
    """
    d = upper.config.d_model
    r = np.asarray(as_array("resid", resid, shape=(None, d), finite=True, real=True), np.float32)
    n_active = check_positive_int("n_active", n_active)
    T = r.shape[0]
    if T < 2:
        raise ValueError(f"resid: expected at least 2 prompt tokens, received shape {r.shape}")
    if n_active >= T:
        raise ValueError(
            f"n_active: expected fewer than the {T} prompt tokens, received {n_active}"
        )
    P = T - n_active
    slots: int = P if size is None else check_positive_int("size", size)
    if slots < P:
        raise ValueError(f"size: expected >= the prefix length {P}, received {size}")
    # keys and values of every adapted layer, before the cache is allocated
    c = upper.config
    per_slot = 2.0 * c.n_layers * c.n_kv_heads * c.head_dim * jnp.dtype(upper.dtype).itemsize
    check_memory("size", per_slot * (slots + n_active))
    # the prefix runs at its own (bucketed) length; the cache has `slots + n_active` slots,
    # those past the prefix empty (position -1), so queries of one `size` stack together
    n = min(_bucket(P), slots)
    x = np.zeros((n, d), np.float32)
    x[:P] = r[:P]
    pos = np.full(n, -1, np.int32)
    pos[:P] = np.arange(P)
    cache = _prefill(upper, jnp.asarray(x), jnp.asarray(pos), slots + n_active)
    return AdaptedInputs(jnp.asarray(r[P:]), jnp.arange(P, T, dtype=jnp.int32), cache)


def adapted_option_logits(
    upper: lm.Transformer,
    inputs: AdaptedInputs,
    lora: lm.LoRA | None,
    options: Int[Array, " K"],
) -> Float[Array, " K"]:
    """Logits of the option tokens after the last prompt token, under an adapter.

    **Arguments:**
        upper: the adapted top blocks (as in `adapted_inputs`).
        inputs: one query's `AdaptedInputs` (unbatched; vmap over queries).
        lora: a `jaxlab.lm.LoRA` with `upper`'s layers (None: the base model).
        options: (K,) token ids of the options (e.g. the letters " A" .. " D"), K >= 1,
            each in [0, vocab_size) (never wrapped; else a `ValueError` naming `options`).

    **Returns:** (K,) float32 logits (the option-restricted next-token logits).
    """
    if not isinstance(options, jax.core.Tracer):
        ids = check_ids("options", options, upper.config.vocab_size, what="token ids")
        if ids.ndim != 1 or ids.size == 0:
            raise ValueError(
                f"options: expected (K,) token ids, K >= 1, received shape {ids.shape}"
            )
        options = jnp.asarray(ids, jnp.int32)
    h, _, _ = upper.run_blocks(inputs.resid, inputs.positions, inputs.cache, lora=lora)
    return upper.token_logits(h[-1], options)
