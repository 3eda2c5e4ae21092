"""KV-cache generation under jit: prefill, decode, batched left-padded prompts, streaming.

Shapes are bucketed so that generation does not recompile per prompt or per
token: prompts are left-padded to a power of two (>= 16), the cache holds
`prompt bucket + max_new_tokens` slots, and one `lax.while_loop` decodes up to
`max_new_tokens` tokens, stopping early once every row has produced a stop token.
Each decode step writes its key/value slot in place (the cache rides in the layer
loop's carry).
`stream` runs the same jitted prefill and single-token decode step from Python and
yields tokens as they come.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import NamedTuple

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float, Int

from jaxlab._core import (
    check_memory,
    check_nonnegative_int,
    check_positive_int,
    short_repr,
)

from ._forward import _check_sites, check_token_range, positions_from_mask
from ._lora import LoRA
from ._model import KVCache, Transformer
from ._sampling import Greedy

__all__ = [
    "Generation",
    "generate",
    "generate_text",
    "pad_prompts",
    "prefill",
    "stream",
    "prompt_bucket",
]


class Generation(NamedTuple):
    """Output of `generate`.

    **Attributes:**
        tokens: (B, max_new_tokens) int32 generated ids; `pad_id` after a stop token.
        lengths: (B,) number of generated tokens, the stop token included.
        logits: (B, max_new_tokens, vocab) float32 logits each token was chosen
            from (only with `return_logits=True`; zeros after a row stopped).
    """

    __repr__ = short_repr  # arrays as dtype[shape], long sequences cut

    tokens: Int[Array, "B N"]
    lengths: Int[Array, " B"]
    logits: Float[Array, "B N V"] | None


def prompt_bucket(n: int) -> int:
    """Padded prompt length: the next power of two, at least 16.

    `n` is a prompt length, an integer >= 0 (0, an empty prompt, gets the minimum 16);
    a negative, fractional, boolean or None `n` raises a `ValueError` naming it.
    """
    n = check_nonnegative_int("n", n)
    return max(16, 1 << max(0, n - 1).bit_length())


def pad_prompts(
    prompts: Sequence[Sequence[int]], *, pad_id: int = 0, length: int | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """Left-pad token lists to one (bucketed) length.

    **Arguments:**
        prompts: B lists of token ids (each non-empty).
        pad_id: filler id (masked out, so its value does not matter).
        length: padded length (default: `prompt_bucket` of the longest prompt).

    **Returns:**
        tokens (B, length) int32 and mask (B, length) int32 (1 = real token).
    """
    if isinstance(prompts, str | bytes | Mapping) or not isinstance(prompts, Sequence | np.ndarray):
        raise ValueError(
            f"prompts: expected a sequence of token-id lists, received {short_repr(prompts)}"
        )
    if len(prompts) == 0 or any(np.ndim(p) != 1 or len(p) == 0 for p in prompts):
        raise ValueError("prompts: expected a non-empty list of non-empty token lists")
    longest = max(len(p) for p in prompts)
    if length is None:
        length = prompt_bucket(longest)
    check_positive_int("length", length)
    check_memory("length", 8.0 * len(prompts) * length)  # tokens and mask, int32
    if length < longest:
        raise ValueError(f"length={length} is shorter than the longest prompt ({longest})")
    tokens = np.full((len(prompts), length), pad_id, np.int32)
    mask = np.zeros((len(prompts), length), np.int32)
    for i, p in enumerate(prompts):
        row = np.asarray(p)
        if row.ndim != 1 or row.dtype.kind not in "iu" or row.min() < 0 or row.max() >= 2**31:
            raise ValueError(
                f"prompts[{i}]: expected a list of token ids in [0, 2**31), received "
                f"{row.dtype}{row.shape} {row.ravel()[:5].tolist()}"
            )
        tokens[i, length - len(p) :] = row.astype(np.int32)
        mask[i, length - len(p) :] = 1
    return tokens, mask


def _prefill(model, tokens, mask, cache_size, lora, intervene):
    def one(tok, m):
        cache = KVCache.empty(model.config, cache_size, model.dtype)
        h, _, cache = model.run(tok, positions_from_mask(m), cache, lora=lora, intervene=intervene)
        return model.logits(h[-1]), cache

    return jax.vmap(one)(tokens, mask)


def _decode(model, tok, caches, lora, intervene):
    def one(t, cache):
        pos = cache.next_position
        h, _, cache = model.run(t[None], pos[None], cache, lora=lora, intervene=intervene)
        return model.logits(h[0]), cache

    return jax.vmap(one)(tok, caches)


def _choose(sampler, logits, key):
    keys = jax.random.split(key, logits.shape[0])
    return jax.vmap(sampler)(logits, keys)


@eqx.filter_jit
def _generate_jit(
    model, tokens, mask, key, sampler, lora, intervene, stop_arr, *, max_new, pad_id, return_logits
):
    B = tokens.shape[0]
    logits, caches = _prefill(model, tokens, mask, tokens.shape[1] + max_new, lora, intervene)
    out = jnp.full((B, max_new), pad_id, jnp.int32)
    kept = jnp.zeros((B, max_new, logits.shape[-1]) if return_logits else (0,), jnp.float32)

    def cond(state):
        i, _, _, _, done, _, _ = state
        return (i < max_new) & ~jnp.all(done)

    def body(state):
        i, logits, caches, out, done, key, kept = state
        key, sub = jax.random.split(key)
        tok = _choose(sampler, logits, sub)
        tok = jnp.where(done, jnp.int32(pad_id), tok)
        out = out.at[:, i].set(tok)
        if return_logits:
            kept = kept.at[:, i].set(jnp.where(done[:, None], 0.0, logits))
        done = done | jnp.any(tok[:, None] == stop_arr[None, :], axis=1)
        logits, caches = _decode(model, tok, caches, lora, intervene)
        return i + 1, logits, caches, out, done, key, kept

    state = (jnp.zeros((), jnp.int32), logits, caches, out, jnp.zeros((B,), bool), key, kept)
    _, _, _, out, _, _, kept = jax.lax.while_loop(cond, body, state)
    is_stop = jnp.any(out[:, :, None] == stop_arr[None, None, :], axis=-1)
    first_stop = jnp.where(jnp.any(is_stop, axis=1), jnp.argmax(is_stop, axis=1) + 1, max_new)
    return out, first_stop.astype(jnp.int32), kept


def _prepare(model, prompts, mask, pad_id):
    if not isinstance(model, Transformer):
        raise ValueError(f"model must be a jaxlab.lm.Transformer, got {type(model).__name__}")
    if isinstance(prompts, list | tuple) and prompts and isinstance(prompts[0], list | tuple):
        if mask is not None:
            raise ValueError("mask is only accepted with an already padded (B, P) array")
        tokens, mask = pad_prompts(prompts, pad_id=pad_id)
    else:
        tokens = np.asarray(prompts)
        if tokens.ndim == 1:
            tokens = tokens[None]
        if tokens.ndim != 2 or not np.issubdtype(tokens.dtype, np.integer):
            raise ValueError(
                f"prompts must be token lists or a (B, P) int array, got "
                f"{tokens.dtype}{tokens.shape}"
            )
        if tokens.shape[0] == 0 or tokens.shape[1] == 0:
            raise ValueError(
                f"prompts: expected at least one non-empty prompt, received shape {tokens.shape}"
            )
        mask = np.ones(tokens.shape, np.int32) if mask is None else np.asarray(mask, np.int32)
        if mask.shape != tokens.shape:
            raise ValueError(f"mask must have the prompts' shape {tokens.shape}, got {mask.shape}")
        if np.any(mask[:, -1] == 0):
            raise ValueError("prompts must be left-padded: the last column must be real tokens")
    check_token_range(tokens, model.config.vocab_size, "prompts")  # before the int32 cast
    tokens = jnp.asarray(tokens, jnp.int32)
    return tokens, jnp.asarray(mask, jnp.int32)


def _check_new_tokens(model, tokens, max_new_tokens) -> int:
    """`max_new_tokens` a positive int that fits the context after the padded prompt."""
    max_new_tokens = check_positive_int("max_new_tokens", max_new_tokens)
    if tokens.shape[1] + max_new_tokens > model.config.context_length:
        raise ValueError(
            f"max_new_tokens: prompt ({tokens.shape[1]} padded) + max_new_tokens "
            f"({max_new_tokens}) exceeds the context length "
            f"{model.config.context_length}"
        )
    return max_new_tokens


def generate(
    model: Transformer,
    prompts,
    *,
    max_new_tokens: int,
    sampler=Greedy(),
    stop_tokens: Sequence[int] = (),
    pad_id: int = 0,
    mask=None,
    key: jax.Array | None = None,
    lora: LoRA | None = None,
    intervene: Mapping[tuple[str, int], Callable] | None = None,
    return_logits: bool = False,
) -> Generation:
    """Generate continuations of a batch of prompts with a KV cache, under jit.

    **Arguments:**
        model: a `Transformer`.
        prompts: B lists of token ids (left-padded to a bucket here), or a (B, P)
            / (P,) int array already left-padded (then pass `mask`).
        max_new_tokens: tokens to generate per row, a positive int with padded prompt
            + max_new_tokens <= the context length (static: one compile per value).
        sampler: `Greedy()` (default) or `Sample(temperature, top_p)`.
        stop_tokens: ids that end a row (kept in the output; `pad_id` after).
        pad_id: id written after a row stopped.
        mask: (B, P) 1 on real tokens for an array `prompts`.
        key: PRNG key (keyword-only), required by stochastic samplers.
        lora: LoRA adapters; intervene: {(site, layer): fn} as in `forward`.
        return_logits: also return the logits each token was chosen from.

    **Returns:**
        a `Generation` (tokens, lengths, logits).
    """
    check_positive_int("max_new_tokens", max_new_tokens)
    if getattr(sampler, "stochastic", False) and key is None:
        raise ValueError("a stochastic sampler needs key=")
    tokens, mask = _prepare(model, prompts, mask, pad_id)
    max_new_tokens = _check_new_tokens(model, tokens, max_new_tokens)
    intervene = dict(intervene or {})
    _check_sites((), intervene, model.config.n_layers)
    key = jax.random.key(0) if key is None else key
    # stop ids are traced (no recompile per stop set); -1 never matches a token
    stop_arr = jnp.asarray([int(s) for s in stop_tokens] or [-1], jnp.int32)
    out, lengths, kept = _generate_jit(
        model,
        tokens,
        mask,
        key,
        sampler,
        lora,
        intervene,
        stop_arr,
        max_new=max_new_tokens,
        pad_id=int(pad_id),
        return_logits=bool(return_logits),
    )
    return Generation(out, lengths, kept if return_logits else None)


@eqx.filter_jit
def _prefill_jit(model, tokens, mask, lora, intervene, *, cache_size):
    return _prefill(model, tokens, mask, cache_size, lora, intervene)


@eqx.filter_jit
def _step_jit(model, logits, caches, key, sampler, lora, intervene):
    tok = _choose(sampler, logits, key)
    logits, caches = _decode(model, tok, caches, lora, intervene)
    return tok, logits, caches


def prefill(
    model: Transformer,
    prompts,
    *,
    mask=None,
    cache_size: int | None = None,
    pad_id: int = 0,
    lora: LoRA | None = None,
    intervene: Mapping[tuple[str, int], Callable] | None = None,
) -> tuple[Float[Array, "B V"], KVCache]:
    """Run prompts into a fresh KV cache (jitted); only the last position's logits.

    **Arguments:**
        model, prompts, mask, pad_id, lora, intervene: as in `generate`.
        cache_size: cache slots, a positive int at least the padded prompt length
            (default: that length); a cache larger than the memory available is
            refused before it is allocated.

    **Returns:**
        next-token logits (B, vocab) and the batched `KVCache` (leading axis B).
    """
    tokens, mask = _prepare(model, prompts, mask, pad_id)
    intervene = dict(intervene or {})
    _check_sites((), intervene, model.config.n_layers)
    size = tokens.shape[1] if cache_size is None else check_positive_int("cache_size", cache_size)
    if size < tokens.shape[1]:
        raise ValueError(f"cache_size={size} is smaller than the prompt ({tokens.shape[1]})")
    c = model.config
    # keys and values of every layer, before the cache is allocated
    itemsize = jnp.dtype(model.dtype).itemsize
    per_slot = 2.0 * c.n_layers * c.n_kv_heads * c.head_dim * itemsize
    check_memory("cache_size", per_slot * tokens.shape[0] * size)
    return _prefill_jit(model, tokens, mask, lora, intervene, cache_size=size)


def stream(
    model: Transformer,
    prompts,
    *,
    max_new_tokens: int,
    sampler=Greedy(),
    stop_tokens: Sequence[int] = (),
    pad_id: int = 0,
    key: jax.Array | None = None,
    lora: LoRA | None = None,
    intervene: Mapping[tuple[str, int], Callable] | None = None,
) -> Iterator:
    """Yield generated tokens one step at a time (same arguments and limits as `generate`:
    non-empty prompts, padded prompt + `max_new_tokens` within the context length).

    For a single prompt (a flat token list) each item is an int; for a batch it is
    a (B,) numpy array (`pad_id` in rows that already stopped). The prefill and the
    decode step are jitted once per (batch, prompt bucket, cache size).
    """
    check_positive_int("max_new_tokens", max_new_tokens)
    if getattr(sampler, "stochastic", False) and key is None:
        raise ValueError("a stochastic sampler needs key=")
    single = (
        not (isinstance(prompts, list | tuple) and prompts and isinstance(prompts[0], list | tuple))
        and np.ndim(prompts) == 1
    )
    tokens, mask = _prepare(model, [list(prompts)] if single else prompts, None, pad_id)
    max_new_tokens = _check_new_tokens(model, tokens, max_new_tokens)
    intervene = dict(intervene or {})
    _check_sites((), intervene, model.config.n_layers)
    rng = jax.random.key(0) if key is None else key
    logits, caches = _prefill_jit(
        model, tokens, mask, lora, intervene, cache_size=tokens.shape[1] + max_new_tokens
    )
    stop = set(int(s) for s in stop_tokens)
    done = np.zeros(tokens.shape[0], bool)
    for _ in range(max_new_tokens):
        rng, sub = jax.random.split(rng)
        tok, logits, caches = _step_jit(model, logits, caches, sub, sampler, lora, intervene)
        tok = np.where(done, pad_id, np.asarray(tok))
        done |= np.isin(tok, list(stop)) if stop else False
        yield int(tok[0]) if single else tok
        if done.all():
            return


def generate_text(
    model: Transformer,
    tokenizer,
    prompts: str | Sequence[str],
    *,
    max_new_tokens: int = 64,
    chat: bool = False,
    sampler=Greedy(),
    key: jax.Array | None = None,
    **kwargs,
) -> str | list[str]:
    """Generate text continuations of string prompt(s), stopping at the model's stop tokens.

    **Arguments:**
        model, tokenizer: from `jaxlab.lm.load`.
        prompts: a string or a list of strings.
        max_new_tokens: cap on generated tokens.
        chat: wrap each prompt as one user turn with the model's chat template.
        sampler, key, **kwargs: as in `generate`.

    **Returns:**
        the decoded continuation(s) (special tokens removed).
    """
    single = isinstance(prompts, str)
    texts = [prompts] if single else list(prompts)
    if chat:
        texts = [tokenizer.apply_chat_template([{"role": "user", "content": t}]) for t in texts]
    ids = [tokenizer.encode(t) for t in texts]
    gen = generate(
        model,
        ids,
        max_new_tokens=max_new_tokens,
        sampler=sampler,
        stop_tokens=tokenizer.stop_ids,
        pad_id=tokenizer.pad_id,
        key=key,
        **kwargs,
    )
    toks, lengths = np.asarray(gen.tokens), np.asarray(gen.lengths)
    outs = [tokenizer.decode(toks[i, : lengths[i]].tolist()) for i in range(len(texts))]
    return outs[0] if single else outs
