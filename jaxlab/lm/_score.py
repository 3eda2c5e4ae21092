"""`score`: log-likelihoods of continuations given prompts, without generating.

Each item is one prompt with K candidate continuations (the options of a
multiple-choice question). The prompt runs once into a KV cache; every option
then runs from a copy of that cache (the prompt's keys and values are computed
once per item, not once per option). Only the hidden states that predict a
continuation token go through the output head, and the head is applied in
vocabulary chunks with a running log-sum-exp, so no (batch, sequence, vocabulary)
logits block is ever formed (8 x 512 float32 Qwen2 logits would be 2.5 GB).

Shapes are bucketed (prompt and continuation lengths and the number of real
continuation positions to 2^k or 3 * 2^(k-1), the batch padded to `batch_size`) so a
scan over many items compiles a handful of times.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from jaxlab._core import short_repr

from ._lora import LoRA
from ._model import KVCache, Transformer, _rms_norm
from ._quant import embed_rows, project, slice_rows

__all__ = ["Scores", "score"]


class Scores(NamedTuple):
    """Output of `score`, one entry per item.

    **Attributes:**
        sum: per item, a (K_i,) float64 array: log p(continuation | prompt) of each option.
        tokens: per item, K_i arrays (n_tokens,): log p of each continuation token.
    """

    __repr__ = short_repr  # arrays as dtype[shape], long sequences cut

    sum: list[np.ndarray]
    tokens: list[list[np.ndarray]]

    @property
    def mean(self) -> list[np.ndarray]:
        """Per-token average log-likelihood of each option (length-normalised score)."""
        return [np.array([t.mean() for t in item]) for item in self.tokens]


def _length_bucket(n: int, smallest: int = 16) -> int:
    """Padded length: the next of 16, 24, 32, 48, 64, 96, ... (at most 1/3 padding)."""
    b = smallest
    while b < n:
        b = b * 3 // 2 if b & (b - 1) == 0 else b * 4 // 3
    return b


def _target_logprobs(model: Transformer, h, targets, vocab_chunk):
    """log softmax(head(norm(h)))[target] for rows h (N, d), in vocabulary chunks."""
    cfg = model.config
    head = model.embed if model.lm_head is None else model.lm_head
    hn = _rms_norm(h, model.final_norm, cfg.norm_eps)
    picked = jnp.sum(hn.astype(jnp.float32) * embed_rows(head, targets), axis=-1)
    V = head.shape[0]
    chunk = min(vocab_chunk, V)
    n_chunks = -(-V // chunk)

    def chunk_lse(i):
        # the last chunk is shifted left to stay in range; its repeated rows are masked
        start = jnp.minimum(i * chunk, V - chunk)
        logits = project(hn.astype(jnp.float32), slice_rows(head, start, chunk))
        fresh = start + jnp.arange(chunk) >= i * chunk
        logits = jnp.where(fresh[None, :], logits, -jnp.inf)
        return jax.nn.logsumexp(logits, axis=-1)

    lse = jax.nn.logsumexp(jax.lax.map(chunk_lse, jnp.arange(n_chunks)), axis=0)
    return picked - lse


@eqx.filter_jit
def _hidden_jit(model, ptoks, pmask, ctoks, cmask, lora):
    """(B, K, C, d) hidden states that predict each continuation token."""
    cfg = model.config
    B, P = ptoks.shape
    _, K, C = ctoks.shape

    def item(pt, pm, ct, cm):
        cache = KVCache.empty(cfg, P + C, model.dtype)
        ppos = jnp.where(pm > 0, jnp.cumsum(pm) - 1, -1).astype(jnp.int32)
        h, _, cache = model.run(pt, ppos, cache, lora=lora)
        n_prompt = jnp.sum(pm).astype(jnp.int32)

        def option(c, m):
            # right-padded continuation: padding slots carry position -1 (never attended)
            pos = jnp.where(m > 0, n_prompt + jnp.cumsum(m) - 1, -1).astype(jnp.int32)
            hc, _, _ = model.run(c[:-1], pos[:-1], cache, lora=lora)
            return hc

        hc = jax.vmap(option)(ct, cm)
        # token j of an option is predicted by the prompt's last state (j = 0) or by
        # the option's own state at j - 1
        first = jnp.broadcast_to(h[-1], (K, 1, h.shape[-1]))
        return jnp.concatenate([first, hc], axis=1)

    return jax.vmap(item)(ptoks, pmask, ctoks, cmask)


@eqx.filter_jit
def _head_jit(model, hs, ctoks, rows, vocab_chunk):
    # only the real (unpadded) continuation positions go through the output head; a
    # separate program, so that a new row count does not recompile the transformer
    h = hs.reshape(-1, hs.shape[-1])[rows]
    return _target_logprobs(model, h, ctoks.reshape(-1)[rows], vocab_chunk)


def _ids(x, tokenizer, what, *, add_bos):
    if isinstance(x, str):
        if tokenizer is None:
            raise ValueError(f"{what} is a string: pass a tokenizer (or token ids)")
        return tokenizer.encode(x, add_bos=add_bos)
    arr = np.asarray(x)
    if arr.ndim != 1 or (arr.size and not np.issubdtype(arr.dtype, np.integer)):
        raise ValueError(
            f"{what} must be a string or a 1-D list of int token ids, got {arr.dtype}{arr.shape}"
        )
    return arr.astype(np.int64).tolist()


def _check_range(ids, vocab, what):
    bad = [t for t in ids if not 0 <= t < vocab]
    if bad:
        raise ValueError(f"{what}: token ids must lie in [0, {vocab}), got {bad[:5]}")


def _token_ids(x, tokenizer, what, vocab, *, add_bos):
    """`_ids`, refusing an empty result and ids outside [0, vocab)."""
    ids = _ids(x, tokenizer, what, add_bos=add_bos)
    if not ids:
        raise ValueError(f"{what} is empty (no tokens)")
    _check_range(ids, vocab, what)
    return ids


def score(
    model: Transformer,
    tokenizer,
    prompts: Sequence[str | Sequence[int]],
    continuations: Sequence[Sequence[str | Sequence[int]]],
    *,
    batch_size: int = 8,
    vocab_chunk: int = 16384,
    lora: LoRA | None = None,
) -> Scores:
    """Log-likelihood of each continuation given its prompt (multiple-choice scoring).

    The prompt and each continuation are tokenised separately (the prompt with the
    model's BOS setting, continuations without BOS) and concatenated, so every
    option of an item shares the prompt's tokens and its KV cache.

    **Arguments:**

    - `model`: a `Transformer`.
    - `tokenizer`: its `Tokenizer` (may be None when everything is token ids).
    - `prompts`: N prompts, each a string or a list of token ids.
    - `continuations`: N lists of options, each a string or a list of token ids.
    - `batch_size`: items per compiled batch (the last batch is padded).
    - `vocab_chunk`: output-head rows per step of the log-sum-exp (the largest
      logits block is (positions in a batch) x `vocab_chunk`).
    - `lora`: `LoRA` adapters applied to every prompt and continuation token (None: the
      base model).

    **Returns:**

    `Scores`: `sum[i]` (K_i,) total log-likelihood of each option of item i,
    `tokens[i][j]` the per-token log-probabilities, `mean[i]` their averages.

    **Raises:**

    `ValueError` (naming the argument): empty prompts or options, token ids out of
    range, a prompt plus continuation longer than the context length.
    """
    if not isinstance(model, Transformer):
        raise ValueError(f"model must be a jaxlab.lm.Transformer, got {type(model).__name__}")
    if isinstance(prompts, str) or not isinstance(prompts, Sequence) or not prompts:
        raise ValueError("prompts must be a non-empty list of strings or token-id lists")
    if isinstance(continuations, str) or len(continuations) != len(prompts):
        raise ValueError(
            f"continuations must be a list of {len(prompts)} option lists (one per "
            f"prompt), got {type(continuations).__name__}"
            + ("" if isinstance(continuations, str) else f" of length {len(continuations)}")
        )
    for name, v in (("batch_size", batch_size), ("vocab_chunk", vocab_chunk)):
        if not isinstance(v, int) or isinstance(v, bool) or v <= 0:
            raise ValueError(f"{name} must be a positive int, got {v!r}")
    cfg = model.config
    items = []
    for i, (p, opts) in enumerate(zip(prompts, continuations, strict=True)):
        pid = _token_ids(p, tokenizer, f"prompts[{i}]", cfg.vocab_size, add_bos=None)
        if isinstance(opts, str) or not isinstance(opts, Sequence) or not opts:
            raise ValueError(f"continuations[{i}] must be a non-empty list of options")
        oids = []
        for j, o in enumerate(opts):
            what = f"continuations[{i}][{j}]"
            oid = _token_ids(o, tokenizer, what, cfg.vocab_size, add_bos=False)
            if len(pid) + len(oid) > cfg.context_length:
                raise ValueError(
                    f"continuations[{i}][{j}]: prompt ({len(pid)}) + continuation "
                    f"({len(oid)}) tokens exceed the context length "
                    f"{cfg.context_length}"
                )
            oids.append(oid)
        items.append((pid, oids))

    sums: list[np.ndarray] = [np.zeros(0)] * len(items)
    per_token: list[list[np.ndarray]] = [[] for _ in items]
    # similar prompt lengths share a batch (and a bucket): fewer padded tokens; the
    # option count and length buckets are global so that batches share one compile
    order = sorted(range(len(items)), key=lambda i: len(items[i][0]))
    K = max(len(os) for _, os in items)
    C = _length_bucket(max(len(o) for _, os in items for o in os), smallest=4)
    for b0 in range(0, len(order), batch_size):
        idx = order[b0 : b0 + batch_size]
        batch = [items[i] for i in idx] + [items[idx[0]]] * (batch_size - len(idx))
        P = _length_bucket(max(len(p) for p, _ in batch))
        ptoks = np.zeros((batch_size, P), np.int32)
        pmask = np.zeros((batch_size, P), np.int32)
        ctoks = np.zeros((batch_size, K, C), np.int32)
        cmask = np.zeros((batch_size, K, C), np.int32)
        for r, (p, os) in enumerate(batch):
            ptoks[r, P - len(p) :], pmask[r, P - len(p) :] = p, 1
            for j, o in enumerate(os):
                ctoks[r, j, : len(o)], cmask[r, j, : len(o)] = o, 1
        real = np.flatnonzero(cmask.reshape(-1))
        rows = np.zeros(_length_bucket(real.size), np.int32)  # padded with row 0, ignored
        rows[: real.size] = real
        ctoks_j = jnp.asarray(ctoks)
        hs = _hidden_jit(
            model, jnp.asarray(ptoks), jnp.asarray(pmask), ctoks_j, jnp.asarray(cmask), lora
        )
        flat = np.asarray(_head_jit(model, hs, ctoks_j, jnp.asarray(rows), vocab_chunk))
        lp = np.zeros(cmask.size, np.float32)
        lp[real] = flat[: real.size]
        lp = lp.reshape(cmask.shape)
        for r, i in enumerate(idx):
            opts = items[i][1]
            per_token[i] = [lp[r, j, : len(o)].copy() for j, o in enumerate(opts)]
            sums[i] = np.array([t.astype(np.float64).sum() for t in per_token[i]])
    return Scores(sums, per_token)
