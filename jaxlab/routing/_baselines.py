"""Baseline routers behind `AbstractRouter`: fixed model, kNN, MLP/linear, matrix factorisation.

- `FixedRouter`: every query gets each candidate's training mean quality (under a cost
  weight it picks the best fixed model for that weight).
- `KNNRouter` (RouterBench's kNN router): mean quality of the k most similar training
  queries (cosine similarity of features).
- `MLPRouter` (RouterBench's MLP router; `hidden=()` is a linear/logistic router): features
  -> M logits, trained on binary cross-entropy.
- `MatrixFactorisationRouter` (RouteLLM's MF router): logit(q, m) = w . (v_m * (W x_q)) +
  b_m, a learned embedding per candidate against a projected query.
- `EmbedLLMRouter` (EmbedLLM, Zhuang et al. 2024): logit(q, m) = phi(x_q) . e_m + b_m, an
  inner product of a learned model embedding with an MLP projection of the query embedding.
"""

from __future__ import annotations

from collections.abc import Sequence

import equinox as eqx
import jax
import jax.numpy as jnp
import optax
from jaxtyping import Array, Float

from jaxlab._core import check_positive_int

from ._router import AbstractRouter
from ._table import RoutingTable
from ._train import fit_on_table as _fit_on

__all__ = ["EmbedLLMRouter", "FixedRouter", "KNNRouter", "MLPRouter", "MatrixFactorisationRouter"]


def _features(x):
    x = jnp.asarray(x, jnp.float32)
    if x.ndim != 2:
        raise ValueError(f"features: expected an (N, F) array, received shape {x.shape}")
    return x


def _mean_cost(table: RoutingTable):
    c = jnp.asarray(table.cost.mean(0), jnp.float32)
    # a zero-cost pool would make cost normalisation divide by zero
    return jnp.where(jnp.max(c) > 0, c, jnp.ones_like(c))


class FixedRouter(AbstractRouter):
    """Each candidate's mean training quality for every query (best-fixed-model router)."""

    mean_quality: Float[Array, " M"]
    candidate_cost: Float[Array, " M"]

    @classmethod
    def fit(cls, table: RoutingTable, *, key=None) -> FixedRouter:
        """Means of `table.quality` and `table.cost` per candidate (`key` unused, as
        `KNNRouter.fit`)."""
        del key
        return cls(
            mean_quality=jnp.asarray(table.quality.mean(0), jnp.float32),
            candidate_cost=_mean_cost(table),
        )

    def predict_quality(self, features):
        x = _features(features)
        return jnp.broadcast_to(self.mean_quality, (x.shape[0], self.mean_quality.size))


class KNNRouter(AbstractRouter):
    """Mean quality of the `k` nearest training queries by cosine similarity."""

    train_features: Float[Array, "T F"]
    train_quality: Float[Array, "T M"]
    candidate_cost: Float[Array, " M"]
    k: int = eqx.field(static=True, default=10)

    @classmethod
    def fit(cls, table: RoutingTable, *, k: int = 10, key=None) -> KNNRouter:
        """Stores the table's features (unit-normalised) and qualities (`key` unused: the
        fit is deterministic; accepted so every router's `fit` takes one)."""
        del key
        k = min(check_positive_int("k", k), table.n_queries)
        x = _features(table.features)
        x = x / jnp.maximum(jnp.linalg.norm(x, axis=1, keepdims=True), 1e-12)
        return cls(
            train_features=x,
            train_quality=jnp.asarray(table.quality, jnp.float32),
            candidate_cost=_mean_cost(table),
            k=k,
        )

    def predict_quality(self, features):
        x = _features(features)
        x = x / jnp.maximum(jnp.linalg.norm(x, axis=1, keepdims=True), 1e-12)
        _, idx = jax.lax.top_k(x @ self.train_features.T, self.k)
        return self.train_quality[idx].mean(axis=1)


def _bce(logits, target):
    return jnp.mean(optax.sigmoid_binary_cross_entropy(logits, target))


class MLPRouter(AbstractRouter):
    """Features -> M correctness logits (an MLP; `hidden=()` is a linear router)."""

    layers: tuple[eqx.nn.Linear, ...]
    candidate_cost: Float[Array, " M"]
    weight_decay: float = eqx.field(static=True, default=1e-4)

    def __init__(
        self, n_features, n_candidates, candidate_cost, *, hidden=(64,), key, weight_decay=1e-4
    ):
        sizes = [n_features, *hidden, n_candidates]
        keys = jax.random.split(key, len(sizes) - 1)
        self.layers = tuple(
            eqx.nn.Linear(a, b, key=k, dtype=jnp.float32)
            for a, b, k in zip(sizes[:-1], sizes[1:], keys, strict=True)
        )
        self.candidate_cost = jnp.asarray(candidate_cost, jnp.float32)
        self.weight_decay = weight_decay

    def logits(self, features):
        """(N, M) correctness logits."""
        h = _features(features)
        for i, layer in enumerate(self.layers):
            h = jax.vmap(layer)(h)
            if i < len(self.layers) - 1:
                h = jax.nn.gelu(h)
        return h

    def predict_quality(self, features):
        return jax.nn.sigmoid(self.logits(features))

    def loss(self, features, quality, *, key):
        del key
        l2 = sum(jnp.sum(layer.weight**2) for layer in self.layers)
        return _bce(self.logits(features), quality) + self.weight_decay * l2

    @classmethod
    def fit(
        cls,
        table: RoutingTable,
        *,
        key,
        hidden: Sequence[int] = (64,),
        steps=300,
        learning_rate=1e-2,
        weight_decay=1e-4,
        monitor=None,
        monitor_every=100,
    ) -> MLPRouter:
        """Trains on `table` (binary cross-entropy + L2, Adam, full batch; `monitor`,
        `monitor_every` as `fit_router`)."""
        return _fit_on(
            table,
            lambda k: cls(
                table.features.shape[1],
                table.n_candidates,
                _mean_cost(table),
                hidden=tuple(hidden),
                key=k,
                weight_decay=weight_decay,
            ),
            key=key,
            steps=steps,
            optimizer=optax.adam(learning_rate),
            monitor=monitor,
            monitor_every=monitor_every,
        )


class MatrixFactorisationRouter(AbstractRouter):
    """RouteLLM-style matrix factorisation: logit = w . (v_m * (W x)) + b_m."""

    project: eqx.nn.Linear
    model_embedding: Float[Array, "M D"]
    readout: Float[Array, " D"]
    bias: Float[Array, " M"]
    candidate_cost: Float[Array, " M"]
    weight_decay: float = eqx.field(static=True, default=1e-4)

    def __init__(self, n_features, n_candidates, candidate_cost, *, dim=16, key, weight_decay=1e-4):
        k1, k2, k3 = jax.random.split(key, 3)
        self.project = eqx.nn.Linear(n_features, dim, use_bias=False, key=k1, dtype=jnp.float32)
        self.model_embedding = jax.random.normal(k2, (n_candidates, dim), jnp.float32)
        self.readout = jax.random.normal(k3, (dim,), jnp.float32) / jnp.sqrt(dim)
        self.bias = jnp.zeros(n_candidates, jnp.float32)
        self.candidate_cost = jnp.asarray(candidate_cost, jnp.float32)
        self.weight_decay = weight_decay

    def logits(self, features):
        """(N, M) correctness logits."""
        z = jax.vmap(self.project)(_features(features))  # (N, D)
        return (z[:, None, :] * self.model_embedding[None]) @ self.readout + self.bias[None, :]

    def predict_quality(self, features):
        return jax.nn.sigmoid(self.logits(features))

    def loss(self, features, quality, *, key):
        del key
        l2 = jnp.sum(self.project.weight**2) + jnp.sum(self.model_embedding**2)
        return _bce(self.logits(features), quality) + self.weight_decay * l2

    @classmethod
    def fit(
        cls,
        table: RoutingTable,
        *,
        key,
        dim=16,
        steps=300,
        learning_rate=1e-2,
        weight_decay=1e-4,
        monitor=None,
        monitor_every=100,
    ) -> MatrixFactorisationRouter:
        """Trains on `table` (binary cross-entropy + L2, Adam, full batch; `monitor`,
        `monitor_every` as `fit_router`)."""
        return _fit_on(
            table,
            lambda k: cls(
                table.features.shape[1],
                table.n_candidates,
                _mean_cost(table),
                dim=dim,
                key=k,
                weight_decay=weight_decay,
            ),
            key=key,
            steps=steps,
            optimizer=optax.adam(learning_rate),
            monitor=monitor,
            monitor_every=monitor_every,
        )


class EmbedLLMRouter(AbstractRouter):
    """EmbedLLM-style router: logit(q, m) = phi(x_q) . e_m + b_m.

    A learned embedding `e_m` per candidate (the "model embedding" of EmbedLLM, Zhuang et
    al. 2024) against a non-linear projection `phi` (a one-hidden-layer MLP) of the
    query's embedding (e.g. `jaxlab.lm.encode_sentences`); correctness is the sigmoid of
    their dot product plus a per-candidate bias. Unlike `MatrixFactorisationRouter`
    (a linear projection and an element-wise product read out by one shared vector), the
    score is a plain inner product in a learned space, so candidates with similar
    strengths get nearby embeddings.
    """

    phi: eqx.nn.MLP
    model_embedding: Float[Array, "M D"]
    bias: Float[Array, " M"]
    candidate_cost: Float[Array, " M"]
    weight_decay: float = eqx.field(static=True, default=1e-4)

    def __init__(
        self, n_features, n_candidates, candidate_cost, *, dim=16, hidden=64, key, weight_decay=1e-4
    ):
        k1, k2 = jax.random.split(key)
        self.phi = eqx.nn.MLP(n_features, dim, hidden, 1, jax.nn.gelu, key=k1, dtype=jnp.float32)
        self.model_embedding = jax.random.normal(k2, (n_candidates, dim), jnp.float32) / jnp.sqrt(
            dim
        )
        self.bias = jnp.zeros(n_candidates, jnp.float32)
        self.candidate_cost = jnp.asarray(candidate_cost, jnp.float32)
        self.weight_decay = weight_decay

    def logits(self, features):
        """(N, M) correctness logits."""
        z = jax.vmap(self.phi)(_features(features))  # (N, D)
        return z @ self.model_embedding.T + self.bias[None, :]

    def predict_quality(self, features):
        return jax.nn.sigmoid(self.logits(features))

    def loss(self, features, quality, *, key):
        del key
        l2 = sum(jnp.sum(layer.weight**2) for layer in self.phi.layers)
        l2 = l2 + jnp.sum(self.model_embedding**2)
        return _bce(self.logits(features), quality) + self.weight_decay * l2

    @classmethod
    def fit(
        cls,
        table: RoutingTable,
        *,
        key,
        dim=16,
        hidden=64,
        steps=300,
        learning_rate=1e-2,
        weight_decay=1e-4,
        monitor=None,
        monitor_every=100,
    ) -> EmbedLLMRouter:
        """Trains on `table` (binary cross-entropy + L2, Adam, full batch; `monitor`,
        `monitor_every` as `fit_router`)."""
        return _fit_on(
            table,
            lambda k: cls(
                table.features.shape[1],
                table.n_candidates,
                _mean_cost(table),
                dim=dim,
                hidden=hidden,
                key=k,
                weight_decay=weight_decay,
            ),
            key=key,
            steps=steps,
            optimizer=optax.adam(learning_rate),
            monitor=monitor,
            monitor_every=monitor_every,
        )
