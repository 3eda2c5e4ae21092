"""`score`: log-likelihoods of continuations given prompts, without generating.

Each item is one prompt with K candidate continuations (the options of a
multiple-choice question). The prompt runs once into a KV cache; every option
then runs from a copy of that cache (the prompt's keys and values are computed
once per item, not once per option). Items are batched across prompts, and when
the prompts of a batch share a token prefix of at least `MIN_SHARED_PREFIX` tokens
(a few-shot preamble, an instruction), that prefix runs once into the cache every
item of the batch starts from: item i's prompt p_i = s + r_i is run as s (once),
then r_i, then each option, and log p(o | p_i) = sum_j log p(o_j | s, r_i, o_<j) is
the same quantity (equal up to float rounding: the prefix's matmuls have another
shape). A planner orders the items (prompts sharing a prefix together, similar
lengths together) so that a batch's common prefix is long and its padding small.

Only the hidden states that predict a continuation token go through the output
head, and the head is applied in vocabulary chunks with a running log-sum-exp, so
no (batch, sequence, vocabulary) logits block is ever formed (8 x 512 float32 Qwen2
logits would be 2.5 GB).

Shapes are bucketed (shared-prefix, prompt-remainder and continuation lengths and the
number of real continuation positions to ceil(s * 2^(k/4)): at most 19% padding, four
buckets per octave; the batch padded to `batch_size`, or to a power of two when all
items fit in one batch) so a scan over many items compiles a handful of times.
Bounds are checked before anything is allocated: at most `MAX_SCORE_OPTIONS` options
per item and `MAX_SCORE_BATCH` items per batch.
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

__all__ = ["MAX_SCORE_BATCH", "MAX_SCORE_OPTIONS", "MIN_SHARED_PREFIX", "Scores", "score"]

MAX_SCORE_OPTIONS = 64
"""Most options per item that `score` accepts (each option runs from its own copy of the
item's KV cache); split larger items."""

MAX_SCORE_BATCH = 256
"""Largest `batch_size` that `score` accepts (items per compiled batch)."""

MIN_SHARED_PREFIX = 16
"""Fewest tokens of a prefix common to a batch's prompts that `score` runs once for the
batch (shorter ones are not worth a separate pass)."""


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


def _fine_bucket(n: int, smallest: int = 16) -> int:
    """Padded length: the smallest ceil(smallest * 2^(k/4)) >= n (at most 19% padding).

    16, 20, 23, 27, 32, 39, 46, 54, 64, ...: four lengths per octave, so the number of
    compiled shapes grows with log(n) while the padding waste stays small.
    """
    k = 0
    while (b := -(-smallest * 2 ** (k // 4) * _QUARTER_STEPS[k % 4] // 10000)) < n:
        k += 1
    return max(b, smallest)


# 2^(j/4) for j = 0..3, times 10^4, rounded up: integer arithmetic, no float drift
_QUARTER_STEPS = (10000, 11893, 14143, 16818)


def _common_prefix(a: Sequence[int], b: Sequence[int]) -> int:
    """Length of the longest common prefix of two token lists."""
    n = min(len(a), len(b))
    for i in range(n):
        if a[i] != b[i]:
            return i
    return n


class _Batch(NamedTuple):
    idx: list[int]  # items (the caller's indices) in this batch
    shared: int  # tokens of the common prefix run once for the batch (0: none)


def _plan(prompts: Sequence[Sequence[int]], batch_size: int, share: bool) -> list[_Batch]:
    """Batch order: prompts that share a prefix together, similar lengths together.

    With `share`, prompts are sorted by their tokens and cut into groups wherever two
    neighbours share fewer than `MIN_SHARED_PREFIX` tokens (in sorted order the common
    prefix of any run of prompts is the smallest common prefix of its neighbours, so
    every batch inside a group shares at least that many tokens). Within a group, and
    among the prompts that share with none, items are sorted by length, so a batch's
    remainders pad to similar buckets. A batch's shared prefix is its prompts' common
    prefix, less one token (every item keeps a prompt token of its own, whose state
    predicts the option's first token), used when it is at least `MIN_SHARED_PREFIX`
    tokens and the batch holds two items or more.
    """
    n = len(prompts)
    by_len = lambda i: len(prompts[i])  # noqa: E731
    if share:
        lex = sorted(range(n), key=lambda i: tuple(prompts[i]))
        groups: list[list[int]] = [[lex[0]]]
        for a, b in zip(lex, lex[1:], strict=False):
            if _common_prefix(prompts[a], prompts[b]) >= MIN_SHARED_PREFIX:
                groups[-1].append(b)
            else:
                groups.append([b])
        order = [i for g in groups if len(g) > 1 for i in sorted(g, key=by_len)]
        order += sorted((g[0] for g in groups if len(g) == 1), key=by_len)
    else:
        order = sorted(range(n), key=by_len)
    plan = []
    for b0 in range(0, n, batch_size):
        idx = order[b0 : b0 + batch_size]
        shared = 0
        if share and len(idx) > 1:
            first = prompts[idx[0]]
            common = min(_common_prefix(first, prompts[i]) for i in idx[1:])
            common = min(common, min(len(prompts[i]) for i in idx) - 1)
            shared = common if common >= MIN_SHARED_PREFIX else 0
        plan.append(_Batch(idx, shared))
    return plan


@eqx.filter_jit
def _hidden_jit(model, xtoks, xmask, ptoks, pmask, ctoks, cmask, lora):
    """(B, K, C, d) hidden states that predict each continuation token.

    `xtoks` (X,) is the batch's shared prefix, left-padded (`xmask` 1 on real tokens),
    or None; `ptoks` (B, P) each item's prompt remainder, left-padded; `ctoks`
    (B, K, C) the options, right-padded. The cache holds X + P + C slots: the prefix's
    keys and values are computed once and every item's run starts from them.
    """
    cfg = model.config
    B, P = ptoks.shape
    _, K, C = ctoks.shape
    X = 0 if xtoks is None else xtoks.shape[0]
    cache = KVCache.empty(cfg, X + P + C, model.dtype)
    n_shared = jnp.zeros((), jnp.int32)
    if xtoks is not None:
        xpos = jnp.where(xmask > 0, jnp.cumsum(xmask) - 1, -1).astype(jnp.int32)
        _, _, cache = model.run(xtoks, xpos, cache, lora=lora)
        n_shared = jnp.sum(xmask).astype(jnp.int32)

    def item(pt, pm, ct, cm):
        ppos = jnp.where(pm > 0, n_shared + jnp.cumsum(pm) - 1, -1).astype(jnp.int32)
        h, _, item_cache = model.run(pt, ppos, cache, lora=lora)
        n_prompt = n_shared + jnp.sum(pm).astype(jnp.int32)

        def option(c, m):
            # right-padded continuation: padding slots carry position -1 (never attended)
            pos = jnp.where(m > 0, n_prompt + jnp.cumsum(m) - 1, -1).astype(jnp.int32)
            hc, _, _ = model.run(c[:-1], pos[:-1], item_cache, lora=lora)
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
    share_prefix: bool = True,
) -> Scores:
    """Log-likelihood of each continuation given its prompt (multiple-choice scoring).

    The prompt and each continuation are tokenised separately (the prompt with the
    model's BOS setting, continuations without BOS) and concatenated, so every
    option of an item shares the prompt's tokens and its KV cache. Items are batched
    across prompts; with `share_prefix`, a prefix common to a batch's prompts (at
    least `MIN_SHARED_PREFIX` tokens: a few-shot preamble, an instruction) is run
    once for the batch. Results come back in the caller's order whatever the batch
    order, and equal the full forward's log-softmax of each (prompt + option) up to
    float rounding.

    **Arguments:**

    - `model`: a `Transformer`.
    - `tokenizer`: its `Tokenizer` (may be None when everything is token ids).
    - `prompts`: N prompts, each a string or a list of token ids.
    - `continuations`: N lists of options, each a string or a list of token ids.
    - `batch_size`: items per compiled batch, at most `MAX_SCORE_BATCH` (256); the last
      batch is padded.
    - `vocab_chunk`: output-head rows per step of the log-sum-exp (the largest
      logits block is (positions in a batch) x `vocab_chunk`).
    - `lora`: `LoRA` adapters applied to every prompt and continuation token (None: the
      base model).
    - `share_prefix`: run a prefix shared by a batch's prompts once (False: every
      item's prompt runs whole, the per-item path).

    **Returns:**

    `Scores`: `sum[i]` (K_i,) total log-likelihood of each option of item i,
    `tokens[i][j]` the per-token log-probabilities, `mean[i]` their averages.

    **Raises:**

    `ValueError` (naming the argument): empty prompts or options, more than
    `MAX_SCORE_OPTIONS` (64) options in an item, `batch_size` above `MAX_SCORE_BATCH`,
    token ids out of range, a prompt plus continuation longer than the context length.
    """
    if not isinstance(model, Transformer):
        raise ValueError(f"model must be a jaxlab.lm.Transformer, got {type(model).__name__}")
    if isinstance(prompts, str) or not isinstance(prompts, Sequence) or not prompts:
        raise ValueError("prompts must be a non-empty list of strings or token-id lists")
    if isinstance(continuations, str) or len(continuations) != len(prompts):
        raise ValueError(
            f"continuations must be a list of {len(prompts)} option lists (one per "
            f"entry of prompts), got {type(continuations).__name__}"
            + ("" if isinstance(continuations, str) else f" of length {len(continuations)}")
        )
    for name, v in (("batch_size", batch_size), ("vocab_chunk", vocab_chunk)):
        if not isinstance(v, int) or isinstance(v, bool) or v <= 0:
            raise ValueError(f"{name} must be a positive int, got {v!r}")
    if batch_size > MAX_SCORE_BATCH:
        raise ValueError(f"batch_size must be at most {MAX_SCORE_BATCH}, got {batch_size}")
    if not isinstance(share_prefix, bool):
        raise ValueError(f"share_prefix must be a bool, got {share_prefix!r}")
    cfg = model.config
    items = []
    for i, (p, opts) in enumerate(zip(prompts, continuations, strict=True)):
        pid = _token_ids(p, tokenizer, f"prompts[{i}]", cfg.vocab_size, add_bos=None)
        if isinstance(opts, str) or not isinstance(opts, Sequence) or not opts:
            raise ValueError(f"continuations[{i}] must be a non-empty list of options")
        if len(opts) > MAX_SCORE_OPTIONS:
            raise ValueError(
                f"continuations[{i}] has {len(opts)} options: at most "
                f"{MAX_SCORE_OPTIONS} per item (split the item)"
            )
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
    # the option count and length buckets are global, so that batches share a compile;
    # a lone batch is padded to a power of two only
    K = max(len(os) for _, os in items)
    C = _fine_bucket(max(len(o) for _, os in items for o in os), smallest=4)
    B = (
        batch_size
        if len(items) > batch_size
        else min(batch_size, 1 << (len(items) - 1).bit_length())
    )
    for batch in _plan([p for p, _ in items], batch_size, share_prefix):
        idx, n_x = batch.idx, batch.shared
        rows_in = [items[i] for i in idx] + [items[idx[0]]] * (B - len(idx))
        xtoks = xmask = None
        if n_x:
            X = _fine_bucket(n_x)
            xt, xm = np.zeros(X, np.int32), np.zeros(X, np.int32)
            xt[X - n_x :], xm[X - n_x :] = rows_in[0][0][:n_x], 1
            xtoks, xmask = jnp.asarray(xt), jnp.asarray(xm)
        P = _fine_bucket(max(len(p) - n_x for p, _ in rows_in))
        ptoks = np.zeros((B, P), np.int32)
        pmask = np.zeros((B, P), np.int32)
        ctoks = np.zeros((B, K, C), np.int32)
        cmask = np.zeros((B, K, C), np.int32)
        for r, (p, os) in enumerate(rows_in):
            rest = p[n_x:]
            ptoks[r, P - len(rest) :], pmask[r, P - len(rest) :] = rest, 1
            for j, o in enumerate(os):
                ctoks[r, j, : len(o)], cmask[r, j, : len(o)] = o, 1
        real = np.flatnonzero(cmask.reshape(-1))
        rows = np.zeros(_fine_bucket(real.size), np.int32)  # padded with row 0, ignored
        rows[: real.size] = real
        ctoks_j = jnp.asarray(ctoks)
        hs = _hidden_jit(
            model,
            xtoks,
            xmask,
            jnp.asarray(ptoks),
            jnp.asarray(pmask),
            ctoks_j,
            jnp.asarray(cmask),
            lora,
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
