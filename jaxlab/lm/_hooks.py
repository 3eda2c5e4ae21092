"""TransformerLens' hook names as aliases of jaxlab's sites, and `run_with_cache`.

TransformerLens (Nanda & Bloom 2022) names every activation of a `HookedTransformer`
by a hook point, e.g. `blocks.3.hook_resid_post` or `blocks.3.attn.hook_pattern`, and
`model.run_with_cache(tokens, names_filter=...)` returns the logits and a cache of the
hooks asked for. Here each name is an alias of one (site, layer) pair of
`jaxlab.lm.SITES` / `HEAD_SITES`, and `run_with_cache` is one jitted `forward` that
returns only the names asked for (the whole-model cache is TransformerLens users' most
common memory complaint). Names jaxlab does not produce (`hook_embed`, `attn.hook_q`,
`mlp.hook_post`, `ln_final.hook_normalized`, ...) raise a `ValueError` that lists the
supported ones.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence

import jax
import numpy as np
from jaxtyping import Array, Float, Int

from jaxlab._core import check_positive_int

from ._forward import forward, forward_batched
from ._model import Transformer

__all__ = ["HOOK_SITES", "hook_name", "parse_hook_name", "hook_names", "run_with_cache"]

HOOK_SITES: dict[str, str] = {
    "hook_resid_pre": "resid_pre",
    "hook_attn_out": "attn_out",
    "hook_resid_mid": "resid_mid",
    "hook_mlp_out": "mlp_out",
    "hook_resid_post": "resid_post",
    "attn.hook_z": "z",
    "attn.hook_pattern": "pattern",
}
"""TransformerLens hook point (after `blocks.{i}.`) -> the jaxlab site it aliases.
Shapes per sequence, as TransformerLens gives them without the batch axis: (T, d_model)
for the residual-width hooks, (T, n_heads, head_dim) for `attn.hook_z`, (n_heads, T, T)
for `attn.hook_pattern` (query, key)."""

_SITE_HOOKS = {site: hook for hook, site in HOOK_SITES.items()}
_NAME_RE = re.compile(r"^blocks\.(\d+)\.(.+)$")


def _supported(n_layers: int | None) -> str:
    layers = "i" if n_layers is None else f"i in [0, {n_layers})"
    return f"blocks.{{i}}.{{{', '.join(HOOK_SITES)}}} ({layers})"


def hook_name(site: str, layer: int) -> str:
    """The TransformerLens hook name of jaxlab's (site, layer), e.g.
    `hook_name("resid_post", 3) == "blocks.3.hook_resid_post"`.

    **Arguments:** `site`: one of `SITES` / `HEAD_SITES`; `layer`: a block index >= 0.

    **Returns:** the hook name (str).
    """
    if site not in _SITE_HOOKS:
        raise ValueError(f"site: expected one of {tuple(_SITE_HOOKS)}, received {site!r}")
    if isinstance(layer, bool) or not isinstance(layer, int | np.integer) or layer < 0:
        raise ValueError(f"layer: expected an int >= 0, received {layer!r}")
    return f"blocks.{int(layer)}.{_SITE_HOOKS[site]}"


def parse_hook_name(name: str, n_layers: int | None = None) -> tuple[str, int]:
    """jaxlab's (site, layer) of a TransformerLens hook name.

    **Arguments:**

    - `name`: e.g. `"blocks.3.hook_resid_post"` or `"blocks.0.attn.hook_z"`.
    - `n_layers`: the model's block count, a positive int, to check the layer index
      (optional).

    **Returns:** (site, layer).

    Raises a `ValueError` naming the supported hooks for any other name.
    """
    if not isinstance(name, str):
        raise ValueError(f"name: expected a hook name (str), received {type(name).__name__}")
    if n_layers is not None:
        n_layers = check_positive_int("n_layers", n_layers)
    m = _NAME_RE.match(name)
    if m is None or m.group(2) not in HOOK_SITES:
        raise ValueError(
            f"name: {name!r} is not a hook point jaxlab produces; supported: {_supported(n_layers)}"
        )
    layer = int(m.group(1))
    if n_layers is not None and layer >= n_layers:
        raise ValueError(f"name: {name!r} names block {layer}; the model has {n_layers} blocks")
    return HOOK_SITES[m.group(2)], layer


def hook_names(model: Transformer) -> list[str]:
    """Every hook name `run_with_cache` accepts for `model`, block by block.

    **Arguments:** `model` a `jaxlab.lm.Transformer`.

    **Returns:** the names, `blocks.{i}.<hook>` for every layer i and every `HOOK_SITES` key.
    """
    if not isinstance(model, Transformer):
        raise ValueError(f"model: expected a jaxlab.lm.Transformer, got {type(model).__name__}")
    return [f"blocks.{i}.{h}" for i in range(model.config.n_layers) for h in HOOK_SITES]


def _selected(model, names_filter) -> list[str]:
    n_layers = model.config.n_layers
    if names_filter is None:
        return hook_names(model)
    if isinstance(names_filter, str):
        names = [names_filter]
    elif callable(names_filter):
        names = [n for n in hook_names(model) if names_filter(n)]
        if not names:
            raise ValueError("names_filter: the callable selected no hook of this model")
    elif isinstance(names_filter, Sequence):
        names = list(names_filter)
        if not names:
            raise ValueError("names_filter: expected at least one hook name, received none")
    else:
        raise ValueError(
            "names_filter: expected None, a hook name, a list of hook names or a callable "
            f"name -> bool, received {type(names_filter).__name__}"
        )
    for n in names:
        try:
            parse_hook_name(n, n_layers)
        except ValueError as e:
            raise ValueError(f"names_filter: {e}") from None
    return list(dict.fromkeys(names))


def run_with_cache(
    model: Transformer,
    tokens: Int[Array, " T"] | Int[Array, "B T"],
    *,
    names_filter: str | Sequence[str] | Callable[[str], bool] | None = None,
    mask=None,
) -> tuple[Float[Array, "... T V"], dict[str, Array]]:
    """Logits and a cache of the TransformerLens hooks asked for, in one jitted pass.

    **Arguments:**

    - `model`: a `Transformer`.
    - `tokens`: (T,) token ids, or a left-padded (B, T) batch (`pad_prompts`).
    - `names_filter`: the hooks to cache, as in TransformerLens: one name, a list of
      names, or a callable name -> bool over `hook_names(model)`; None caches every hook
      (all blocks, all of `HOOK_SITES`: large, name the ones you need).
    - `mask`: (T,) or (B, T), 1 on real tokens, 0 on left padding (default all 1).

    **Returns:** logits (T, V) (or (B, T, V)) and {hook name: activation}, holding only the
    names asked for: (T, d_model), (T, n_heads, head_dim) for `attn.hook_z`, (n_heads, T,
    T) for `attn.hook_pattern`, with a leading B for a batch. Each equals
    `forward(..., capture=(site,), layers=(layer,))`'s value of its (site, layer).
    """
    if not isinstance(model, Transformer):
        raise ValueError(f"model: expected a jaxlab.lm.Transformer, got {type(model).__name__}")
    names = _selected(model, names_filter)
    pairs = [parse_hook_name(n) for n in names]
    sites = tuple(dict.fromkeys(s for s, _ in pairs))
    layers = tuple(sorted({layer for _, layer in pairs}))
    batched = getattr(tokens, "ndim", np.ndim(tokens)) == 2
    run = forward_batched if batched else forward
    logits, acts = run(model, tokens, mask=mask, capture=sites, layers=layers)
    where = {layer: j for j, layer in enumerate(layers)}
    cache: dict[str, jax.Array] = {}
    for n, (site, layer) in zip(names, pairs, strict=True):
        a = acts[site]
        cache[n] = a[:, where[layer]] if batched else a[where[layer]]
    return logits, cache
