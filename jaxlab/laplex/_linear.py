"""`LaplexLinear`: a trainable LAPLEX projection / classification head (P9)."""

from __future__ import annotations

import equinox as eqx
import jax
import jax.numpy as jnp
from jaxtyping import Array, Float, PRNGKeyArray

from jaxlab._core import check_array, check_positive_int

from ._dense import dense_matrix
from ._matvec import matvec

__all__ = ["LaplexLinear"]


class LaplexLinear(eqx.Module):
    """`y = Re(K x) + bias` with the LAPLEX matrix `K` (out_features, in_features).

    Every head places the inputs (`s`) and outputs (`t`) on a learnable line;
    output i reads input j with weight `c_h exp(-(a_h + i b_h)|t_h[i] - s_h[j]|)`.
    The matrix is dense and typically full rank, but stored as
    `heads * (in + out + 2 or 3) + out` numbers, and applied in O((in + out) log)
    time. Read as a model, each head softly routes every input to the outputs
    whose anchors lie near its anchor (`routing()`).

    LAPLEX (P9).
    """

    t: Float[Array, "H out"]
    s: Float[Array, "H inp"]
    log_a: Float[Array, " H"]
    b: Float[Array, " H"] | None
    c: Float[Array, " H"]
    bias: Float[Array, " out"]

    def __init__(
        self,
        in_features: int,
        out_features: int,
        heads: int,
        *,
        phased: bool = False,
        key: PRNGKeyArray,
        dtype=jnp.float32,
    ):
        """**Arguments:** `in_features`, `out_features`, `heads` (positive ints);
        `phased`: learn a phase `b` per head; `key` (keyword-only); `dtype`.
        """
        n = check_positive_int("in_features", in_features)
        m = check_positive_int("out_features", out_features)
        h = check_positive_int("heads", heads)
        k1, k2, k3, k4 = jax.random.split(key, 4)
        self.s = jax.random.uniform(k1, (h, n), dtype)
        self.t = jax.random.uniform(k2, (h, m), dtype)
        # decay ~ a few input spacings, so each output reads a neighbourhood of inputs
        self.log_a = jnp.log(jnp.full((h,), n / 4.0, dtype))
        self.b = jax.random.uniform(k3, (h,), dtype, -3.0, 3.0) if phased else None
        scale = jnp.sqrt(jnp.asarray(1.0 / (h * min(n, 8)), dtype))
        self.c = scale * jax.random.normal(k4, (h,), dtype)
        self.bias = jnp.zeros((m,), dtype)

    @property
    def a(self) -> Float[Array, " H"]:
        return jnp.exp(self.log_a)

    def __call__(self, x: Float[Array, " inp"]) -> Float[Array, " out"]:
        """**Arguments:** `x` (in_features,). **Returns:** (out_features,)."""
        check_array("x", x, shape=(self.s.shape[1],), dtype=jnp.floating)
        y = matvec(x.astype(self.s.dtype), self.t, self.s, self.a, self.b, self.c)
        return jnp.real(y) + self.bias

    def batch(self, x: Float[Array, "B inp"]) -> Float[Array, "B out"]:
        """Apply to a batch in one LAPLEX matmat (cheaper than `jax.vmap(self)`).

        **Arguments:** `x` (B, in_features). **Returns:** (B, out_features).
        """
        check_array("x", x, shape=(None, self.s.shape[1]), dtype=jnp.floating)
        y = matvec(x.T.astype(self.s.dtype), self.t, self.s, self.a, self.b, self.c)
        return jnp.real(y).T + self.bias[None]

    def num_params(self) -> int:
        return sum(x.size for x in jax.tree.leaves(eqx.filter(self, eqx.is_array)))

    def weight(self) -> Float[Array, "out inp"]:
        """The dense (out, in) matrix this layer applies (small layers only)."""
        return jnp.real(dense_matrix(self.t, self.s, self.a, self.b, self.c))

    def routing(self) -> Float[Array, "out inp"]:
        """Soft routing of inputs to outputs: each row a distribution over inputs.

        Per head, `exp(-a_h |t_h[i] - s_h[j]|)` normalised over inputs j; heads are
        mixed in proportion to `|c_h|`. Dense (out, in): for inspection.
        """
        d = jnp.abs(self.t[:, :, None] - self.s[:, None, :])
        logits = -self.a[:, None, None] * d
        per_head = jax.nn.softmax(logits, axis=-1)
        w = jnp.abs(self.c) / jnp.sum(jnp.abs(self.c))
        return jnp.sum(w[:, None, None] * per_head, axis=0)
