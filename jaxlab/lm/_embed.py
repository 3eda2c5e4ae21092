"""`embed`: one vector per text, the mean of a model's final hidden states.

The text runs through every block (left-padded batches, padding never attended); the
final RMSNorm is applied (the states the output head reads) and the states of the
text's real tokens, BOS included when the model adds one, are averaged. Such decoder
mean-pool embeddings are a retrieval baseline, not a trained sentence encoder: callers
usually centre them over their corpus before comparing by cosine (BOS and the common
direction of all texts dominate the raw vectors).

Shapes are bucketed (length to 16, 24, 32, 48, ...; the batch padded to `batch_size`) so
that embedding a corpus compiles a handful of times.
"""

from __future__ import annotations

from collections.abc import Sequence

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from jaxlab._core import check_memory

from ._forward import positions_from_mask
from ._model import KVCache, Transformer, _rms_norm
from ._score import _length_bucket, _token_ids

__all__ = ["embed"]


@eqx.filter_jit
def _embed_jit(model, tokens, mask):
    cfg = model.config

    def one(tok, m):
        cache = KVCache.empty(cfg, tok.shape[0], model.dtype)
        h, _, _ = model.run(tok, positions_from_mask(m), cache)
        hn = _rms_norm(h, model.final_norm, cfg.norm_eps).astype(jnp.float32)
        w = m.astype(jnp.float32)
        return (hn * w[:, None]).sum(axis=0) / jnp.maximum(w.sum(), 1.0)

    return jax.vmap(one)(tokens, mask)


def embed(
    model: Transformer,
    tokenizer,
    texts: Sequence[str | Sequence[int]],
    *,
    batch_size: int = 8,
) -> np.ndarray:
    """Mean-pooled final hidden states (after the final norm) of each text.

    **Arguments:**

    - `model`: a `Transformer`.
    - `tokenizer`: its `Tokenizer` (may be None when every text is token ids); strings
      are encoded with the model's BOS setting.
    - `texts`: N strings or lists of token ids.
    - `batch_size`: texts per compiled batch (the last batch is padded), a positive int
      whose padded batch fits in memory (checked before allocating).

    **Returns:** an (N, d_model) float32 array, row i the embedding of `texts[i]`.

    **Raises:** `ValueError` (naming the argument) on an empty list or text, token ids
    out of range, a text longer than the context length, a bad `batch_size`.
    """
    if not isinstance(model, Transformer):
        raise ValueError(f"model must be a jaxlab.lm.Transformer, got {type(model).__name__}")
    if isinstance(texts, str) or not isinstance(texts, Sequence) or not texts:
        raise ValueError("texts must be a non-empty list of strings or token-id lists")
    if not isinstance(batch_size, int) or isinstance(batch_size, bool) or batch_size <= 0:
        raise ValueError(f"batch_size must be a positive int, got {batch_size!r}")
    cfg = model.config
    ids = []
    for i, t in enumerate(texts):
        tid = _token_ids(t, tokenizer, f"texts[{i}]", cfg.vocab_size, add_bos=None)
        if len(tid) > cfg.context_length:
            raise ValueError(
                f"texts[{i}]: {len(tid)} tokens exceed the context length {cfg.context_length}"
            )
        ids.append(tid)
    # every batch is padded to batch_size rows: estimate the largest one's tokens, mask and
    # per-token float32 widths (residual, q/k/v/out, FFN) before allocating it
    T = min(_length_bucket(max(len(t) for t in ids)), cfg.context_length)
    check_memory("batch_size", float(batch_size) * T * (8 + 4 * (5 * cfg.d_model + cfg.d_ff)))
    out = np.zeros((len(ids), cfg.d_model), np.float32)
    order = sorted(range(len(ids)), key=lambda i: len(ids[i]))  # similar lengths batch up
    for b0 in range(0, len(order), batch_size):
        idx = order[b0 : b0 + batch_size]
        rows = [ids[i] for i in idx] + [ids[idx[0]]] * (batch_size - len(idx))
        T = min(_length_bucket(max(len(r) for r in rows)), cfg.context_length)
        toks = np.zeros((batch_size, T), np.int32)
        mask = np.zeros((batch_size, T), np.int32)
        for r, tid in enumerate(rows):
            toks[r, T - len(tid) :], mask[r, T - len(tid) :] = tid, 1
        e = np.asarray(_embed_jit(model, jnp.asarray(toks), jnp.asarray(mask)))
        out[idx] = e[: len(idx)]
    return out
