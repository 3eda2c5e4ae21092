"""`forward`: logits plus captured activations, with interventions and LoRA, under jit."""

from __future__ import annotations

import warnings
from collections.abc import Callable, Mapping, Sequence

import equinox as eqx
import jax
import jax.core
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float, Int

from jaxlab._core import as_array

from ._lora import LoRA
from ._model import HEAD_SITES, SITES, KVCache, Transformer

__all__ = ["forward", "forward_batched", "positions_from_mask"]


def positions_from_mask(mask: Int[Array, "... T"]) -> Int[Array, "... T"]:
    """Position ids for left-padded rows: 0, 1, ... over real tokens, -1 on padding."""
    m = as_array("mask", mask, dtype=jnp.integer)
    if m.ndim < 1 or m.shape[-1] == 0:
        raise ValueError(f"mask: expected (..., T) with T >= 1, received shape {m.shape}")
    m = m.astype(jnp.int32)
    return jnp.where(m > 0, jnp.cumsum(m, axis=-1) - 1, -1).astype(jnp.int32)


def check_token_range(tokens, vocab_size, name: str = "tokens"):
    """ValueError naming `name` (eagerly) or `eqx.error_if` (under jit) unless
    0 <= tokens < vocab_size."""
    bad = (tokens < 0) | (tokens >= vocab_size)
    if isinstance(tokens, jax.core.Tracer):
        return eqx.error_if(tokens, bad, f"{name}: token ids must lie in [0, {vocab_size})")
    if bool(jnp.any(bad)):
        raise ValueError(
            f"{name}: token ids must lie in [0, {vocab_size}), got values "
            f"{np.asarray(tokens)[np.asarray(bad)][:5].tolist()}"
        )
    return tokens


def _check_sites(capture, intervene, n_layers):
    known = SITES + HEAD_SITES
    for s in capture:
        if s not in known:
            raise ValueError(f"capture: unknown site {s!r}; expected one of {known}")
    for key, fn in intervene.items():
        if not (isinstance(key, tuple) and len(key) == 2):
            raise ValueError(f"intervene keys must be (site, layer) tuples, got {key!r}")
        site, layer = key
        if site not in known:
            raise ValueError(f"intervene: unknown site {site!r}; expected one of {known}")
        if not isinstance(layer, int | np.integer) or not 0 <= layer < n_layers:
            raise ValueError(f"intervene: layer must be an int in [0, {n_layers}), got {layer!r}")
        if not callable(fn):
            raise ValueError(f"intervene[{key!r}] must be callable")


@eqx.filter_jit
def _forward_jit(model, tokens, mask, capture, layers, intervene, lora):
    def one(tok, m):
        cache = KVCache.empty(model.config, tok.shape[0], model.dtype)
        h, acts, _ = model.run(
            tok,
            positions_from_mask(m),
            cache,
            capture=capture,
            intervene=intervene,
            lora=lora,
            capture_layers=layers,
        )
        return model.logits(h), acts

    return jax.vmap(one)(tokens, mask)


def _prepare(model, tokens, mask, capture, layers, intervene, *, batched):
    """Validate and normalise `forward`/`forward_batched`'s inputs to a (B, T) batch."""
    if not isinstance(model, Transformer):
        raise ValueError(f"model must be a jaxlab.lm.Transformer, got {type(model).__name__}")
    tokens = as_array("tokens", tokens)  # ids beyond int32 are refused here, not wrapped
    want = 2 if batched else 1
    if not jnp.issubdtype(tokens.dtype, jnp.integer) or tokens.ndim != want:
        shape = "(B, T)" if batched else "(T,)"
        raise ValueError(
            f"tokens must be a {shape} integer array, got {tokens.dtype}{tokens.shape}"
        )
    if tokens.shape[-1] == 0:
        raise ValueError("tokens must not be empty")
    tokens = check_token_range(tokens, model.config.vocab_size)  # before the int32 cast
    tokens = jnp.atleast_2d(tokens).astype(jnp.int32)
    if mask is None:
        mask = jnp.ones(tokens.shape, jnp.int32)
    else:
        mask = jnp.atleast_2d(as_array("mask", mask)).astype(jnp.int32)
        if mask.shape != tokens.shape:
            raise ValueError(f"mask must have the shape of tokens {tokens.shape}, got {mask.shape}")
    cfg = model.config
    capture = tuple(capture)
    intervene = dict(intervene or {})
    _check_sites(capture, intervene, cfg.n_layers)
    layers = tuple(range(cfg.n_layers)) if layers is None else tuple(int(i) for i in layers)
    if any(not 0 <= i < cfg.n_layers for i in layers):
        raise ValueError(f"layers must lie in [0, {cfg.n_layers}), got {layers}")
    return tokens, mask, capture, layers, intervene


def forward(
    model: Transformer,
    tokens: Int[Array, " T"],
    *,
    mask: Int[Array, " T"] | None = None,
    capture: Sequence[str] = (),
    layers: Sequence[int] | None = None,
    intervene: Mapping[tuple[str, int], Callable] | None = None,
    lora: LoRA | None = None,
) -> tuple[Float[Array, "T V"], dict[str, Float[Array, "L T d"]]]:
    """Logits and per-layer activations of one token sequence, jitted.

    Unbatched, like the rest of jaxlab: `jax.vmap` it over sequences of one length, or
    use `forward_batched` for a left-padded batch of prompts of different lengths.

    **Arguments:**
        model: a `Transformer`.
        tokens: (T,) int token ids. A (B, T) batch is still accepted for one release with
            a `DeprecationWarning`: call `forward_batched` instead.
        mask: (T,), 1/True on real tokens, 0 on left padding (default: all 1).
        capture: sites to return, among "resid_pre" (block input), "attn_out"
            (attention contribution to the residual, after Gemma's post-norm),
            "resid_mid" (after adding it), "mlp_out" (MLP contribution),
            "resid_post" (block output); and the per-head `HEAD_SITES` "z" (each
            head's output before the output projection, (T, n_heads, head_dim)) and
            "pattern" (attention probabilities, (n_heads, T, T)).
        layers: layer indices to return for captured sites (default: all).
        intervene: {(site, layer): fn} where fn maps that activation (T, d) to an
            edited (T, d) inside the jitted forward (steering, ablation); captured
            values and everything downstream see the edited value. Use callables
            that are `eqx.Module`s holding arrays (e.g. `Steer`) to change their
            values without recompiling.
        lora: LoRA adapters to add to the projections.

    **Returns:**
        logits (T, vocab) float32 and {site: (len(layers), T, d_model)} (head sites:
        (len(layers), T, n_heads, head_dim) and (len(layers), n_heads, T, T)).
    """
    if getattr(tokens, "ndim", np.ndim(tokens)) == 2:
        warnings.warn(
            "lm.forward with a (B, T) batch is deprecated: use lm.forward_batched "
            "(lm.forward takes one (T,) sequence and vmaps)",
            DeprecationWarning,
            stacklevel=2,
        )
        return forward_batched(
            model,
            tokens,
            mask=mask,
            capture=capture,
            layers=layers,
            intervene=intervene,
            lora=lora,
        )
    args = _prepare(model, tokens, mask, capture, layers, intervene, batched=False)
    logits, acts = _forward_jit(model, *args, lora)
    return logits[0], {k: v[0] for k, v in acts.items()}


def forward_batched(
    model: Transformer,
    tokens: Int[Array, "B T"],
    *,
    mask: Int[Array, "B T"] | None = None,
    capture: Sequence[str] = (),
    layers: Sequence[int] | None = None,
    intervene: Mapping[tuple[str, int], Callable] | None = None,
    lora: LoRA | None = None,
) -> tuple[Float[Array, "B T V"], dict[str, Float[Array, "B L T d"]]]:
    """`forward` over a left-padded batch (`pad_prompts`), the batched convenience wrapper.

    **Arguments:**
        model: a `Transformer`.
        tokens: (B, T) int token ids, left-padded.
        mask: (B, T), 1/True on real tokens, 0 on left padding (default: all 1).
        capture, layers, intervene, lora: as in `forward` (`intervene`'s functions see
            one row's (T, d) activation).

    **Returns:**
        logits (B, T, vocab) float32 and {site: (B, len(layers), T, d_model)}.
    """
    args = _prepare(model, tokens, mask, capture, layers, intervene, batched=True)
    return _forward_jit(model, *args, lora)
