"""`LatentRouter`: routing as counterfactual utility prediction with latent communication.

After "LatentRouter" (P6 of this project's paper list: counterfactual multimodal utility
prediction for MLLM routing). Per query:

1. the query features are projected to `n_tokens` input tokens; `n_capsules` learned
   routing capsules attend over them (cross-attention) -> capsules (K, D);
2. each candidate is a learned capability token (M, D) (no positions: the router is
   equivariant to permuting the candidates, and a candidate can be dropped or added);
3. latent communication, `depth` layers: candidate tokens attend to the capsules and the
   capsules attend to the available candidate tokens (ablation `communication=False`:
   the mean capsule is added to every candidate token instead, no attention);
4. a distributional outcome head, shared by all candidates, maps each candidate token to
   Beta(alpha, beta) over its quality on this query (`head="point"`: one logit);
5. a bounded capsule correction `bound * tanh(g(token_j, mean capsule))` is added to the
   utilities of queries whose top-2 utilities are within `margin` (only close decisions
   move, and by at most `bound`);
6. utility = E[quality] - cost_weight * cost / max(cost); unavailable candidates get -inf.
   Training draws random availability masks (`mask_rate`), so the router learns to route
   inside changing candidate pools.

Loss: for the Beta head, the expected Bernoulli log-loss under Beta(alpha, beta),
-(y (psi(a) - psi(a+b)) + (1-y) (psi(b) - psi(a+b))) (the evidential loss of Sensoy et
al. 2018), plus the log-loss of the corrected mean on close queries; for the point head,
binary cross-entropy. Masked candidates are left out of the loss.
"""

from __future__ import annotations

import equinox as eqx
import jax
import jax.numpy as jnp
import optax
from jax.scipy.special import digamma
from jaxtyping import Array, Float

from ._router import AbstractRouter
from ._table import RoutingTable
from ._train import fit_on_table

__all__ = ["LatentRouter"]


class _Block(eqx.Module):
    read_capsules: eqx.nn.MultiheadAttention  # candidates <- capsules
    read_candidates: eqx.nn.MultiheadAttention  # capsules <- candidates
    norm_c: eqx.nn.LayerNorm
    norm_k: eqx.nn.LayerNorm
    mlp: eqx.nn.MLP

    def __init__(self, dim, heads, *, key):
        k1, k2, k3 = jax.random.split(key, 3)
        self.read_capsules = eqx.nn.MultiheadAttention(heads, dim, key=k1, dtype=jnp.float32)
        self.read_candidates = eqx.nn.MultiheadAttention(heads, dim, key=k2, dtype=jnp.float32)
        self.norm_c = eqx.nn.LayerNorm(dim, dtype=jnp.float32)
        self.norm_k = eqx.nn.LayerNorm(dim, dtype=jnp.float32)
        self.mlp = eqx.nn.MLP(
            dim, dim, 2 * dim, 1, activation=jax.nn.gelu, key=k3, dtype=jnp.float32
        )


class LatentRouter(AbstractRouter):
    """Capsules x capability tokens with latent communication and a distributional head.

    **Arguments (constructor):**

    - `n_features` F, `n_candidates` M, `candidate_cost` (M,) mean costs.
    - `dim` D, `n_tokens` input tokens, `n_capsules` K, `depth` communication layers,
      `heads` attention heads.
    - `communication`: latent communication on/off (ablation).
    - `head`: "beta" (distributional) or "point".
    - `correction`: bounded capsule correction on/off; `margin`, `bound` its gate and size.
    - `mask_rate`: probability that a candidate is hidden in a training example.
    - `key`: PRNG key for the initial weights.
    """

    input_proj: eqx.nn.Linear
    capsule_queries: Float[Array, "K D"]
    capsule_attn: eqx.nn.MultiheadAttention
    capability: Float[Array, "M D"]
    blocks: tuple[_Block, ...]
    pool_proj: eqx.nn.Linear
    scorer: eqx.nn.MLP
    corrector: eqx.nn.MLP
    candidate_cost: Float[Array, " M"]
    n_tokens: int = eqx.field(static=True)
    communication: bool = eqx.field(static=True)
    head: str = eqx.field(static=True)
    correction: bool = eqx.field(static=True)
    margin: float = eqx.field(static=True)
    bound: float = eqx.field(static=True)
    mask_rate: float = eqx.field(static=True)

    def __init__(
        self,
        n_features: int,
        n_candidates: int,
        candidate_cost,
        *,
        dim: int = 32,
        n_tokens: int = 4,
        n_capsules: int = 4,
        depth: int = 2,
        heads: int = 2,
        communication: bool = True,
        head: str = "beta",
        correction: bool = True,
        margin: float = 0.05,
        bound: float = 0.05,
        mask_rate: float = 0.3,
        key: jax.Array,
    ):
        if head not in ("beta", "point"):
            raise ValueError(f"head: expected 'beta' or 'point', received {head!r}")
        if not 0 <= mask_rate < 1:
            raise ValueError(f"mask_rate: expected a value in [0, 1), received {mask_rate}")
        ks = jax.random.split(key, 7 + depth)
        self.input_proj = eqx.nn.Linear(n_features, n_tokens * dim, key=ks[0], dtype=jnp.float32)
        self.capsule_queries = 0.5 * jax.random.normal(ks[1], (n_capsules, dim), jnp.float32)
        self.capsule_attn = eqx.nn.MultiheadAttention(heads, dim, key=ks[2], dtype=jnp.float32)
        self.capability = 0.5 * jax.random.normal(ks[3], (n_candidates, dim), jnp.float32)
        self.blocks = tuple(_Block(dim, heads, key=k) for k in ks[7:])
        self.pool_proj = eqx.nn.Linear(dim, dim, key=ks[4], dtype=jnp.float32)
        self.scorer = eqx.nn.MLP(
            dim, 2 if head == "beta" else 1, dim, 1, jax.nn.gelu, key=ks[5], dtype=jnp.float32
        )
        self.corrector = eqx.nn.MLP(2 * dim, 1, dim, 1, jax.nn.gelu, key=ks[6], dtype=jnp.float32)
        self.candidate_cost = jnp.asarray(candidate_cost, jnp.float32)
        self.n_tokens = n_tokens
        self.communication = communication
        self.head = head
        self.correction = correction
        self.margin = margin
        self.bound = bound
        self.mask_rate = mask_rate

    def _tokens(self, x, available):
        """Final candidate tokens (M, D) and the mean capsule (D,) of one query."""
        dim = self.capability.shape[1]
        inputs = self.input_proj(x).reshape(self.n_tokens, dim)
        caps = self.capsule_queries + self.capsule_attn(self.capsule_queries, inputs, inputs)
        cand = self.capability
        if not self.communication:
            cand = cand + self.pool_proj(caps.mean(0))[None, :]
        for b in self.blocks:
            if self.communication:
                cn = jax.vmap(b.norm_c)(cand)
                cand = cand + b.read_capsules(cn, caps, caps)
                kn = jax.vmap(b.norm_k)(caps)
                mask = jnp.broadcast_to(available[None, :], (caps.shape[0], cand.shape[0]))
                caps = caps + b.read_candidates(kn, cand, cand, mask=mask)
            cand = cand + jax.vmap(b.mlp)(jax.vmap(b.norm_c)(cand))
        return cand, caps.mean(0)

    def _one(self, x, available):
        """(mean quality, head outputs, correction) per candidate of one query."""
        cand, pooled = self._tokens(x, available)
        out = jax.vmap(self.scorer)(cand)
        if self.head == "beta":
            ab = jax.nn.softplus(out) + 1e-2
            mean = ab[:, 0] / ab.sum(1)
        else:
            ab = out
            mean = jax.nn.sigmoid(out[:, 0])
        both = jnp.concatenate([cand, jnp.broadcast_to(pooled, cand.shape)], axis=1)
        corr = self.bound * jnp.tanh(jax.vmap(self.corrector)(both)[:, 0])
        return mean, ab, corr

    def _gap(self, u):
        top2 = jax.lax.top_k(u, 2)[0]
        return top2[..., 0] - top2[..., 1]

    def predict_quality(self, features, *, available=None):
        """Expected quality (N, M) (uncorrected: the head's mean)."""
        x = jnp.asarray(features, jnp.float32)
        av = self._available(x.shape[0], available)
        return jax.vmap(self._one)(x, av)[0]

    def _available(self, n, available):
        m = self.capability.shape[0]
        if available is None:
            return jnp.ones((n, m), bool)
        return jnp.broadcast_to(jnp.asarray(available, bool), (n, m))

    def predict_utilities(self, features, *, cost_weight=0.0, available=None):
        """Utilities (N, M) with the bounded correction on close decisions; -inf where not
        `available` (see `AbstractRouter.predict_utilities`)."""
        x = jnp.asarray(features, jnp.float32)
        av = self._available(x.shape[0], available)
        mean, _, corr = jax.vmap(self._one)(x, av)
        c = self.candidate_cost / jnp.max(self.candidate_cost)
        u = jnp.where(av, mean - cost_weight * c[None, :], -jnp.inf)
        if self.correction and self.capability.shape[0] > 1:
            close = self._gap(u) < self.margin
            u = u + jnp.where(close[:, None] & av, corr, 0.0)
        return u

    def loss(self, features, quality, *, key):
        """Training loss on a random availability mask (masked candidates left out).

        Beta head: the expected Bernoulli log-loss under Beta(alpha, beta),
        `-(y (psi(a) - psi(a+b)) + (1-y) (psi(b) - psi(a+b)))` (Sensoy et al. 2018), plus
        the log-loss of the corrected mean on close queries; point head: binary
        cross-entropy.
        """
        x = jnp.asarray(features, jnp.float32)
        y = jnp.asarray(quality, jnp.float32)
        n, m = y.shape
        u = jax.random.uniform(key, (n, m))
        av = (u >= self.mask_rate) | (jnp.arange(m)[None, :] == jnp.argmax(u, 1)[:, None])
        mean, ab, corr = jax.vmap(self._one)(x, av)
        w = av.astype(jnp.float32)
        if self.head == "beta":
            a, b = ab[..., 0], ab[..., 1]
            ds = digamma(a + b)
            nll = -(y * (digamma(a) - ds) + (1 - y) * (digamma(b) - ds))
        else:
            nll = optax.sigmoid_binary_cross_entropy(ab[..., 0], y)
        total = jnp.sum(w * nll) / jnp.sum(w)
        if self.correction and m > 1:
            base = jnp.where(av, jax.lax.stop_gradient(mean), -jnp.inf)
            close = (self._gap(base) < self.margin).astype(jnp.float32)[:, None] * w
            p = jnp.clip(mean + corr, 1e-4, 1 - 1e-4)
            ll = -(y * jnp.log(p) + (1 - y) * jnp.log1p(-p))
            total = total + jnp.sum(close * ll) / jnp.maximum(jnp.sum(close), 1.0)
        return total

    @classmethod
    def fit(
        cls,
        table: RoutingTable,
        *,
        key,
        steps: int = 400,
        learning_rate: float = 3e-3,
        monitor=None,
        monitor_every: int = 100,
        **options,
    ) -> LatentRouter:
        """Builds a router for `table` (options as the constructor) and trains it with Adam
        (full batch) through `jaxlab.run_steps` (`monitor`, `monitor_every` as
        `routing.fit_router`)."""
        c = table.cost.mean(0)
        c = c if c.max() > 0 else c + 1
        return fit_on_table(
            table,
            lambda k: cls(table.features.shape[1], table.n_candidates, c, key=k, **options),
            key=key,
            steps=steps,
            optimizer=optax.adam(learning_rate),
            monitor=monitor,
            monitor_every=monitor_every,
        )
