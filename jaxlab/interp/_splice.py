"""Model-level SAE metrics: splice the reconstruction into `lm.forward` via `intervene`.

With p the clean next-token distribution, CE the mean next-token cross-entropy over the
T-1 positions t whose token t and t+1 are both real (mask), and KL the mean over the T
real positions t of KL(p_clean,t || p_edited,t) (SAELens' `get_recons_loss`: CE per token
over T-1 positions, KL over all T):

- `ce_loss_score = (CE_ablated - CE_sae) / (CE_ablated - CE_clean)`, SAELens'
  definition with zero-ablation of the site as the ablated baseline
  (1: the reconstruction loses nothing; 0: as bad as deleting the activation);
- `kl_score = (KL_ablated - KL_sae) / KL_ablated`.

The clean, spliced and ablated passes run the same compiled program (`Splice` with
traced mixing weights), so an identity reconstruction gives exactly CE_clean and a
zero reconstruction exactly CE_ablated.
"""

from __future__ import annotations

from collections.abc import Callable

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float, Int

from .._core import as_array, check_ids, check_positive_int, check_real
from ..lm import SITES, Transformer, forward_batched

__all__ = ["Splice", "ce_loss_score"]


class Splice(eqx.Module):
    """Intervention `x -> keep * x + recon * sae(x * scale) / scale` on a (T, d) site.

    **Attributes:** `sae` (a callable (d,) -> (d,), e.g. an SAE); `keep`, `recon`, `scale`
    () traced floats (clean: (1, 0), reconstruction: (0, 1), zero-ablation: (0, 0));
    `skip` () int: the first `skip` positions keep their clean value in every mode.
    """

    sae: Callable
    keep: Float[Array, ""]
    recon: Float[Array, ""]
    scale: Float[Array, ""]
    skip: Int[Array, ""]

    def __call__(self, x: Float[Array, "T d"]) -> Float[Array, "T d"]:
        r = jax.vmap(self.sae)(x * self.scale) / self.scale
        out = self.keep * x + self.recon * r.astype(x.dtype)
        first = jnp.arange(x.shape[0], dtype=self.skip.dtype) < self.skip
        return jnp.where(first[:, None], x, out)


@jax.jit
def _losses(logits, ref_logp, tokens, mask):
    """Summed next-token NLL over the T-1 pairs of real tokens, summed KL(p_clean ||
    p_edited) over the T real positions (SAELens: CE per token over T-1, KL over T), and
    the two counts."""
    logp = jax.nn.log_softmax(logits, axis=-1)
    pair = (mask[:, :-1] * mask[:, 1:]).astype(logp.dtype)
    real = mask.astype(logp.dtype)
    nll = -jnp.take_along_axis(logp[:, :-1], tokens[:, 1:, None], axis=-1)[..., 0]
    kl = jnp.sum(jnp.exp(ref_logp) * (ref_logp - logp), axis=-1)
    return jnp.sum(pair * nll), jnp.sum(real * kl), jnp.sum(pair), jnp.sum(real)


def ce_loss_score(
    model: Transformer,
    tokens: Int[Array, "B T"],
    sae: Callable,
    *,
    layer: int,
    site: str = "resid_post",
    mask: Int[Array, "B T"] | None = None,
    input_scale: float = 1.0,
    skip_first: int = 1,
    batch_size: int = 8,
) -> dict[str, float]:
    """CE-loss score and KL score of splicing `sae` at (site, layer) (SAELens' definitions).

    With CE the mean next-token cross-entropy over the T-1 positions whose token and next
    token are real: `ce_loss_score = (CE_ablated - CE_sae) / (CE_ablated - CE_clean)`, the
    ablated baseline zeroing the site (1: the reconstruction loses nothing; 0: as bad as
    deleting the activation); `kl_score = (KL_ablated - KL_sae) / KL_ablated`, KL the mean
    KL(p_clean || p_edited) over all T real positions (the last one included), as SAELens
    averages it. Positions left clean by `skip_first` add the same CE to all three passes
    and KL 0, so they leave both scores unchanged. The three passes run one compiled
    program, so an identity reconstruction gives exactly CE_clean.

    **Arguments:**

    - `model`: a `jaxlab.lm.Transformer`.
    - `tokens`: (B, T) token ids in [0, vocab_size) (left padding marked by `mask`); an
      id outside the vocabulary is refused naming `tokens`, never wrapped.
    - `sae`: callable (d,) -> (d,) reconstruction (an SAE, `TopKPCA`, ...); it sees the
      activation multiplied by `input_scale` and its output is divided by it.
    - `layer`, `site`: where to splice (see `jaxlab.lm.SITES`).
    - `mask`: (B, T) 1 on real tokens, 0 on padding (default all); other values raise.
    - `input_scale`: a finite number > 0.
    - `skip_first`: leading positions of every row left clean in all three passes. The
      default 1 keeps the first (BOS, attention-sink) token clean: its residual norm is
      ~100x the median, and SAEs trained on `jaxlab.lm.collect`'s stores (which skip it by
      default, as SAELens' evaluations exclude special tokens) never saw it. 0 splices every
      position. With `skip_first > 0` rows must not be left-padded (a ValueError says so):
      the skipped positions must be each row's first real tokens.
    - `batch_size`: sequences per forward pass.

    **Returns:** {"ce_clean", "ce_sae", "ce_ablated", "ce_loss_score", "kl_sae",
    "kl_ablated", "kl_score"} as floats.
    """
    if not isinstance(model, Transformer):
        raise ValueError(
            f"model: expected a jaxlab.lm.Transformer, received {type(model).__name__}"
        )
    if not callable(sae):
        raise ValueError(f"sae: expected a callable (d,) -> (d,), received {type(sae).__name__}")
    if site not in SITES:
        raise ValueError(f"site: expected one of {SITES}, received {site!r}")
    n_layers = model.config.n_layers
    if isinstance(layer, bool) or not isinstance(layer, int | np.integer):
        raise ValueError(f"layer: expected an int in [0, {n_layers}), received {layer!r:.60}")
    if not 0 <= layer < n_layers:
        raise ValueError(f"layer: expected an int in [0, {n_layers}), received {layer}")
    # ids outside the vocabulary are refused, never wrapped by the embedding lookup
    tokens = jnp.asarray(check_ids("tokens", tokens, model.config.vocab_size, what="token ids"))
    if tokens.ndim != 2 or tokens.shape[1] < 2 or tokens.shape[0] == 0:
        raise ValueError(
            f"tokens: expected shape (B, T) with B >= 1 and T >= 2, received {tokens.shape}"
        )
    mask = jnp.ones(tokens.shape, jnp.int32) if mask is None else as_array("mask", mask)
    if mask.shape != tokens.shape:
        raise ValueError(f"mask: expected shape {tokens.shape}, received {mask.shape}")
    if mask.dtype == jnp.bool_:
        mask = mask.astype(jnp.int32)  # 1 on real tokens, as the int masks
    if not bool(jnp.all((mask == 0) | (mask == 1))):
        raise ValueError("mask: expected 0/1 (or bool) values")
    input_scale = check_real("input_scale", input_scale, low=0.0, low_inclusive=False)
    batch_size = check_positive_int("batch_size", batch_size)
    if isinstance(skip_first, bool) or not isinstance(skip_first, int) or skip_first < 0:
        raise ValueError(f"skip_first: expected an int >= 0, received {skip_first!r}")
    if skip_first > 0 and not bool(jnp.all(mask[:, : min(skip_first, mask.shape[1])] != 0)):
        raise ValueError(
            f"mask: rows are left-padded, so skip_first={skip_first} would keep padding clean "
            "instead of each row's first tokens; right-pad the rows or pass skip_first=0"
        )
    f32 = jnp.float32

    def splice(keep, recon):
        return Splice(
            sae,
            jnp.asarray(keep, f32),
            jnp.asarray(recon, f32),
            jnp.asarray(input_scale, f32),
            jnp.asarray(skip_first, jnp.int32),
        )

    tot = np.zeros((3, 2))
    pairs, positions = 0.0, 0.0
    for s in range(0, tokens.shape[0], batch_size):
        tb, mb = tokens[s : s + batch_size].astype(jnp.int32), mask[s : s + batch_size]
        runs = [
            forward_batched(model, tb, mask=mb, intervene={(site, layer): splice(k, r)})[0]
            for k, r in ((1, 0), (0, 1), (0, 0))
        ]
        ref = jax.nn.log_softmax(runs[0], axis=-1)
        for i, lg in enumerate(runs):
            nll, kl, n_pair, n_real = _losses(lg, ref, tb, mb)
            tot[i] += (float(nll), float(kl))
        pairs += float(n_pair)
        positions += float(n_real)
    if pairs == 0:
        raise ValueError("mask: expected at least one pair of consecutive real tokens")
    (ce_clean, _), (ce_sae, kl_sae), (ce_abl, kl_abl) = tot / np.array([pairs, positions])
    if ce_abl == ce_clean or kl_abl == 0:
        raise ValueError(
            f"layer: zero-ablating ({site!r}, {layer}) leaves the loss unchanged "
            f"(CE {ce_clean:.6g}); the scores are undefined there"
        )
    return {
        "ce_clean": ce_clean,
        "ce_sae": ce_sae,
        "ce_ablated": ce_abl,
        "ce_loss_score": (ce_abl - ce_sae) / (ce_abl - ce_clean),
        "kl_sae": kl_sae,
        "kl_ablated": kl_abl,
        "kl_score": (kl_abl - kl_sae) / kl_abl,
    }
