"""Linear-recurrence scans: the one primitive every LAPLEX pass is built from.

Contract shared by every strategy (alpha: (N,), x: (N, K), same dtype):

    forward:  h[j] = alpha[j]   * h[j-1] + x[j],   h[-1] = 0
    reverse:  h[j] = alpha[j+1] * h[j+1] + x[j],   h[N]  = 0

so one array `alpha[j] = exp(-lambda * (s[j] - s[j-1]))` serves both
directions. Strategies are `equinox.Module`s (diffrax-style strategy objects)
and are `jax.vmap`-able; they are never differentiated directly (the LAPLEX
custom VJP calls them again for the backward pass).
"""

from __future__ import annotations

import abc

import equinox as eqx
import jax.numpy as jnp
from jax import lax
from jaxtyping import Array, Inexact

__all__ = ["AbstractScan", "AssociativeScan", "BlockedScan", "reverse_by_flip"]


def _combine(left, right):
    a1, h1 = left
    a2, h2 = right
    return a1 * a2, a2[..., None] * h1 + h2


def reverse_by_flip(forward, alpha: Array, x: Array) -> Array:
    """Run the reverse recurrence with a forward-only scan `forward(alpha, x)`."""
    zero = jnp.zeros((1,), alpha.dtype)
    alpha_rev = jnp.flip(jnp.concatenate([alpha[1:], zero]))
    return jnp.flip(forward(alpha_rev, jnp.flip(x, axis=0)), axis=0)


class AbstractScan(eqx.Module):
    """A strategy computing the LAPLEX linear recurrence, the primitive of every pass.

    With `alpha` (N,) and `x` (N, K) of one dtype:
    `forward`: `h[j] = alpha[j] * h[j-1] + x[j]`, `h[-1] = 0`;
    `reverse`: `h[j] = alpha[j+1] * h[j+1] + x[j]`, `h[N] = 0`;
    so one `alpha[j] = exp(-lambda (s[j] - s[j-1]))` serves both directions. Strategies
    are vmap-able and never differentiated directly (the LAPLEX custom VJP calls them
    again for the backward pass).
    """

    @abc.abstractmethod
    def forward(self, alpha: Inexact[Array, " N"], x: Inexact[Array, "N K"]) -> Array:
        """Forward recurrence; the reverse one defaults to flipping."""

    def __call__(
        self, alpha: Inexact[Array, " N"], x: Inexact[Array, "N K"], *, reverse: bool = False
    ) -> Inexact[Array, "N K"]:
        """**Arguments:** `alpha` (N,), `x` (N, K) of the same dtype; `reverse` direction.

        **Returns:** `h` (N, K).
        """
        if alpha.shape[0] == 0:
            return x
        if reverse:
            return reverse_by_flip(self.forward, alpha, x)
        return self.forward(alpha, x)

    def scan_beta(
        self, beta: Inexact[Array, " N"], x: Inexact[Array, "N K"], *, reverse: bool = False
    ) -> Inexact[Array, "N K"]:
        """The same recurrence given `beta = alpha - 1` (accurate when alpha ~ 1).

        The default forms `alpha = 1 + beta` in the storage dtype; `CpuScan`
        instead runs `h + (beta h + x)` in double precision, which keeps float32
        results accurate for decays far below the anchor spacing.
        """
        return self(beta + 1, x, reverse=reverse)


class AssociativeScan(AbstractScan):
    """`jax.lax.associative_scan` (the generic parallel-prefix reference)."""

    def forward(self, alpha, x):
        return lax.associative_scan(_combine, (alpha, x))[1]


class BlockedScan(AbstractScan):
    """Chunk-local recurrences (`lax.scan` over `block` steps, vector over chunks),
    a short associative scan over chunk carries, then one fix-up pass.

    Pure JAX, so it runs on every backend; the C++ `CpuScan` is faster on CPU.
    """

    block: int = eqx.field(static=True, default=512)
    unroll: int = eqx.field(static=True, default=8)

    def forward(self, alpha, x):
        n, k = x.shape
        bsz = min(self.block, n)
        nb = -(-n // bsz)
        pad = nb * bsz - n
        a = jnp.pad(alpha, (0, pad)).reshape(nb, bsz).T
        xs = jnp.pad(x, ((0, pad), (0, 0))).reshape(nb, bsz, k).transpose(1, 0, 2)

        def step(carry, ax):
            h, p = carry
            aj, xj = ax
            h = aj[:, None] * h + xj
            p = aj * p
            return (h, p), (h, p)

        init = (jnp.zeros((nb, k), x.dtype), jnp.ones((nb,), alpha.dtype))
        _, (h, p) = lax.scan(step, init, (a, xs), unroll=self.unroll)
        _, carry = lax.associative_scan(_combine, (p[-1], h[-1]))
        carry_in = jnp.concatenate([jnp.zeros((1, k), x.dtype), carry[:-1]], axis=0)
        out = h + p[:, :, None] * carry_in[None]
        return out.transpose(1, 0, 2).reshape(nb * bsz, k)[:n]
