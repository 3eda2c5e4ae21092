"""Feature inspection: top-activating contexts of a latent and feature-label association.

Papers: Bricken et al. 2023 (max-activating examples); Cover & Thomas 2006 (mutual
information of discrete variables).
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
from jaxtyping import Array, Float, Int

from .._core import (
    as_array,
    check_array,
    check_finite,
    check_memory,
    check_nonnegative_int,
    check_positive_int,
)

__all__ = ["top_activating_contexts", "feature_label_association"]


def top_activating_contexts(
    activations: Float[Array, " N"],
    tokens: Int[Array, " N"],
    sequence_ids: Int[Array, " N"],
    *,
    k: int = 10,
    window: int = 8,
) -> dict[str, Array]:
    """The k tokens where a latent is largest, with a token window around each.

    **Arguments:** `activations` (N,) one latent's values over a flat token stream;
    `tokens` (N,) token ids; `sequence_ids` (N,) which prompt each token belongs to (windows
    never cross a prompt boundary); `k`; `window` tokens each side.

    **Returns:** {"index": (k,), "activation": (k,), "tokens": (k, 2 window + 1) (-1 outside
    the prompt), "activations": (k, 2 window + 1) (0 outside)}; the centre column is the
    top token.
    """
    a = as_array("activations", activations)
    sizes = check_array("activations", a, shape=("N",), dtype=jnp.floating)
    tokens = as_array("tokens", tokens)
    seq = as_array("sequence_ids", sequence_ids)
    check_array("tokens", tokens, shape=("N",), sizes=sizes, dtype=jnp.integer)
    check_array("sequence_ids", seq, shape=("N",), sizes=sizes, dtype=jnp.integer)
    k = check_positive_int("k", k)
    if k > a.shape[0]:
        raise ValueError(f"k: expected <= N={a.shape[0]} tokens, received {k}")
    window = check_nonnegative_int("window", window)
    check_memory("window", 16.0 * k * (2 * window + 1))  # (k, 2 window + 1) windows
    check_finite("activations", a)
    return _contexts(a, tokens, seq, k, window)


@functools.partial(jax.jit, static_argnums=(3, 4))
def _contexts(a, tokens, seq, k, window):
    vals, idx = jax.lax.top_k(a, k)
    offs = jnp.arange(-window, window + 1, dtype=idx.dtype)
    pos = idx[:, None] + offs[None, :]
    inside = (pos >= 0) & (pos < a.shape[0])
    p = jnp.clip(pos, 0, a.shape[0] - 1)
    ok = inside & (seq[p] == seq[idx][:, None])
    return {
        "index": idx,
        "activation": vals,
        "tokens": jnp.where(ok, tokens[p], -1),
        "activations": jnp.where(ok, a[p], jnp.zeros((), a.dtype)),
    }


def feature_label_association(
    activations: Float[Array, "N m"], labels: Int[Array, " N"]
) -> dict[str, Array]:
    """Pearson correlation and mutual information of each latent with a label.

    The label is per token (or per prompt, with one aggregated activation row per prompt,
    e.g. the max over its tokens). The correlation uses the activation values; the mutual
    information (nats) is between the firing indicator `activation > 0` and the discrete label.

    **Arguments:** `activations` (N, m); `labels` (N,) int (binary for a meaningful correlation).

    **Returns:** {"correlation": (m,) (0 for a constant latent), "mutual_information": (m,)}.
    """
    a = as_array("activations", activations)
    sizes = check_array("activations", a, shape=("N", "m"), dtype=jnp.floating)
    y = as_array("labels", labels)
    check_array("labels", y, shape=("N",), sizes=sizes, dtype=jnp.integer)
    if a.shape[0] == 0:
        raise ValueError("activations: expected at least one row, received 0")
    check_finite("activations", a)
    classes = jnp.unique(y)
    return _association(a, jnp.searchsorted(classes, y), int(classes.shape[0]))


@functools.partial(jax.jit, static_argnums=(2,))
def _association(a, y, n_classes):
    f = a.dtype
    yf = y.astype(f)
    ac, yc = a - jnp.mean(a, axis=0)[None], yf - jnp.mean(yf)
    num = yc @ ac
    den = jnp.sqrt(jnp.sum(ac**2, axis=0) * jnp.sum(yc**2))
    corr = jnp.where(den > 0, num / jnp.where(den > 0, den, 1), jnp.zeros((), f))
    fire = (a > 0).astype(f)  # (N, m)
    onehot = jax.nn.one_hot(y, n_classes, dtype=f)  # (N, C)
    n = jnp.asarray(a.shape[0], f)
    joint = jnp.stack([(1 - fire).T @ onehot, fire.T @ onehot], axis=1) / n  # (m, 2, C)
    pf = jnp.sum(joint, axis=2, keepdims=True)
    py = jnp.sum(joint, axis=1, keepdims=True)
    safe = jnp.where(joint > 0, joint, 1)
    mi = jnp.sum(jnp.where(joint > 0, joint * jnp.log(safe / (pf * py)), 0), axis=(1, 2))
    return {"correlation": corr, "mutual_information": mi}
