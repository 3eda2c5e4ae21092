"""The dominance of one belief over its competitors across a generated sequence (P13).

P13 quantifies how strongly a belief dominates during generation. With per-position
scores `s[t, k]` of the K competing hypotheses (belief states, probe logits or option
log-likelihoods; defined up to an additive constant per position) and a mask `m[t]` of the
valid positions, the signed margin of hypothesis `target` at position t is

    margin[t] = s[t, target] - max_{j != target} s[t, j],

and its summaries over the valid positions are

    mean     = sum_t m[t] margin[t] / sum_t m[t],
    final    = margin[t_last]       (t_last the last valid position),
    fraction = sum_t m[t] [margin[t] > 0] / sum_t m[t]

(the fraction of positions at which `target` dominates). A binary belief state `b[t]`
(`belief_state`, A versus B) is its own margin: scores (b[t], 0) with B as the reference
hypothesis, so `dominance` also takes (T,) margins directly.
"""

from __future__ import annotations

import functools

import equinox as eqx
import jax
import jax.core
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Bool, Float

from .._core import as_array, check_array

__all__ = ["Dominance", "dominance"]


class Dominance(eqx.Module):
    """Per-position margins of the target belief and their summaries.

    **Attributes:** `margin` (T,) (0 at masked positions); `mean`, `final`, `fraction` ().
    """

    margin: Float[Array, " T"]
    mean: Float[Array, ""]
    final: Float[Array, ""]
    fraction: Float[Array, ""]


def dominance(
    scores: Float[Array, "T K"] | Float[Array, " T"],
    *,
    mask: Bool[Array, " T"] | None = None,
    target: int = 0,
) -> Dominance:
    """Dominance of hypothesis `target` over a (generated) sequence (P13).

    With per-position scores `s[t, k]` of the K competing hypotheses (belief states, probe
    logits or option log-likelihoods; defined up to an additive constant per position) and
    the valid positions `m[t]`, the signed margin at position t is

        margin[t] = s[t, target] - max_{j != target} s[t, j],

    summarised over the valid positions as

        mean     = sum_t m[t] margin[t] / sum_t m[t],
        final    = margin[t_last]        (t_last the last valid position),
        fraction = sum_t m[t] [margin[t] > 0] / sum_t m[t]   (positions dominated).

    A binary belief state `b[t]` (`belief_state`, A versus B) is its own margin (scores
    `(b[t], 0)`, B the reference), so (T,) margins are accepted directly. Unbatched;
    `jax.vmap` it over items (with their masks for ragged lengths).

    **Arguments:**

    - `scores`: (T, K) per-position scores of K >= 2 hypotheses, or (T,) signed margins
      of hypothesis 0 over hypothesis 1 (`target` must then be 0).
    - `mask`: (T,) bool, True at valid positions (default all); at least one.
    - `target`: index of the hypothesis whose dominance is measured.

    **Returns:** `Dominance` (margin (T,), mean, final, fraction).
    """
    s = as_array("scores", scores, finite=True)
    if not jnp.issubdtype(s.dtype, jnp.floating):
        s = s.astype(jnp.float32)
    check_array("scores", s, dtype=jnp.floating)
    if s.ndim == 1:
        if target != 0:
            raise ValueError(f"target: expected 0 for (T,) margins, received {target!r}")
    elif s.ndim == 2:
        K = s.shape[1]
        if K < 2:
            raise ValueError(f"scores: expected shape (T, K) with K >= 2, received {s.shape}")
        if isinstance(target, bool) or not isinstance(target, int) or not 0 <= target < K:
            raise ValueError(f"target: expected an int in [0, {K}), received {target!r}")
    else:
        raise ValueError(f"scores: expected shape (T, K) or (T,), received {s.shape}")
    if s.shape[0] == 0:
        raise ValueError("scores: expected at least one position, received none")
    if mask is None:
        m = jnp.ones(s.shape[:1], bool)
    else:
        m = as_array("mask", mask)
        check_array("mask", m, shape=s.shape[:1], dtype=jnp.bool_)
    if not isinstance(m, jax.core.Tracer) and not bool(np.any(np.asarray(m))):
        raise ValueError("mask: expected at least one valid position, received none")
    return _dominance(s, m, target)


@functools.partial(jax.jit, static_argnums=2)
def _dominance(s, m, target):
    if s.ndim == 1:
        margin = s
    else:
        others = jnp.where(jnp.arange(s.shape[1])[None, :] == target, -jnp.inf, s)
        margin = s[:, target] - jnp.max(others, axis=1)
    m = eqx.error_if(m, ~jnp.any(m), "mask: expected at least one valid position")
    T = margin.shape[0]
    w = m.astype(margin.dtype)
    n = jnp.sum(w)
    margin = jnp.where(m, margin, 0)
    last = T - 1 - jnp.argmax(m[::-1])
    return Dominance(
        margin,
        jnp.sum(margin * w) / n,
        margin[last],
        jnp.sum((margin > 0).astype(margin.dtype) * w) / n,
    )
