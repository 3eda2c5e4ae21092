"""Loss-visible vs loss-invisible overlaps, from the loss's sensitivity."""

from __future__ import annotations

from collections.abc import Callable

import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Bool, Float, PRNGKeyArray

from jaxlab._core import (
    as_array,
    check_array,
    check_finite,
    check_memory,
    check_positive_int,
)

from ._layout import OverlapLayout

__all__ = [
    "overlap_sensitivity",
    "classify_overlaps",
    "random_overlaps",
    "linear_rank1_visibility",
    "visibility_table",
]


def overlap_sensitivity(
    loss_fn: Callable[[Array], Array], gs: Float[Array, "S P P"]
) -> Float[Array, "P P"]:
    """Largest `|dl/dG_ab|` (symmetric derivative) over sample overlap matrices `gs`.

    The derivative is taken with respect to the symmetric overlap `G_ab = G_ba`,
    i.e. `S + S^T` off the diagonal, `S` on it.
    """
    check_array("gs", gs, shape=(None, "P", "P"), dtype=jnp.floating)
    check_finite("gs", gs)
    if gs.shape[0] == 0:
        raise ValueError("gs: expected at least one sample overlap matrix, received shape (0, ...)")

    def sym_grad(g):
        s = jax.grad(loss_fn)(g)
        s_sym = s + s.T
        return jnp.where(jnp.eye(g.shape[0], dtype=bool), s, s_sym)

    return jnp.max(jnp.abs(jax.vmap(sym_grad)(gs)), axis=0)


def classify_overlaps(
    loss_fn: Callable[[Array], Array], gs: Float[Array, "S P P"], *, rtol: float = 1e-7
) -> Bool[Array, "P P"]:
    """Loss-visible overlaps: those the loss is sensitive to at any of the sample points.

    An overlap is visible when its largest sensitivity exceeds `rtol` times the
    largest sensitivity of any overlap; the others are loss-invisible (they do
    not affect activity, output or loss, but enter the learning flow). Paper P1.

    **Returns:** symmetric boolean `(P, P)`, True = loss-visible.
    """
    sens = overlap_sensitivity(loss_fn, gs)
    return sens > rtol * jnp.max(sens)


def random_overlaps(
    layout: OverlapLayout, n_samples: int, *, key: PRNGKeyArray, dtype=jnp.float32
) -> Float[Array, "S P P"]:
    """`n_samples` random positive-definite overlap matrices (Wishart, scale 1/P)."""
    n_samples = check_positive_int("n_samples", n_samples)
    p = layout.size
    check_memory("n_samples", 4.0 * n_samples * p * p * jnp.dtype(dtype).itemsize)
    a = jax.random.normal(key, (n_samples, p, 2 * p), dtype) / jnp.sqrt(jnp.asarray(2 * p, dtype))
    return a @ jnp.swapaxes(a, 1, 2)


def linear_rank1_visibility() -> dict[str, list[str]]:
    """The analytic classification for a linear rank-1 RNN with one input (paper P1).

    With `x = kappa m + v I`, `dkappa/dt = -kappa + (n.m) kappa + (n.I) v` and
    `z = (w.m) kappa + (w.I) v` (overlaps `/N`), so activity, output and loss
    depend on `n.m, n.I, w.m, w.I` only. The other six overlaps are invisible
    but enter the flow: e.g. `d(n.m)/dt` involves `m.m` and `n.n`.
    """
    layout = OverlapLayout(1, 1)
    names = layout.overlap_names()
    visible = {"m1.n1", "n1.I1", "m1.w", "I1.w"}
    return {
        "visible": [nm for nm in names if nm in visible],
        "invisible": [nm for nm in names if nm not in visible],
    }


def visibility_table(layout: OverlapLayout, visible: Bool[Array, "P P"]) -> dict[str, bool]:
    """`{"a.b": visible}` for the upper-triangle overlaps."""
    p = layout.size
    vis = np.asarray(as_array("visible", visible, shape=(p, p), dtype=jnp.bool_))
    iu, ju = np.triu_indices(layout.size)
    return {nm: bool(vis[i, j]) for nm, i, j in zip(layout.overlap_names(), iu, ju, strict=True)}
