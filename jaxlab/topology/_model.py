"""HOPSE-M (message-passing-free) and a HOMP baseline on the same complexes (P18).

Both models take one `ComplexArrays` (unbatched; `jax.vmap` over a stacked batch)
and return a graph-level output `[out_dim]`; `cell_states` returns the per-cell
hidden states `[n_r, width]` per rank, which are permutation-equivariant in the
cells, while the sum-pooled output is invariant.
"""

from __future__ import annotations

from collections.abc import Sequence

import equinox as eqx
import jax
import jax.numpy as jnp
from jaxtyping import Array, Float, PRNGKeyArray

from ._arrays import ComplexArrays, source_rank
from ._hasse import rank_routes

__all__ = ["HOPSE", "HOMP", "ResidualBlock"]


class ResidualBlock(eqx.Module):
    """Per-cell `h -> LayerNorm(h + W_2 relu(W_1 h))`."""

    mlp: eqx.nn.MLP
    norm: eqx.nn.LayerNorm

    def __init__(self, width: int, *, key: PRNGKeyArray, dtype: object = None):
        self.mlp = eqx.nn.MLP(
            width, width, width, depth=1, activation=jax.nn.relu, key=key, dtype=dtype
        )
        self.norm = eqx.nn.LayerNorm(width, dtype=dtype)

    def __call__(self, h: Float[Array, " w"]) -> Float[Array, " w"]:
        return self.norm(h + self.mlp(h))


def _per_cell(fn, h):
    return jax.vmap(fn)(h)


def _check_arrays(arrays: ComplexArrays, feature_dims: Sequence[int], max_rank: int) -> None:
    if not isinstance(arrays, ComplexArrays):
        raise ValueError(f"arrays: expected a ComplexArrays, received {type(arrays).__name__}")
    if arrays.max_rank != max_rank:
        raise ValueError(f"arrays: expected max_rank {max_rank}, received {arrays.max_rank}")
    for r, (x, f) in enumerate(zip(arrays.x, feature_dims, strict=True)):
        if x.ndim != 2 or x.shape[1] != f:
            raise ValueError(f"arrays.x[{r}]: expected [n, {f}] (unbatched), received {x.shape}")


ENCODERS = ("joined", "per_route")


def _joined_embed(embed, x, encs):
    """`W [x, e_1, ..., e_k] + b`: one linear map of a rank's features joined with all its
    route encodings (the same as `W_x x + sum_i W_i e_i + b`, one matmul)."""
    return jnp.concatenate([x, *encs], axis=1) @ embed.weight.T + embed.bias[None]


def _embed_and_encode(embed, encoders, x, encs):
    """`W x + b + sum_i MLP_i(e_i)` for one rank, fused: the route MLPs' first layers as
    one batched matmul over the routes, their second layers and the embedding as one
    matmul over the concatenation `[x, relu(W1_i e_i + b1_i)...]` (the same sums as
    applying each MLP and adding, in fewer and larger operations)."""
    k = min(len(encoders), len(encs))
    if k == 0:
        return _per_cell(embed, x)
    first = [mlp.layers[0] for mlp in encoders[:k]]
    second = [mlp.layers[1] for mlp in encoders[:k]]
    w1 = jnp.stack([lin.weight for lin in first])  # [k, w, d]
    b1 = jnp.stack([lin.bias for lin in first])  # [k, w]
    hid = jax.nn.relu(jnp.einsum("knd,kwd->nkw", jnp.stack(encs[:k]), w1) + b1[None])
    n = x.shape[0]
    cat = jnp.concatenate([x, hid.reshape(n, -1)], axis=1)  # [n, f + k w]
    w2 = jnp.concatenate([embed.weight] + [lin.weight for lin in second], axis=1)
    bias = embed.bias + sum(lin.bias for lin in second)
    return cat @ w2.T + bias[None]


def _readout(readout, head, states, mask):
    """`head(sum_r sum_cells m_c (V_r h_c + c_r))`, computed as
    `head(sum_r V_r (sum_cells m_c h_c) + c_r sum_cells m_c)` (linearity: one
    `[width, width]` product per rank and graph instead of one per cell)."""
    pooled = sum(
        lin.weight @ jnp.sum(h * m[:, None], axis=0) + lin.bias * jnp.sum(m).astype(h.dtype)
        for lin, h, m in zip(readout, states, mask, strict=True)
    )
    return head(pooled)


class HOPSE(eqx.Module):
    """HOPSE-M: per-cell maps of features and Hasse-route encodings, no message passing.

    Each cell of rank `r` gets, with `encoder="joined"` (default),
    `h = W_r [x, e_{r,1}, ..., e_{r,k}] + b_r`: one linear encoder over the cell's
    features joined with its `k` precomputed route encodings (P18's HOPSE-M feeds the
    encodings of all neighbourhoods of a rank, concatenated, to one linear layer per
    rank); with `encoder="per_route"`, `h = W_r x + sum_i MLP_{r,i}(e_{r,i})`, one
    two-layer encoder MLP per route (more per-cell work). Then `depth` per-rank
    residual blocks with LayerNorm; the graph output is `head(sum_r sum_cells V_r h)`.
    Cost is linear in the number of cells. (HOPSE, P18.)

    **Arguments:**
        feature_dims: `f_r` per rank.
        encoding_dim: width `d` of each route encoding (0: features only).
        out_dim: output width (classes or regression targets).
        width: hidden width; depth: residual blocks per rank.
        encoder: `"joined"` or `"per_route"` (see above).
        key: PRNG key (keyword-only).
    """

    embed: tuple[eqx.nn.Linear, ...]
    encoders: tuple[tuple[eqx.nn.MLP, ...], ...]
    blocks: tuple[tuple[ResidualBlock, ...], ...]
    readout: tuple[eqx.nn.Linear, ...]
    head: eqx.nn.MLP
    feature_dims: tuple[int, ...] = eqx.field(static=True)
    encoding_dim: int = eqx.field(static=True)
    max_rank: int = eqx.field(static=True)
    encoder: str = eqx.field(static=True)

    def __init__(
        self,
        feature_dims: Sequence[int],
        encoding_dim: int,
        out_dim: int,
        *,
        width: int = 64,
        depth: int = 2,
        encoder: str = "joined",
        key: PRNGKeyArray,
        dtype: object = None,
    ):
        if encoder not in ENCODERS:
            raise ValueError(f"encoder: expected one of {ENCODERS}, received {encoder!r}")
        self.encoder = encoder
        self.feature_dims = tuple(int(f) for f in feature_dims)
        self.encoding_dim = int(encoding_dim)
        self.max_rank = len(self.feature_dims) - 1
        R = self.max_rank
        k_embed, k_enc, k_blocks, k_read, k_head = jax.random.split(key, 5)
        joined = encoder == "joined"
        self.embed = tuple(
            eqx.nn.Linear(
                f + (len(rank_routes(r, R)) * self.encoding_dim if joined else 0),
                width,
                key=k,
                dtype=dtype,
            )
            for r, (f, k) in enumerate(
                zip(self.feature_dims, jax.random.split(k_embed, R + 1), strict=True)
            )
        )
        enc_keys = jax.random.split(k_enc, (R + 1, 4))
        self.encoders = tuple(
            tuple(
                eqx.nn.MLP(
                    self.encoding_dim,
                    width,
                    width,
                    depth=1,
                    activation=jax.nn.relu,
                    key=enc_keys[r, i],
                    dtype=dtype,
                )
                for i in range(len(rank_routes(r, R)))
            )
            if self.encoding_dim > 0 and not joined
            else ()
            for r in range(R + 1)
        )
        bkeys = jax.random.split(k_blocks, (depth, R + 1))
        self.blocks = tuple(
            tuple(ResidualBlock(width, key=bkeys[layer, r], dtype=dtype) for r in range(R + 1))
            for layer in range(depth)
        )
        self.readout = tuple(
            eqx.nn.Linear(width, width, key=k, dtype=dtype) for k in jax.random.split(k_read, R + 1)
        )
        self.head = eqx.nn.MLP(
            width, out_dim, width, depth=1, activation=jax.nn.relu, key=k_head, dtype=dtype
        )

    def _encode(self, r: int, arrays: ComplexArrays) -> Float[Array, "n w"]:
        x, encs = arrays.x[r], arrays.enc[r]
        if self.encoder == "joined":
            if self.encoding_dim == 0:
                return _per_cell(self.embed[r], x)
            k = len(rank_routes(r, self.max_rank))
            if len(encs) != k or any(e.shape[-1] != self.encoding_dim for e in encs):
                raise ValueError(
                    f"arrays.enc[{r}]: expected {k} route encodings of width "
                    f"{self.encoding_dim}, received {[tuple(e.shape) for e in encs]}"
                )
            return _joined_embed(self.embed[r], x, encs)
        return _embed_and_encode(self.embed[r], self.encoders[r], x, encs)

    def cell_states(self, arrays: ComplexArrays) -> tuple[Float[Array, "n w"], ...]:
        """Hidden state of every cell, `[n_r, width]` per rank."""
        _check_arrays(arrays, self.feature_dims, self.max_rank)
        states = []
        for r in range(self.max_rank + 1):
            h = self._encode(r, arrays)
            for layer in self.blocks:
                h = _per_cell(layer[r], h)
            states.append(h)
        return tuple(states)

    def __call__(self, arrays: ComplexArrays) -> Float[Array, " out"]:
        """Graph-level output `[out_dim]` (sum pooling over real cells of all ranks)."""
        return _readout(self.readout, self.head, self.cell_states(arrays), arrays.mask)


class _HOMPLayer(eqx.Module):
    route_lin: tuple[tuple[eqx.nn.Linear, ...], ...]
    self_lin: tuple[eqx.nn.Linear, ...]
    update: tuple[ResidualBlock, ...]

    def __init__(self, width: int, max_rank: int, *, key: PRNGKeyArray, dtype: object = None):
        k1, k2, k3 = jax.random.split(key, 3)
        rk = jax.random.split(k1, (max_rank + 1, 4))
        self.route_lin = tuple(
            tuple(
                eqx.nn.Linear(width, width, use_bias=False, key=rk[r, i], dtype=dtype)
                for i in range(len(rank_routes(r, max_rank)))
            )
            for r in range(max_rank + 1)
        )
        self.self_lin = tuple(
            eqx.nn.Linear(width, width, key=k, dtype=dtype)
            for k in jax.random.split(k2, max_rank + 1)
        )
        self.update = tuple(
            ResidualBlock(width, key=k, dtype=dtype) for k in jax.random.split(k3, max_rank + 1)
        )

    def __call__(self, states, arrays: ComplexArrays):
        R = arrays.max_rank
        new = []
        for r in range(R + 1):
            h = _per_cell(self.self_lin[r], states[r])
            for i, route in enumerate(rank_routes(r, R)):
                src = states[source_rank(r, route)]
                msg = _per_cell(self.route_lin[r][i], src)[arrays.senders[r][i]]
                msg = msg * arrays.edge_mask[r][i][:, None]
                h = h + jax.ops.segment_sum(
                    msg, arrays.receivers[r][i], num_segments=states[r].shape[0]
                )
            new.append(_per_cell(self.update[r], h))
        return tuple(new)


class HOMP(eqx.Module):
    """Higher-order message passing baseline (CWN/SCCN style) with HOPSE's width/depth.

    Each layer updates every rank from sum-aggregated messages along all its
    routes (up/down adjacency, boundary, coboundary):
    `h_r <- Block_r(U_r h_r + sum_routes sum_{s->t} W_route h_s)`. Takes the
    lifted features only (no precomputed encodings), as HOMP models do.

    **Arguments:**
        feature_dims: `f_r` per rank; out_dim: output width.
        width, depth: hidden width and number of message-passing layers.
        key: PRNG key (keyword-only).
    """

    embed: tuple[eqx.nn.Linear, ...]
    layers: tuple[_HOMPLayer, ...]
    readout: tuple[eqx.nn.Linear, ...]
    head: eqx.nn.MLP
    feature_dims: tuple[int, ...] = eqx.field(static=True)
    max_rank: int = eqx.field(static=True)

    def __init__(
        self,
        feature_dims: Sequence[int],
        out_dim: int,
        *,
        width: int = 64,
        depth: int = 2,
        key: PRNGKeyArray,
        dtype: object = None,
    ):
        self.feature_dims = tuple(int(f) for f in feature_dims)
        self.max_rank = len(self.feature_dims) - 1
        R = self.max_rank
        k_embed, k_layers, k_read, k_head = jax.random.split(key, 4)
        self.embed = tuple(
            eqx.nn.Linear(f, width, key=k, dtype=dtype)
            for f, k in zip(self.feature_dims, jax.random.split(k_embed, R + 1), strict=True)
        )
        self.layers = tuple(
            _HOMPLayer(width, R, key=k, dtype=dtype) for k in jax.random.split(k_layers, depth)
        )
        self.readout = tuple(
            eqx.nn.Linear(width, width, key=k, dtype=dtype) for k in jax.random.split(k_read, R + 1)
        )
        self.head = eqx.nn.MLP(
            width, out_dim, width, depth=1, activation=jax.nn.relu, key=k_head, dtype=dtype
        )

    def cell_states(self, arrays: ComplexArrays) -> tuple[Float[Array, "n w"], ...]:
        """Hidden state of every cell after message passing, `[n_r, width]` per rank."""
        _check_arrays(arrays, self.feature_dims, self.max_rank)
        states = tuple(_per_cell(self.embed[r], arrays.x[r]) for r in range(self.max_rank + 1))
        for layer in self.layers:
            states = layer(states, arrays)
        return states

    def __call__(self, arrays: ComplexArrays) -> Float[Array, " out"]:
        """Graph-level output `[out_dim]` (sum pooling over real cells of all ranks)."""
        return _readout(self.readout, self.head, self.cell_states(arrays), arrays.mask)
