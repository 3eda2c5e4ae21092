"""Activation patching between two prompts in one call (`patch_activation`).

Activation patching (Meng et al. 2022, "causal tracing"; Wang et al. 2023; the
TransformerLens `patching` utilities) runs a *source* prompt, records one activation, and
writes it into a *target* run at one hook (and position, and head), returning the target's
logits under the patch. Here the hook is a TransformerLens name or a jaxlab (site, layer)
pair, and the patch is an `eqx.Module` intervention inside the jitted `forward`, whose
position and head are traced: sweeping positions or heads does not recompile.
"""

from __future__ import annotations

import equinox as eqx
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float, Int

from ._forward import forward
from ._hooks import parse_hook_name
from ._model import HEAD_SITES, SITES, Transformer
from ._tokenizer import Tokenizer

__all__ = ["patch_activation"]


class _Patch(eqx.Module):
    """Write `value` into the activation: every position or one, every head or one."""

    value: Array  # (T, ...) for all positions, else the source's row at its position
    position: Int[Array, ""]
    head: Int[Array, ""]
    all_positions: bool = eqx.field(static=True)
    all_heads: bool = eqx.field(static=True)
    pattern: bool = eqx.field(static=True)

    def __call__(self, x: Array) -> Array:
        # the pattern is (H, T, S): put the query position first like (T, ...) sites
        xt = jnp.moveaxis(x, 1, 0) if self.pattern else x
        v = self.value.astype(xt.dtype)
        if self.all_positions and self.all_heads:
            out = v
        elif self.all_positions:
            out = xt.at[:, self.head].set(v[:, self.head])
        elif self.all_heads:
            out = xt.at[self.position].set(v)
        else:
            out = xt.at[self.position, self.head].set(v[self.head])
        return jnp.moveaxis(out, 0, 1) if self.pattern else out


def _tokens(name, value, tokenizer, vocab_size):
    if isinstance(value, str):
        if tokenizer is None:
            raise ValueError(f"{name}: a string needs tokenizer=; or pass token ids")
        value = tokenizer.encode(value)
    arr = np.asarray(value)
    if arr.ndim != 1 or arr.size == 0 or not np.issubdtype(arr.dtype, np.integer):
        raise ValueError(
            f"{name}: expected a non-empty string or 1-D integer token ids, received "
            f"{arr.dtype}{arr.shape}"
        )
    if arr.min() < 0 or arr.max() >= vocab_size:
        raise ValueError(f"{name}: token ids must lie in [0, {vocab_size})")
    return jnp.asarray(arr, jnp.int32)


def _index(name, value, size, what):
    if isinstance(value, bool) or not isinstance(value, int | np.integer):
        raise ValueError(f"{name}: expected an int or None, received {value!r}")
    if not -size <= value < size:
        raise ValueError(f"{name}: expected an int in [-{size}, {size}) ({what}), received {value}")
    return int(value) % size


def patch_activation(
    model: Transformer,
    target: Int[Array, " T"] | str,
    source: Int[Array, " S"] | str,
    hook: str | tuple[str, int],
    *,
    position: int | None = None,
    head: int | None = None,
    tokenizer: Tokenizer | None = None,
) -> Float[Array, "T V"]:
    """The target prompt's logits with one activation taken from the source prompt's run.

    **Arguments:**

    - `model`: a `Transformer`.
    - `target`, `source`: (T,) and (S,) token ids (or strings, with `tokenizer`).
    - `hook`: a TransformerLens hook name (`"blocks.5.hook_resid_post"`,
      `"blocks.5.attn.hook_z"`, see `HOOK_SITES`) or a (site, layer) pair of `SITES` /
      `HEAD_SITES`.
    - `position`: the token position to patch (negative counts from the end, in each
      prompt separately: -1 patches the source's last position into the target's last);
      None patches every position (the prompts must then have one length).
    - `head`: for `attn.hook_z` / `attn.hook_pattern` only, the one head to patch; None
      patches all heads.
    - `tokenizer`: encodes string prompts (BOS per its setting).

    **Returns:** (T, vocab) float32 logits of the patched target run. Patching a site
    with the target's own activations returns the target's logits; patching the last
    block's `hook_resid_post` at position p makes the logits at p the source's.
    """
    if not isinstance(model, Transformer):
        raise ValueError(f"model: expected a jaxlab.lm.Transformer, got {type(model).__name__}")
    cfg = model.config
    if isinstance(hook, str):
        site, layer = parse_hook_name(hook, cfg.n_layers)
    elif isinstance(hook, tuple) and len(hook) == 2:
        site, layer = hook
        if site not in SITES + HEAD_SITES:
            raise ValueError(f"hook: unknown site {site!r}; expected one of {SITES + HEAD_SITES}")
        if isinstance(layer, bool) or not isinstance(layer, int | np.integer):
            raise ValueError(f"hook: the layer must be an int, received {layer!r}")
        if not 0 <= layer < cfg.n_layers:
            raise ValueError(f"hook: the layer must lie in [0, {cfg.n_layers}), received {layer}")
        layer = int(layer)
    else:
        raise ValueError(f"hook: expected a hook name or a (site, layer) pair, received {hook!r}")
    tgt = _tokens("target", target, tokenizer, cfg.vocab_size)
    src = _tokens("source", source, tokenizer, cfg.vocab_size)
    if position is None and tgt.shape != src.shape:
        raise ValueError(
            f"position: None patches every position, which needs prompts of one length; "
            f"target has {tgt.shape[0]} tokens, source {src.shape[0]}"
        )
    if site == "pattern" and tgt.shape != src.shape:
        raise ValueError(
            f"hook: a pattern patch needs prompts of one length (the key axis), "
            f"target has {tgt.shape[0]} tokens, source {src.shape[0]}"
        )
    if head is not None:
        if site not in ("z", "pattern"):
            raise ValueError(f"head: only attn.hook_z / attn.hook_pattern have heads, not {site!r}")
        head = _index("head", head, cfg.n_heads, "a head index")
    _, acts = forward(model, src, capture=(site,), layers=(layer,))
    value = acts[site][0]
    if site == "pattern":
        value = jnp.moveaxis(value, 1, 0)  # (T, H, S): positions first
    p_src = p_tgt = 0
    if position is not None:
        p_src = _index("position", position, int(src.shape[0]), "in source")
        p_tgt = _index("position", position, int(tgt.shape[0]), "in target")
        value = value[p_src]
    patch = _Patch(
        value,
        jnp.asarray(p_tgt, jnp.int32),
        jnp.asarray(0 if head is None else head, jnp.int32),
        all_positions=position is None,
        all_heads=head is None,
        pattern=site == "pattern",
    )
    logits, _ = forward(model, tgt, intervene={(site, layer): patch})
    return logits
