"""`HAPS`: a router over architectures and a hypernetwork generating input-conditioned LoRA.

P19 (HAPS, hierarchical routing): a high-level router picks one of M candidate LLM
architectures for a query; a low-level generator emits LoRA factors for the chosen
architecture from the same query; both read one shared trunk, so that the adaptation
objective also shapes the routing representation. Here:

- trunk: an MLP from query features (F,) to a code h (H,);
- router: a linear head h -> M logits (with `shared=False`, the ablation, the router has a
  trunk of its own and the LoRA objective no longer reaches it);
- generator: a shared layer [h; e_j] -> u_j (e_j a learned embedding of architecture j),
  then an architecture-specific `LoRAGenerator` u_j -> the `jaxlab.lm.LoRA` of j's
  adapted blocks (sized to j's dimensions);
- answer: j's adapted top blocks on the query's cached prefix (`adapted_option_logits`).

Training is `HAPSStep` (reward-augmented objective, REINFORCE for the router).
"""

from __future__ import annotations

from collections.abc import Sequence

import equinox as eqx
import jax
import jax.numpy as jnp
from jaxtyping import Array, Float, Int

from jaxlab import lm
from jaxlab._core import check_memory, check_positive_int, check_size

from ._adapted import AdaptedInputs, adapted_option_logits
from ._hypernet import LoRAGenerator

__all__ = ["HAPS"]


# the largest trunk/embedding/code width or LoRA rank HAPS accepts (the paper uses <= 1024)
HAPS_MAX_WIDTH = 1 << 16


class HAPS(eqx.Module):
    """Hierarchical router: architecture choice + per-input generated LoRA.

    **Attributes:**
        trunk: MLP (F,) -> (H,), shared by the router and the generators.
        router_trunk: the router's own MLP when un-shared, else None.
        router_head: Linear H -> M.
        arch_embed: (M, E) architecture embeddings.
        shared_layer: Linear H + E -> C (the generation layer shared across architectures).
        generators: M `LoRAGenerator`s (C,) -> LoRA of architecture j.
        candidate_cost: (M,) cost of each architecture (used by `route`'s cost weight).
    """

    trunk: eqx.nn.MLP
    router_trunk: eqx.nn.MLP | None
    router_head: eqx.nn.Linear
    arch_embed: Float[Array, "M E"]
    shared_layer: eqx.nn.Linear
    generators: tuple[LoRAGenerator, ...]
    candidate_cost: Float[Array, " M"]

    def __init__(
        self,
        n_features: int,
        configs: Sequence[lm.LMConfig],
        candidate_cost,
        *,
        key: jax.Array,
        hidden: int = 64,
        arch_dim: int = 16,
        code_dim: int = 32,
        rank: int = 4,
        targets: Sequence[str] = ("q", "o"),
        shared: bool = True,
    ):
        """A fresh HAPS (every generator emits B = 0: each architecture starts as its base).

        **Arguments:**
            n_features: F.
            configs: the M `LMConfig`s of the candidates' adapted blocks.
            candidate_cost: (M,) mean cost of each candidate (> 0).
            key: PRNG key (keyword-only).
            hidden: trunk width H.
            arch_dim: architecture embedding size E.
            code_dim: C, the generators' input size.
            rank, targets: of the generated LoRA (as `LoRAGenerator`).
            shared: one trunk for router and generators (False: the un-shared ablation).
        """
        n_features = check_positive_int("n_features", n_features)
        why = "routing.HAPS_MAX_WIDTH"
        hidden = check_size("hidden", hidden, cap=HAPS_MAX_WIDTH, why=why)
        arch_dim = check_size("arch_dim", arch_dim, cap=HAPS_MAX_WIDTH, why=why)
        code_dim = check_size("code_dim", code_dim, cap=HAPS_MAX_WIDTH, why=why)
        rank = check_size("rank", rank, cap=HAPS_MAX_WIDTH, why=why)
        # the trunk(s), the shared layer and the generators' output layers, float32
        check_memory("hidden", 4.0 * 2 * (n_features * hidden + hidden * hidden))
        configs = tuple(configs)
        if not configs:
            raise ValueError("configs: expected at least one LMConfig, received none")
        cost = jnp.asarray(candidate_cost, jnp.float32)
        if cost.shape != (len(configs),) or not bool(jnp.all(cost > 0)):
            raise ValueError(
                f"candidate_cost: expected {len(configs)} positive costs, received {cost}"
            )
        m = len(configs)
        ks = jax.random.split(key, 5 + m)

        def mlp(k):
            return eqx.nn.MLP(
                n_features,
                hidden,
                hidden,
                depth=1,
                activation=jax.nn.gelu,
                key=k,
                dtype=jnp.float32,
            )

        self.trunk = mlp(ks[0])
        self.router_trunk = None if shared else mlp(ks[1])
        self.router_head = eqx.nn.Linear(hidden, m, key=ks[2], dtype=jnp.float32)
        self.arch_embed = jax.random.normal(ks[3], (m, arch_dim), jnp.float32)
        self.shared_layer = eqx.nn.Linear(hidden + arch_dim, code_dim, key=ks[4], dtype=jnp.float32)
        self.generators = tuple(
            LoRAGenerator(c, code_dim, key=ks[5 + j], rank=rank, targets=targets)
            for j, c in enumerate(configs)
        )
        self.candidate_cost = cost

    @property
    def n_candidates(self) -> int:
        """M."""
        return len(self.generators)

    def router_logits(self, features: Float[Array, " F"]) -> Float[Array, " M"]:
        """The high-level router's logits for one query."""
        h = self.trunk(features) if self.router_trunk is None else self.router_trunk(features)
        return self.router_head(h)

    def lora(self, features: Float[Array, " F"], arch: int) -> lm.LoRA:
        """The generated adapter of architecture `arch` (a Python int) for one query."""
        code = jnp.concatenate([self.trunk(features), self.arch_embed[arch]])
        return self.generators[arch](jax.nn.gelu(self.shared_layer(code)))

    def option_logits(
        self,
        features: Float[Array, " F"],
        uppers: Sequence[lm.Transformer],
        inputs: Sequence[AdaptedInputs],
        options: Sequence[Int[Array, " K"]],
    ) -> Float[Array, "M K"]:
        """Every architecture's adapted option logits for one query (unbatched).

        **Arguments:**
            features: (F,).
            uppers: the M frozen adapted blocks (`jaxlab.lm.layer_slice`).
            inputs: the query's M `AdaptedInputs`.
            options: M (K,) option token ids (one per tokenizer).

        **Returns:** (M, K) logits.
        """
        return jnp.stack(
            [
                adapted_option_logits(u, x, self.lora(features, j), o)
                for j, (u, x, o) in enumerate(zip(uppers, inputs, options, strict=True))
            ]
        )

    def route(
        self, features: Float[Array, " F"], *, cost_weight: float | Float[Array, ""] = 0.0
    ) -> Int[Array, ""]:
        """The chosen architecture: argmax of log pi_j - cost_weight * cost_j / max(cost)."""
        logp = jax.nn.log_softmax(self.router_logits(features))
        c = self.candidate_cost / jnp.max(self.candidate_cost)
        return jnp.argmax(logp - cost_weight * c)
