"""`LoRAGenerator`: one architecture's output layer of a hypernetwork emitting LoRA factors.

Text-to-LoRA (Charakorn et al. 2025, "Text-to-LoRA: instant transformer adaptation") maps a
task description to the A and B factors of a LoRA adapter with a hypernetwork; HAPS (P19)
generates them per input, for the architecture its router chose. The generator is an affine
map from a code vector (the shared trunk's output for this query and architecture) to every
factor of the chosen projections of every adapted layer, sized to that architecture's
dimensions. Its bias is a static LoRA (A biased to N(0, 1/in), B to 0); its weight adds the
input-conditioned part, with B's weight and bias at zero so that a fresh generator emits
B = 0: the adapted model starts as the base model, bit for bit (the LoRA convention).
"""

from __future__ import annotations

from collections.abc import Sequence

import equinox as eqx
import jax
import jax.numpy as jnp
from jaxtyping import Array, Float

from jaxlab import lm
from jaxlab._core import check_memory, check_nonnegative_int, check_positive_int

__all__ = ["LoRAGenerator", "pad_lora"]


class LoRAGenerator(eqx.Module):
    """Code (H,) -> a `jaxlab.lm.LoRA` for one architecture's adapted blocks.

    **Attributes:**
        weight_a, bias_a: (n_a, H), (n_a,): the flattened A factors, n_a = sum over targets
            of L * rank * in_features.
        weight_b, bias_b: (n_b, H), (n_b,): the flattened B factors (zero at init).
        layer_scale: (L,) alpha / rank on every adapted layer (not trained).
        shapes: static ((target, out_features, in_features), ...).
        rank, n_layers: static.
    """

    weight_a: Float[Array, "na H"]
    bias_a: Float[Array, " na"]
    weight_b: Float[Array, "nb H"]
    bias_b: Float[Array, " nb"]
    layer_scale: Float[Array, " L"]
    shapes: tuple[tuple[str, int, int], ...] = eqx.field(static=True)
    rank: int = eqx.field(static=True)
    n_layers: int = eqx.field(static=True)

    def __init__(
        self,
        config: lm.LMConfig,
        code_dim: int,
        *,
        key: jax.Array,
        rank: int = 4,
        alpha: float | None = None,
        targets: Sequence[str] = ("q", "o"),
        input_scale: float = 0.1,
    ):
        """A fresh generator (emits B = 0 for every code).

        **Arguments:**
            config: the `LMConfig` of the adapted blocks (`layer_slice(model, start).config`).
            code_dim: H, the length of the code vector.
            key: PRNG key (keyword-only).
            rank: LoRA rank r.
            alpha: scale numerator (scale alpha / r; default 2 r).
            targets: projections among `jaxlab.lm.PROJECTIONS`.
            input_scale: std of A's input-conditioned weight relative to its bias.
        """
        self.rank = check_positive_int("rank", rank)
        code_dim = check_positive_int("code_dim", code_dim)
        targets = tuple(targets)
        full = lm.lora_shapes(config)
        bad = [t for t in targets if t not in full]
        if bad or not targets or len(set(targets)) != len(targets):
            raise ValueError(
                f"targets: expected distinct names among {tuple(full)}, received {targets}"
            )
        self.n_layers = config.n_layers
        self.shapes = tuple((t, full[t][0], full[t][1]) for t in targets)
        L, r = self.n_layers, self.rank
        n_a = sum(L * r * i for _, _, i in self.shapes)
        n_b = sum(L * o * r for _, o, _ in self.shapes)
        k_bias, k_w = jax.random.split(key)
        # A's bias: the usual N(0, 1/in) LoRA init, per target
        fan = jnp.concatenate(
            [jnp.full((L * r * i,), float(i) ** -0.5, jnp.float32) for _, _, i in self.shapes]
        )
        self.bias_a = jax.random.normal(k_bias, (n_a,), jnp.float32) * fan
        self.weight_a = (
            jax.random.normal(k_w, (n_a, code_dim), jnp.float32)
            * fan[:, None]
            * (input_scale * code_dim**-0.5)
        )
        self.weight_b = jnp.zeros((n_b, code_dim), jnp.float32)
        self.bias_b = jnp.zeros((n_b,), jnp.float32)
        scale = (2.0 * r if alpha is None else float(alpha)) / r
        self.layer_scale = jnp.full((L,), scale, jnp.float32)

    @property
    def n_generated(self) -> int:
        """Numbers generated per input (all A and B entries)."""
        return self.bias_a.shape[0] + self.bias_b.shape[0]

    def __call__(self, code: Float[Array, " H"]) -> lm.LoRA:
        """The adapter for one code vector (unbatched; vmap over inputs).

        **Arguments:** `code` (H,).

        **Returns:** a `jaxlab.lm.LoRA` with `n_layers` layers.
        """
        fa = self.weight_a @ code + self.bias_a
        fb = self.weight_b @ code + self.bias_b
        L, r = self.n_layers, self.rank
        a, b, ia, ib = {}, {}, 0, 0
        for t, o, i in self.shapes:
            a[t] = fa[ia : ia + L * r * i].reshape(L, r, i)
            b[t] = fb[ib : ib + L * o * r].reshape(L, o, r)
            ia, ib = ia + L * r * i, ib + L * o * r
        return lm.LoRA.from_factors(a, b, jax.lax.stop_gradient(self.layer_scale))


def pad_lora(lora: lm.LoRA, below: int) -> lm.LoRA:
    """An adapter of the top blocks extended to the whole model: `below` unadapted layers
    (zero factors, scale 0) first, so it can be passed to `jaxlab.lm.forward` / `score`.

    **Arguments:** `lora` (for layers start .. n_layers - 1); `below` = start, an integer
    >= 0 (0: nothing to pad; a bool, a float or a size beyond the memory available
    raises a `ValueError` naming it).

    **Returns:** a `jaxlab.lm.LoRA` with `below + L` layers.
    """
    below = check_nonnegative_int("below", below)
    # the padded factors: `below` more layers of each factor (float32)
    per_layer = sum(v[0].size for v in (*lora.a.values(), *lora.b.values())) + 1
    check_memory("below", 4.0 * below * per_layer)

    def pad(x):
        return jnp.concatenate([jnp.zeros((below, *x.shape[1:]), x.dtype), x])

    return lm.LoRA.from_factors(
        {t: pad(v) for t, v in lora.a.items()},
        {t: pad(v) for t, v in lora.b.items()},
        pad(lora.layer_scale),
    )
