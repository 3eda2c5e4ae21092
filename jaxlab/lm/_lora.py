"""LoRA adapters as a pytree, separate from the (frozen) base model.

Hu et al. 2021, "LoRA: Low-Rank Adaptation of Large Language Models": a frozen
weight W (out, in) is used as W + scale * B @ A with A (rank, in), B (out, rank),
scale = alpha / rank. B starts at zero, so a fresh adapter leaves every output
bit-identical. The adapter is its own `eqx.Module`, so an optax optimiser trains
it alone: `eqx.filter_grad(loss)(lora, model, batch)` differentiates only the
adapter, and the base model never enters the optimiser state.
"""

from __future__ import annotations

import equinox as eqx
import jax
import jax.numpy as jnp
from jaxtyping import Array, Float

__all__ = ["LoRA", "PROJECTIONS", "lora_shapes"]

#: projection name -> (output size attribute, input size attribute) of the config.
PROJECTIONS = ("q", "k", "v", "o", "gate", "up", "down")
"""The projections a `LoRA` adapter can target, per block: attention `q`, `k`, `v`, `o` and MLP
`gate`, `up`, `down`."""


def lora_shapes(config) -> dict[str, tuple[int, int]]:
    """The shapes of one layer's adaptable projections.

    **Arguments:** `config`: an `LMConfig`.

    **Returns:** dict projection name -> `(out_features, in_features)` of its weight.
    """
    hq = config.n_heads * config.head_dim
    hkv = config.n_kv_heads * config.head_dim
    d, f = config.d_model, config.d_ff
    return {
        "q": (hq, d),
        "k": (hkv, d),
        "v": (hkv, d),
        "o": (d, hq),
        "gate": (f, d),
        "up": (f, d),
        "down": (d, f),
    }


class LoRA(eqx.Module):
    """Low-rank adapters on chosen projections of chosen layers.

    **Attributes:**
        a: projection name -> A of shape (n_layers, rank, in_features).
        b: projection name -> B of shape (n_layers, out_features, rank).
        layer_scale: (n_layers,) alpha/rank on adapted layers, 0 elsewhere
            (not trained: filter it out with `LoRA.trainable_filter`).
    """

    a: dict[str, Float[Array, "L r i"]]
    b: dict[str, Float[Array, "L o r"]]
    layer_scale: Float[Array, " L"]

    def __init__(
        self,
        config,
        *,
        key,
        rank: int = 8,
        alpha: float = 16.0,
        targets=("q", "v"),
        layers=None,
        init_b_scale: float = 0.0,
        dtype=jnp.float32,
    ):
        """Fresh adapters (A ~ N(0, 1/in), B = 0 unless `init_b_scale` > 0).

        **Arguments:**
            config: the model's `LMConfig`.
            key: PRNG key (keyword-only).
            rank: adapter rank r.
            alpha: scale numerator (scale = alpha / rank).
            targets: projections among "q k v o gate up down".
            layers: layer indices to adapt (default: all).
            init_b_scale: std of a random B (0 gives the exact-identity start; a
                nonzero value is for tests).
        """
        if not isinstance(rank, int) or rank <= 0:
            raise ValueError(f"rank must be a positive int, got {rank!r}")
        targets = tuple(targets)
        bad = [t for t in targets if t not in PROJECTIONS]
        if bad or not targets:
            raise ValueError(f"targets must be a non-empty subset of {PROJECTIONS}, got {targets}")
        n = config.n_layers
        layers = tuple(range(n)) if layers is None else tuple(int(i) for i in layers)
        if any(not 0 <= i < n for i in layers):
            raise ValueError(f"layers must lie in [0, {n}), got {layers}")
        shapes = lora_shapes(config)
        keys = jax.random.split(key, 2 * len(targets))
        self.a = {
            t: jax.random.normal(keys[2 * j], (n, rank, shapes[t][1]), dtype)
            * (shapes[t][1] ** -0.5)
            for j, t in enumerate(targets)
        }
        self.b = {
            t: jax.random.normal(keys[2 * j + 1], (n, shapes[t][0], rank), dtype) * init_b_scale
            for j, t in enumerate(targets)
        }
        mask = (
            jnp.zeros((n,), dtype).at[jnp.asarray(layers, jnp.int32)].set(1.0)
            if layers
            else jnp.zeros((n,), dtype)
        )
        self.layer_scale = mask * (alpha / rank)

    @classmethod
    def from_factors(
        cls,
        a: dict[str, Float[Array, "L r i"]],
        b: dict[str, Float[Array, "L o r"]],
        layer_scale: Float[Array, " L"],
    ) -> LoRA:
        """An adapter from given factors (e.g. generated per input by a hypernetwork).

        No shape check against a config happens here (the arrays may be traced): build
        them with `lora_shapes(config)`.

        **Arguments:**
            a: projection name -> A (n_layers, rank, in_features).
            b: the same names -> B (n_layers, out_features, rank).
            layer_scale: (n_layers,) the scale of each layer (alpha / rank, or 0).

        **Returns:** a `LoRA`.
        """
        if set(a) != set(b) or not a or any(t not in PROJECTIONS for t in a):
            raise ValueError(
                f"a, b: expected the same non-empty subset of {PROJECTIONS} as keys, got "
                f"{sorted(a)} and {sorted(b)}"
            )
        self = object.__new__(cls)
        object.__setattr__(self, "a", dict(a))
        object.__setattr__(self, "b", dict(b))
        object.__setattr__(self, "layer_scale", layer_scale)
        return self

    @staticmethod
    def trainable_filter(lora: LoRA):
        """A filter spec for `eqx.partition`: True on A and B, False on `layer_scale`."""
        spec = jax.tree_util.tree_map(lambda _: False, lora)
        return eqx.tree_at(
            lambda m: (m.a, m.b),
            spec,
            (
                jax.tree_util.tree_map(lambda _: True, lora.a),
                jax.tree_util.tree_map(lambda _: True, lora.b),
            ),
        )


def adapted_weight(w, lora_layer, name):
    """W + scale * B @ A for one layer's slice of a LoRA (W itself if not adapted).

    The adapter is merged into the weight rather than added to the output: with
    B = 0 the matmul then sees bit-identical inputs, so outputs are bit-identical
    to the base model's (an added zero branch changes XLA's fusion and rounding).
    """
    if lora_layer is None or name not in lora_layer.a:
        return w
    a = lora_layer.a[name].astype(jnp.float32)
    b = lora_layer.b[name].astype(jnp.float32)
    return w.astype(jnp.float32) + lora_layer.layer_scale.astype(jnp.float32) * (b @ a)
